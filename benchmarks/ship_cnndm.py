"""Ship an extractive model that `training_scripts/gpu_recipe.sh` trained (its folder as the call returned it), or that
`train_stepwise.py --features_file` trained with the same settings on the CPU (`--hardware cpu --command "..."`), as
one of the package's checkpoints, with the decoding chosen on development documents (`--end_bias` for a stepwise
model: its end unit's logit, chosen on raw CNN `validation[300:400]` by `choose_end_bias.py`) and a card that says
what ran where, then the card's scores: the shipped pipeline on the 300 raw CNN articles of `validation[:300]` (never
trained on nor used for a choice), as `test_default_model` recomputes for the default; `--device cuda` reads the
summaries the GPU call decoded (quality_cnndm.py's cache) instead of decoding here.

    python benchmarks/ship_cnndm.py --model "Stepwise HiBERT" \
        --source runs/gpu/stepwise-hibert-minilm-cnndm-gpu/final --end_bias -2.1 --development "..."
    python benchmarks/ship_cnndm.py --model ETCSum --source runs/gpu2/1/etcsum-minilm-cnndm-gpu/final \
        --device cuda --call "three models side by side on the GPU within its 560 s" --development "..."
    python benchmarks/ship_cnndm.py --model ETCSum --source runs/etc_cpu/run/final --hardware cpu \
        --command "python training_scripts/train_stepwise.py ..." --development "..."

A run that continued a shipped checkpoint (`train_stepwise.py --init_from`) keeps that checkpoint's run on the card
and adds its own (`--continued_from`, with `--hardware cpu --command`); read the starting card before shipping
over it.

Once `quality_cnndm.py` has written the table that holds the shipped model's rows (--results), `--card_figures`
puts that table's figures of the shipped decoding on the card: on each held-out set ROUGE-1/2/Lsum, the summaries'
length, and the paired ROUGE-1 differences to Lead-3 and to the Lead of as many words; the card's scores (its
metadata, and the held-out line `ship` wrote) become the table's `validation[:300]` ones where they differ.

    python benchmarks/ship_cnndm.py --model "Stepwise HiBERT" --card_figures
"""

import argparse
import re
import textwrap
from pathlib import Path

from _common import REPO, setup_runtime, ship_adapter_checkpoint

DATA = (
    "{articles} CNN/DailyMail training articles of the shared `train_large.jsonl.gz` (lowercased; 57% CNN, 43% Daily "
    "Mail), split with the lowercase-aware `split_sentences` (20.1 words a sentence on lowercased text, against "
    "pysbd's 27.6 and pysbd's 21.5 on raw cased CNN text), cut at 768 layout tokens (at most 64 sentences of at most "
    "36 word pieces; 24.4 sentences a document), greedy-oracle targets (PreSumm's ROUGE-1 F + ROUGE-2 F, at most 4 "
    "sentences, in selection order; 2.78 a document)."
)
CARRIED = (
    " The MiniLM carried to the GPU held its frozen word table in int8 rows (0.7% relative error, 64 MiB carry limit); "
    "the shipped adapter loads over the exact installed MiniLM, on which every score here is measured."
)
HIBERT_ENCODER = (
    "Sentence encoder: all six MiniLM layers, mean-pooled (the pooling `from_encoder` reads from all-MiniLM-L6-v2's "
    "own `1_Pooling` config; the paper's first token holds for BERT, not for this encoder), trained too (LoRA r=32, "
    "alpha 64 on query/key/value/dense of every layer); document layers: copies of MiniLM layers 4-5 with the same "
    "LoRA; the new modules in full."
)
ETCSUM_ENCODER = (
    "Encoder: ETC global-local attention over the document's tokens (local radius 84; a global token per sentence), "
    "started from all six MiniLM layers with LoRA r=32, alpha 64 on query/key/value/dense of every layer; the global "
    "token embeddings, sentence positions, relative-position biases and the scorer are new and train in full."
)
BERTSUM_ENCODER = (
    "Encoder: MiniLM over the first 512 tokens (its position table) with LoRA r=32, alpha 64 on query/key/value/dense "
    "of all six layers; the two inter-sentence Transformer layers, the segment embeddings and the scorer train in "
    "full."
)
LORA = (
    "LoRA instead of full fine-tuning (every layer in fp16 would be about 31 MB, over the 20 MB checkpoint limit); "
    "greedy-oracle targets; documents cut at 768 tokens for training (the GPU call's carry limit, kept on the CPU for "
    "one recipe; 92% of oracle sentences lie in the first 32 sentences)"
)
POOLING = (
    "the sentence encoder is mean-pooled (MiniLM was trained for mean pooling; on development documents the same "
    "recipe with the first token, trained beside a mean-pooled copy for the same 166 s, scored {pooling})"
)
STEPWISE = "the end unit's logit biased by {end_bias:g} (not in the paper: the length calibration on raw text)"
# quality_cnndm.py's name -> (shipped folder, encoder text, deviations from the paper, shipped decoding settings)
MODELS = {
    "Stepwise HiBERT": ("stepwise-hibert-minilm-cnndm", HIBERT_ENCODER, f"{POOLING}; {LORA}; {STEPWISE}",
                        {"trigram_blocking": True, "min_sentences": 1}),
    "HiBERT": ("hibert-minilm-cnndm", HIBERT_ENCODER,
               f"{POOLING}; {LORA}; trigram blocking on (PreSumm's, for a model that scores each sentence alone)",
               {"trigram_blocking": True}),
    "ETCSum": ("etcsum-minilm-cnndm", ETCSUM_ENCODER,
               f"{LORA}; trained and evaluated on the first 768 tokens (the model accepts 4,096); MiniLM's absolute "
               "positions (tiled past 512) beside ETC's relative keys (ETC has none: MiniLM's layers were trained "
               "with them, and a GPU run without them gave every sentence the same score); trigram blocking on (as "
               "for the other models that score each sentence alone)", {"trigram_blocking": True}),
    "Stepwise ETCSum": ("stepwise-etcsum-minilm-cnndm", ETCSUM_ENCODER,
                        f"{LORA}; trained and evaluated on the first 768 tokens (the model accepts 4,096); {STEPWISE}",
                        {"trigram_blocking": True, "min_sentences": 1}),
    "BERTSum": ("bertsum-minilm-cnndm", BERTSUM_ENCODER,
                f"{LORA}; sentences cut at 36 word pieces as the training features were (PreSumm keeps 200), so "
                "more of them fit in 512 tokens", {"trigram_blocking": True}),
}
# --hardware -> what the card's training text says of the run
HARDWARE = {
    "h200": "Trained on one NVIDIA H200 with `training_scripts/gpu_recipe.sh` (features from `train_stepwise.py "
            "--save_features` on the CPU machine; the call trained {call}). Run: {run}",
    "cpu": "Trained on 2 CPU cores with the GPU recipe's settings (`{command}`, over the features `train_stepwise.py "
           "--save_features` builds as for the GPU recipe), the installed MiniLM unchanged. Run: {run}",
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, choices=list(MODELS))
    parser.add_argument("--card_figures", action="store_true",
                        help="only rewrite the shipped card's figures from --results (see above)")
    parser.add_argument("--source", help="the recipe's final folder of that model (needed to ship)")
    parser.add_argument("--end_bias", type=float, default=None, help="a stepwise model's dev-chosen end bias")
    parser.add_argument("--pooling", default="no differently", help="HiBERT models: the pooling comparison's figures")
    parser.add_argument("--development", help="the card's line on the development choice (needed to ship)")
    parser.add_argument("--call", default="three models side by side on the GPU within its 555 s",
                        help="what the GPU call trained beside this model")
    parser.add_argument("--hardware", choices=list(HARDWARE), default="h200", help="where the run trained")
    parser.add_argument("--command", default=None, help="with --hardware cpu: the training command, for the card")
    parser.add_argument("--continued_from", default=None,
                        help="the checkpoint --source continued (--init_from): its run stays on the card")
    parser.add_argument("--device", default="cpu", help="cuda: the held-out summaries the GPU call decoded")
    parser.add_argument("--results", default="benchmarks/results/quality_cnndm_gpu.md",
                        help="the quality_cnndm.py table that holds this model's rows")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not args.card_figures and not (args.source and args.development):
        parser.error("shipping needs --source and --development (or --card_figures alone)")
    return args


def held_out_scores(folder: Path, name: str, threads: int, device: str) -> dict:
    """ROUGE-1/2/Lsum of the shipped pipeline with its own defaults on the 300 raw CNN articles of validation[:300],
    decoded as `quality_cnndm.py --blocking yes` decodes them (its cache then holds them for the table)."""
    from argparse import Namespace

    from quality_cnndm import model_summaries

    from sumformers.text.evaluation import data_dir, read_jsonl
    from sumformers.text.scoring import rouge_scores

    rows = read_jsonl(data_dir() / "cnn_dailymail" / "validation.jsonl")[:300]
    settings = Namespace(cache_dir=str(REPO / "runs" / "quality_cnndm"), threads=threads, batch_size=8,
                         etcsum_max_length=768, device=device)
    summaries, _ = model_summaries(name, folder, [row["document"] for row in rows], True, settings)
    scores = rouge_scores(summaries, [row["summary"] for row in rows])
    return {key: round(value, 2) for key, value in scores.items()}


def card_training_text(args, run: str, started: str | None = None) -> str:
    """The shipped card's training text: the data (all articles, or the run's subset), the model, where and how it
    trained (`run`: the training script's own account, which starts with its document count), the deviations. With
    `started` (the training text of the checkpoint the run continued, trained on the H200), that run first, then
    this one as its continuation."""
    _, encoder, deviations, _ = MODELS[args.model]
    hardware, continuation = args.hardware, ""
    if started is not None:
        if "Trained on one NVIDIA H200" not in started:
            raise SystemExit("--continued_from: only a checkpoint the GPU recipe trained is continued here")
        continuation = (f" Then continued on 2 CPU cores over its own frozen sentence vectors (`{args.command}`): "
                        f"{run}")
        hardware, run = "h200", re.search(r"Run: (.*?) Deviations from the paper", started).group(1)
    documents = int(re.match(r"(\d+) documents", run).group(1))
    articles = "The 39,563" if documents == 39563 else f"{documents:,} of the 39,563"
    # the GPU call carried a MiniLM with an int8 word table; a CPU run used the installed one
    carried = CARRIED if hardware == "h200" else ""
    trained = HARDWARE[hardware].format(run=run, command=args.command, call=args.call)
    return (f"{DATA.format(articles=articles)} {encoder}{carried} {trained}{continuation} Deviations from the paper, "
            f"each with its reason: {deviations.format(end_bias=args.end_bias, pooling=args.pooling)}.")


def ship(args) -> Path:
    from transformers import AutoConfig

    from sumformers.hub import read_card_info, write_card

    name, _, _, config_updates = MODELS[args.model]
    stepwise = args.model.startswith("Stepwise")
    if stepwise != (args.end_bias is not None):
        raise SystemExit("--end_bias is for (and needed by) the stepwise models")
    if (args.hardware == "cpu") != (args.command is not None):
        raise SystemExit("--command is for (and needed by) --hardware cpu")
    if stepwise:
        config_updates = dict(config_updates, end_bias=args.end_bias)
    started = read_card_info(args.continued_from)["training"] if args.continued_from else None
    training = card_training_text(args, read_card_info(args.source)["training"], started)
    target = REPO / "checkpoints" / name
    ship_adapter_checkpoint(args.source, target, [], args.hardware, "Training run", config_updates=config_updates)
    (target / "training_log.txt").unlink(missing_ok=True)
    card = read_card_info(target)
    scores = held_out_scores(target, args.model, args.threads, args.device)
    decoded = " (decoded on the H200)" if args.device != "cpu" else ""
    card.update(
        training=training,
        dataset_name="CNN/DailyMail 3.0.0 (first 300 documents of the validation split, CNN articles)",
        split="validation[:300]",
        datasets=["abisee/cnn_dailymail"],
        results=scores,
        evaluation=f"{args.development} Held out (`validation[:300]`, raw cased CNN articles, the shipped "
        f"decoding{decoded}): {card_scores_text(scores)}; both held-out sets with Lead-3 and paired differences: "
        f"`{args.results}`.",
    )
    write_card(target, AutoConfig.from_pretrained(target), card)
    print(f"shipped {target}: {scores}", flush=True)
    return target


QUALITY_FIGURES = "Held-out figures of the quality table"
# quality_cnndm.py's set titles -> how a card names them
HELD_OUT_SETS = {"validation_large[:1000]": "Lowercased `validation_large[:1000]`",
                 "validation[:300] (CNN)": "Raw cased CNN `validation[:300]`"}
SOURCE_NAMES = {"CNN": "CNN", "DM": "Daily Mail"}
LEAD_WORDS = "ROUGE-1 - Lead of as many words (paired)"
CARD_SET = "validation[:300] (CNN)"  # the set of the card's scores (`held_out_scores`)
CARD_SCORES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeLsum": "ROUGE-Lsum"}  # -> the table's columns


def card_scores_text(scores: dict) -> str:
    """The card's held-out scores as its evaluation text states them: "ROUGE-1 / 2 / Lsum 30.88 / 11.70 / 27.28"."""
    return "ROUGE-1 / 2 / Lsum " + " / ".join(f"{scores[key]:.2f}" for key in CARD_SCORES)


def signed(cell: str) -> str:
    """A table's paired difference "1.67 [1.13, 2.29]" as a card writes it: "+1.67 [+1.13, +2.29]", saying so when
    the interval holds 0."""
    value, low, high = (float(number) for number in re.findall(r"-?\d+\.\d+", cell))
    holds_zero = " (the interval holds 0)" if low <= 0 <= high else ""
    return f"{value:+.2f} [{low:+.2f}, {high:+.2f}]{holds_zero}"


def shipped_rows(model: str, results: str) -> dict[str, dict[str, str]]:
    """Set title -> the row of `model`'s shipped decoding (trigram blocking, neither a word budget nor a fixed length)
    in `results`, a `quality_cnndm.py` table."""
    from quality_cnndm import read_tables

    found = {}
    for title, rows in read_tables((REPO / results).read_text()).items():
        shipped = [row for row in rows if row["model"] == model and row["trigram blocking"] == "yes"
                   and "<=" not in row["decoding"] and "exactly" not in row["decoding"]]
        if shipped:
            (found[title],) = shipped
    if not found:
        raise SystemExit(f"{results} has no row of {model}'s shipped decoding")
    return found


def quality_table_figures(model: str, results: str) -> str:
    """The card's section of `results` (a `quality_cnndm.py` table): on each held-out set, the shipped decoding's
    ROUGE-1/2/Lsum, its length and its paired ROUGE-1 differences to Lead-3 and to the Lead of as many words."""
    bullets, decodings = [], set()
    for title, row in shipped_rows(model, results).items():
        if LEAD_WORDS not in row:
            raise SystemExit(f"{results} has no '{LEAD_WORDS}' column: rerun its Command line first")
        counts = [f"{header.rsplit('(', 1)[1].rstrip(')')} {SOURCE_NAMES[header.split()[1]]}"
                  for header in row if header.startswith("ROUGE-1 ") and header.split()[1] in SOURCE_NAMES]
        articles = f" ({', '.join(counts)} articles)" if len(counts) > 1 else ""
        rouge = " / ".join(row[column].split()[0] for column in ("ROUGE-1", "ROUGE-2", "ROUGE-Lsum"))
        bullets.append(
            f"- {HELD_OUT_SETS.get(title, f'`{title}`')}{articles}: ROUGE-1 / 2 / Lsum {rouge}, {row['sentences']} "
            f"sentences ({row['words']} words) a summary; ROUGE-1 over Lead-3 "
            f"{signed(row['ROUGE-1 - Lead-3 (paired)'])}, against the Lead of as many words "
            f"{signed(row[LEAD_WORDS])} (`{results}`)."
        )
        decodings.add(row["decoding"])
    opening = (
        f"{QUALITY_FIGURES}, shipped decoding ({' / '.join(sorted(decodings))}, trigram blocking); paired ROUGE-1 "
        "differences with 95% bootstrap intervals, against Lead-3 and against the Lead of as many words (each "
        "article's first N words, N = the words of this model's summary of it: a difference at the same length)."
    )
    return "\n\n".join([wrapped(opening), "\n".join(wrapped(bullet, indent="  ") for bullet in bullets)])


def wrapped(text: str, indent: str = "") -> str:
    """`text` in lines of at most 120 characters (later ones indented by `indent`), an interval never split."""
    kept = re.sub(r"\[([^\]]*), ", "[\\1,\N{NO-BREAK SPACE}", text)
    lines = textwrap.fill(kept, width=120, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return lines.replace("\N{NO-BREAK SPACE}", " ")


def with_quality_figures(evaluation: str, figures: str, results: str) -> str:
    """`evaluation` (a card's text) with `figures` as its quality-table section: an earlier one is replaced, except
    its items that cite another results file, which follow the new ones."""
    head, _, section = evaluation.partition(QUALITY_FIGURES)
    items = re.split(r"\n(?=- )", section)[1:]  # an item runs on over its indented lines
    kept = [item.rstrip() for item in items if f"`{results}`" not in item]
    return f"{head.rstrip()}\n\n{figures}" + "".join(f"\n{item}" for item in kept)


def write_card_figures(args) -> Path:
    """Put --results' figures of the shipped model on its card (`quality_table_figures`) and rebuild the card."""
    from transformers import AutoConfig

    from sumformers.hub import read_card_info, write_card

    target = REPO / "checkpoints" / MODELS[args.model][0]
    card = read_card_info(target)
    figures = quality_table_figures(args.model, args.results)
    evaluation = card["evaluation"]
    card_set = shipped_rows(args.model, args.results).get(CARD_SET)
    if card_set:  # the scores `ship` measured, as the table has them now (decoding or scoring may have changed since)
        scores = {key: float(card_set[column].split()[0]) for key, column in CARD_SCORES.items()}
        evaluation = evaluation.replace(card_scores_text(card["results"]), card_scores_text(scores))
        card["results"] = scores
    card["evaluation"] = with_quality_figures(evaluation, figures, args.results)
    write_card(target, AutoConfig.from_pretrained(target), card)
    print(f"{target}: {figures}", flush=True)
    return target


def main():
    args = parse_args()
    setup_runtime(args.threads)
    write_card_figures(args) if args.card_figures else ship(args)


if __name__ == "__main__":
    main()
