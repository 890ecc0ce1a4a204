"""Memory and time of one training row of the Stepwise ETCSum content planner (#14) on CPU: one Rotowire game's
whole table (every record's template sentence, one global token each) and a plan prefix, forward and backward, as
`train_content_planner.py --model_type stepwise_etcsum_planner` trains it (MiniLM, blocked attention).

Four cases, each in a fresh subprocess: with and without gradient checkpointing (`--gradient_checkpointing`: each
layer's activations recomputed in the backward pass), with MiniLM's attention dropout (0.1) and without it (CPU SDPA
has no fused kernel with dropout or with a bias that needs gradients, so the scores are kept either way; dropout adds
its mask). Memory is the resident set (`_common.measured_run`): `peak` above what the process held before the pass.

    # writes benchmarks/results/rotowire_planner_cost.{md,json}
    python benchmarks/rotowire_planner_cost.py --data ../shared/data/rotowire/games.jsonl
"""

import argparse
import json
import os
from pathlib import Path

from _common import measure_in_subprocess, measured_run, write_report

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CASES = {  # name -> (gradient checkpointing, attention dropout)
    "plain": (False, None),
    "checkpointed": (True, None),
    "no_attention_dropout": (False, 0.0),
    "checkpointed_no_attention_dropout": (True, 0.0),
}


def planner_and_game(data: str, game_index: int):
    """A new planner from MiniLM and the training features of the game (sorted ids) at `game_index`."""
    from sumformers import ARCHITECTURES
    from sumformers.text.evaluation import read_jsonl
    from sumformers.text.rotowire_records import split_games
    from sumformers.training import model_and_tokenizer

    planner_class = ARCHITECTURES["stepwise_etcsum_planner"].model_class
    model, tokenizer = model_and_tokenizer(
        "minilm", lambda encoder, _: planner_class.from_encoder(encoder, encoder_name_or_path="minilm")
    )
    processor = model.processor_class(tokenizer, model.config)
    return model, processor, processor.training_features(split_games(read_jsonl(data), "train")[game_index])


def run_worker(data: str, game_index: int, prefix: int, case: str) -> None:
    import torch

    torch.manual_seed(0)
    checkpointing, attention_dropout = CASES[case]
    model, processor, features = planner_and_game(data, game_index)
    batch = {key: value for key, value in processor.collate([features]).items() if key != "labels"}
    batch.update(
        summary_indices=torch.tensor([features["oracle"][:prefix]]),
        row_documents=torch.tensor([0]),
        labels=torch.tensor([features["oracle"][prefix]]),
    )
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    if attention_dropout is not None:
        for layer in model.layers:
            layer.attention.attention_dropout = attention_dropout
    measured_run(lambda: model(**batch).loss.backward())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(os.environ.get("SUMFORMERS_DATA_DIR", "../shared/data"),
                                                       "rotowire", "games.jsonl"))
    parser.add_argument("--game", type=int, default=0, help="index of the training game (sorted ids)")
    parser.add_argument("--prefix", type=int, default=2, help="oracle plan steps already taken in the row")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--output", default=str(RESULTS_DIR / "rotowire_planner_cost.md"))
    parser.add_argument("--worker", nargs=4, metavar=("DATA", "GAME", "PREFIX", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        data, game, prefix, case = args.worker
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        run_worker(data, int(game), int(prefix), case)
        return
    cases = args.cases.split(",")
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown --cases {sorted(unknown)}; choose from {list(CASES)}")
    _, _, features = planner_and_game(args.data, args.game)
    if args.prefix >= len(features["oracle"]):
        parser.error(f"the game's oracle plan has {len(features['oracle'])} steps; --prefix must be fewer")
    results = {}
    for case in cases:
        worker = [args.data, str(args.game), str(args.prefix), case]
        results[case] = measure_in_subprocess(__file__, worker, args.threads, args.timeout)
        print(case, results[case], flush=True)
    lines = [
        f"Training game {args.game} (sorted ids: {len(features['input_ids']):,} tokens, {len(features['labels'])} "
        f"planning units, each a global token), one row after {args.prefix} oracle plan steps (their tokens follow "
        f"the table's), forward + backward, {args.threads} thread(s), MiniLM, blocked attention.",
        "",
        "| gradient checkpointing | attention dropout | time (s) | peak (MiB) | process peak (MiB) |",
        "|---|---|---:|---:|---:|",
    ]
    for case, result in results.items():
        checkpointing, dropout = CASES[case]
        label = f"| {'yes' if checkpointing else 'no'} | {'0.1 (MiniLM)' if dropout is None else dropout} |"
        if "skipped" in result:
            lines.append(f"{label} - | - | skipped: {result['skipped']} |")
        else:
            lines.append(f"{label} {result['seconds']:.1f} | {result['peak_mib']:,.0f} | "
                         f"{result['process_peak_mib']:,.0f} |")
    write_report("rotowire_planner_cost.py", lines, args.output)
    Path(args.output).with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
