"""Decoding speed of the stepwise models on CPU: one 30-sentence CNN article, beam 3, at most 4 steps.

- Stepwise HiBERT against its non-stepwise variant (top 3): the sentence vectors are computed once per document and
  reused by every step and hypothesis, so the stepwise search adds only document-encoder passes (target: at most
  1.5 times the non-stepwise time).
- Stepwise ETCSum at 1,024 tokens: every step re-encodes document and partial summary for each live hypothesis
  (target: at most 4 s per article). The article is the first validation article whose first 30 sentences fill
  the 1,024 tokens (most 30-sentence CNN articles take only 700-800), so the figure is for a full input.
  Attention through compiled FlexAttention by default (the inference path; the relative-position bias is computed
  inside the kernel); `--etc_attention blocked` or `sdpa` time the others (about twice as slow here: the band and
  bias tensors are materialized).

Every figure is the median of --repeats full pipeline calls (sentence splitting, tokenization, model, search) after
one warm-up call, in this process, with --threads threads. Trained checkpoints are used when found (their end-of-summary
probabilities decide how many steps the search takes); otherwise fresh models from the bundled encoder, which is said.

    python benchmarks/stepwise_speed.py           # writes benchmarks/results/stepwise_speed.md
"""

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKPOINTS = {
    "hibert": ["checkpoints/hibert-minilm-cnndm", "runs/hibert-minilm-cnndm/final"],
    "stepwise_hibert": ["checkpoints/stepwise-hibert-minilm-cnndm", "runs/stepwise-hibert-minilm-cnndm/final"],
    "stepwise_etcsum": ["checkpoints/stepwise-etcsum-minilm-cnndm", "runs/stepwise-etcsum-minilm-cnndm/final"],
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num_sentences", type=int, default=30)
    parser.add_argument("--etc_tokens", type=int, default=1024, help="Stepwise ETCSum input tokens")
    parser.add_argument(
        "--etc_attention", default="flex_attention", help="Stepwise ETCSum attention backend (flex: the inference path)"
    )
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "stepwise_speed.md"))
    return parser.parse_args()


def article_sentences(count: int, input_tokens) -> tuple[str, list[str]]:
    """The first CNN/DM validation article (shared copy) with at least `count` sentences whose first `count` take at
    least `input_tokens(sentences)` tokens of the ETCSum input, cut to `count` sentences."""
    from sumformers.text.evaluation import data_dir, read_jsonl
    from sumformers.text.sentences import split_sentences

    for example in read_jsonl(data_dir() / "cnn_dailymail" / "validation.jsonl"):
        sentences = split_sentences(example["document"])[:count]
        if len(sentences) == count and input_tokens(sentences):
            return example["id"], sentences
    raise ValueError(f"no validation article has {count} sentences that fill the ETCSum input")


def load(model_type: str, attn_implementation: str | None = None):
    """(pipeline, description): the trained checkpoint if there is one, else a fresh model."""
    from transformers import AutoTokenizer, pipeline

    import sumformers
    from sumformers.hub import load_tokenizer
    from sumformers.modeling.pretrained_encoder import bundled_encoder_path

    for candidate in CHECKPOINTS[model_type]:
        if (REPO / candidate / "config.json").is_file():
            model = sumformers.load_model(str(REPO / candidate))
            tokenizer = load_tokenizer(str(REPO / candidate))
            description = candidate
            break
    else:
        model_class = sumformers.ARCHITECTURES[model_type].model_class
        model = model_class.from_encoder(str(bundled_encoder_path())).eval()
        tokenizer = AutoTokenizer.from_pretrained(bundled_encoder_path())
        description = "untrained (no checkpoint found)"
    if attn_implementation:
        model.config._attn_implementation = attn_implementation
    task = sumformers.ARCHITECTURES[model_type].task
    return pipeline(task, model=model, tokenizer=tokenizer), description


def timed(call, repeats: int) -> tuple[float, object]:
    import torch

    with torch.inference_mode():
        result = call()  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main():
    args = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    etcsum, etcsum_source = load("stepwise_etcsum", args.etc_attention)

    def etc_inputs(sentences):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation
            return etcsum.preprocess({"sentences": sentences}, max_length=args.etc_tokens)

    article_id, sentences = article_sentences(
        args.num_sentences, lambda sentences: etc_inputs(sentences)["input_ids"].shape[1] >= args.etc_tokens
    )
    document = {"sentences": sentences}
    rows = []

    hibert, hibert_source = load("hibert")
    stepwise_hibert, stepwise_hibert_source = load("stepwise_hibert")
    plain_seconds, _ = timed(lambda: hibert(document, num_sentences=3), args.repeats)
    stepwise_seconds, result = timed(lambda: stepwise_hibert(document, beam_size=3, num_sentences=4), args.repeats)
    rows.append(("HiBERT, top 3", hibert_source, plain_seconds, ""))
    rows.append(
        (
            "Stepwise HiBERT, beam 3, <= 4 steps",
            stepwise_hibert_source,
            stepwise_seconds,
            f"{stepwise_seconds / plain_seconds:.2f}x HiBERT (target <= 1.5x); {len(result['steps'])} steps taken",
        )
    )

    inputs = etc_inputs(sentences)
    tokens, read = inputs["input_ids"].shape[1], len(inputs["sentences"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        etc_seconds, result = timed(
            lambda: etcsum(document, beam_size=3, num_sentences=4, max_length=args.etc_tokens), args.repeats
        )
    rows.append(
        (
            f"Stepwise ETCSum ({args.etc_attention}), beam 3, <= 4 steps",
            etcsum_source,
            etc_seconds,
            f"{tokens} document tokens ({read} of the {len(sentences)} sentences fit); {len(result['steps'])} steps "
            "taken (target <= 4 s)",
        )
    )

    lines = [
        f"CPU, {args.threads} threads, torch {torch.__version__}; article `{article_id}` (CNN/DM validation), first "
        f"{len(sentences)} sentences; median of {args.repeats} pipeline calls after a warm-up.",
        "",
        "| model | weights | seconds / article | notes |",
        "|---|---|---|---|",
    ]
    lines += [f"| {name} | {source} | {seconds:.3f} | {notes} |" for name, source, seconds, notes in rows]
    table = "\n".join(lines)
    print(table)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(table + "\n")


if __name__ == "__main__":
    main()
