"""ROUGE of HetFormer on untouched development documents, against Lead-k, the greedy oracle and the BERTSum
baseline truncated at 512 tokens, with the paper's ablations. One table per dataset.

    OMP_NUM_THREADS=1 python benchmarks/quality_hetformer.py --dataset qmsum --model runs/hetformer-minilm-qmsum/final
    OMP_NUM_THREADS=1 python benchmarks/quality_hetformer.py --dataset cnn_dailymail \
        --model runs/hetformer-minilm-cnndm/final
    OMP_NUM_THREADS=1 python benchmarks/quality_hetformer.py --dataset fewsum --model runs/hetformer-minilm-fewsum/final

Rows:
- Lead-k: the first k sentences (of the documents in order, for multi-document input);
- Oracle: the greedy oracle against the reference over the whole input (the training labels' objective: ROUGE-1 +
  ROUGE-2 F for one document, ROUGE-2 F for several), as many sentences as raise it;
- BERTSum: the `extractive-summarization` pipeline with the BERTSum checkpoint (trained on CNN/DM), whose input is cut
  at 512 tokens (documents joined one per paragraph);
- HetFormer, and its ablations, evaluated by switching a component off at inference in the same trained model (no
  retraining: each row shows what the trained model loses without that component, which is not the same as a model
  trained without it): one fixed window of 512 tokens in every layer instead of 32 growing to 512; no sentence nodes
  (the `[CLS]` before each sentence becomes an ordinary windowed token, still read by the scorer); no entity links;
  for multi-document input, no document nodes.
Every system but the oracle picks k sentences with trigram blocking. Inputs are prepared as in training
(`sumformers.text.sentences.document_texts`: QMSum's `{vocalsound}`-style markup is removed for every system).
HetFormer is also paired against each baseline per document (95% bootstrap intervals).

`--ship TRAINED_ON` makes `--model` (a training run's adapter folder, with its card) the shipped QMSum checkpoint:
its card gets this run's table and paired differences, `--ship_chosen_on` (how the model was chosen, on other
documents than these), its HetFormer scores in the model index, and where it trained.
"""

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO_ROOT = Path(__file__).resolve().parents[1]

from _common import ship_adapter_checkpoint  # noqa: E402
from transformers import AutoConfig  # noqa: E402

from sumformers.hub import load_pipeline, read_card_info, write_card  # noqa: E402
from sumformers.text.evaluation import data_dir, read_jsonl  # noqa: E402
from sumformers.text.scoring import bootstrap_interval, greedy_oracle, rouge_per_example, rouge_scores  # noqa: E402
from sumformers.text.sentences import document_texts, lead_k, split_sentences  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# dataset -> (file, rows, text column, k, markup): k is the usual 3 for news, else the median size of the greedy
# oracle on the training split (QMSum 11, FewSum 4; FewSum's references are ~52 words, so the paper's Multi-News
# default of 9 would be far too long).
DATASETS = {
    "qmsum": ("qmsum/validation.jsonl", None, "document", 11, True),
    "cnn_dailymail": ("cnn_dailymail/validation.jsonl", 300, "document", 3, False),
    "fewsum": ("fewsum/validation.jsonl", None, "documents", 4, False),
}
SHIPPED = REPO_ROOT / "checkpoints" / "hetformer-minilm-qmsum"
DEFAULT_BERTSUM = ("checkpoints/bertsum-minilm-cnndm", "runs/bertsum-minilm-cnndm/final")
ABLATIONS = {
    "HetFormer": {},
    "- growing windows (512 in every layer)": {"attention_windows": "fixed"},
    "- sentence nodes": {"use_sentence_nodes": False},
    "- entity links": {"use_entities": False},
    "- document nodes": {"use_document_nodes": False},
}


def hetformer_rows(model_path, inputs, k, max_length, multi_document, no_ablations=False, segmentation=None,
                   min_unit_words=None):
    """ROUGE inputs for HetFormer and its ablations: each input is encoded once (sentences, entities), then scored
    once per variant by the pipeline's own forward and postprocess steps. `segmentation` "sentences" reads
    transcripts as prose sentences and lets filler be chosen (the package before meeting units); "meeting" sets the
    meeting units' `min_words` from `meeting_min_unit_words`."""
    summarizer = load_pipeline(model_path)
    config = summarizer.model.config
    if segmentation is not None:
        config.meeting_segmentation = "off" if segmentation == "sentences" else "auto"
    if min_unit_words is not None:
        config.meeting_min_unit_words = min_unit_words
    skip_filler = segmentation != "sentences"
    max_length = max_length or config.max_position_embeddings
    original = {name: getattr(config, name) for name in ("attention_windows", "use_sentence_nodes", "use_entities",
                                                           "use_document_nodes")}
    variants = {name: change for name, change in ABLATIONS.items() if multi_document or "document" not in name}
    if no_ablations:
        variants = {"HetFormer": {}}
    predictions = {name: [] for name in variants}
    seconds = {name: 0.0 for name in variants}
    for document in inputs:
        model_inputs = summarizer.preprocess(document, max_length=max_length)
        for name, change in variants.items():
            for setting, value in original.items():
                setattr(config, setting, value)
            for setting, value in change.items():
                setattr(config, setting, [512] * len(original["attention_windows"]) if value == "fixed" else value)
            start = time.perf_counter()
            outputs = summarizer.forward(dict(model_inputs))
            seconds[name] += time.perf_counter() - start
            predictions[name].append(summarizer.postprocess(
                outputs, num_sentences=k, trigram_blocking=True, skip_filler=skip_filler
            )["summary"])
    for setting, value in original.items():
        setattr(config, setting, value)
    return predictions, seconds, max_length


def record_in_card(checkpoint, scores, evaluation):
    """Write an evaluation into a checkpoint's card info and rebuild its model card."""
    card_info = read_card_info(checkpoint)
    card_info.update(results=scores, evaluation=evaluation)
    write_card(Path(checkpoint), AutoConfig.from_pretrained(checkpoint), card_info)


def ship(model, report: str, scores: dict, chosen_on: str, trained_on: str, split: str) -> Path:
    """`model` as the shipped QMSum HetFormer, its card holding `chosen_on`, this run's `report` (table and paired
    differences) and `scores` (the model index, on `split`)."""
    shipped = ship_adapter_checkpoint(model, SHIPPED, [chosen_on, "", *report.split("\n")], trained_on, "")
    card = read_card_info(shipped)
    card.update(results=scores, dataset_name="qmsum", split=split)
    write_card(shipped, AutoConfig.from_pretrained(shipped), card)
    return shipped


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=DATASETS, required=True)
    parser.add_argument("--model", required=True, help="HetFormer checkpoint trained on this dataset.")
    parser.add_argument("--bertsum", default=None, help="BERTSum checkpoint (default: the shipped one, else the run).")
    parser.add_argument("--num_sentences", type=int, default=None, help="k (default: per dataset, see DATASETS).")
    parser.add_argument("--max_length", type=int, default=None, help="HetFormer input tokens (default: the model's).")
    parser.add_argument("--start", type=int, default=0, help="First document (e.g. 10: past the tuning meetings).")
    parser.add_argument("--max_samples", type=int, default=None)
    parser.add_argument(
        "--segmentation", choices=("meeting", "sentences"), default=None,
        help="meeting: transcripts as meeting units, filler never chosen (the default); sentences: as prose "
        "sentences, filler allowed (the package before #62). Applies to BERTSum's selection too.",
    )
    parser.add_argument("--no_oracle", action="store_true", help="Skip the greedy oracle row (slow on meetings).")
    parser.add_argument("--meeting_min_unit_words", type=int, default=None, help="Override the config's (tuning).")
    parser.add_argument("--paired_with", default=None,
                        help="A .json this script wrote on the same documents: print HetFormer's paired differences.")
    parser.add_argument(
        "--output", default=None, help="Path without extension (default results/hetformer_quality_<dataset>)."
    )
    parser.add_argument(
        "--no_ablations", action="store_true", help="HetFormer as trained only (e.g. at another length)."
    )
    parser.add_argument(
        "--record_card", default=None, help="A checkpoint folder whose model card gets the HetFormer row."
    )
    parser.add_argument("--ship", metavar="TRAINED_ON", default=None,
                        help="Ship --model as checkpoints/hetformer-minilm-qmsum (qmsum; its card says TRAINED_ON).")
    parser.add_argument("--ship_chosen_on", default=None,
                        help="With --ship: how the model was chosen, for its card (development documents, scores).")
    args = parser.parse_args()
    if args.ship and (args.dataset != "qmsum" or not args.ship_chosen_on or args.record_card):
        parser.error("--ship needs --dataset qmsum and --ship_chosen_on, and not --record_card")
    # BERTSum and long inputs: the pipeline warns on every truncated document; the table states the limits.
    warnings.filterwarnings("ignore", message="Input truncated")

    file_name, rows, text_column, default_k, strip_markup = DATASETS[args.dataset]
    k = args.num_sentences or default_k
    stop = args.start + args.max_samples if args.max_samples else rows
    examples = read_jsonl(data_dir() / file_name)[args.start : stop]
    multi_document = text_column == "documents"
    texts = [document_texts(example[text_column], strip_markup) for example in examples]
    references = [example["summary"] for example in examples]
    documents_sentences = [[split_sentences(text) for text in item] for item in texts]
    flat_sentences = [[s for sentences in item for s in sentences] for item in documents_sentences]

    predictions = {
        f"Lead-{k}": ["\n".join(sentences[i] for i in lead_k(sentences, k)) for sentences in flat_sentences],
    }
    if not args.no_oracle:
        predictions["Oracle (greedy)"] = [
            "\n".join(
                sentences[i] for i in greedy_oracle(sentences, reference, metric="r2" if multi_document else "r1+r2")
            )
            for sentences, reference in zip(flat_sentences, references)
        ]
    seconds = {}
    bertsum = args.bertsum or next((path for path in DEFAULT_BERTSUM if (REPO_ROOT / path).is_dir()), None)
    if bertsum is None:
        raise FileNotFoundError(f"no BERTSum checkpoint in {DEFAULT_BERTSUM}: pass --bertsum")
    summarizer = load_pipeline(str(REPO_ROOT / bertsum) if not Path(bertsum).is_absolute() else bertsum)
    start = time.perf_counter()
    outputs = summarizer(["\n\n".join(item) for item in texts], num_sentences=k, trigram_blocking=True,
                         skip_filler=args.segmentation != "sentences")
    seconds["BERTSum (CNN/DM, 512 tokens)"] = time.perf_counter() - start
    predictions["BERTSum (CNN/DM, 512 tokens)"] = [output["summary"] for output in outputs]

    inputs = [{"documents": item} if multi_document else item[0] for item in texts]
    het_predictions, het_seconds, max_length = hetformer_rows(
        args.model, inputs, k, args.max_length, multi_document, args.no_ablations, args.segmentation,
        args.meeting_min_unit_words,
    )
    predictions.update(het_predictions)
    seconds.update(het_seconds)

    scores = {name: rouge_scores(summaries, references) for name, summaries in predictions.items()}
    lengths = {name: sum(len(s.split()) for s in summaries) / len(summaries) for name, summaries in predictions.items()}
    lines = [
        f"### {args.dataset}: {len(examples)} documents of `{file_name}`"
        f" (rows {args.start} to {args.start + len(examples) - 1}), k = {k}, HetFormer at most {max_length:,} tokens",
        "",
        f"Command: `OMP_NUM_THREADS=1 python benchmarks/quality_hetformer.py {' '.join(sys.argv[1:])}`; "
        f"BERTSum: `{bertsum}`.",
        "",
        "| system | ROUGE-1 | ROUGE-2 | ROUGE-Lsum | words | model time (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, score in scores.items():
        time_cell = f"{seconds[name]:.0f}" if name in seconds else "-"
        lines.append(f"| {name} | {score['rouge1']:.2f} | {score['rouge2']:.2f} | {score['rougeLsum']:.2f} | "
                     f"{lengths[name]:.0f} | {time_cell} |")
    report = "\n".join(lines) + "\n\n" + baselines_report(predictions, references)
    if args.paired_with:
        report += "\n\n" + paired_report(args.paired_with, examples, predictions, references)
    output = Path(args.output or RESULTS_DIR / f"hetformer_quality_{args.dataset}")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.with_suffix(".md").write_text(report + "\n")
    if args.record_card:
        record_in_card(args.record_card, scores["HetFormer"], (
            f"{len(examples)} documents of `{file_name}`, top {k} sentences with trigram blocking, at most "
            f"{max_length:,} tokens: ROUGE-1 {scores['HetFormer']['rouge1']:.2f}, ROUGE-2 "
            f"{scores['HetFormer']['rouge2']:.2f}, ROUGE-Lsum {scores['HetFormer']['rougeLsum']:.2f} "
            f"(BERTSum truncated "
            f"at 512 tokens: {scores['BERTSum (CNN/DM, 512 tokens)']['rougeLsum']:.2f} ROUGE-Lsum; Lead-{k}: "
            f"{scores[f'Lead-{k}']['rougeLsum']:.2f}). Command: `python benchmarks/quality_hetformer.py "
            f"{' '.join(sys.argv[1:])}`."
        ))
    output.with_suffix(".json").write_text(json.dumps(
        {"dataset": args.dataset, "documents": len(examples), "k": k, "max_length": max_length, "model": args.model,
         "bertsum": bertsum, "scores": scores, "mean_words": lengths, "model_seconds": seconds,
         "ids": [example["id"] for example in examples], "predictions": predictions}, indent=2) + "\n")
    if args.ship:
        shipped = ship(args.model, report, scores["HetFormer"], args.ship_chosen_on, args.ship,
                       f"validation[{args.start}:{stop if stop is not None else ''}]")
        print(f"Shipped: {shipped}")
    print(report)


def paired_lines(title: str, ours: list[dict], theirs: list[dict]) -> list[str]:
    """`title`, then the mean per-document difference `ours` minus `theirs` (`rouge_per_example` rows of the same
    documents) of each ROUGE score with its 95% bootstrap interval, one markdown line each."""
    lines = [f"{title}, paired over {len(ours)} documents:"]
    for key in ("rouge1", "rouge2", "rougeLsum"):
        differences = [a[key] - b[key] for a, b in zip(ours, theirs)]
        low, high = bootstrap_interval(differences)
        lines.append(f"- {key}: {sum(differences) / len(differences):+.2f} [{low:+.2f}, {high:+.2f}]")
    return lines


def baselines_report(predictions, references) -> str:
    """HetFormer's per-document ROUGE differences against each baseline of this run (Lead-k, BERTSum), with 95%
    bootstrap intervals: the issue's target is a paired difference whose interval lies above 0."""
    ours = rouge_per_example(predictions["HetFormer"], references)
    sections = [
        "\n".join(paired_lines(f"HetFormer minus {name}", ours, rouge_per_example(summaries, references)))
        for name, summaries in predictions.items()
        if name.startswith(("Lead-", "BERTSum"))
    ]
    return "\n\n".join(sections)


def paired_report(other_json, examples, predictions, references) -> str:
    """HetFormer's per-document ROUGE differences (this run minus `other_json`'s, on the same documents) with 95%
    bootstrap intervals."""
    other = json.loads(Path(other_json).read_text())
    if other.get("ids") != [example["id"] for example in examples]:
        raise ValueError(f"{other_json} holds other documents than this run")
    ours = rouge_per_example(predictions["HetFormer"], references)
    theirs = rouge_per_example(other["predictions"]["HetFormer"], references)
    return "\n".join(paired_lines(f"HetFormer, this run minus {other_json}", ours, theirs))

if __name__ == "__main__":
    main()
