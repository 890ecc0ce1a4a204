"""Summary quality on the CNN/DM documents held out from training: by default, in one run, the first 1,000 of
`validation_large` (CNN then Daily Mail) and the 300 CNN articles of `validation[:300]` of the shared copy.

One table per set: Lead-2, Lead-3, the greedy oracle, the BERTSum baseline (its encoder's 512 tokens), HiBERT, Stepwise
HiBERT, ETCSum, Stepwise ETCSum and HetFormer (full length), each with and without trigram blocking: ROUGE-1/2/Lsum
(F1 x 100, rouge-score with stemming, one sentence per line) overall and by source (CNN / Daily Mail), mean summary
length in whitespace words, and redundancy (share of summaries in which a trigram occurs in two different sentences).
Each model row also gives the training hours of its checkpoint and the hardware they ran on, as the checkpoint's card
info (`sumformers_card.json`) records them: its `training_seconds` and `training_hardware` where given, else what
the training scripts write into its `training` text ("N optimizer steps (...) on HARDWARE" and "final training loss
X, T s"); a resumed run records only the time after it resumed ("at least"). The baselines were not trained ("-").

    # both sets, every model found; writes benchmarks/results/quality_cnndm.md
    python benchmarks/quality_cnndm.py --max_words 60
    # the main table with the official ROUGE-1.5.5 beside rouge-score (needs `pip install sumformers[official-rouge]`)
    python benchmarks/quality_cnndm.py --models 'HiBERT,Stepwise HiBERT' --blocking yes --max_words 60 --rouge official
    # one set, one model
    python benchmarks/quality_cnndm.py --data_file ../shared/data/cnn_dailymail/validation.jsonl --limit 50 \
        --models "Stepwise HiBERT" --stepwise_hibert checkpoints/stepwise-hibert-minilm-cnndm

Decoding: non-stepwise models keep their top 3 sentences (the `extractive-summarization` pipeline); stepwise models
run the `stepwise-summarization` pipeline with the paper's beam 3 and at most 4 steps, stopping at the end-of-summary
unit. Oracle is PreSumm's greedy oracle (ROUGE-1 F + ROUGE-2 F, no length cap), Oracle (Full) the stepwise paper's
(greedy on the mean of ROUGE-1/2/Lsum F, whole document); trigram blocking does not apply to them. Predictions are
cached per model and setting under --cache_dir, so the table can be rebuilt without re-decoding; a model whose
checkpoint is missing gets a row saying so.

`--rouge official` adds ROUGE-1/2/L F1 x 100 by the official ROUGE-1.5.5 Perl script (`sumformers.text.official_rouge`:
the settings of See et al. 2017 and Liu & Lapata 2019, `-c 95 -r 1000 -n 2 -a -m`, with WordNet's stemming exceptions;
intervals are the script's own bootstrap) beside rouge-score's, on the same summaries, and their difference (official
minus rouge-score): the columns to compare with a paper's table. Everything else (paired differences, by source)
stays on rouge-score.

`--max_words N` adds one row per system decoded under the same length budget, without trigram blocking: at most 4
sentences (Lead: in document order, the others: in rank order or by beam search) and at most N whitespace words, a
sentence that would exceed the budget being skipped. The references average about 34 words, so summary length
moves ROUGE F1 by about as much as content does; these rows compare the systems at equal length.

`--stepwise_sentences K` adds one row per stepwise model decoded to exactly K sentences (beam 3, the end unit allowed
only after K), without trigram blocking: the length of Lead-K and of the non-stepwise models' top K, the paper's
length for both kinds on CNN/DM (K = 3), so that a stepwise model and its non-stepwise variant compare at the same
number of sentences rather than under a word budget that the stepwise model may stop short of. With K = 3, each set's
table is followed by the paired ROUGE-1 difference of each stepwise model at exactly 3 sentences to its non-stepwise
variant's top 3 (both without blocking), when both were selected.
"""

import argparse
import json
import re
import sys
from pathlib import Path

from _common import (
    REPO,
    SOURCES,
    TRAINING_RUN,
    cached_summaries,
    checkpoint_key,
    display_path,
    find_checkpoint,
    format_cell,
    paired_with_lead3,
    paired_with_lead_words,
    rouge_metrics,
    setup_runtime,
    write_report,
)

MODELS = {  # name -> (default checkpoint candidates, pipeline task)
    "BERTSum": (["checkpoints/bertsum-minilm-cnndm", "runs/bertsum-minilm-cnndm/final"], "extractive-summarization"),
    "HiBERT": (["checkpoints/hibert-minilm-cnndm", "runs/hibert-minilm-cnndm/final"], "extractive-summarization"),
    "Stepwise HiBERT": (
        ["checkpoints/stepwise-hibert-minilm-cnndm", "runs/stepwise-hibert-minilm-cnndm/final"],
        "stepwise-summarization",
    ),
    "ETCSum": (["checkpoints/etcsum-minilm-cnndm", "runs/etcsum-minilm-cnndm/final"], "extractive-summarization"),
    "Stepwise ETCSum": (
        ["checkpoints/stepwise-etcsum-minilm-cnndm", "runs/stepwise-etcsum-minilm-cnndm/final"],
        "stepwise-summarization",
    ),
    "HetFormer": (["runs/hetformer-minilm-cnndm40k/final"], "extractive-summarization"),
}
# (label, file under the shared cnn_dailymail folder, first document, documents): the sets the default run reports
HELD_OUT_SETS = (
    ("validation_large[:1000]", "validation_large.jsonl.gz", 0, 1000),
    ("validation[:300] (CNN)", "validation.jsonl", 0, 300),
)
COLUMNS = (
    "rouge1", "rouge1_vs_lead3", "rouge1_vs_lead_words", "rouge2", "rougeLsum", "mean_sentences", "mean_words",
    "redundancy",
)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data_file", default=None, help="one CNN/DM JSONL (.gz) to evaluate instead of the two held-out sets"
    )
    parser.add_argument("--start", type=int, default=0, help="with --data_file: first document (default 0)")
    parser.add_argument("--limit", type=int, default=300, help="with --data_file: documents (default 300)")
    for name in MODELS:
        flag = "--" + name.lower().replace(" ", "_")
        parser.add_argument(flag, default=None, help=f"{name} checkpoint (default: the first of {MODELS[name][0]})")
    parser.add_argument(
        "--etcsum_max_length",
        type=int,
        default=512,
        help="document tokens the ETCSum models read (their training length; CNN/DM articles average about 770); "
        "others use their own limit",
    )
    parser.add_argument(
        "--models", default=None, help=f"comma-separated subset of {', '.join(MODELS)} (default: all)"
    )
    parser.add_argument("--max_words", type=int, default=None, help="add rows under this word budget (see above)")
    parser.add_argument("--stepwise_sentences", type=int, default=None,
                        help="add rows of the stepwise models at exactly this many sentences (see above)")
    parser.add_argument("--blocking", choices=("both", "yes", "no"), default="both",
                        help="the models' rows with and without trigram blocking (default both), or one of them")
    parser.add_argument("--rouge", choices=("rouge-score", "official"), default="rouge-score",
                        help="official: add the official ROUGE-1.5.5's columns beside rouge-score's (see above)")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--end_bias", type=float, default=None,
                        help="stepwise models: the end unit's logit bias (default: each model's own)")
    parser.add_argument("--device", default="cpu", help="where the models decode (cpu, cuda); cached apart")
    parser.add_argument("--decode_only", action="store_true",
                        help="only decode the selected models into the cache (e.g. on a lent GPU), no table")
    parser.add_argument("--cache_dir", default=str(REPO / "runs" / "quality_cnndm"))
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "quality_cnndm.md"))
    return parser.parse_args()


OFFICIAL_COLUMNS = ("official_rouge1", "official_rouge2", "official_rougeLsum", "official_minus_rouge_score")


def summary_metrics(
    summaries: list[str], references: list[str], sources: list[str | None], rouge: str = "rouge-score"
) -> dict:
    """Mean ROUGE-1/2/Lsum with 95% bootstrap intervals (`<key>_interval`), ROUGE-1 by source (`rouge1_<source>`),
    mean words and redundancy; with `rouge` "official" also ROUGE-1.5.5's (`official_<key>`, with the script's
    intervals) and official minus rouge-score for the three (`official_minus_rouge_score`)."""
    from sumformers.text.sentences import has_repeated_trigram, summary_length_stats, to_sentences

    scores = rouge_metrics(summaries, references, sources)
    if rouge == "official":
        from sumformers.text.official_rouge import official_rouge_scores

        official = official_rouge_scores(summaries, references)
        keys = ("rouge1", "rouge2", "rougeLsum")
        scores.update({f"official_{key}": value for key, value in official.items()})
        scores["official_minus_rouge_score"] = " / ".join(f"{official[key] - scores[key]:+.2f}" for key in keys)
    lengths = summary_length_stats(summaries)
    scores["mean_words"], scores["mean_sentences"] = lengths["mean_words"], lengths["mean_sentences"]
    scores["redundancy"] = 100.0 * sum(has_repeated_trigram(to_sentences(s)) for s in summaries) / len(summaries)
    return scores


def matched_length_pairs(rows: list[tuple[str, str, str, dict | str]], sentences: int | None) -> list[str]:
    """Lines of the paired ROUGE-1 difference (95% bootstrap interval) of each stepwise model at exactly 3 sentences
    to its non-stepwise variant's top 3, both without blocking: stepwise against non-stepwise at matched length."""
    from sumformers.text.scoring import bootstrap_interval

    if sentences != 3:  # the non-stepwise rows keep their top 3
        return []
    scored = [(name, decoding, result) for name, decoding, blocking, result in rows
              if blocking == "no" and isinstance(result, dict)]
    lines = []
    for name, decoding, stepwise in scored:
        if not name.startswith("Stepwise ") or "exactly 3 sentences" not in decoding:
            continue
        variant_name = name.removeprefix("Stepwise ")
        variant = next((result for other, description, result in scored
                        if other == variant_name and description.startswith("top 3")), None)
        if variant is None:
            continue
        differences = [a - b for a, b in zip(stepwise["rouge1_per_document"], variant["rouge1_per_document"])]
        low, high = bootstrap_interval(differences)
        lines.append(f"{name} at exactly 3 sentences - {variant_name} top 3, no blocking, paired ROUGE-1: "
                     f"{sum(differences) / len(differences):+.2f} [{low:+.2f}, {high:+.2f}]")
    return lines


def baseline_summaries(sentences: list[list[str]], references: list[str], max_words: int | None) -> dict:
    from sumformers.text.scoring import greedy_oracle
    from sumformers.text.sentences import select_sentences

    lead = [range(len(s)) for s in sentences]
    summaries = {
        # Lead-2 as well: stepwise models choose their length, and on these references (~34 words) two sentences
        # already score above three
        ("Lead-2", False): ["\n".join(s[i] for i in select_sentences(r, s, 2)) for s, r in zip(sentences, lead)],
        ("Lead-3", False): ["\n".join(s[i] for i in select_sentences(r, s, 3)) for s, r in zip(sentences, lead)],
        ("Lead-3", True): [
            "\n".join(s[i] for i in select_sentences(r, s, 3, trigram_blocking=True)) for s, r in zip(sentences, lead)
        ],
        ("Oracle", None): [
            "\n".join(s[i] for i in greedy_oracle(s, reference)) for s, reference in zip(sentences, references)
        ],
        ("Oracle (Full)", None): [
            "\n".join(s[i] for i in greedy_oracle(s, reference, metric="full"))
            for s, reference in zip(sentences, references)
        ],
    }
    if max_words:
        summaries[("Lead", False, max_words)] = [
            "\n".join(s[i] for i in select_sentences(r, s, 4, max_words=max_words)) for s, r in zip(sentences, lead)
        ]
    return summaries


def training_hours(card_info: dict | None) -> str:
    """The training time a checkpoint's card info records, in hours on its hardware (see the module's docstring):
    e.g. "0.12 (NVIDIA H200)", "at least 0.50 (CPU)" for a resumed run, "not recorded" when the card says neither."""
    text = (card_info or {}).get("training") or ""
    seconds = (card_info or {}).get("training_seconds")
    if seconds is None:
        found = re.search(r"final training loss [^,]+, ([\d,]+) s", text)
        seconds = float(found.group(1).replace(",", "")) if found else None
    if seconds is None:
        return "not recorded"
    hardware = (card_info or {}).get("training_hardware")
    if hardware is None:
        found = TRAINING_RUN.search(text)
        hardware = found.group(2).strip().rstrip(".") if found and found.group(2) else None
    resumed = "at least " if "the run resumed there" in text else ""
    return f"{resumed}{seconds / 3600:.2f}" + (f" ({hardware})" if hardware else "")


def checkpoint_training_hours(checkpoint: Path) -> str:
    """`training_hours` of the card info saved with `checkpoint`."""
    from sumformers.hub import read_card_info

    return training_hours(read_card_info(checkpoint))


def resolve_checkpoint(name: str, given: str | None) -> Path | None:
    return find_checkpoint([given] if given else MODELS[name][0])


def decoding_options(
    name: str, checkpoint: Path, args, max_words: int | None = None, sentences: int | None = None
) -> tuple[dict, str]:
    """Pipeline options and their description: top 3, or the paper's beam 3 / at most 4 steps with the model's own
    minimum length (its config's `min_sentences`); under a word budget top 4 / at most 4 steps within `max_words`;
    a stepwise model with `sentences`: exactly that many steps; ETCSum models read at most --etcsum_max_length
    tokens."""
    if MODELS[name][1] == "extractive-summarization":
        options, description = {"num_sentences": 4 if max_words else 3}, f"top {4 if max_words else 3}"
    else:
        config = json.loads((checkpoint / "config.json").read_text())
        minimum = config.get("min_sentences", 1)
        options = dict(beam_size=3, num_sentences=4, min_sentences=minimum)
        # the paper's rule (the default): a summary cut at 4 sentences pays for its end unit
        given = getattr(args, "end_bias", None)
        end_bias = config.get("end_bias", 0.0) if given is None else given
        # every decoding setting is in the options (the cache key): shipping may rewrite the config
        options.update(end_bias=end_bias, end_at_limit=config.get("end_at_limit", True))
        closing = ", END paid at 4" if options["end_at_limit"] else ""
        description = f"beam 3, {minimum}-4 sentences{closing}"
        if sentences:
            options.update(num_sentences=sentences, min_sentences=sentences)
            description = f"beam 3, exactly {sentences} sentences"
        elif end_bias:
            description += f", END bias {end_bias:g}"
    if max_words:
        options["max_words"] = max_words
        description += f", <= {max_words} words"
    if "ETCSum" in name:
        options["max_length"] = args.etcsum_max_length
        description += f", {args.etcsum_max_length} tokens"
    return options, description


def model_summaries(
    name, checkpoint: Path, documents, blocking: bool, args, max_words=None, sentences=None
) -> tuple[list[str], str]:
    """The model's summaries (cached by checkpoint, setting and documents) and the decoding time per document as
    "seconds (threads)": a cached row keeps the thread count it was timed with."""
    import sumformers

    options, _ = decoding_options(name, checkpoint, args, max_words, sentences)
    device = getattr(args, "device", "cpu")
    # a GPU's summaries may differ from the CPU's in the last bits of a score: cached apart
    key = [checkpoint_key(checkpoint, configs=False), blocking, options, *([device] if device != "cpu" else [])]
    options.pop("end_at_limit", None)  # in the key, not a pipeline option: the model's own rule
    return cached_summaries(args.cache_dir, name, key, documents,
                            lambda: sumformers.load_pipeline(str(checkpoint), device=device),
                            args.threads if device == "cpu" else device,
                            **options, trigram_blocking=blocking, batch_size=args.batch_size)


def format_table(title: str, rows: list[tuple[str, str, str, dict | str]], counts: dict) -> str:
    by_source = [source for source in SOURCES if counts.get(source)]
    source_columns = "".join(f" ROUGE-1 {SOURCES[source]} ({counts[source]}) |" for source in by_source)
    # the official ROUGE's columns follow rouge-score's ROUGE-Lsum when the rows have them (--rouge official)
    official = any(isinstance(result, dict) and "official_rouge1" in result for *_, result in rows)
    columns = COLUMNS[:5] + (OFFICIAL_COLUMNS if official else ()) + COLUMNS[5:]
    official_header = (" ROUGE-1 official | ROUGE-2 official | ROUGE-L official "
                       "| official - rouge-score (R-1 / R-2 / R-L) |") if official else ""
    lines = [
        f"## {title}: {counts['all']} documents",
        "",
        "| model | decoding | trigram blocking | ROUGE-1 | ROUGE-1 - Lead-3 (paired) "
        "| ROUGE-1 - Lead of as many words (paired) | ROUGE-2 | ROUGE-Lsum |"
        + official_header
        + " sentences | words | redundancy % |"
        + source_columns
        + " s / doc (threads) | training hours (hardware) |",
        "|---|---|---|" + "---|" * len(columns) + "---|" * len(by_source) + "---|---|",
    ]
    for name, decoding, blocking, result in rows:
        if isinstance(result, str):
            empty = " |" * (len(columns) - 1 + len(by_source) + 1)  # the other columns, then s / doc
            lines.append(f"| {name} | {decoding} | {blocking} | {result} |{empty} - |")
            continue
        values = " | ".join(
            result[column] if isinstance(result[column], str) else format_cell(result, column) for column in columns
        )
        sources = "".join(f" {result[f'rouge1_{source}']:.2f} |" for source in by_source)
        seconds = result.get("seconds") or ""
        hours = result.get("training_hours") or "-"
        lines.append(f"| {name} | {decoding} | {blocking} | {values} |{sources} {seconds} | {hours} |")
    return "\n".join(lines)


def read_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """The tables of a report `format_table` wrote: set title (the heading before ": N documents") -> its rows, each
    {column header: cell text}, headers with their counts (e.g. "ROUGE-1 CNN (211)")."""
    tables, title, headers = {}, None, None
    for line in text.splitlines():
        if line.startswith("## "):
            title, headers = line[3:].rsplit(": ", 1)[0], None
            tables[title] = []
        elif title is not None and line.startswith("|") and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if headers is None:
                headers = cells
            else:
                tables[title].append(dict(zip(headers, cells)))
    return tables


def evaluate_set(title: str, examples: list[dict], selected: list[str], args, checkpoints: dict) -> str:
    """The table of one document set: the baselines, then every selected model found (its checkpoint is added to
    `checkpoints`), with and without trigram blocking, under --max_words and at --stepwise_sentences. Every row is
    paired with Lead-3 and with the Lead of as many words as its own summary on each document."""
    from sumformers.text.sentences import split_sentences

    documents = [example["document"] for example in examples]
    references = [example["summary"] for example in examples]
    # the small shared validation file is CNN only and has no `source` field
    sources = [example.get("source", "cnn") for example in examples]
    counts = {"all": len(examples), **{source: sources.count(source) for source in SOURCES}}
    rows = []
    document_sentences = [] if args.decode_only else [split_sentences(document) for document in documents]
    baselines = {} if args.decode_only else baseline_summaries(document_sentences, references, args.max_words)
    for (name, blocking, *budget), summaries in baselines.items():
        label = "n/a" if blocking is None else ("yes" if blocking else "no")
        if budget:
            decoding = f"first 4, <= {budget[0]} words"
        else:
            decoding = f"first {name[-1]}" if name.startswith("Lead") else "greedy, R1+R2 F"
            decoding = "greedy, mean R1/R2/Lsum F" if name == "Oracle (Full)" else decoding
        metrics = dict(summary_metrics(summaries, references, sources, args.rouge), seconds=None)
        rows.append((name, decoding, label, paired_with_lead_words(metrics, summaries, document_sentences, references)))
    lead3 = next((result for name, _, label, result in rows if name == "Lead-3" and label == "no"), None)
    for *_, result in rows:
        paired_with_lead3(result, lead3)
    for name in selected:
        checkpoint = resolve_checkpoint(name, getattr(args, name.lower().replace(" ", "_")))
        if checkpoint is None:
            rows.append((name, "-", "-", "checkpoint not found"))
            continue
        checkpoints[name] = display_path(checkpoint)
        blocking_settings = {"both": (False, True), "yes": (True,), "no": (False,)}[args.blocking]
        settings = [(blocking, None, None) for blocking in blocking_settings]
        settings += [(False, args.max_words, None)] if args.max_words else []
        stepwise = MODELS[name][1] == "stepwise-summarization"
        settings += [(False, None, args.stepwise_sentences)] if stepwise and args.stepwise_sentences else []
        for blocking, max_words, sentences in settings:
            print(f"{title} {name}, blocking {blocking}, budget {max_words}, sentences {sentences}: {checkpoint}",
                  file=sys.stderr, flush=True)
            summaries, seconds = model_summaries(name, checkpoint, documents, blocking, args, max_words, sentences)
            if args.decode_only:
                continue
            metrics = dict(summary_metrics(summaries, references, sources, args.rouge), seconds=seconds)
            metrics = paired_with_lead3(metrics, lead3)
            paired_with_lead_words(metrics, summaries, document_sentences, references)
            metrics["training_hours"] = checkpoint_training_hours(checkpoint)
            description = decoding_options(name, checkpoint, args, max_words, sentences)[1]
            rows.append((name, description, "yes" if blocking else "no", metrics))
    pairs = matched_length_pairs(rows, args.stepwise_sentences)
    return format_table(title, rows, counts) + "".join(f"\n\n{line}" for line in pairs)


def main():
    args = parse_args()
    setup_runtime(args.threads)
    from sumformers.text.evaluation import data_dir, read_jsonl

    if args.data_file:
        sets = [(f"{Path(args.data_file).name}[{args.start}:{args.start + args.limit}]", Path(args.data_file))]
        ranges = [(args.start, args.limit)]
    else:
        sets = [(title, data_dir() / "cnn_dailymail" / name) for title, name, _, _ in HELD_OUT_SETS]
        ranges = [(start, limit) for _, _, start, limit in HELD_OUT_SETS]
    selected = [name.strip() for name in args.models.split(",")] if args.models else list(MODELS)
    unknown = sorted(set(selected) - set(MODELS))
    if unknown:
        raise SystemExit(f"unknown --models {unknown}; choose from {list(MODELS)}")

    checkpoints = {}
    if args.decode_only:
        for (title, path), (start, limit) in zip(sets, ranges):
            evaluate_set(title, read_jsonl(path)[start : start + limit], selected, args, checkpoints)
        return
    tables = [
        evaluate_set(title, read_jsonl(path)[start : start + limit], selected, args, checkpoints)
        for (title, path), (start, limit) in zip(sets, ranges)
    ]
    lines = [
        "CNN/DM validation documents held out from training; ROUGE F1 x 100 (rouge-score, stemming, rougeLsum over "
        "`split_sentences` sentences) with 95% bootstrap intervals (1,000 resamples of the documents); words = mean "
        "summary length; redundancy = % of summaries repeating a trigram across sentences."
        + (" Official: ROUGE-1.5.5 (-c 95 -r 1000 -n 2 -a -m, WordNet stemming exceptions) on the same summaries, "
           "with its own 95% bootstrap intervals; official - rouge-score: the difference of the two means."
           if args.rouge == "official" else ""),
        "",
        *("\n\n".join(tables).split("\n")),
        "",
        "Checkpoints: " + "; ".join(f"{name}: `{path}`" for name, path in checkpoints.items()),
    ]
    write_report("quality_cnndm.py", lines, args.output)


if __name__ == "__main__":
    main()
