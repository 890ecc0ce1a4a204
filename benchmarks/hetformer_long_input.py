"""ROUGE, time and memory against input length (#62's long-input table): HetFormer reading the first L tokens of each
meeting (L from --lengths, 1k-16k by default) against BERTSum truncated at 512 tokens and Lead-k, on QMSum meetings.
HetFormer reads meeting units (`text.sentences.meeting_units`); every system skips filler when choosing.

    # the table (hours on 2 shared cores; a GPU-trained checkpoint is what it is meant for)
    python benchmarks/hetformer_long_input.py --model checkpoints/hetformer-minilm-qmsum --start 10
    # a dry run at tiny scale
    python benchmarks/hetformer_long_input.py --lengths 256 512 --start 10 --max_samples 1 --output /tmp/long_input

Per length: ROUGE-1/2/Lsum over the meetings, the model's seconds per meeting (preprocessing and forward) and the
peak resident set above what the process held before that length (`VmHWM` reset per length, MiB).
"""

import argparse
import json
import time
import warnings
from pathlib import Path

from _common import proc_status_mib, setup_runtime

RESULTS_DIR = Path(__file__).resolve().parent / "results"
K = 11  # QMSum's summary length in sentences (quality_hetformer.py)


def measured(function):
    """`function()`'s result, seconds and peak resident set above the one before it (MiB)."""
    baseline = proc_status_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset VmHWM to the current resident set
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start, proc_status_mib("VmHWM") - baseline


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="checkpoints/hetformer-minilm-qmsum")
    parser.add_argument("--bertsum", default="checkpoints/bertsum-minilm-cnndm")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--start", type=int, default=10, help="First validation meeting (0-9: development).")
    parser.add_argument("--max_samples", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=str(RESULTS_DIR / "hetformer_long_input"), help="Path without extension.")
    args = parser.parse_args()
    setup_runtime(args.threads)
    from sumformers.hub import load_pipeline
    from sumformers.text.evaluation import data_dir, read_jsonl
    from sumformers.text.scoring import rouge_scores
    from sumformers.text.sentences import document_texts, lead_k, split_sentences

    stop = args.start + args.max_samples if args.max_samples else None
    examples = read_jsonl(data_dir() / "qmsum" / "validation.jsonl")[args.start : stop]
    texts = [document_texts(example["document"], strip_markup=True)[0] for example in examples]
    references = [example["summary"] for example in examples]
    warnings.simplefilter("ignore")  # one truncation warning per meeting and length
    rows = {}
    lead = [split_sentences(text) for text in texts]
    rows[f"Lead-{K}"] = (["\n".join(s[i] for i in lead_k(s, K)) for s in lead], None, None)
    bertsum = load_pipeline(args.bertsum)
    summaries, seconds, peak = measured(lambda: [out["summary"] for out in bertsum(texts, num_sentences=K)])
    rows["BERTSum (512 tokens)"] = (summaries, seconds / len(texts), peak)
    hetformer = load_pipeline(args.model)
    hetformer(texts[0], num_sentences=K, max_length=min(args.lengths))  # loads spaCy outside the measured lengths
    for length in args.lengths:
        summaries, seconds, peak = measured(lambda length=length: [
            hetformer(text, num_sentences=K, max_length=length)["summary"] for text in texts])
        rows[f"HetFormer ({length:,} tokens)"] = (summaries, seconds / len(texts), peak)

    lines = [
        f"### QMSum validation[{args.start}:{args.start + len(examples)}]: {len(examples)} meetings, k = {K}, "
        f"{args.threads} thread(s)",
        "",
        "| system | ROUGE-1 | ROUGE-2 | ROUGE-Lsum | seconds / meeting | peak MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    table = {}
    for name, (summaries, seconds, peak) in rows.items():
        scores = rouge_scores(summaries, references)
        table[name] = {**scores, "seconds_per_meeting": seconds, "peak_mib": peak}
        cost = "| - | - |" if seconds is None else f"| {seconds:.1f} | {peak:.0f} |"
        lines.append(f"| {name} | {scores['rouge1']:.2f} | {scores['rouge2']:.2f} | {scores['rougeLsum']:.2f} {cost}")
    report = "\n".join(lines)
    print(report)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.with_suffix(".md").write_text(report + "\n")
    output.with_suffix(".json").write_text(json.dumps({"ids": [e["id"] for e in examples], "rows": table}, indent=2))


if __name__ == "__main__":
    main()
