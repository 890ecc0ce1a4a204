"""Documents per second on CPU: a model's pipeline on ONNX Runtime (`sumformers export --onnx`) against the same
pipeline on PyTorch, in one run, with the same number of threads for both (torch intra-op threads, ONNX Runtime
intra-op threads; one inter-op thread each), for each thread count asked.

Each document is summarized by every back end in turn (the order rotates from one document to the next, so that a
burst of load on a shared machine falls on all of them alike) after one warm-up document each; every call is the
whole pipeline (sentence splitting, tokenization, model, search). Wall-clock and process CPU seconds are both
reported: on a machine others share, CPU seconds are the steadier measure. The float32 ONNX Runtime rows differ in
its graph optimization level (the graphs themselves already hold the fused kernels the export writes, and the
default model's sentence encoder on real tokens only: docs/onnx.md); the int8 row is the opt-in `--quantize int8`
export. The summaries of every back end are compared with PyTorch's, and so are its scores (the first step's
next-choice probabilities of a stepwise model, the sentence probabilities of the others).

    python benchmarks/onnx_speed.py --threads 1 2 --documents 50    # writes benchmarks/results/onnx_speed.md
    python benchmarks/onnx_speed.py --model etcsum-minilm-cnndm --threads 1 --documents 20 --no-int8 \
        --output benchmarks/results/onnx_speed_etcsum.md
"""

import argparse
import json
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO / "benchmarks" / "results" / "onnx_speed.md"
TARGET = 1.5


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="shipped extractive checkpoint or folder (default: the default)")
    parser.add_argument(
        "--onnx-folder", default=None, help="its ONNX export (default: exported into a temporary folder)"
    )
    parser.add_argument("--documents", type=int, default=50, help="development articles to summarize")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread counts, each for both back ends")
    parser.add_argument("--data-file", default=None, help="JSONL with `document` (default: CNN/DM validation.jsonl)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="Markdown report")
    parser.add_argument("--levels", nargs="+", choices=["ORT_ENABLE_ALL", "ORT_ENABLE_BASIC"],
                        default=["ORT_ENABLE_ALL", "ORT_ENABLE_BASIC"], help="ONNX Runtime graph optimization levels")
    parser.add_argument("--int8", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the --quantize int8 export (--no-int8: float32 only)")
    return parser.parse_args(argv)


def onnx_levels():
    import onnxruntime

    level = onnxruntime.GraphOptimizationLevel
    return {"ORT_ENABLE_ALL": level.ORT_ENABLE_ALL, "ORT_ENABLE_BASIC": level.ORT_ENABLE_BASIC}


def scores(pipeline, document: str) -> list[float]:
    """The probabilities the search reads: a stepwise model's first next-choice distribution, or every sentence's."""
    if pipeline.model.is_stepwise:
        return pipeline(document, return_steps=True)["steps"][0]["distribution"]
    return pipeline(document, return_sentences=True)["sentence_scores"]


def largest_score_difference(pipeline, reference, documents: list[str]) -> float:
    return max(abs(a - b) for document in documents
               for a, b in zip(scores(pipeline, document), scores(reference, document), strict=True))


def time_backends(pipelines: dict, documents: list[str]) -> dict:
    """name -> {"wall": s, "cpu": s, "summaries": [...]}, each document run by every back end, the order rotating."""
    names = list(pipelines)
    for name in names:  # warm-up: first-call allocations, lazy imports
        pipelines[name](documents[0])
    totals = {name: {"wall": 0.0, "cpu": 0.0, "summaries": []} for name in names}
    for index, document in enumerate(documents):
        for name in names[index % len(names):] + names[: index % len(names)]:
            wall, cpu = time.perf_counter(), time.process_time()
            summary = pipelines[name](document)["summary"]
            totals[name]["wall"] += time.perf_counter() - wall
            totals[name]["cpu"] += time.process_time() - cpu
            totals[name]["summaries"].append(summary)
    return totals


def main(argv=None) -> int:
    args = parse_args(argv)
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import onnxruntime
    import torch

    from sumformers.hub import DEFAULT_MODEL, load_pipeline
    from sumformers.onnx_export import export_onnx
    from sumformers.onnx_runtime import default_session_options

    torch.set_num_interop_threads(1)
    warnings.filterwarnings("ignore")
    model = args.model or DEFAULT_MODEL
    data_file = Path(args.data_file or REPO.parent / "shared" / "data" / "cnn_dailymail" / "validation.jsonl")
    lines = data_file.read_text().splitlines()[: args.documents]
    documents = [json.loads(line)["document"] for line in lines]
    rows, ratios, drift = [], {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        folders = {
            "float32": Path(args.onnx_folder) if args.onnx_folder else export_onnx(model, Path(scratch) / "float32"),
        }
        if args.int8:
            folders["int8"] = export_onnx(model, Path(scratch) / "int8", quantize="int8")
        for threads in args.threads:
            torch.set_num_threads(threads)
            pipelines = {"PyTorch": load_pipeline(model)}
            for label in args.levels:
                level = onnx_levels()[label]
                options = default_session_options(threads)
                options.graph_optimization_level = level
                pipelines[f"ONNX Runtime float32, {label}"] = load_pipeline(str(folders["float32"]),
                                                                           session_options=options)
            if args.int8:
                pipelines["ONNX Runtime int8 (--quantize int8), ORT_ENABLE_ALL"] = load_pipeline(
                    str(folders["int8"]), session_options=default_session_options(threads))
            if not drift:  # scores do not depend on the thread count: measured once, outside the timing
                drift = {name: largest_score_difference(pipeline, pipelines["PyTorch"], documents)
                         for name, pipeline in pipelines.items() if name != "PyTorch"}
            totals = time_backends(pipelines, documents)
            reference = totals["PyTorch"]
            cpu_share = sum(total["cpu"] for total in totals.values()) / sum(total["wall"] for total in totals.values())
            for name, total in totals.items():
                same = sum(a == b for a, b in zip(total["summaries"], reference["summaries"]))
                ratios[threads, name] = reference["cpu"] / total["cpu"]
                rows.append(
                    f"| {threads} | {name} | {len(documents) / total['wall']:.2f} | "
                    f"{reference['wall'] / total['wall']:.2f}x | {len(documents) / total['cpu']:.2f} | "
                    f"{ratios[threads, name]:.2f}x | {same}/{len(documents)} | "
                    f"{f'{drift[name]:.1e}' if name in drift else '-'} | {cpu_share:.0%} |"
                )

    # the environment's thread defaults, as run (the benchmark sets each thread count itself)
    environment = "".join(f"{name}={os.environ[name]} " for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
                          if name in os.environ)
    command = f"{environment}python benchmarks/onnx_speed.py {shlex.join(argv if argv is not None else sys.argv[1:])}"
    verdicts = []
    for threads in args.threads:
        for precision in folders:
            name, ratio = max(((name, ratio) for (count, name), ratio in ratios.items()
                               if count == threads and precision in name), key=lambda item: item[1])
            verdicts.append(f"{threads} thread(s), {precision}: {ratio:.2f}x ({name}; the target of {TARGET}x "
                            f"{'met' if ratio >= TARGET else '**not met**'})")
    report = "\n".join([
        "# ONNX Runtime against PyTorch, documents per second on CPU",
        "",
        f"Command: `{command}`. Model: {model}; {len(documents)} articles of `{data_file.name}` (CNN/DM "
        f"validation, the first {len(documents)}); for each thread count, the same number of threads for every back "
        f"end (torch intra-op, ONNX Runtime intra-op; one inter-op thread each); torch {torch.__version__}, "
        f"onnxruntime {onnxruntime.__version__}. Every call is the whole pipeline (splitting, tokenization, model, "
        "search); the back ends take the documents in turn, the order rotating. Score difference: the largest "
        "difference from PyTorch's probabilities over the documents (a stepwise model's first next-choice "
        "distribution, the others' sentence probabilities). CPU share: the CPU seconds the process had per "
        "wall-clock second, in that thread count's run (others share the machine; the CPU-time columns are the "
        "steadier measure).",
        "",
        "| threads | back end | docs/s (wall) | vs PyTorch (wall) | docs/s (CPU time) | vs PyTorch (CPU time) "
        "| summaries as PyTorch's | score difference | CPU share |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Best ONNX Runtime setting against PyTorch in CPU time: " + "; ".join(verdicts) + ".",
        "",
    ])
    Path(args.output).write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
