"""Rotowire content planning on the held-back games: content selection (precision, recall, F1 of distinct records)
and content ordering (normalized Damerau-Levenshtein similarity) x 100 of plans against the oracle plans induced
from the human summaries, per-game means with 95% bootstrap intervals over the test games.

    OMP_NUM_THREADS=2 python benchmarks/quality_rotowire.py --hibert runs/planner-hibert/final \
        --etcsum runs/planner-etcsum/final

Split: `rotowire_records.ROTOWIRE_SPLITS` over the games sorted by id (60 train, 5 dev, 15 test); rows read the 15 test
games. Planning-only rows:
- Template: the records most often mentioned in the training plans, in a fixed order. A record is generalized to its
  role and key ("home team | TEAM-PTS", "2nd highest scorer | REB", "game | DAY"); the template is the roles and keys
  of the median number of distinct records per training plan, most frequent first, put in the order of their mean
  relative position in the training plans; a role or key a test game lacks is skipped.
- Stepwise HiBERT and Stepwise ETCSum planners: greedy plans of the `content-planning` pipeline.
Small samples: the figures compare systems with each other and are not comparable to published Rotowire results.
The realizer's rows (BLEU, RG, CS and CO of text) come with the realizer.
"""

import argparse
import os
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "rotowire" / "games.jsonl"
METRICS = ("cs_precision", "cs_recall", "cs_f1", "co")


def record_roles(game) -> dict[str, str]:
    """Record id -> its role and key: the date, the home or visiting team, or the k-th highest scorer (ties in
    box-score order; players without points after those with)."""
    from sumformers.text.rotowire_records import GAME, PLAYER

    points = {record.entity: int(record.value) for record in game.records if record.key == "PTS"}
    players = [record.entity for record in game.players]
    order = sorted(players, key=lambda name: -points.get(name, -1))
    rank = {name: index + 1 for index, name in enumerate(order)}
    roles = {}
    for record in game.records:
        if record.entity_type == GAME:
            role = "game"
        elif record.entity_type == PLAYER:
            role = f"scorer {rank[record.entity]}"
        else:
            role = "home team" if record.entity == game.home_name else "visiting team"
        roles[record.id] = f"{role} | {record.key}"
    return roles


def template_baseline(train_games, train_plans) -> list[str]:
    """The template: roles and keys (see `record_roles`) in their fixed order."""
    from sumformers.text.rotowire_plans import plan_records

    counts, positions, sizes = Counter(), defaultdict(list), []
    for game, plan in zip(train_games, train_plans):
        roles = record_roles(game)
        records = list(dict.fromkeys(plan_records(plan)))
        sizes.append(len(records))
        for index, record_id in enumerate(records):
            counts[roles[record_id]] += 1
            positions[roles[record_id]].append(index / len(records))
    chosen = [role for role, _ in counts.most_common(int(statistics.median(sizes)))]
    return sorted(chosen, key=lambda role: statistics.mean(positions[role]))


def template_plan(game, template: list[str]) -> list[str]:
    from sumformers.text.rotowire_records import EOT

    by_role = {role: record_id for record_id, role in record_roles(game).items()}
    return [by_role[role] for role in template if role in by_role] + [EOT]


def row(name: str, plans, references, seconds: float) -> dict:
    from sumformers.text.table_to_text_metrics import bootstrap_interval, plan_scores

    scores = plan_scores(plans, references)
    cells = {}
    for metric in METRICS:
        values = [game[metric] for game in scores["per_game"]]
        low, high = bootstrap_interval(values)
        cells[metric] = f"{statistics.mean(values):.1f} [{low:.1f}, {high:.1f}]"
    return {"system": name, **cells, "seconds": f"{seconds:.0f}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA), help="rotowire/games.jsonl")
    parser.add_argument("--hibert", help="a trained Stepwise HiBERT planner (folder)")
    parser.add_argument("--etcsum", help="a trained Stepwise ETCSum planner (folder)")
    parser.add_argument("--max_plan_length", type=int, default=120)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from sumformers.hub import load_pipeline
    from sumformers.text.evaluation import read_jsonl
    from sumformers.text.rotowire_plans import oracle_plan
    from sumformers.text.rotowire_records import ROTOWIRE_SPLITS, parse_game, split_games

    torch.set_num_threads(args.threads)
    rows = read_jsonl(args.data)
    split = {name: split_games(rows, name) for name in ROTOWIRE_SPLITS}
    train = [parse_game(game) for game in split["train"]]
    test = [parse_game(game) for game in split["test"]]
    references = [oracle_plan(game) for game in test]
    start = time.perf_counter()
    template = template_baseline(train, [oracle_plan(game) for game in train])
    rows = [row("Template (most mentioned records)", [template_plan(game, template) for game in test], references,
                time.perf_counter() - start)]
    for name, folder in (("Stepwise HiBERT planner", args.hibert), ("Stepwise ETCSum planner", args.etcsum)):
        if folder:
            planner = load_pipeline(folder)
            start = time.perf_counter()
            plans = [output["plan"] for output in planner(split["test"], max_plan_length=args.max_plan_length)]
            rows.append(row(name, plans, references, time.perf_counter() - start))
    print(f"Rotowire content planning, {len(test)} test games (per-game means x 100, 95% bootstrap intervals)\n")
    print("| System | CS P | CS R | CS F1 | CO | seconds |\n|---|---|---|---|---|---|")
    for cells in rows:
        print("| " + " | ".join(cells[key] for key in ("system", *METRICS, "seconds")) + " |")


if __name__ == "__main__":
    main()
