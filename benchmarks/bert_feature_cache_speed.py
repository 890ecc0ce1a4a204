"""Seconds per training step of the CopyTransformer's stacking variant (encoder_input "bert_windowed": the frozen
bundled MiniLM read in windows feeds the encoder) with the frozen BERT run in every step, and over its features
cached once (`sumformers.frozen_layers.cached_bert_features`, train_abstractive.py --bert_feature_cache).

The paper's small model (d_model 256, 3 + 3 layers), one batch of --documents random documents of --tokens tokens
(random ids: the cost does not depend on them) and --target_tokens summary tokens, AdamW, dropout as configured. Both
ways run in this process, alternating, after one warm-up step each; a step is the batch's collation (with the cache:
reading the documents' features), forward, backward and the optimizer step. Reported: the median of --steps steps each
way, and the one-time cost of computing the cache.

    OMP_NUM_THREADS=1 python benchmarks/bert_feature_cache_speed.py   # writes results/bert_feature_cache_speed.md
"""

import argparse
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from _common import command_line

REPO = Path(__file__).resolve().parents[1]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=16, help="documents, all in one batch")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per document")
    parser.add_argument("--target_tokens", type=int, default=100)
    parser.add_argument("--steps", type=int, default=5, help="timed steps each way (after one warm-up step each)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "bert_feature_cache_speed.md"))
    return parser.parse_args()


def main():
    args = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    from sumformers import CopyTransformerForConditionalGeneration
    from sumformers.frozen_layers import BertFeatureCollator, cached_bert_features
    from sumformers.modeling.pretrained_encoder import bundled_encoder_path

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CopyTransformerForConditionalGeneration.from_encoder(
            "minilm", encoder_input="bert_windowed", d_model=256, encoder_layers=3, decoder_layers=3
        )
    config = model.config
    generator = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(args.documents):
        ids = torch.randint(1000, config.vocab_size, (args.tokens,), generator=generator).tolist()
        labels = [*torch.randint(1000, config.vocab_size, (args.target_tokens - 1,), generator=generator).tolist(),
                  config.eos_token_id]
        rows.append(dict(input_ids=ids, attention_mask=[1] * len(ids), source_extended_ids=ids, labels=labels))
    features = Dataset.from_list(rows)
    collate = model.processor_class(AutoTokenizer.from_pretrained(bundled_encoder_path()), config).collate
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        values, offsets = cached_bert_features(model, features, collate, str(Path(folder) / "bert.u16"))
        cache_seconds = time.perf_counter() - start
        cache_shape, cache_mib = values.shape, values.nbytes / 2**20
        cached_rows = [dict(row, cache_row=index) for index, row in enumerate(rows)]
        ways = {
            "frozen BERT in every step": lambda: collate(rows),
            "over the cached features": lambda: BertFeatureCollator(collate, values, offsets)(cached_rows),
        }
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        model.train()
        times = {name: [] for name in ways}
        for step in range(args.steps + 1):
            for name, batch in ways.items():
                start = time.perf_counter()
                model(**batch()).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step:  # the first is the warm-up
                    times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    plain, cached = medians.values()
    lines = [
        "# Training step of the CopyTransformer's stacking variant over cached frozen BERT features",
        "",
        command_line("bert_feature_cache_speed.py"),
        "",
        f"`python benchmarks/bert_feature_cache_speed.py` ({args.threads} thread(s), torch {torch.__version__}): "
        f"bundled MiniLM as the frozen BERT (windows of {config.bert_window}, stride {config.bert_stride}), "
        f"d_model {config.d_model}, {config.encoder_layers} + {config.decoder_layers} layers, one batch of "
        f"{args.documents} random documents of {args.tokens} tokens and {args.target_tokens} summary tokens, AdamW; "
        f"median of {args.steps} steps each way after one warm-up step, alternating, in one process.",
        "",
        "| step | seconds (median) | all timed steps |",
        "| --- | --- | --- |",
        *(f"| {name} | {medians[name]:.3f} | {', '.join(f'{t:.3f}' for t in times[name])} |" for name in ways),
        "",
        f"The cache makes a step {plain / cached:.2f} times as fast. Computing it once for these {args.documents} "
        f"documents took {cache_seconds:.2f} s (bfloat16 autocast): {cache_shape[0]} tokens x {cache_shape[1]} "
        f"features, {cache_mib:.1f} MiB on disk.",
    ]
    Path(args.output).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
