"""Abstractive summary quality on 1,000 CNN/DM documents no model saw: the first 1,000 of `validation_large`
(211 CNN then 789 Daily Mail articles) of the shared copy.

The data is the **lowercased** pointer-generator text (see the shared data README): the abstractive models are trained
on it and write lowercase, and ROUGE lower-cases anyway. These documents are for this report only and must not be used
for tuning anything (checkpoint choice, decoding settings, length limits): the abstractive training scripts take
`validation_large[1000:1200]` as their dev set.

Rows: Lead-3 (the first 3 sentences of `split_sentences`), the default shipped extractive model
(`extractive-summarization`, top 3 sentences with trigram blocking; `--extractive` for another) as a reference, then
the abstractive models, each a checkpoint folder given by its flag (a row says "checkpoint not found" when it is
missing):

- `--bsea`: BertSumExtAbs; `--planner`: the sentence planner; `--planner_no_guidance`: the planner trained without the
  guidance loss (ablation); `--bsea_large`: BertSumExtAbs with its decoder enlarged to the planner's parameter count.

They run `transformers.pipeline("abstractive-summarization", model=folder)` (the task `import sumformers` registers),
called on a list of documents with `batch_size` and only the generation options set by flag (`--num_beams`,
`--max_length`, `--min_length`, `--length_penalty`; otherwise the model's generation config decides), and give one
sentence a line under "summary".

Columns: ROUGE-1/2/Lsum F1 x 100 (rouge-score with stemming, rougeLsum over the summary's lines) with 95% bootstrap
intervals, ROUGE-1 by source; novel bigrams = % of the summary's bigrams absent from the document, mean over documents
(`novel_ngram_ratio`, on the package's `word_tokens`: lowercased words and single punctuation marks); sentences per
summary; words per sentence (mean over all summary sentences); repeated trigrams = % of summaries in which a word
trigram occurs twice anywhere, within a sentence or across two (`has_repeated_trigram_anywhere` below, on words
without punctuation, so "it's" twice is no repeat; not the package's `has_repeated_trigram`, across sentences only and
with punctuation tokens, that quality_cnndm.py reports as redundancy: a decoder also repeats itself inside a
sentence); facts in article = % of the numbers and names the summaries state that their articles hold
(`source_facts`; on lowercased text, numbers only); words = mean summary length in whitespace words; seconds per
document (threads).

    python benchmarks/quality_abstractive.py --bsea runs/bsea/final --planner runs/planner/final --threads 2
    python benchmarks/quality_abstractive.py --limit 20 --output /tmp/qa.md     # a quick look

Predictions are cached per model, settings and documents under --cache_dir, so the table can be rebuilt without
re-decoding. The report also shows each abstractive model's summaries of the first 3 documents next to the references.
"""

import argparse
import json
import re
import sys
from pathlib import Path

from _common import (
    REPO,
    SOURCES,
    cached_summaries,
    checkpoint_key,
    data_slice,
    display_path,
    find_checkpoint,
    format_cell,
    paired_with_lead3,
    paired_with_lead_words,
    rouge_metrics,
    setup_runtime,
    write_report,
)

ABSTRACTIVE = {  # flag -> row name
    "bsea": "BSEA",
    "planner": "Planner",
    "planner_no_guidance": "Planner, no guidance loss",
    "bsea_large": "BSEA, large decoder",
}
LLAMA_ROWS = {  # flag -> row name: WikiSum over a pretrained Llama-family decoder
    "zero_shot_llama": "SmolLM2 zero-shot (T-D prompt, no training)",
    "wikisum_llama": "WikiSum over SmolLM2 (LoRA)",
}
GENERATION_OPTIONS = ("num_beams", "max_length", "min_length", "length_penalty", "no_repeat_word_ngram_size")
COLUMNS = (
    "rouge1",
    "rouge1_vs_lead3",
    "rouge1_vs_lead_words",
    "rouge2",
    "rougeLsum",
    "novel_bigrams",
    "mean_sentences",
    "words_per_sentence",
    "repeated_trigrams",
    "facts_in_article",
    "mean_words",
)
EXAMPLES = 3  # documents whose summaries the report shows
_WORD_RE = re.compile(r"\w+(?:'\w+)*")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data_file", default=None, help="CNN/DM JSONL (.gz) (default: the shared cnn_dailymail/validation_large)"
    )
    parser.add_argument("--start", type=int, default=0, help="first document (default 0)")
    parser.add_argument("--limit", type=int, default=1000, help="documents (default 1000)")
    parser.add_argument("--extractive", default=None, help="extractive reference model (default: the shipped default)")
    for flag, name in ABSTRACTIVE.items():
        parser.add_argument(f"--{flag}", default=None, help=f"{name} checkpoint folder")
    parser.add_argument("--num_beams", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument("--max_length", type=int, default=None, help="most summary tokens (default: the model's)")
    parser.add_argument("--min_length", type=int, default=None, help="fewest summary tokens (default: the model's)")
    parser.add_argument("--length_penalty", type=float, default=None, help="beam length penalty (default: the model's)")
    parser.add_argument("--no_repeat_word_ngram_size", type=int, default=None,
                        help="block repeated word n-grams of this size (default: the model's config)")
    parser.add_argument("--zero_shot_llama", default=None,
                        help="a Llama-family folder (SmolLM2-135M-Instruct) prompted as WikiSum T-D, no training")
    parser.add_argument("--wikisum_llama", default=None, nargs="+",
                        help="WikiSum-over-Llama adapter folders (train_wikisum_llama.py): a row each")
    parser.add_argument("--llama_base", default=None, help="the base of --wikisum_llama (default: the one it names)")
    parser.add_argument("--llama_max_new_tokens", type=int, default=120)
    parser.add_argument("--llama_min_new_tokens", type=int, default=0,
                        help="the end of the summary is not allowed before this many new tokens (0: any time)")
    parser.add_argument("--llama_repetition_penalty", type=float, default=1.1,
                        help="on the generated tokens only (transformers' RepetitionPenaltyLogitsProcessor)")
    parser.add_argument("--llama_no_repeat_word_ngram_size", type=int, default=0,
                        help="block repeated word n-grams of this size in the generated tokens (0: off)")
    parser.add_argument("--llama_num_beams", type=int, default=1, help="beam size (1: greedy)")
    parser.add_argument("--llama_length_penalty", type=float, default=1.0,
                        help="beam search's length penalty (the exponent of the length a beam's score is divided by)")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the abstractive pipelines decode (cpu, cuda, ...)")
    parser.add_argument("--cache_dir", default=str(REPO / "runs" / "quality_abstractive"))
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "quality_abstractive.md"))
    return parser.parse_args()


def words(text: str) -> list[str]:
    """Lowercased words: runs of word characters, with inner apostrophes ("it's", "bull's"); punctuation dropped."""
    return _WORD_RE.findall(text.lower())


def has_repeated_trigram_anywhere(summary: str) -> bool:
    """Does a word trigram (`words`) occur twice in the summary, in one sentence or in two? Trigrams do not cross
    sentences (the summary's lines, or its `split_sentences` sentences)."""
    from sumformers.text.sentences import to_sentences

    seen = set()
    for sentence in to_sentences(summary):
        tokens = words(sentence)
        for trigram in zip(tokens, tokens[1:], tokens[2:]):
            if trigram in seen:
                return True
            seen.add(trigram)
    return False


def words_per_sentence(summaries: list[str]) -> float:
    """Mean whitespace words of a sentence, over the sentences of all summaries (0.0 when there are none)."""
    from sumformers.text.sentences import to_sentences

    lengths = [len(sentence.split()) for summary in summaries for sentence in to_sentences(summary)]
    return sum(lengths) / len(lengths) if lengths else 0.0


def abstractive_metrics(summaries: list[str], documents: list[str], references: list[str], sources: list) -> dict:
    """ROUGE (with intervals and by source), novel bigrams %, sentences per summary, words per sentence, repeated
    trigrams %, facts in the article % and mean words."""
    from sumformers.text.sentences import novel_ngram_ratio, summary_length_stats

    lengths = summary_length_stats(summaries)
    novel = [novel_ngram_ratio(summary, document, 2) for summary, document in zip(summaries, documents)]
    return dict(
        rouge_metrics(summaries, references, sources),
        novel_bigrams=100.0 * sum(novel) / len(novel),
        mean_sentences=lengths["mean_sentences"],
        words_per_sentence=words_per_sentence(summaries),
        repeated_trigrams=100.0 * sum(map(has_repeated_trigram_anywhere, summaries)) / len(summaries),
        facts_in_article=facts_in_article(summaries, documents),
        mean_words=lengths["mean_words"],
    )


def facts_in_article(summaries: list[str], documents: list[str]) -> float:
    """% of the facts (numbers, names: `source_facts`) all summaries state that their articles hold; 100 when none
    states any."""
    from sumformers.text.sentences import source_facts

    counts = [source_facts(summary, document) for summary, document in zip(summaries, documents)]
    stated = sum(total for _, total in counts)
    return 100.0 * sum(supported for supported, _ in counts) / stated if stated else 100.0


def generation_options(args) -> dict:
    """The generation options set by flag; the others are left to the model."""
    return {name: getattr(args, name) for name in GENERATION_OPTIONS if getattr(args, name) is not None}


def describe_decoding(checkpoint: Path, options: dict) -> str:
    """The decoding column: the options set by flag, then what the model's config and generation config set for the
    others."""
    config = {}
    for file_name in ("config.json", "generation_config.json"):  # word n-gram blocking is in the model's config
        config_file = checkpoint / file_name
        config.update(json.loads(config_file.read_text()) if config_file.is_file() else {})
    model = {name: config[name] for name in GENERATION_OPTIONS if name not in options and name in config}
    parts = [f"{name} {value}" for name, value in options.items()]
    parts += [f"{name} {value} (model)" for name, value in model.items()]
    return ", ".join(parts) or "model defaults"


def lead3(document_sentences: list[list[str]]) -> list[str]:
    from sumformers.text.sentences import lead_k

    return ["\n".join(sentences[i] for i in lead_k(sentences, 3)) for sentences in document_sentences]


def extractive_summaries(checkpoint: Path, documents: list[str], args) -> tuple[list[str], str]:
    """The extractive reference: top 3 sentences with trigram blocking."""
    from sumformers.hub import load_pipeline

    options = {"num_sentences": 3, "trigram_blocking": True}

    key = ["extractive-summarization", checkpoint_key(checkpoint), options]
    return cached_summaries(args.cache_dir, f"extractive-{checkpoint.name}", key, documents,
                            lambda: load_pipeline(str(checkpoint), task="extractive-summarization"), args.threads,
                            **options, batch_size=args.batch_size)


def abstractive_summaries(flag: str, checkpoint: Path, documents: list[str], args) -> tuple[list[str], str]:
    """`checkpoint`'s summaries of `documents` through its pipeline on `args.device` (cached), and the seconds per
    document."""
    options = generation_options(args)
    device = getattr(args, "device", "cpu")

    def load_summarizer():
        import transformers

        import sumformers  # noqa: F401 (registers the abstractive-summarization task)

        return transformers.pipeline("abstractive-summarization", model=str(checkpoint), device=device)

    # a GPU's summaries may differ from the CPU's in the last bits of a beam score: cached apart
    key = ["abstractive-summarization", checkpoint_key(checkpoint), options, *([device] if device != "cpu" else [])]
    return cached_summaries(args.cache_dir, flag, key, documents, load_summarizer, args.threads, **options,
                            batch_size=args.batch_size)


def llama_summaries(flag: str, path: str, documents: list[str], args) -> tuple[list[str], str]:
    """Summaries by WikiSum over a Llama-family decoder through `pipeline("wikisum-llama")` (the article's sentences
    ranked into the prompt, greedy or beam search as the flags say, one prompt at a time), cached."""
    options = {"max_new_tokens": args.llama_max_new_tokens, "repetition_penalty": args.llama_repetition_penalty}
    if args.llama_no_repeat_word_ngram_size:  # (off: the key of the summaries cached before the option existed)
        options["no_repeat_word_ngram_size"] = args.llama_no_repeat_word_ngram_size
    if args.llama_min_new_tokens:  # (off: likewise)
        options["min_new_tokens"] = args.llama_min_new_tokens
    if args.llama_num_beams > 1:  # (greedy: likewise)
        options.update(num_beams=args.llama_num_beams, length_penalty=args.llama_length_penalty)

    def load_summarizer():
        from transformers import AutoTokenizer, pipeline

        from sumformers.modeling.modeling_wikisum_llama import load_wikisum_llama

        model = load_wikisum_llama(path, base_model=args.llama_base).to(getattr(args, "device", "cpu"))
        tokenizer_folder = path if (Path(path) / "tokenizer.json").is_file() else model.config.base_model_name_or_path
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
        # blocking 0, greedy, and the repetition penalty as given: the settings are the flags', not the config's
        return pipeline("wikisum-llama", model=model, tokenizer=tokenizer, no_repeat_word_ngram_size=0, num_beams=1)

    key = ["wikisum-llama", checkpoint_key(Path(path)), options]
    return cached_summaries(args.cache_dir, flag, key, documents, load_summarizer, args.threads, **options)


def format_table(rows: list[tuple[str, str, dict | str]], counts: dict) -> list[str]:
    by_source = [source for source in SOURCES if counts.get(source)]
    header = (
        "| model | decoding | ROUGE-1 | ROUGE-1 - Lead-3 (paired) | ROUGE-1 - Lead of as many words (paired) "
        "| ROUGE-2 | ROUGE-Lsum | novel bigrams % | sentences | words / sentence "
        "| repeated trigrams % | facts in article % | words |"
        + "".join(f" ROUGE-1 {SOURCES[source]} ({counts[source]}) |" for source in by_source)
        + " s / doc (threads) |"
    )
    lines = [header, "|---|---|" + "---|" * (len(COLUMNS) + len(by_source) + 1)]
    for name, decoding, result in rows:
        if isinstance(result, str):
            lines.append(f"| {name} | {decoding} | {result} |" + " |" * (len(COLUMNS) + len(by_source)))
            continue
        values = " | ".join(format_cell(result, column) for column in COLUMNS)
        sources = "".join(f" {result[f'rouge1_{source}']:.2f} |" for source in by_source)
        lines.append(f"| {name} | {decoding} | {values} |{sources} {result['seconds'] or ''} |")
    return lines


def format_examples(name: str, examples: list[dict], summaries: list[str]) -> list[str]:
    """The model's summaries of the first documents next to their references, one sentence a line."""
    lines = [f"### {name}", "", f"| document | reference | {name} |", "|---|---|---|"]
    for example, summary in zip(examples[:EXAMPLES], summaries):
        cells = [text.strip().replace("|", "\\|").replace("\n", "<br>") for text in (example["summary"], summary)]
        lines.append(f"| `{example.get('id', '')}` | {cells[0]} | {cells[1]} |")
    return [*lines, ""]


def main():
    args = parse_args()
    setup_runtime(args.threads)
    from sumformers.hub import resolve_model
    from sumformers.text.sentences import split_sentences

    data_file, examples = data_slice(args, "validation_large.jsonl.gz")
    documents = [example["document"] for example in examples]
    references = [example["summary"] for example in examples]
    sources = [example.get("source", "cnn") for example in examples]
    counts = {source: sources.count(source) for source in SOURCES}

    document_sentences = [split_sentences(document) for document in documents]

    def scored(summaries: list[str], seconds: str | None) -> dict:
        metrics = dict(abstractive_metrics(summaries, documents, references, sources), seconds=seconds)
        return paired_with_lead_words(metrics, summaries, document_sentences, references)

    lead = scored(lead3(document_sentences), None)

    def row(name: str, decoding: str, summaries: list[str], seconds: str | None):
        print(f"scoring {name}", file=sys.stderr, flush=True)
        return name, decoding, paired_with_lead3(scored(summaries, seconds), lead)

    rows = [("Lead-3", "first 3 sentences", paired_with_lead3(lead, lead))]
    checkpoints = {}
    # a shipped checkpoint's name (default: the default model) or a folder, relative to the repository like the others
    extractive = find_checkpoint([resolve_model(args.extractive)])
    if extractive is None:
        rows.append(("Extractive", "-", f"checkpoint not found (`{args.extractive}`)"))
    else:
        checkpoints["extractive"] = display_path(extractive)
        print(f"extractive: {extractive}", file=sys.stderr, flush=True)
        summaries, seconds = extractive_summaries(extractive, documents, args)
        rows.append(row(f"Extractive ({extractive.name})", "top 3, trigram blocking", summaries, seconds))
    examples_lines = []
    options = generation_options(args)
    for flag, name in ABSTRACTIVE.items():
        checkpoint = find_checkpoint([getattr(args, flag)]) if getattr(args, flag) else None
        if checkpoint is None:
            given = f"`{getattr(args, flag)}`" if getattr(args, flag) else f"no --{flag}"
            rows.append((name, "-", f"checkpoint not found ({given})"))
            continue
        checkpoints[flag] = display_path(checkpoint)
        print(f"{name}: {checkpoint}", file=sys.stderr, flush=True)
        summaries, seconds = abstractive_summaries(flag, checkpoint, documents, args)
        rows.append(row(name, describe_decoding(checkpoint, options), summaries, seconds))
        examples_lines += format_examples(name, examples, summaries)

    for flag, name in LLAMA_ROWS.items():
        given = getattr(args, flag) or []
        folders = [given] if isinstance(given, str) else list(given)
        for index, folder in enumerate(folders):
            path = find_checkpoint([folder])
            row_name = name if len(folders) == 1 else f"{name}: `{folder}`"
            if path is None:
                rows.append((row_name, "-", f"checkpoint not found (`{folder}`)"))
                continue
            checkpoints[flag if index == 0 else f"{flag} {index + 1}"] = display_path(path)
            summaries, seconds = llama_summaries(flag, str(path), documents, args)
            blocking = args.llama_no_repeat_word_ngram_size
            at_least = f"at least {args.llama_min_new_tokens}, " if args.llama_min_new_tokens else ""
            search = (f"{args.llama_num_beams} beams, length penalty {args.llama_length_penalty}"
                      if args.llama_num_beams > 1 else "greedy")
            decoding = (f"{search}, {at_least}{args.llama_max_new_tokens} new tokens, repetition penalty "
                        f"{args.llama_repetition_penalty}" + (f", repeated word {blocking}-grams blocked" if blocking
                                                              else "") + " (generated tokens)")
            rows.append(row(row_name, decoding, summaries, seconds))
            examples_lines += format_examples(row_name, examples, summaries)

    title = f"{data_file.name}[{args.start}:{args.start + len(examples)}]"
    body = [
        "CNN/DM validation documents held out from training and tuning (lowercased text); ROUGE F1 x 100 (rouge-score, "
        "stemming, rougeLsum over the summary's sentences) with 95% bootstrap intervals (1,000 resamples of the "
        "documents); novel bigrams = % of summary bigrams not in the document (mean over documents); sentences = mean "
        "per summary; words / sentence = mean over all summary sentences; repeated trigrams = % of summaries in which "
        "a word trigram (punctuation left out) occurs twice, within a sentence or across sentences; facts in article "
        "= % of the numbers the summaries state that their articles hold (names too on cased text); words = mean "
        "summary length (whitespace words).",
        "",
        f"## {title}: {len(examples)} documents",
        "",
        *format_table(rows, counts),
        "",
        "Checkpoints: " + ("; ".join(f"{flag}: `{path}`" for flag, path in checkpoints.items()) or "none"),
    ]
    if examples_lines:
        body += ["", f"## Example summaries (the first {min(EXAMPLES, len(examples))} documents)", "", *examples_lines]
    write_report("quality_abstractive.py", body, args.output)


if __name__ == "__main__":
    main()
