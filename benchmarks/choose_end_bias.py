"""Choose a stepwise model's `end_bias` (the bias on its end-of-summary unit's logit) on development documents.

The summaries are decoded as `quality_cnndm.py --blocking yes` decodes them (and cached with its cache), once per
candidate bias. The rule, fixed before any decoding: the highest ROUGE-1 among the biases whose mean summary length
lies within --sentences (the references' 3-4 highlights); if none does, the bias whose mean length is nearest that
range. Choose on documents you do not report (the default: raw CNN `validation[300:400]`, never in a reported table).

    python benchmarks/choose_end_bias.py --model "Stepwise ETCSum" --checkpoint runs/stepwise-etcsum/final \
        --biases 0 -1 -2 -3 --write
"""

import argparse
import json
from argparse import Namespace
from pathlib import Path

from _common import REPO, data_slice, setup_runtime

SUMMARY_SENTENCES = (2.5, 4.5)  # the mean length range the rule asks for: the references' 3-4 highlights


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the model's name in quality_cnndm.py, e.g. 'Stepwise ETCSum'")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--biases", type=float, nargs="+", default=[0.0, -1.0, -2.0, -3.0])
    parser.add_argument("--data_file", default=None, help="default: the shared raw CNN validation.jsonl")
    parser.add_argument("--start", type=int, default=300)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--sentences", type=float, nargs=2, default=list(SUMMARY_SENTENCES),
                        help="the mean length range")
    parser.add_argument("--etcsum_max_length", type=int, default=768)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--cache_dir", default=str(REPO / "runs" / "quality_cnndm"))
    parser.add_argument("--write", action="store_true", help="set the chosen end_bias in the checkpoint's config")
    parser.add_argument("--output", default=None, help="also write the candidates and the choice here (JSON)")
    return parser.parse_args()


def choose(candidates: list[dict], low: float, high: float) -> dict:
    """The rule above, over `candidates` (dicts with `end_bias`, `rouge1`, `mean_sentences`)."""
    inside = [candidate for candidate in candidates if low <= candidate["mean_sentences"] <= high]
    if inside:
        return max(inside, key=lambda candidate: candidate["rouge1"])
    return min(candidates, key=lambda candidate: max(low - candidate["mean_sentences"],
                                                     candidate["mean_sentences"] - high))


def main():
    args = parse_args()
    setup_runtime(args.threads)
    from quality_cnndm import model_summaries, summary_metrics

    data_file, rows = data_slice(args, "validation.jsonl")
    documents, references = [row["document"] for row in rows], [row["summary"] for row in rows]
    checkpoint = Path(args.checkpoint).resolve()
    candidates = []
    for bias in args.biases:
        settings = Namespace(**vars(args), end_bias=bias)
        summaries, _ = model_summaries(args.model, checkpoint, documents, True, settings)
        metrics = summary_metrics(summaries, references, [None] * len(rows))
        candidate = {key: round(metrics[key], 2) for key in ("rouge1", "rouge2", "rougeLsum", "mean_sentences")}
        candidates.append({"end_bias": bias, **candidate})
        print(json.dumps(candidates[-1]), flush=True)
    chosen = choose(candidates, *args.sentences)
    print(f"chosen on {data_file.name}[{args.start}:{args.start + args.limit}]: end_bias {chosen['end_bias']:g}")
    if args.output:
        Path(args.output).write_text(json.dumps({"documents": f"{data_file.name}[{args.start}:"
                                                              f"{args.start + args.limit}]",
                                                 "rule": f"best ROUGE-1 with {args.sentences} mean sentences",
                                                 "candidates": candidates, "chosen": chosen}, indent=1))
    if args.write:
        from transformers import AutoConfig

        import sumformers  # noqa: F401 (registers the model types)

        config = AutoConfig.from_pretrained(checkpoint)
        config.end_bias = chosen["end_bias"]
        config.save_pretrained(checkpoint)


if __name__ == "__main__":
    main()
