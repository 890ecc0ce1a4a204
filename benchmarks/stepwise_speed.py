"""Decoding speed of the stepwise models on CPU: one 30-sentence CNN article, beam 3, at most 4 steps.

- Stepwise HiBERT against its non-stepwise variant (top 3): the sentence vectors are computed once per document and
  reused by every step and hypothesis, so the stepwise search adds only document-encoder passes (target: at most
  1.5 times the non-stepwise time).
- Stepwise ETCSum at 1,024 and 2,048 tokens of the same article (its first 1,024 tokens, then 2,048): every step
  re-encodes document and partial summary, all live hypotheses of a step in one batched forward (target: 2,048
  tokens within 2x the 1,024-token time; the ETC attention is linear in length). Document states cannot be reused
  across steps: document tokens read every global token, the summary's included, from the first layer on. Timed
  for the ETC design that new models get (relative keys, no absolute positions: `from_encoder` on the bundled
  encoder, untrained) with the search forced to take every step (`min_sentences = num_sentences = 4`), so that both
  lengths do the same work, and for the shipped checkpoint (trained before relative keys; its own END decides the
  steps). Attention through compiled FlexAttention by default (the inference path; the relative scores are looked
  up inside the kernel); `--etc_attention blocked` or `sdpa` time the others.

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
from functools import partial
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
    parser.add_argument(
        "--num_document_sentences", type=int, default=30, help="HiBERT reads the article's first this many sentences"
    )
    parser.add_argument(
        "--etc_tokens", type=int, nargs="+", default=[1024, 2048], help="Stepwise ETCSum input lengths (tokens)"
    )
    parser.add_argument("--etc_only", action="store_true", help="time Stepwise ETCSum only (not the HiBERT pair)")
    parser.add_argument(
        "--etc_attention", default="flex_attention", help="Stepwise ETCSum attention backend (flex: the inference path)"
    )
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "stepwise_speed.md"))
    return parser.parse_args()


def article_sentences(count: int | None, input_tokens) -> tuple[str, list[str]]:
    """The first CNN/DM validation article (shared copy) whose first `count` sentences (every sentence with None)
    take at least `input_tokens(sentences)` tokens of the ETCSum input, cut to those sentences."""
    from sumformers.text.evaluation import data_dir, read_jsonl
    from sumformers.text.sentences import split_sentences

    for example in read_jsonl(data_dir() / "cnn_dailymail" / "validation.jsonl"):
        sentences = split_sentences(example["document"])[:count]
        if (count is None or len(sentences) == count) and input_tokens(sentences):
            return example["id"], sentences
    raise ValueError(f"no validation article has {count} sentences that fill the ETCSum input")


def load(model_type: str, attn_implementation: str | None = None, fresh: bool = False):
    """(pipeline, description): the trained checkpoint if there is one (and not `fresh`), else a fresh model."""
    from transformers import AutoTokenizer, pipeline

    import sumformers
    from sumformers.hub import load_tokenizer
    from sumformers.modeling.pretrained_encoder import bundled_encoder_path

    for candidate in [] if fresh else CHECKPOINTS[model_type]:
        if (REPO / candidate / "config.json").is_file():
            model = sumformers.load_model(str(REPO / candidate))
            tokenizer = load_tokenizer(str(REPO / candidate))
            description = candidate
            break
    else:
        model_class = sumformers.ARCHITECTURES[model_type].model_class
        model = model_class.from_encoder(str(bundled_encoder_path())).eval()
        tokenizer = AutoTokenizer.from_pretrained(bundled_encoder_path())
        description = "untrained, from the bundled encoder" if fresh else "untrained (no checkpoint found)"
    if attn_implementation:
        model.set_attn_implementation(attn_implementation)
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


def timed_interleaved(calls, repeats: int) -> tuple[list[list[float]], list[list[float]], list]:
    """Wall and process CPU seconds of each call per round, the calls alternating within every round (so that the
    load of a shared machine weighs on each alike), after one warm-up round; and the warm-up results."""
    import torch

    wall, cpu = [[] for _ in calls], [[] for _ in calls]
    with torch.inference_mode():
        results = [call() for call in calls]
        for _ in range(repeats):
            for index, call in enumerate(calls):
                start, start_cpu = time.perf_counter(), time.process_time()
                call()
                wall[index].append(time.perf_counter() - start)
                cpu[index].append(time.process_time() - start_cpu)
    return wall, cpu, results


def main():
    args = parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    etc_models = [
        ("ETC design (relative keys, no absolute positions)", *load("stepwise_etcsum", args.etc_attention, fresh=True)),
        ("shipped checkpoint (bias, tiled positions)", *load("stepwise_etcsum", args.etc_attention)),
    ]
    etcsum = etc_models[0][1]
    longest = max(args.etc_tokens)

    def etc_inputs(sentences, tokens):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation
            return etcsum.preprocess({"sentences": sentences}, max_length=tokens)

    # the whole article (its first `longest` tokens), so that every length reads a prefix of the same text
    article_id, sentences = article_sentences(
        None, lambda sentences: etc_inputs(sentences, longest)["input_ids"].shape[1] >= longest
    )
    document = {"sentences": sentences}
    rows = []

    if not args.etc_only:
        hibert, hibert_source = load("hibert")
        stepwise_hibert, stepwise_hibert_source = load("stepwise_hibert")
        hibert_document = {"sentences": sentences[: args.num_document_sentences]}
        plain_seconds, _ = timed(lambda: hibert(hibert_document, num_sentences=3), args.repeats)
        stepwise_seconds, result = timed(
            lambda: stepwise_hibert(hibert_document, beam_size=3, num_sentences=4), args.repeats
        )
        first = f"first {args.num_document_sentences} sentences"
        rows.append((f"HiBERT, top 3 ({first})", hibert_source, plain_seconds, ""))
        rows.append(
            (
                f"Stepwise HiBERT, beam 3, <= 4 steps ({first})",
                stepwise_hibert_source,
                stepwise_seconds,
                f"{stepwise_seconds / plain_seconds:.2f}x HiBERT (target <= 1.5x); {len(result['steps'])} steps taken",
            )
        )

    for design, summarizer, source in etc_models:
        forced = design.startswith("ETC design")
        options = dict(beam_size=3, num_sentences=4, **({"min_sentences": 4} if forced else {}))
        lengths = sorted(args.etc_tokens)
        calls = [partial(summarizer, document, max_length=tokens, **options) for tokens in lengths]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wall, cpu, results = timed_interleaved(calls, args.repeats)
        for index, tokens in enumerate(lengths):
            inputs = etc_inputs(sentences, tokens)
            length, read = inputs["input_ids"].shape[1], len(inputs["sentences"])
            notes = f"{length} document tokens ({read} sentences); {len(results[index]['steps'])} steps taken"
            if index:
                wall_ratio = statistics.median(w / w0 for w, w0 in zip(wall[index], wall[0]))
                cpu_ratio = statistics.median(c / c0 for c, c0 in zip(cpu[index], cpu[0]))
                notes += f"; **{wall_ratio:.2f}x** the {lengths[0]}-token time (CPU time {cpu_ratio:.2f}x)"
            rows.append(
                (
                    f"Stepwise ETCSum, {design} ({args.etc_attention}), beam 3, "
                    + ("4 steps + END" if forced else "<= 4 steps"),
                    source,
                    statistics.median(wall[index]),
                    notes,
                )
            )

    lines = [
        f"CPU, {args.threads} threads, torch {torch.__version__}; article `{article_id}` (CNN/DM validation, "
        f"{len(sentences)} sentences); median of {args.repeats} pipeline calls after a warm-up (Stepwise ETCSum: the "
        "lengths alternate within each round; the ratio is the median of the per-round ratios). Command: "
        f"`OMP_NUM_THREADS={args.threads} python benchmarks/stepwise_speed.py --threads {args.threads} --repeats "
        f"{args.repeats}{' --etc_only' if args.etc_only else ''}`.",
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
