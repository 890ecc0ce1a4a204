"""Rotowire table-to-text on the held-back games of the shared split (`rotowire_records.ROTOWIRE_SPLITS` over the games
sorted by id: 60 train, 5 dev, 15 test; `--split test`, or `dev`). Small samples: the figures compare systems with
each other and are not comparable to published Rotowire results.

Planning-only rows: content selection (precision, recall, F1 of distinct records) and content ordering (normalized
Damerau-Levenshtein similarity of the record sequences) x 100 of each plan against the oracle plan induced from the
game's human summary. CS is the paper's (Narayan et al. 2020, section 7; Wiseman et al. 2017), which reports CS alone
for plans: CO of plans is this package's extension (the paper's CO is of realized text). Both count the records that
state a number, the numeric relations the paper's extractor counts: the records that only name (players' names, the
teams' names and cities, the date) and the players' starting positions are left out (`--records all` counts them,
the definitions of the reports before issue #40; `--records statistics all` gives a table under each from the same
plans; the starting positions left out since issue #58). CS is micro-averaged as the paper's (overlaps and sizes
summed over the games; the interval resamples the games and pools again); the macro CS F1 (the mean of the games'
F1) stands beside it for comparison with earlier reports. CO is the mean over the games. 95% bootstrap intervals over
the games.
- Template: the records most often mentioned in the training plans. A record is generalized to its role and key
  ("home team | TEAM-PTS", "scorer 2 | REB", "game | DAY"); the template is the roles and keys of the median number of
  distinct records per training plan, most frequent first, put in the order of their mean relative position in the
  training plans, then grouped into one plan sentence per entity (in the order the entities first appear); a role
  or key a test game lacks is skipped.
- Stepwise HiBERT and Stepwise ETCSum planners (`--hibert`, `--etcsum`): greedy plans of the `content-planning`
  pipeline, decoded as in the paper by default; `--sentence_break_bias B ...` (B added to the sentence break's logit
  at every step: a negative B lengthens the plan sentences) and `--min_sentences N ...` (no end of plan before N
  units) give one row per pair of values (choose them with `--split dev`).

Realized-text rows: BLEU (sacrebleu corpus BLEU against the human summary; the interval bootstraps games, corpus BLEU
of each resample), RG precision and count (relations the package's rule-based extractor finds in the text that the
box score supports), CS precision/recall/F1 and CO of the text's relations against the human summary's (per-game
means, 95% bootstrap intervals). The extractor (`text.table_to_text_metrics`) ties each number to the nearest named
entity instead of the published neural IE system.
- Templates of the oracle plan: each plan sentence's record templates (`plan_to_text`) as the text, a realizer-free
  floor.
- The realizer (`--realizer`, the `table-to-text` pipeline) on the oracle plans (the realizer alone), on the template
  plans and on each planner's plans (the whole system); `--numbers_from_input off on` realizes each plan both ways
  (on: number tokens only from each step's input; default: as the realizer's config says).

The report ends with the first games' human summaries next to the realizer's text from the oracle plan and from
the plans of the whole system (template or planner) with the highest BLEU. `--ship "CPU, 2 cores"` also writes the
realizer to `checkpoints/` (its adapter as trained, already fp16) with a card that adds this run's realized-text
rows to its development scores and says where it trained. `--ship_planner "CPU, 2 cores"` does the same for the
HiBERT planner (`--hibert`) with this run's tables; `--ship_sentence_break_bias B` (one of the `--sentence_break_bias`
values, chosen on the dev games, with `--ship_decoding_reason` for the card) becomes its config's default decoding.
`--ship_numbers_from_input REASON` turns `numbers_from_input` on in the shipped realizer (`--realizer` is that folder)
and replaces its card's test table with this run's, REASON (the dev games' figures) saying why.
`--update_planner_card` replaces the planning table on the shipped HiBERT planner's card (`--hibert` is that folder)
with this run's, keeping the rest of its evaluation; with `--ship_sentence_break_bias B` its config decodes with B
from then on (the card says why: `--ship_decoding_reason`, needed wherever the bias is not 0).

    OMP_NUM_THREADS=2 python benchmarks/quality_rotowire.py --hibert runs/planner-hibert/final \
        --etcsum runs/planner-etcsum/final --realizer runs/realizer/final --threads 2 \
        --ship "CPU (2 shared cores, 1 thread)" --output benchmarks/results/quality_rotowire.md
"""

import argparse
import itertools
import statistics
import time
from pathlib import Path

import numpy as np
from _common import display_path, setup_runtime, ship_adapter_checkpoint, write_report

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "rotowire" / "games.jsonl"
CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
SHIPPED_REALIZER = "realizer-minilm-rotowire"
SHIPPED_HIBERT_PLANNER = "stepwise-hibert-planner-minilm-rotowire"
EXAMPLES = 2
TEXT_COLUMNS = ("RG P%", "RG #", "CS P%", "CS R%", "CS F1%", "CO%")
RECORD_DEFINITIONS = {
    "statistics": "CS as the paper defines it, CO (the paper's for text only) over the same records: those that "
                  "state a number, without the names (players' names, the teams' names and cities), the date and "
                  "the players' starting positions; CS micro-averaged over the games (CS F1 (macro): the mean of the "
                  "games' F1), CO the mean over the games.",
    "all": "CS and CO over every record, names and date included (the definitions before issue #40, not the "
           "paper's); CS micro-averaged over the games (CS F1 (macro): the mean of the games' F1), CO the mean over "
           "the games.",
}


def interval_cell(values, digits: int = 1) -> str:
    from sumformers.text.scoring import bootstrap_interval

    low, high = bootstrap_interval(values)
    return f"{statistics.mean(values):.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def pooled_selection_intervals(selections, resamples=1000, seed=0) -> dict[str, tuple[float, float]]:
    """95% bootstrap intervals (x 100) of the micro-averaged CS precision, recall and F1: the games resampled, their
    counts pooled again."""
    counts = np.array([[s["overlap"], s["predicted"], s["reference"]] for s in selections], dtype=float)
    rows = np.random.default_rng(seed).integers(0, len(counts), size=(resamples, len(counts)))
    overlap, predicted, reference = counts[rows].sum(axis=1).T
    precision = np.divide(overlap, predicted, out=np.zeros_like(overlap), where=predicted > 0)
    recall = np.divide(overlap, reference, out=np.zeros_like(overlap), where=reference > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros_like(overlap), where=overlap > 0)
    return {name: (100 * float(np.percentile(values, 2.5)), 100 * float(np.percentile(values, 97.5)))
            for name, values in (("cs_precision", precision), ("cs_recall", recall), ("cs_f1", f1))}


def plan_row(name: str, plans, references, seconds: float, records: str = "statistics") -> str:
    """CS P, R, F1 micro-averaged (the paper's), the macro CS F1, CO: each with its interval."""
    from sumformers.text.table_to_text_metrics import plan_scores

    scores = plan_scores(plans, references, records)
    intervals = pooled_selection_intervals(scores["selections"])
    cells = [f"{scores[metric]:.1f} [{intervals[metric][0]:.1f}, {intervals[metric][1]:.1f}]"
             for metric in ("cs_precision", "cs_recall", "cs_f1")]
    cells += [interval_cell([game[metric] for game in scores["per_game"]]) for metric in ("cs_f1", "co")]  # x 100
    return f"| {name} | " + " | ".join(cells) + f" | {seconds:.0f} |"


def bleu_interval(predictions, references, resamples=1000, seed=0):
    from sumformers.text.table_to_text_metrics import bleu

    rows = np.random.default_rng(seed).integers(0, len(predictions), size=(resamples, len(predictions)))
    scores = [bleu([predictions[i] for i in row], [references[i] for i in row]) for row in rows]
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


def text_row(name: str, games, texts) -> str:
    from sumformers.text.table_to_text_metrics import (
        bleu,
        relation_generation,
        text_content_ordering,
        text_content_selection,
    )

    references = [" ".join(game.summary) for game in games]
    per_game = {column: [] for column in TEXT_COLUMNS}
    for game, text, reference in zip(games, texts, references):
        rg = relation_generation(game, text)
        cs = text_content_selection(game, text, reference)
        per_game["RG P%"].append(100 * rg["precision"])
        per_game["RG #"].append(rg["supported"])
        per_game["CS P%"].append(100 * cs["precision"])
        per_game["CS R%"].append(100 * cs["recall"])
        per_game["CS F1%"].append(100 * cs["f1"])
        per_game["CO%"].append(100 * text_content_ordering(game, text, reference))
    low, high = bleu_interval(texts, references)
    cells = [f"{bleu(texts, references):.2f} [{low:.2f}, {high:.2f}]"]
    cells += [interval_cell(values, 2) for values in per_game.values()]
    return f"| {name} | " + " | ".join(cells) + " |"


def ship(checkpoint: str, name: str, table: list[str], setting: str, trained_on: str,
         config_updates: dict | None = None) -> Path:
    """Copy a trained adapter checkpoint to `checkpoints/<name>`; its card keeps the training run's development
    scores and adds `table`, this run's rows, after `setting`, and where it trained (`trained_on`);
    `config_updates` change the shipped config's decoding defaults."""
    development = "Development games (the training run's check)"
    return ship_adapter_checkpoint(checkpoint, CHECKPOINTS / name, [setting, "", *table], trained_on, development,
                                   config_updates=config_updates)


def turn_numbers_from_input_on(folder: Path, table: list[str], setting: str) -> Path:
    """The shipped realizer with `numbers_from_input` on by default: its config updated, and its card's evaluation
    keeping the training run's development line (the first paragraph) with `setting` and `table` after it."""
    from transformers import AutoConfig

    from sumformers.hub import read_card_info, write_card

    card = read_card_info(folder)
    development = card["evaluation"].split("\n\n")[0]
    card["evaluation"] = "\n".join([development, "", setting, "", *table])
    config = AutoConfig.from_pretrained(folder)
    config.update({"numbers_from_input": True})
    config.save_pretrained(folder)
    write_card(folder, config, card)
    return folder


def planner_bias(folder) -> float:
    from transformers import AutoConfig

    import sumformers  # noqa: F401  (registers the architectures with the Auto classes)

    return AutoConfig.from_pretrained(folder).sentence_break_bias


def planner_decoding(bias: float, reason: str | None) -> str:
    """The card's line on the planner's default decoding."""
    return (f"this checkpoint decodes with sentence-break bias {bias:g} by default"
            + (f" ({reason})." if bias else " (the paper's decoding)."))


def update_planner_card(folder: Path, plan_table: list[str], setting: str, bias: float | None = None) -> Path:
    """The shipped planner's card with its planning table (the evaluation's first table) replaced by `plan_table`
    after `setting`; the development line and the realized-text table stay. `bias`, where given, becomes the
    config's `sentence_break_bias` (its default decoding)."""
    from transformers import AutoConfig

    from sumformers.hub import read_card_info, write_card

    card = read_card_info(folder)
    paragraphs = card["evaluation"].split("\n\n")
    tables = [index for index, paragraph in enumerate(paragraphs) if paragraph.startswith("| system | CS P")]
    if len(tables) != 1:
        raise ValueError(f"{folder}: expected one planning table in its card info, found {len(tables)}")
    paragraphs[tables[0] - 1 : tables[0] + 1] = [setting, "\n".join(plan_table)]
    card["evaluation"] = "\n\n".join(paragraphs)
    config = AutoConfig.from_pretrained(folder)
    if bias is not None:
        config.update({"sentence_break_bias": bias})
        config.save_pretrained(folder)
    write_card(folder, config, card)
    return folder


def main():
    from sumformers.configuration.summarizer_config import DEFAULT_SUMMARY_SENTENCES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DATA), help="rotowire/games.jsonl")
    parser.add_argument("--split", default="test", choices=("dev", "test"))
    parser.add_argument("--hibert", help="a trained Stepwise HiBERT planner (folder)")
    parser.add_argument("--etcsum", help="a trained Stepwise ETCSum planner (folder)")
    parser.add_argument("--realizer", help="a trained realizer (folder)")
    parser.add_argument(
        "--num_sentences", type=int, default=DEFAULT_SUMMARY_SENTENCES["content_plan"],
        help="most units of a plan before its end",
    )
    parser.add_argument("--sentence_break_bias", type=float, nargs="+", default=[0.0], metavar="B",
                        help="plan with each of these biases on the sentence break's logit (one row each; 0, the "
                        "default, is the paper's decoding whatever the checkpoint's config says)")
    parser.add_argument("--min_sentences", type=int, nargs="+", default=[1], metavar="N",
                        help="plan with each of these least plan lengths in units (one row each with each bias; "
                        "1, the default, is the paper's decoding)")
    parser.add_argument("--num_beams", type=int, default=None, help="realizer beam size (default: the model's)")
    parser.add_argument("--numbers_from_input", nargs="+", choices=("off", "on"), default=None,
                        help="realize with number tokens from each step's input only (on) or any (off), one row "
                        "each (default: the realizer config's setting)")
    parser.add_argument("--records", nargs="+", default=["statistics"], choices=tuple(RECORD_DEFINITIONS),
                        help="what planning CS and CO count, one table each from the same plans: the paper's "
                        "statistics (names and date left out, default) or every record (the reports before issue "
                        "#40); the first is the card's")
    parser.add_argument("--update_planner_card", action="store_true",
                        help="replace the planning table on the shipped planner's card (--hibert) with this run's")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="where the planners and the realizer run (cpu, cuda)")
    parser.add_argument("--output", default=None, help="also write the report here (Markdown)")
    parser.add_argument("--ship", metavar="TRAINED_ON", default=None,
                        help="write --realizer to checkpoints/; its card says it trained on TRAINED_ON")
    parser.add_argument("--ship_planner", metavar="TRAINED_ON", default=None,
                        help="write --hibert to checkpoints/; its card says it trained on TRAINED_ON")
    parser.add_argument("--ship_sentence_break_bias", type=float, default=None, metavar="B",
                        help="the shipped planner's default sentence-break bias, one of --sentence_break_bias "
                        "(--ship_planner: default 0, the paper's decoding; --update_planner_card: default its "
                        "config's)")
    parser.add_argument("--ship_decoding_reason", default=None,
                        help="for the card: why the shipped planner decodes with a bias (the dev games' figures)")
    parser.add_argument("--ship_numbers_from_input", metavar="REASON", default=None,
                        help="turn numbers_from_input on in the shipped realizer (--realizer), REASON on its card")
    args = parser.parse_args()
    if args.ship_numbers_from_input:
        if not args.realizer or Path(args.realizer).resolve() != (CHECKPOINTS / SHIPPED_REALIZER).resolve():
            parser.error(f"--ship_numbers_from_input needs --realizer checkpoints/{SHIPPED_REALIZER}")
        if "on" not in (args.numbers_from_input or []) or args.ship:
            parser.error("--ship_numbers_from_input needs --numbers_from_input ... on (its rows go on the card), "
                         "and not --ship")
    if args.update_planner_card:
        if not args.hibert or Path(args.hibert).resolve() != (CHECKPOINTS / SHIPPED_HIBERT_PLANNER).resolve():
            parser.error(f"--update_planner_card needs --hibert checkpoints/{SHIPPED_HIBERT_PLANNER}")
        if args.ship_planner or args.records[0] != "statistics":
            parser.error("--update_planner_card takes the paper's CS and CO (--records statistics first), and not "
                         "--ship_planner")
    if args.ship and not args.realizer:
        parser.error("--ship needs --realizer")
    if args.ship_planner and not args.hibert:
        parser.error("--ship_planner needs --hibert")
    if args.ship_sentence_break_bias is not None and not (args.ship_planner or args.update_planner_card):
        parser.error("--ship_sentence_break_bias needs --ship_planner or --update_planner_card")
    if args.ship_planner or args.update_planner_card:
        # the planner's default decoding after this run: the option, else the paper's (shipping) or the config's
        default = planner_bias(args.hibert) if args.update_planner_card else 0.0
        shipped_bias = default if args.ship_sentence_break_bias is None else args.ship_sentence_break_bias
        if shipped_bias not in args.sentence_break_bias:
            parser.error(f"the planner's bias {shipped_bias:g} (--ship_sentence_break_bias) must be one of "
                         "--sentence_break_bias (its row goes on the card)")
        if shipped_bias and not args.ship_decoding_reason:
            parser.error(f"the planner's bias {shipped_bias:g} needs --ship_decoding_reason (the card says why)")
    setup_runtime(args.threads)

    from transformers import pipeline

    from sumformers.hub import load_pipeline
    from sumformers.text.evaluation import read_jsonl
    from sumformers.text.rotowire_plans import learn_plan_template, oracle_plan, plan_to_text, template_plan
    from sumformers.text.rotowire_records import ROTOWIRE_SPLITS, parse_game, split_games

    rows = read_jsonl(args.data)
    train = [parse_game(game) for game in split_games(rows, "train")]
    raw_games = split_games(rows, args.split)
    games = [parse_game(game) for game in raw_games]
    references = [oracle_plan(game) for game in games]

    start = time.perf_counter()
    template = learn_plan_template(train, [oracle_plan(game) for game in train])
    plans = {"Template (most mentioned records)": [template_plan(game, template) for game in games]}
    seconds = {"Template (most mentioned records)": time.perf_counter() - start}
    missing = {}
    for name, folder in (("Stepwise HiBERT planner", args.hibert), ("Stepwise ETCSum planner", args.etcsum)):
        if not folder:
            continue
        if not Path(folder).is_dir():
            missing[name] = folder
            continue
        planner = load_pipeline(folder, device=args.device)
        for bias, least in itertools.product(args.sentence_break_bias, args.min_sentences):
            row = ", ".join([name] + [f"sentence-break bias {bias:g}"] * (bias != 0)
                            + [f"at least {least} units"] * (least != 1))
            start = time.perf_counter()
            outputs = planner(raw_games, num_sentences=args.num_sentences, min_sentences=least,
                              sentence_break_bias=bias)
            plans[row] = [output["plan"] for output in outputs]
            seconds[row] = time.perf_counter() - start
    planning = {records: [plan_row(name, game_plans, references, seconds[name], records)
                          for name, game_plans in plans.items()]
                + [f"| {name} | checkpoint not found: {folder} | | | | | |" for name, folder in missing.items()]
                for records in args.records}

    texts = {}
    realized = [text_row("Templates of the oracle plan", games,
                         [" ".join(plan_to_text(game, plan)) for game, plan in zip(games, references)])]
    if args.realizer and not Path(args.realizer).is_dir():
        realized.append(f"| Realizer | checkpoint not found: {args.realizer} | | | | | | |")
    elif args.realizer:
        realizer = pipeline("table-to-text", model=args.realizer, device=args.device)
        options = {"num_beams": args.num_beams} if args.num_beams else {}
        settings = args.numbers_from_input or ["on" if realizer.model.config.numbers_from_input else "off"]
        for numbers, (name, game_plans) in itertools.product(settings, {"Oracle plan": references, **plans}.items()):
            on = numbers == "on"
            outputs = realizer([{"game": raw, "plan": plan} for raw, plan in zip(raw_games, game_plans)],
                               numbers_from_input=on, **options)
            # the examples below show the last setting's texts
            texts[name] = [" ".join(output["sentences"]) for output in outputs]
            realized.append(text_row(f"{name} + realizer" + ", numbers from the input" * on, games, texts[name]))

    checkpoints = {"HiBERT planner": args.hibert, "ETCSum planner": args.etcsum, "realizer": args.realizer}
    setting = (f"{len(games)} `{args.split}` games of the shared Rotowire sample ({', '.join(ROTOWIRE_SPLITS)} split "
               "by sorted id); small samples, not comparable to published Rotowire results.")
    plan_tables = {records: ["| system | CS P | CS R | CS F1 | CS F1 (macro) | CO (not in the paper) | seconds |",
                             "|---|---|---|---|---|---|---|", *rows] for records, rows in planning.items()}
    plan_table = plan_tables[args.records[0]]  # the card's
    text_table = ["| system | BLEU | " + " | ".join(TEXT_COLUMNS) + " |", "|---|---|" + "---|" * len(TEXT_COLUMNS),
                  *realized]
    body = [
        setting,
        "",
        "### Content plans against the oracle plans (x 100, 95% bootstrap intervals over the games)",
        "",
        *itertools.chain.from_iterable([RECORD_DEFINITIONS[records], "", *table, ""]
                                       for records, table in plan_tables.items()),
        "### Realized text against the human summaries",
        "",
        *text_table,
        "",
        "Checkpoints: " + ("; ".join(f"{name}: `{display_path(Path(folder).resolve())}`"
                                      for name, folder in checkpoints.items() if folder) or "none"),
    ]
    if texts:
        from sumformers.text.table_to_text_metrics import bleu

        human = [" ".join(game.summary) for game in games]
        system = max((name for name in plans if name in texts), key=lambda name: bleu(texts[name], human))
        columns = ["Oracle plan", system]
        body += ["", f"### Realized summaries next to the human ones: the realizer alone (oracle plan) and the whole "
                 f"system with the highest BLEU ({system} + realizer)", ""]
        for index, game in enumerate(games[:EXAMPLES]):
            body += [f"**{game.id}** ({game.vis_name} at {game.home_name})", "",
                     "| human | " + " | ".join(f"{name} + realizer" for name in columns) + " |", "|---|---|---|",
                     f"| {human[index]} | " + " | ".join(texts[name][index] for name in columns) + " |", ""]
    if args.ship:
        decoded = f"{setting} Decoded on CPU with {args.threads} threads by `benchmarks/quality_rotowire.py`."
        shipped = ship(args.realizer, SHIPPED_REALIZER, text_table, decoded, args.ship)
        body += ["", f"Shipped: `{display_path(shipped)}`"]
    threads = f"{args.threads} thread" + "s" * (args.threads > 1)
    if args.ship_planner or args.update_planner_card:
        decoded = (f"{setting} Planned on CPU with {threads} by `benchmarks/quality_rotowire.py`; "
                   f"{planner_decoding(shipped_bias, args.ship_decoding_reason)} "
                   f"{RECORD_DEFINITIONS[args.records[0]]}")
    if args.ship_planner:
        tables = plan_table + (["", *text_table] if texts else [])
        shipped = ship(args.hibert, SHIPPED_HIBERT_PLANNER, tables, decoded, args.ship_planner,
                       config_updates={"sentence_break_bias": shipped_bias})
        body += ["", f"Shipped: `{display_path(shipped)}`"]
    if args.ship_numbers_from_input:
        decoded = (f"{setting} Decoded on CPU with {args.threads} threads by `benchmarks/quality_rotowire.py`; this "
                   f"checkpoint writes only numbers of its input by default ({args.ship_numbers_from_input}).")
        shipped = turn_numbers_from_input_on(CHECKPOINTS / SHIPPED_REALIZER, text_table, decoded)
        body += ["", f"Updated: `{display_path(shipped)}` (numbers_from_input on)"]
    if args.update_planner_card:
        updated = update_planner_card(CHECKPOINTS / SHIPPED_HIBERT_PLANNER, plan_table, decoded, shipped_bias)
        body += ["", f"Updated: `{display_path(updated)}` (its planning table; sentence-break bias "
                 f"{shipped_bias:g})"]
    write_report("quality_rotowire.py", body, args.output)


if __name__ == "__main__":
    main()
