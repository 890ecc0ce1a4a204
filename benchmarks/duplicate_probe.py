"""The duplicate probe (issue 57): does a stepwise model read its own partial summary?

For each development article: the model's first pick (its highest-scoring sentence with an empty summary, as the
first beam step takes it: the end unit may not close an empty summary); an exact copy of that sentence inserted right
after it; then, with the first pick as the partial summary, is the copy the model's top next choice among the
document's sentences (the end unit left out: the question is which sentence it would add)? A model that reads its
summary should see that the copy adds nothing. Reported per model: in how many articles the copy stays the top next
choice, the copy's mean rank among the open sentences, and the change of the copy's log-probability (softmax over the
open sentences and the end unit, as the model scores a step) from the empty summary to the summary holding its twin:
it should collapse, where a model that ignores its summary gains what the chosen twin's probability leaves free.

Development documents only (default: raw CNN `validation[300:320]`; the reported sets are `validation[:300]` and
`validation_large[:1000]`).

    python benchmarks/duplicate_probe.py                                   # the shipped default
    python benchmarks/duplicate_probe.py --models checkpoints/stepwise-hibert-minilm-cnndm,runs/candidate/final \
        --output benchmarks/results/duplicate_probe.md
"""

import argparse
import math
import warnings
from pathlib import Path

from _common import REPO, data_slice, display_path, setup_runtime, write_report

DEFAULT_MODEL = "checkpoints/stepwise-hibert-minilm-cnndm"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=DEFAULT_MODEL, help="comma-separated stepwise checkpoints")
    parser.add_argument("--data_file", default=None, help="CNN/DM JSONL (.gz); default: the shared raw CNN file")
    parser.add_argument("--start", type=int, default=300, help="first document (default 300: development)")
    parser.add_argument("--limit", type=int, default=20, help="documents (default 20)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per_document", action="store_true", help="add one row per document and model")
    parser.add_argument("--output", default=None, help="also write the report here (markdown)")
    return parser.parse_args()


def with_copy(sentences: list[str], index: int) -> list[str]:
    """`sentences` with an exact copy of sentence `index` inserted right after it (the copy's index: index + 1)."""
    return [*sentences[: index + 1], sentences[index], *sentences[index + 1 :]]


def next_choice_log_probs(model, inputs: dict, prefix: list[int]):
    """The model's log-probabilities [sentences + 1] (end unit last) of the next choice for one document's `inputs`
    (its processor's output without `sentences`) given the partial summary `prefix` (sentence indices)."""
    import torch

    summary = torch.tensor([prefix], dtype=torch.long).reshape(1, len(prefix))
    with torch.no_grad():
        logits = model(**inputs, summary_indices=summary).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def probe_sentences(score, sentences: list[str]) -> dict | None:
    """The probe on one document: `score(sentences, prefix)` gives the next-choice log-probabilities [len(sentences)
    + 1] (end unit last, closed sentences -inf or the dtype's minimum). None when the document has fewer than two
    sentences. Returns the first pick, whether the copy is the top next choice, its rank among the open sentences
    (1 = top) and its log-probability before (empty summary) and after (the first pick chosen)."""
    if len(sentences) < 2:
        return None
    first = int(score(sentences, [])[:-1].argmax())
    doubled = with_copy(sentences, first)
    copy = first + 1
    before = score(doubled, [])
    after = score(doubled, [first])
    sentence_scores = after[:-1].clone()
    sentence_scores[first] = -math.inf  # already in the summary (the model closes it too)
    rank = 1 + int((sentence_scores > sentence_scores[copy]).sum())
    return {
        "first": first,
        "copy_top": rank == 1,
        "copy_rank": rank,
        "log_prob_before": float(before[copy]),
        "log_prob_after": float(after[copy]),
    }


def model_scorer(model, processor):
    """`score(sentences, prefix)` for `probe_sentences` over a loaded stepwise model and its processor (the
    sentences as the pipeline reads them; a document past the model's sentence limit is cut as the pipeline cuts
    it)."""

    def score(sentences, prefix):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation to the model's limits
            inputs = processor({"sentences": list(sentences)})
        inputs.pop("sentences")
        return next_choice_log_probs(model, inputs, prefix)

    return score


def probe_model(checkpoint: str, documents: list[str]) -> list[dict | None]:
    """`probe_sentences` for every document (split into sentences as the model's processor splits them)."""
    from sumformers.hub import load_model, load_tokenizer

    model = load_model(checkpoint)
    if not model.is_stepwise:
        raise SystemExit(f"{checkpoint} is not a stepwise model")
    processor = model.processor_class(load_tokenizer(checkpoint), model.config)
    score = model_scorer(model, processor)
    results = []
    for document in documents:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sentences = processor.sentences(document)
        results.append(probe_sentences(score, sentences))
    return results


def summarize(results: list[dict | None]) -> dict:
    """The probe's figures over documents: copies at the top, mean rank, mean/min/max change of the copy's
    log-probability."""
    probed = [result for result in results if result is not None]
    changes = [result["log_prob_after"] - result["log_prob_before"] for result in probed]
    return {
        "documents": len(probed),
        "copy_top": sum(result["copy_top"] for result in probed),
        "mean_rank": sum(result["copy_rank"] for result in probed) / len(probed),
        "mean_change": sum(changes) / len(changes),
        "min_change": min(changes),
        "max_change": max(changes),
        "mean_prob_after": sum(math.exp(result["log_prob_after"]) for result in probed) / len(probed),
    }


def main():
    args = parse_args()
    setup_runtime(args.threads)
    data_file, rows = data_slice(args, "validation.jsonl")
    documents = [row["document"] for row in rows]
    checkpoints = [name.strip() for name in args.models.split(",") if name.strip()]
    lines = [
        f"Duplicate probe on `{data_file.name}[{args.start}:{args.start + len(rows)}]` (development documents): the "
        "model's first pick copied right after itself; with the first pick as the partial summary, is the copy the "
        "top next choice among the sentences? Change = the copy's log-probability with the first pick chosen minus "
        "with the empty summary (mean [min, max]); P(copy) after = its mean probability then.",
        "",
        "| model | documents | copy top next choice | copy's mean rank | log-prob change | P(copy) after |",
        "|---|---|---|---|---|---|",
    ]
    per_document = []
    for checkpoint in checkpoints:
        path = Path(checkpoint) if Path(checkpoint).is_absolute() else REPO / checkpoint
        results = probe_model(str(path), documents)
        figures = summarize(results)
        lines.append(
            f"| `{display_path(path)}` | {figures['documents']} | {figures['copy_top']} of {figures['documents']} | "
            f"{figures['mean_rank']:.2f} | {figures['mean_change']:+.2f} [{figures['min_change']:+.2f}, "
            f"{figures['max_change']:+.2f}] | {figures['mean_prob_after']:.3f} |"
        )
        for index, result in enumerate(results):
            if result is not None:
                change = result["log_prob_after"] - result["log_prob_before"]
                per_document.append(
                    f"| `{display_path(path)}` | {args.start + index} | {result['first']} | "
                    f"{'yes' if result['copy_top'] else 'no'} | {result['copy_rank']} | {change:+.2f} |"
                )
    if args.per_document:
        lines += ["", "| model | document | first pick | copy top | copy's rank | log-prob change |",
                  "|---|---|---|---|---|---|", *per_document]
    write_report("duplicate_probe.py", lines, args.output)


if __name__ == "__main__":
    main()
