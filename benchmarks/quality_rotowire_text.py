"""Rotowire table-to-text quality on the held-back games of the shared split (`ROTOWIRE_SPLITS`: the last 15 games by
id, `--split test`; `--split dev` for the 5 dev games). Small-sample figures under this package's rule-based relation
extractor (`text.table_to_text_metrics`): not comparable to published Rotowire results.

Realized-text rows (this file holds only these so far; the planning-only and planner rows are to be added):

- templates of the oracle plan: each plan sentence's record templates (`plan_to_text`) as the text, a realizer-free
  floor;
- realizer on oracle plans (`--realizer FOLDER`): the `table-to-text` pipeline with `plan="oracle"`, which realizes
  the plan induced from each game's own summary, so the row measures the realizer alone.

Columns: BLEU (sacrebleu corpus BLEU against the human summary; the interval bootstraps games, corpus BLEU of each
resample), RG precision and count (relations the extractor finds in the text that the box score supports), CS
precision/recall/F1 and CO (relations of the text against those of the human summary), each a mean over games with a
95% bootstrap interval (`text.scoring.bootstrap_interval`).

    python benchmarks/quality_rotowire_text.py --realizer runs/realizer/final --threads 2
"""

import argparse
import sys
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "rotowire" / "games.jsonl"


def bleu_interval(predictions, references, resamples=1000, seed=0):
    from sumformers.text.table_to_text_metrics import bleu

    rows = np.random.default_rng(seed).integers(0, len(predictions), size=(resamples, len(predictions)))
    scores = [bleu([predictions[i] for i in row], [references[i] for i in row]) for row in rows]
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


def score_row(name, games, texts):
    from sumformers.text.table_to_text_metrics import (
        bleu,
        bootstrap_interval,
        relation_generation,
        text_content_ordering,
        text_content_selection,
    )

    references = [" ".join(game.summary) for game in games]
    per_game = {"RG P": [], "RG #": [], "CS P": [], "CS R": [], "CS F1": [], "CO": []}
    for game, text, reference in zip(games, texts, references):
        rg = relation_generation(game, text)
        cs = text_content_selection(game, text, reference)
        per_game["RG P"].append(100 * rg["precision"])
        per_game["RG #"].append(rg["supported"])
        per_game["CS P"].append(100 * cs["precision"])
        per_game["CS R"].append(100 * cs["recall"])
        per_game["CS F1"].append(100 * cs["f1"])
        per_game["CO"].append(100 * text_content_ordering(game, text, reference))
    low, high = bleu_interval(texts, references)
    cells = [f"{bleu(texts, references):.2f} [{low:.2f}, {high:.2f}]"]
    for values in per_game.values():
        low, high = bootstrap_interval(values)
        cells.append(f"{np.mean(values):.2f} [{low:.2f}, {high:.2f}]")
    return f"| {name} | " + " | ".join(cells) + " |"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default=str(SHARED))
    parser.add_argument("--split", default="test", choices=("dev", "test"))
    parser.add_argument("--realizer", default=None, help="trained realizer folder")
    parser.add_argument("--num_beams", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    import torch
    from transformers import pipeline

    import sumformers  # noqa: F401  (registers the table-to-text task)
    from sumformers.text.rotowire_plans import oracle_plan, plan_to_text
    from sumformers.text.rotowire_records import read_games, split_games

    torch.set_num_threads(args.threads)
    games = split_games(read_games(args.games), args.split)
    rows = [score_row("templates of the oracle plan", games,
                      [" ".join(plan_to_text(game, oracle_plan(game))) for game in games])]
    if args.realizer:
        if not Path(args.realizer).is_dir():
            rows.append(f"| realizer on oracle plans | checkpoint not found: {args.realizer} |")
        else:
            realizer = pipeline("table-to-text", model=args.realizer, plan="oracle")
            options = {"num_beams": args.num_beams} if args.num_beams else {}
            outputs = realizer(list(games), **options)
            rows.append(score_row("realizer on oracle plans", games, [" ".join(o["sentences"]) for o in outputs]))
    print(f"{len(games)} `{args.split}` games of {args.games}\n")
    print("| system | BLEU | RG P% | RG # | CS P% | CS R% | CS F1% | CO% |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
