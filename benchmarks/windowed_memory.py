"""Time and peak memory of BERT-windowing (Aksenov et al. 2020) against truncation, on CPU: the frozen features of
`WindowedEncoder` (the bundled MiniLM over windows of 512 positions every 256 tokens, last four layers averaged by
each token's window count) for documents of 512, 2,048, 8,192 and 100,000 tokens, against one pass over the first
510 tokens, which is what a truncating encoder reads whatever the document's length.

Each case runs in a fresh subprocess (batch 1, random token ids); memory is the resident set above what the process
held before the pass. Windowed memory should grow linearly with length (windows are encoded a few at a time; the
float32 features themselves are length x 1,536 x 4 bytes: 614 MB at 100,000 tokens).

    OMP_NUM_THREADS=2 python benchmarks/windowed_memory.py --threads 2
"""

import argparse
import json
import os
from pathlib import Path

from _common import measure_in_subprocess, measured_run

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LENGTHS = (512, 2048, 8192, 100_000)
RESULTS = Path(__file__).resolve().parent / "results" / "windowed_memory"
CASES = {"truncated": "truncated at 512 positions (one pass)", "windowed": "windowed, 512 / stride 256"}


def run_worker(case: str, length: int) -> None:
    import torch

    from sumformers.modeling.windowed_encoder import WindowedEncoder

    encoder = WindowedEncoder(d_model=256).eval()
    generator = torch.Generator().manual_seed(0)
    # ordinary WordPiece ids (past the [unused] and special tokens at the start of BERT's vocabulary)
    input_ids = torch.randint(1000, encoder.encoder.config.vocab_size, (1, length), generator=generator)
    if case == "truncated":
        input_ids = input_ids[:, : encoder.window - 2]
    measured_run(lambda: encoder.frozen_features(input_ids))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per case")
    parser.add_argument("--output", default=str(RESULTS), help="path without extension (.md and .json are written)")
    args = parser.parse_args()
    if args.worker:
        run_worker(args.worker[0], int(args.worker[1]))
        return

    results = {case: {} for case in CASES}
    for length in LENGTHS:
        for case in CASES:
            result = measure_in_subprocess(__file__, [case, str(length)], args.threads, args.timeout)
            results[case][str(length)] = result
            print(case, length, result, flush=True)
    rows = [
        "| tokens | truncated s / MiB | windowed s / MiB | time ratio | windowed s per 1,000 tokens |",
        "|---|---|---|---|---|",
    ]
    for length in LENGTHS:
        truncated, windowed = results["truncated"][str(length)], results["windowed"][str(length)]
        if "skipped" in truncated or "skipped" in windowed:
            rows.append(f"| {length:,} | {truncated.get('skipped', '')} | {windowed.get('skipped', '')} | | |")
            continue
        rows.append(
            f"| {length:,} | {truncated['seconds']:.2f} / {truncated['peak_mib']:.0f} | "
            f"{windowed['seconds']:.2f} / {windowed['peak_mib']:.0f} | "
            f"{windowed['seconds'] / truncated['seconds']:.2f} | "
            f"{1000 * windowed['seconds'] / length:.3f} |"
        )
    report = "\n".join([
        f"Command: `OMP_NUM_THREADS={args.threads} python benchmarks/windowed_memory.py --threads {args.threads}` "
        "(CPU, batch 1, the bundled MiniLM; cores shared with other jobs: compare times only within this table).",
        "",
        *rows,
    ])
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.with_suffix(".md").write_text(report + "\n")
    output.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    print(report)


if __name__ == "__main__":
    main()
