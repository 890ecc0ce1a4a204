"""Stepwise HiBERT candidates against a baseline checkpoint on development documents (issue 57): ROUGE, length and
redundancy with and without trigram blocking, the paired ROUGE-1 difference to the baseline and to the Lead of as
many words (95% bootstrap intervals), and the duplicate probe (`duplicate_probe.py`).

Development documents only (defaults: raw CNN `validation[300:600]` and lowercased `validation_large[1000:1300]`;
the reported sets are `validation[:300]` and `validation_large[:1000]`). Summaries are decoded as
`quality_cnndm.py` decodes the Stepwise HiBERT rows (beam 3, 1-4 sentences, each checkpoint's own end bias) and
cached in its cache.

    python benchmarks/stepwise_candidates_dev.py --baseline checkpoints/stepwise-hibert-minilm-cnndm \
        --candidates runs/ft-dup/final,runs/ft-null/final --output benchmarks/results/stepwise_candidates_dev.md
"""

import argparse
from argparse import Namespace
from pathlib import Path

from _common import REPO, display_path, paired_with_lead_words, setup_runtime, write_report

DEV_SETS = (  # (label, file under the shared cnn_dailymail folder, first document, documents)
    ("validation[300:600] (raw CNN)", "validation.jsonl", 300, 300),
    ("validation_large[1000:1300] (lowercased)", "validation_large.jsonl.gz", 1000, 300),
)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="checkpoints/stepwise-hibert-minilm-cnndm")
    parser.add_argument("--candidates", required=True, help="comma-separated checkpoints")
    parser.add_argument("--limit", type=int, default=None, help="documents per set (default: each set's 300)")
    parser.add_argument("--probe_documents", type=int, default=20, help="duplicate probe: raw CNN validation[300:]")
    parser.add_argument("--blocking", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--cache_dir", default=str(REPO / "runs" / "quality_cnndm"))
    parser.add_argument("--output", default=None)
    return parser.parse_args()


def resolved(path: str) -> Path:
    return (Path(path) if Path(path).is_absolute() else REPO / path).resolve()


def main():
    args = parse_args()
    setup_runtime(args.threads)
    from duplicate_probe import probe_model, summarize
    from quality_cnndm import model_summaries, summary_metrics

    from sumformers.text.evaluation import data_dir, read_jsonl
    from sumformers.text.scoring import bootstrap_interval
    from sumformers.text.sentences import split_sentences

    checkpoints = [resolved(args.baseline)] + [resolved(c) for c in args.candidates.split(",") if c.strip()]
    settings = Namespace(end_bias=None, etcsum_max_length=512, device="cpu", cache_dir=args.cache_dir,
                         threads=args.threads, batch_size=args.batch_size)
    blockings = {"both": (False, True), "yes": (True,), "no": (False,)}[args.blocking]
    lines = [
        "Development documents (never reported). ROUGE F1 x 100 (rouge-score, stemming); paired = per-document "
        "ROUGE-1 minus the baseline's on the same documents and setting, 95% bootstrap interval; redundancy = % of "
        "summaries repeating a trigram across sentences; vs Lead of as many words = per-document ROUGE-1 minus that "
        "of the document's first N words, N = the summary's words on that document. Decoding: beam 3, 1-4 "
        "sentences, each model's end bias.",
        "",
        f"Baseline: `{display_path(checkpoints[0])}`",
    ]
    for title, name, start, count in DEV_SETS:
        rows = read_jsonl(data_dir() / "cnn_dailymail" / name)[start : start + (args.limit or count)]
        documents, references = [row["document"] for row in rows], [row["summary"] for row in rows]
        sources = [row.get("source", "cnn") for row in rows]
        document_sentences = [split_sentences(document) for document in documents]
        lines += ["", f"## {title}: {len(rows)} documents", "",
                  "| model | trigram blocking | ROUGE-1 | paired ROUGE-1 vs baseline | paired ROUGE-1 vs Lead of as "
                  "many words | ROUGE-2 | ROUGE-Lsum | sentences | words | redundancy % |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for blocking in blockings:
            baseline = None
            for checkpoint in checkpoints:
                summaries, _ = model_summaries("Stepwise HiBERT", checkpoint, documents, blocking, settings)
                metrics = paired_with_lead_words(summary_metrics(summaries, references, sources), summaries,
                                                 document_sentences, references)
                low, high = metrics["rouge1_vs_lead_words_interval"]
                vs_lead = f"{metrics['rouge1_vs_lead_words']:+.2f} [{low:+.2f}, {high:+.2f}]"
                if baseline is None:
                    baseline, paired = metrics, "-"
                else:
                    differences = [a - b for a, b in zip(metrics["rouge1_per_document"],
                                                         baseline["rouge1_per_document"])]
                    low, high = bootstrap_interval(differences)
                    paired = f"{sum(differences) / len(differences):+.2f} [{low:+.2f}, {high:+.2f}]"
                lines.append(
                    f"| `{display_path(checkpoint)}` | {'yes' if blocking else 'no'} | {metrics['rouge1']:.2f} | "
                    f"{paired} | {vs_lead} | {metrics['rouge2']:.2f} | {metrics['rougeLsum']:.2f} | "
                    f"{metrics['mean_sentences']:.2f} | {metrics['mean_words']:.1f} | {metrics['redundancy']:.1f} |"
                )
    probe_rows = read_jsonl(data_dir() / "cnn_dailymail" / "validation.jsonl")[300 : 300 + args.probe_documents]
    lines += ["", f"## Duplicate probe: raw CNN validation[300:{300 + len(probe_rows)}]", "",
              "| model | copy top next choice | copy's mean rank | copy log-prob change |", "|---|---|---|---|"]
    for checkpoint in checkpoints:
        figures = summarize(probe_model(str(checkpoint), [row["document"] for row in probe_rows]))
        lines.append(
            f"| `{display_path(checkpoint)}` | {figures['copy_top']} of {figures['documents']} | "
            f"{figures['mean_rank']:.2f} | {figures['mean_change']:+.2f} [{figures['min_change']:+.2f}, "
            f"{figures['max_change']:+.2f}] |"
        )
    write_report("stepwise_candidates_dev.py", lines, args.output)


if __name__ == "__main__":
    main()
