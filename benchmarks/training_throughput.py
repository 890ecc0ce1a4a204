"""Training throughput of every extractive family on the 40k-article CNN/DailyMail set, measured by running each
training script as a user would, on the first `--documents` articles of `train_large` (written to a temporary
JSONL, never into the repo), and reading the Trainer's own `train_results.json`.

    python benchmarks/training_throughput.py --documents 64 --threads 2

Reported per model: documents per second of the optimizer loop (`train_samples_per_second`: one sample is one
document with all its sentences, and for stepwise models all its oracle steps), the wall time of the whole run
(sentence splitting, oracle labels, HiBERT's precomputed sentence vectors, model building, training; no evaluation),
and what a 39,563-document epoch costs at that rate. Every run uses the scripts' defaults but for the flags shown.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import command_line  # noqa: E402

from sumformers.text.evaluation import data_dir  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAIN_DOCUMENTS = 39_563
LORA = ["--lora_target_modules", "query,key,value,dense", "--lora_r", "16", "--lora_alpha", "32"]
# (name, script, extra flags): the families of the issue, at the input lengths they are meant to read.
RUNS = [
    ("BERTSum (512 tokens)", "train_extractive.py", ["--lora_layers", "0,1,2,3,4,5", *LORA]),
    ("HiBERT (frozen sentence encoder)", "train_stepwise.py", ["--model_type", "hibert", *LORA]),
    ("Stepwise HiBERT (frozen sentence encoder)", "train_stepwise.py", ["--model_type", "stepwise_hibert", *LORA]),
    ("ETCSum (1,024 tokens)", "train_stepwise.py", ["--model_type", "etcsum", "--max_length", "1024", *LORA]),
    (
        "Stepwise ETCSum (1,024 tokens)",
        "train_stepwise.py",
        ["--model_type", "stepwise_etcsum", "--max_length", "1024", *LORA],
    ),
    ("HetFormer (2,048 tokens)", "train_hetformer.py", ["--max_length", "2048", "--use_entities", "false", *LORA]),
]


def write_subset(path: Path, documents: int) -> None:
    source = data_dir() / "cnn_dailymail" / "train_large.jsonl.gz"
    if not source.is_file():
        raise SystemExit(f"{source} not found (set SUMFORMERS_DATA_DIR)")
    with gzip.open(source, "rt", encoding="utf-8") as rows, path.open("w", encoding="utf-8") as out:
        for _, line in zip(range(documents), rows):
            row = json.loads(line)
            out.write(json.dumps({"id": row["id"], "document": row["document"], "summary": row["summary"]}) + "\n")


def run(script: str, flags: list[str], train_file: Path, output: Path, batch_size: int, threads: int) -> dict:
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / script), "--train_file", str(train_file),
        "--output_dir", str(output), "--do_train", "--num_train_epochs", "1",
        "--per_device_train_batch_size", str(batch_size), "--save_strategy", "no", "--seed", "42", *flags,
    ]  # fmt: skip
    environment = dict(os.environ, OMP_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    wall = time.perf_counter() - start
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1]}
    metrics = json.loads((output / "train_results.json").read_text())
    return {"documents_per_second": metrics["train_samples_per_second"], "train_s": metrics["train_runtime"],
            "wall_s": wall}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default=None, help="run only the models whose name contains this text")
    parser.add_argument("--output", default=str(REPO_ROOT / "benchmarks" / "results" / "training_throughput.md"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        train_file = Path(folder) / "train.jsonl"
        write_subset(train_file, args.documents)
        for name, script, flags in RUNS:
            if args.only and args.only not in name:
                continue
            result = run(script, flags, train_file, Path(folder) / script, args.batch_size, args.threads)
            print(name, result, flush=True)
            rows.append((name, script, flags, result))
    lines = [
        command_line("training_throughput.py"),
        "",
        f"Training throughput, {args.documents} train_large documents, batch {args.batch_size}, "
        f"{args.threads} CPU threads (`python benchmarks/training_throughput.py --documents {args.documents} "
        f"--threads {args.threads}`)",
        "",
        "| model | script flags | documents / s | train s | whole run s | one epoch of 39,563 documents |",
        "|---|---|---|---|---|---|",
    ]
    for name, script, flags, result in rows:
        if "error" in result:
            lines.append(f"| {name} | `{script} {' '.join(flags)}` | failed: {result['error']} | | | |")
            continue
        epoch_hours = TRAIN_DOCUMENTS / result["documents_per_second"] / 3600
        lines.append(
            f"| {name} | `{script} {' '.join(flags)}` | {result['documents_per_second']:.2f} | "
            f"{result['train_s']:.0f} | {result['wall_s']:.0f} | {epoch_hours:.1f} h |"
        )
    Path(args.output).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
