"""Helpers the benchmark scripts share: for the CNN/DM quality scripts (`quality_cnndm.py`, `quality_abstractive.py`)
checkpoint lookup, ROUGE with bootstrap intervals and by source, the prediction cache, timing, table cells and the
report's header; for the speed and memory scripts (`hetformer_memory.py`, `windowed_memory.py`) one measured case in a
fresh subprocess.

Imported by the scripts as `_common` (the folder of a script run as `python benchmarks/<script>.py` is on sys.path);
sumformers is imported inside the functions, so `--help` stays fast.
"""

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = {"cnn": "CNN", "dailymail": "DM"}  # the `source` field of the large CNN/DM files -> column label
# a training run as the training scripts write it on a card (`sumformers.training`): its optimizer steps, then
# the hardware and the sampling where the card names them
# ("600 optimizer steps (1.00 epochs) on CPU, group_by_length sampling")
TRAINING_RUN = re.compile(r"(\d+) optimizer steps(?: \([^)]*\) on ([^,;]+)(, \w+ sampling)?)?")


def setup_runtime(threads: int) -> None:
    """Offline Hub, no tokenizer thread pool, `threads` torch threads (imports torch: call it after parsing)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(threads)


def data_slice(args, default_file: str) -> tuple[Path, list[dict]]:
    """The rows `[args.start, args.start + args.limit)` of `args.data_file`, by default `default_file` of the shared
    CNN/DM folder, with the file's path."""
    from sumformers.text.evaluation import data_dir, read_jsonl

    data_file = Path(args.data_file) if args.data_file else data_dir() / "cnn_dailymail" / default_file
    return data_file, read_jsonl(data_file)[args.start : args.start + args.limit]


def find_checkpoint(candidates: Iterable[str]) -> Path | None:
    """The first candidate folder (absolute, or relative to the repository root) holding a `config.json`."""
    for candidate in candidates:
        path = Path(candidate) if Path(candidate).is_absolute() else REPO / candidate
        if (path / "config.json").is_file():
            return path
    return None


def display_path(path: Path) -> Path:
    """`path` relative to the repository root when it lies inside it."""
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def ship_adapter_checkpoint(
    checkpoint: str,
    target: Path,
    evaluation: list[str],
    trained_on: str,
    development: str,
    generation: dict | None = None,
    decoding: str | None = None,
    config_updates: dict | None = None,
) -> Path:
    """Copy a training script's adapter checkpoint to `target` (a shipped checkpoint); its card keeps the training
    run's own evaluation under the `development` label, adds `evaluation` (a benchmark's setting and table, one
    markdown line each) and where it trained (`trained_on`). `generation` updates the shipped generation config,
    and `decoding` is then the card's account of it; `config_updates` (decoding fields of the model's config, such
    as a planner's `sentence_break_bias`) update the shipped config, whose card template states them."""
    import shutil

    from transformers import AutoConfig, GenerationConfig

    from sumformers.hub import read_card_info, write_card

    source = Path(checkpoint)
    if not (source / "adapter_model.safetensors").is_file():
        raise SystemExit(f"--ship: {source} is not an adapter checkpoint of a training script")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("training_args.bin"))
    card = read_card_info(source)
    name = target.name
    card.update(model_name=name, repo_id=f"sumformers/{name}", training=f"{card['training']} Trained on {trained_on}.")
    own = [f"{development}: {card['evaluation']}", ""] if card.get("evaluation") else []  # a run with --do_eval
    card["evaluation"] = "\n".join([*own, *evaluation])
    if generation:
        if not decoding:
            raise ValueError("a changed generation config needs the card's account of it (decoding)")
        settings = GenerationConfig.from_pretrained(target)
        settings.update(**generation)
        settings.save_pretrained(target)
        card["decoding"] = decoding
    config = AutoConfig.from_pretrained(target)
    if config_updates:
        config.update(config_updates)
        config.save_pretrained(target)
    write_card(target, config, card)
    return target


def rouge_metrics(summaries: list[str], references: list[str], sources: list[str | None]) -> dict:
    """Mean ROUGE-1/2/Lsum F1 x 100 with 95% bootstrap intervals (`<key>_interval`), ROUGE-1 by source
    (`rouge1_<source>`, None when the set has no document from it) and per document (`rouge1_per_document`, for
    paired comparisons)."""
    from sumformers.text.scoring import ROUGE_KEYS, bootstrap_interval, rouge_per_example

    per_example = rouge_per_example(summaries, references)
    scores = {"rouge1_per_document": [example["rouge1"] for example in per_example]}
    for key in ROUGE_KEYS:
        values = [example[key] for example in per_example]
        scores[key] = sum(values) / len(values)
        scores[f"{key}_interval"] = bootstrap_interval(values)
    for source in SOURCES:
        values = [example["rouge1"] for example, origin in zip(per_example, sources) if origin == source]
        scores[f"rouge1_{source}"] = sum(values) / len(values) if values else None
    return scores


def paired_with_lead3(result: dict, lead3: dict) -> dict:
    """`result` with `rouge1_vs_lead3`: the mean per-document ROUGE-1 difference to Lead-3 (no blocking) on the same
    documents, with its 95% bootstrap interval."""
    from sumformers.text.scoring import bootstrap_interval

    differences = [a - b for a, b in zip(result["rouge1_per_document"], lead3["rouge1_per_document"])]
    result["rouge1_vs_lead3"] = sum(differences) / len(differences)
    result["rouge1_vs_lead3_interval"] = bootstrap_interval(differences)
    return result


def lead_words(sentences: list[str], count: int) -> str:
    """The document's first `count` whitespace words, one sentence a line: the Lead that writes exactly as many words
    as a model's summary of the same document, so that a comparison with it is not one of length."""
    lines, left = [], count
    for sentence in sentences:
        if left <= 0:
            break
        words = sentence.split()[:left]
        lines.append(" ".join(words))
        left -= len(words)
    return "\n".join(lines)


def paired_with_lead_words(result: dict, summaries: list[str], document_sentences: list[list[str]],
                           references: list[str]) -> dict:
    """`result` with `rouge1_vs_lead_words`: the mean per-document ROUGE-1 difference to the document's first N words,
    N = the words of the summary on the same document (`lead_words`), with its 95% bootstrap interval."""
    from sumformers.text.scoring import bootstrap_interval, rouge_per_example

    leads = [lead_words(sentences, len(summary.split())) for sentences, summary in zip(document_sentences, summaries)]
    lead_scores = [example["rouge1"] for example in rouge_per_example(leads, references)]
    differences = [a - b for a, b in zip(result["rouge1_per_document"], lead_scores)]
    result["rouge1_vs_lead_words"] = sum(differences) / len(differences)
    result["rouge1_vs_lead_words_interval"] = bootstrap_interval(differences)
    return result


def timed_summaries(summarizer, documents: list[str], **options) -> tuple[list[str], float]:
    """`summarizer(documents, **options)`'s "summary" texts and the seconds it took per document."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation warnings, one per long document
        outputs = summarizer(documents, **options)
    seconds = (time.perf_counter() - start) / len(documents)
    return [output["summary"] for output in outputs], seconds


def checkpoint_key(checkpoint: Path, configs: bool = True) -> str:
    """A digest of what a checkpoint's outputs depend on, not of its folder: cached summaries follow a checkpoint
    copied to another machine, and a retrained one gets new entries. Its weights, and with `configs` its config and
    generation config (leave them out where the cache key names every decoding setting: shipping rewrites them)."""
    digest = hashlib.sha1()
    names = ("config.json", "generation_config.json") if configs else ()
    for path in sorted(checkpoint.iterdir()):
        if path.suffix == ".safetensors" or path.name in names:
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


DECODE_CHUNK = 100  # documents one cache file holds: an interrupted decoding resumes after its last whole chunk


def cached_summaries(
    cache_dir: str, name: str, key: list, documents: list[str], load_summarizer: Callable, threads: int, **options
) -> tuple[list[str], str]:
    """A model's summaries of `documents` and its decoding time per document as "seconds (threads)" (or the device's
    name for `threads`). They are read
    and written `DECODE_CHUNK` documents at a time as `<cache_dir>/<name>-<hash of key and the chunk>.json`; a chunk
    not cached yet is summarized by `load_summarizer()` (a pipeline, loaded once and only then) with `options`. `key`
    (JSON) names everything else the summaries depend on; a cached chunk keeps the thread count it was timed with."""
    summaries, seconds, thread_counts, summarizer = [], 0.0, set(), None
    for start in range(0, len(documents), DECODE_CHUNK):
        chunk = documents[start : start + DECODE_CHUNK]
        digest = hashlib.sha1(json.dumps([*key, chunk]).encode()).hexdigest()[:12]
        cache = Path(cache_dir) / f"{name.lower().replace(' ', '_')}-{digest}.json"
        if cache.is_file():
            cached = json.loads(cache.read_text())
        else:
            if summarizer is None:
                summarizer = load_summarizer()
            chunk_summaries, chunk_seconds = timed_summaries(summarizer, chunk, **options)
            cached = {"summaries": chunk_summaries, "seconds_per_document": chunk_seconds, "threads": threads}
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(cached))
        summaries += cached["summaries"]
        seconds += cached["seconds_per_document"] * len(chunk)
        thread_counts.add(str(cached.get("threads", 1)))
    return summaries, f"{seconds / max(len(documents), 1):.2f} ({'/'.join(sorted(thread_counts))})"


def format_cell(result: dict, column: str) -> str:
    """A table cell: the value with its interval when it has one; mean words with one decimal, others with two."""
    if column == "mean_words":
        return f"{result[column]:.1f}"
    if f"{column}_interval" in result:
        low, high = result[f"{column}_interval"]
        return f"{result[column]:.2f} [{low:.2f}, {high:.2f}]"
    return f"{result[column]:.2f}"


def command_line(script: str) -> str:
    """The `Command: ` line a results table opens with (benchmarks/results_index.py reads it): this run's command."""
    return f"Command: `{shlex.join(['python', f'benchmarks/{script}', *sys.argv[1:]])}`"


def write_report(script: str, body: list[str], output: str | None) -> None:
    """Print the report (the command line that made it, then `body`) and write it to `output` when given."""
    report = "\n".join([command_line(script), "", *body])
    print(report)
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(report + "\n")


def proc_status_mib(key: str) -> float:
    """A memory figure of this process from /proc/self/status (`VmRSS`, `VmHWM`) in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def measured_run(run: Callable[[], object]) -> None:
    """Time one call of `run` and print, as the last JSON line, its seconds and its peak resident memory above what
    the process held before (`peak_mib`) and in all (`process_peak_mib`): the worker side of `measure_in_subprocess`."""
    import gc

    gc.collect()
    baseline = proc_status_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset the peak resident set (VmHWM) to the current one
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    process_peak = proc_status_mib("VmHWM")
    print(json.dumps({"seconds": seconds, "peak_mib": process_peak - baseline, "process_peak_mib": process_peak}))


def measure_in_subprocess(script: str, worker_args: list[str], threads: int, timeout: int) -> dict:
    """Run `python script --worker *worker_args` in a fresh process with `threads` threads and return the JSON its
    `measured_run` printed, or {"skipped": why} when it timed out, was killed or failed."""
    command = [sys.executable, script, "--worker", *worker_args]
    environment = dict(os.environ, OMP_NUM_THREADS=str(threads))
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {timeout} s"}
    if finished.returncode < 0:
        return {"skipped": f"killed by signal {-finished.returncode} (likely out of memory)"}
    if finished.returncode != 0:
        return {"skipped": "failed: " + (finished.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(finished.stdout.strip().splitlines()[-1])
