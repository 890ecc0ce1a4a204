"""Seconds per news article of the shipped WikiSum-over-SmolLM2 checkpoint (`pipeline("wikisum-llama")`, its shipped
decoding: greedy, at most 120 new tokens, KV cache, one prompt at a time) at 1 and 2 CPU threads: the median over
--limit development articles (`validation.jsonl[--start:]`, raw CNN) after one warm-up call, wall clock and the
process's CPU time, with the machine's load average, since a shared machine's wall clock counts the other processes
too (CPU seconds / threads is what the call would take on idle cores at perfect thread scaling; it is not measured).

    python benchmarks/wikisum_llama_speed.py --threads 1 2    # writes benchmarks/results/wikisum_llama_speed.md
"""

import argparse
import os
import statistics
import time
import warnings
from pathlib import Path

from _common import REPO, data_slice, setup_runtime, write_report


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="wikisum-smollm2-td-cnndm", help="a shipped checkpoint's name or a folder")
    parser.add_argument("--data_file", default=None, help="CNN JSONL (default: the shared cnn_dailymail/validation)")
    parser.add_argument("--start", type=int, default=300)
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "wikisum_llama_speed.md"))
    return parser.parse_args()


def main():
    args = parse_args()
    setup_runtime(args.threads[0])
    import torch

    from sumformers.hub import load_pipeline

    _, examples = data_slice(args, "validation.jsonl")
    articles = [example["document"] for example in examples]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summarizer = load_pipeline(args.model)
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        summarizer(articles[0])  # warm-up
        wall, cpu, words = [], [], []
        for article in articles:
            started, started_cpu = time.perf_counter(), time.process_time()
            summary = summarizer(article)["summary"]
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
            words.append(len(summary.split()))
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        rows.append(f"| {threads} | {statistics.median(wall):.2f} | {max(wall):.2f} | {statistics.median(cpu):.2f} "
                    f"| {statistics.mean(words):.1f} | {load} |")
    body = [
        f"`{Path(str(summarizer.model.name_or_path)).name}` through `pipeline(\"wikisum-llama\")` with its shipped "
        f"decoding, {len(articles)} articles of `validation.jsonl[{args.start}:{args.start + len(articles)}]` "
        f"(after one warm-up call); {os.cpu_count()} CPU cores on the machine, shared.",
        "",
        "| threads | s / article (median wall) | slowest (wall) | CPU s / article (median) | summary words | "
        "load average after (1, 5, 15 min) |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    write_report("wikisum_llama_speed.py", body, args.output)


if __name__ == "__main__":
    main()
