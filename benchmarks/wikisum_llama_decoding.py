"""Decoding settings for WikiSum over SmolLM2 (`pipeline("wikisum-llama")`), and adapters, compared on a tuning slice:
each (checkpoint, setting) row's ROUGE and its per-document ROUGE-1 difference to the first row (the first
checkpoint, the shipped one by default, with the first setting, the shipped decoding), paired, with a 95% bootstrap
interval. The slice must be disjoint from the documents a results table reports (the shipped table reports
`validation.jsonl[300:350]`; tune on `[350:380]`).

A setting is `beams=B,lp=L,rp=R,max=M` (beams, beam search's length penalty, the repetition penalty over the generated
tokens, most new tokens); word trigram blocking stays on. Summaries are cached with quality_abstractive.py's, so a
setting decoded there or here is decoded once. Several --checkpoint folders (adapters trained with different settings)
are each decoded with every setting; --zero_shot adds the base model itself (no adapter) with every setting.

    python benchmarks/wikisum_llama_decoding.py --start 350 --limit 30 \
        --checkpoint checkpoints/wikisum-smollm2-td-cnndm --settings beams=1 beams=2 beams=4,lp=2.0 \
        --threads 1 --output /tmp/decoding.md
"""

import argparse
import sys
from pathlib import Path

from _common import (
    REPO,
    data_slice,
    display_path,
    setup_runtime,
    write_report,
)
from quality_abstractive import abstractive_metrics, llama_summaries

SETTING_KEYS = {"beams": ("llama_num_beams", int), "lp": ("llama_length_penalty", float),
                "rp": ("llama_repetition_penalty", float), "max": ("llama_max_new_tokens", int)}
SHIPPED = {"llama_num_beams": 1, "llama_length_penalty": 1.0, "llama_repetition_penalty": 1.1,
           "llama_max_new_tokens": 120}


def parse_setting(text: str) -> dict:
    """`beams=4,lp=1.0` -> the quality_abstractive flags it sets, the others as the shipped decoding has them."""
    setting = dict(SHIPPED)
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in SETTING_KEYS:
            raise SystemExit(f"unknown setting {name!r} in {text!r}: use {', '.join(SETTING_KEYS)}")
        flag, kind = SETTING_KEYS[name]
        setting[flag] = kind(value)
    return setting


def describe(setting: dict) -> str:
    search = (f"{setting['llama_num_beams']} beams, length penalty {setting['llama_length_penalty']}"
              if setting["llama_num_beams"] > 1 else "greedy")
    return (f"{search}, repetition penalty {setting['llama_repetition_penalty']}, "
            f"{setting['llama_max_new_tokens']} new tokens")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_file", default="/work/shared/data/cnn_dailymail/validation.jsonl")
    parser.add_argument("--start", type=int, default=350)
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--checkpoint", nargs="+", default=["checkpoints/wikisum-smollm2-td-cnndm"],
                        help="adapter folders, the first the reference of the paired differences")
    parser.add_argument("--zero_shot", default=None, help="a base model folder decoded without an adapter too")
    parser.add_argument("--llama_base", default=None, help="the adapter's base (default: the one it names)")
    parser.add_argument("--settings", nargs="+", default=["beams=1"],
                        help="decoding settings, the first the reference of the paired differences")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache_dir", default=str(REPO / "runs" / "quality_abstractive"))
    parser.add_argument("--output", default=None)
    return parser.parse_args()


def main():
    args = parse_args()
    setup_runtime(args.threads)
    data_file, examples = data_slice(args, "validation.jsonl")
    documents = [example["document"] for example in examples]
    references = [example["summary"] for example in examples]
    sources = [example.get("source", "cnn") for example in examples]
    checkpoints = [REPO / path if not Path(path).is_absolute() else Path(path) for path in args.checkpoint]
    models = [("wikisum_llama", checkpoint) for checkpoint in checkpoints]
    models += [("zero_shot_llama", Path(args.zero_shot))] if args.zero_shot else []

    from sumformers.text.scoring import bootstrap_interval

    rows, reference = [], None
    for flag, checkpoint in models:
        for text in args.settings:
            setting = parse_setting(text)
            print(f"{display_path(checkpoint)}, decoding: {describe(setting)}", file=sys.stderr, flush=True)
            flags = argparse.Namespace(**vars(args), **setting, llama_min_new_tokens=0,
                                       llama_no_repeat_word_ngram_size=3)
            summaries, seconds = llama_summaries(flag, str(checkpoint), documents, flags)
            metrics = abstractive_metrics(summaries, documents, references, sources)
            per_document = metrics["rouge1_per_document"]
            reference = per_document if reference is None else reference
            differences = [a - b for a, b in zip(per_document, reference)]
            low, high = bootstrap_interval(differences)
            better = sum(d > 0 for d in differences), sum(d < 0 for d in differences)
            model = f"`{display_path(checkpoint)}`" + (" (zero-shot, no adapter)" if flag == "zero_shot_llama" else "")
            rows.append(
                f"| {model} | {describe(setting)} | {metrics['rouge1']:.2f} "
                f"| {sum(differences) / len(differences):+.2f} [{low:+.2f}, {high:+.2f}] | {better[0]} / {better[1]} "
                f"| {metrics['rouge2']:.2f} | {metrics['rougeLsum']:.2f} | {metrics['facts_in_article']:.2f} "
                f"| {metrics['repeated_trigrams']:.2f} | {metrics['mean_words']:.1f} | {seconds} |"
            )
    body = [
        f"On the tuning slice {data_file.name}[{args.start}:{args.start + len(examples)}] "
        f"({len(examples)} documents, disjoint from the reported [300:350]); word trigram blocking on the generated "
        "text in every row. ROUGE F1 x 100 (rouge-score, stemming); paired = the mean per-document ROUGE-1 "
        "difference to the first row with its 95% bootstrap interval (1,000 resamples of the documents); "
        "better / worse = documents whose ROUGE-1 rose / fell against the first row; facts in article = % of the "
        "numbers and names the summaries state that their articles hold; repeated trigrams = % of summaries with a "
        "word trigram twice; s / doc (threads): as timed when the setting was decoded (the cache keeps it), on the "
        "2-core machine shared with other jobs.",
        "",
        "| checkpoint | decoding | ROUGE-1 | ROUGE-1 - first row (paired) | better / worse | ROUGE-2 | ROUGE-Lsum "
        "| facts in article % | repeated trigrams % | words | s / doc (threads) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    write_report("wikisum_llama_decoding.py", body, args.output)


if __name__ == "__main__":
    main()
