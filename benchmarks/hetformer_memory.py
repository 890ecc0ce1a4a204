"""Peak memory and time of one pass (batch 1) of HetFormer against a full-attention encoder and transformers'
LongformerModel of the same size (the paper's Table 3), at 512, 4,096 and 16,384 tokens, on CPU.

All models have MiniLM-L6's size (6 layers, hidden 384, 12 heads, feed-forward 1536, positions tiled to 16,384) and
random weights. HetFormer runs its default windows (32 growing to 512 tokens on each side, two-sided 64, 128, 256,
256, 512, 1024) with a sentence node every 20 tokens and an entity mention every 40 tokens (50 clusters), close to
the QMSum transcripts' density; Longformer runs the same per-layer windows (matched: its `attention_window` is
HetFormer's two-sided `attention_windows`) and no global tokens. The full-attention encoder is BertModel with eager
attention (the score matrices are materialized, as in the paper's BERT) and with SDPA (a fused, flash-style CPU
kernel: little memory, quadratic time).

Each case runs in a fresh subprocess. Memory is the resident set: `peak` is the highest resident set during the
measured pass minus the resident set just before it (weights and inputs already in memory), `process peak` the
highest resident set of the whole process during the pass (Python, libraries and weights included). Training steps
are forward + backward with every parameter trainable (no optimizer state), with and without gradient checkpointing
(each layer's activations recomputed in the backward pass, as `train_hetformer.py --gradient_checkpointing` trains).
HetFormer's training loss is its sentence-classification loss; Longformer's the mean of its last hidden states.

    # writes benchmarks/results/hetformer_memory.{md,json,png}
    OMP_NUM_THREADS=1 python benchmarks/hetformer_memory.py
"""

import argparse
import json
import os
from pathlib import Path

from _common import measure_in_subprocess, measured_run

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

LENGTHS = (512, 4096, 16384)
MAX_POSITIONS = 16384
SIZE = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536, vocab_size=30522)
SENTENCE_EVERY, MENTION_EVERY, CLUSTERS = 20, 40, 50
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# name -> label
CASES = {
    "hetformer_blocked": "HetFormer, blocked backend, forward",
    "hetformer_flex": "HetFormer, flex_attention (compiled), forward",
    "hetformer_blocked_train": "HetFormer, blocked backend, forward + backward",
    "hetformer_blocked_train_checkpointed": "HetFormer, blocked backend, forward + backward, gradient checkpointing",
    "full_eager": "full attention (BertModel, eager), forward",
    "full_sdpa": "full attention (BertModel, SDPA kernel), forward",
    "longformer": "LongformerModel (same windows), forward",
    "longformer_train": "LongformerModel (same windows), forward + backward",
    "longformer_train_checkpointed": "LongformerModel (same windows), forward + backward, gradient checkpointing",
}
# Cases that cannot run here, with the reason printed in the table.
SKIPPED = {
    ("full_eager", 16384): "scores alone take 12 GiB per layer (12 heads x 16,384^2 x 4 bytes)",
    # Sentence nodes sit in every 128-token tile, so the node pattern's BlockMask has every tile: flex does the full
    # quadratic work there (and recompiles per length); at 4,096 tokens it is already several times slower than blocked.
    ("hetformer_flex", 16384): "quadratic on CPU here (node tiles everywhere): over 15 min, stopped",
}
# HetFormer against Longformer with the same windows: (HetFormer case, Longformer case, what is measured)
PAIRS = (
    ("hetformer_blocked", "longformer", "forward"),
    ("hetformer_blocked_train", "longformer_train", "forward + backward"),
    ("hetformer_blocked_train_checkpointed", "longformer_train_checkpointed",
     "forward + backward, gradient checkpointing"),
)


def hetformer_inputs(length):
    import torch

    from sumformers.modeling.hetformer_graph import HeterogeneousGraph

    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, 29000, (1, length), generator=generator)
    node_types = torch.zeros(1, length, dtype=torch.long)
    cls_positions = torch.arange(0, length, SENTENCE_EVERY)[None]
    node_types[0, cls_positions[0]] = HeterogeneousGraph.SENTENCE
    entity_ids = torch.full((1, length), -1)
    mentions = torch.arange(SENTENCE_EVERY // 2, length, MENTION_EVERY)
    entity_ids[0, mentions] = torch.arange(len(mentions)) % CLUSTERS
    return dict(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        token_type_ids=torch.zeros_like(input_ids),
        node_types=node_types,
        entity_ids=entity_ids,
        cls_positions=cls_positions,
        sentence_mask=torch.ones_like(cls_positions, dtype=torch.bool),
        labels=(torch.arange(cls_positions.shape[1]) % 10 == 0).float()[None],
    )


def build_case(case, length):
    """A zero-argument callable that runs the case once."""
    import torch
    from transformers import BertConfig, BertModel, LongformerConfig, LongformerModel

    from sumformers import HetFormerConfig, HetFormerForExtractiveSummarization

    torch.manual_seed(0)
    if case.startswith("hetformer"):
        # attention dropout 0, as train_hetformer.py trains: CPU SDPA has no fused kernel with dropout, and its
        # fallback keeps every block's score matrix for the backward pass
        encoder = BertConfig(**SIZE, max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
                             attention_probs_dropout_prob=0.0)
        implementation = "flex_attention" if case == "hetformer_flex" else "blocked"
        model = HetFormerForExtractiveSummarization._from_config(
            HetFormerConfig(encoder_config=encoder), attn_implementation=implementation
        )
        inputs = hetformer_inputs(length)
        if case.startswith("hetformer_blocked_train"):
            model.train()
            # what `train_hetformer.py --gradient_checkpointing` does: keep layer inputs
            if case.endswith("checkpointed"):
                model.activation_checkpointing_enable()  # transformers 5: non-reentrant
            return lambda: model(**inputs).loss.backward()
        model.eval()
        inputs.pop("labels")
    elif case.startswith("full"):
        config = BertConfig(**SIZE, max_position_embeddings=MAX_POSITIONS)
        model = BertModel._from_config(config, attn_implementation=case.removeprefix("full_")).eval()
        input_ids = torch.randint(1000, 29000, (1, length))
        inputs = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
    else:
        config = LongformerConfig(
            **SIZE, max_position_embeddings=MAX_POSITIONS + 2, attention_window=HetFormerConfig(
                encoder_config=BertConfig(**SIZE)).attention_windows,
            attention_probs_dropout_prob=0.0,
        )
        model = LongformerModel(config, add_pooling_layer=False).eval()
        input_ids = torch.randint(1000, 29000, (1, length))
        inputs = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
        if case.startswith("longformer_train"):
            model.train()
            if case.endswith("checkpointed"):
                model.gradient_checkpointing_enable()
            return lambda: model(**inputs).last_hidden_state.mean().backward()

    def forward():
        with torch.no_grad():
            model(**inputs)

    return forward


def run_worker(case, length):
    run = build_case(case, length)
    if case == "hetformer_flex":
        run()  # compiles the kernels (tens of seconds, and compiler memory not part of a forward pass)
    measured_run(run)


def measure(case, length, threads, timeout):
    if (case, length) in SKIPPED:
        return {"skipped": SKIPPED[case, length]}
    return measure_in_subprocess(__file__, [case, str(length)], threads, timeout)


def table(results) -> str:
    lines = [
        "| model | tokens | time (s) | peak (MiB) | process peak (MiB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for case, label in CASES.items():
        for length in LENGTHS:
            result = results[case][str(length)]
            if "skipped" in result:
                lines.append(f"| {label} | {length:,} | - | - | skipped: {result['skipped']} |")
            else:
                lines.append(
                    f"| {label} | {length:,} | {result['seconds']:.2f} | {result['peak_mib']:,.0f} | "
                    f"{result['process_peak_mib']:,.0f} |"
                )
    return "\n".join(lines)


def ratio_lines(results) -> list[str]:
    """HetFormer / Longformer time and memory at 4,096 and 16,384 tokens (below 1: HetFormer is faster/smaller)."""
    lines = []
    for het_case, longformer_case, what in PAIRS:
        for length in (4096, 16384):
            het, longformer = results[het_case][str(length)], results[longformer_case][str(length)]
            if "seconds" not in het or "seconds" not in longformer:
                continue
            lines.append(
                f"- {what}, {length:,} tokens: HetFormer {het['seconds']:.2f} s vs Longformer "
                f"{longformer['seconds']:.2f} s (time ratio {het['seconds'] / longformer['seconds']:.2f}); peak "
                f"{het['peak_mib']:,.0f} vs {longformer['peak_mib']:,.0f} MiB "
                f"(ratio {het['peak_mib'] / longformer['peak_mib']:.2f})."
            )
    return lines


def target_lines(results) -> list[str]:
    def peak(case, length, key="peak_mib"):
        return results[case][str(length)].get(key)

    lines = []
    het, full = peak("hetformer_blocked", 4096), peak("full_eager", 4096)
    if het is not None and full is not None:
        verdict = "met" if het <= full / 2 else "NOT met"
        lines.append(f"- 4,096 tokens: HetFormer {het:,.0f} MiB vs full attention (eager) {full:,.0f} MiB: "
                     f"{het / full:.2f}x, target <= 0.5x {verdict}.")
    for case, budget, what in (
        ("hetformer_blocked", 2048, "inference"),
        ("hetformer_blocked_train", 8192, "training step"),
        ("hetformer_blocked_train_checkpointed", 8192, "training step with gradient checkpointing"),
    ):
        total = peak(case, 16384, "process_peak_mib")
        if total is not None:
            verdict = "met" if total <= budget else "NOT met"
            lines.append(f"- 16,384 tokens, {what}: process peak {total:,.0f} MiB (everything included), "
                         f"target <= {budget:,} MiB {verdict}.")
    return lines


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for case, label in CASES.items():
        points = [(n, results[case][str(n)]["peak_mib"]) for n in LENGTHS if "peak_mib" in results[case][str(n)]]
        if points:
            style = "--" if "train" in case else "-"
            axis.plot(*zip(*points), style, marker="o", label=label)
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xticks(LENGTHS, [f"{n:,}" for n in LENGTHS])
    axis.set_xlabel("input tokens (batch 1)")
    axis.set_ylabel("peak resident memory above the loaded model (MiB)")
    axis.set_title("HetFormer vs full attention and Longformer (MiniLM-L6 size, CPU)")
    axis.legend(fontsize=7)
    axis.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    parser.add_argument("--timeout", type=int, default=1200, help="Seconds per case.")
    parser.add_argument("--output", default=str(RESULTS_DIR / "hetformer_memory"), help="Path without extension.")
    parser.add_argument("--cases", nargs="+", choices=CASES, help="Re-measure only these, keeping the other results.")
    args = parser.parse_args()
    if args.worker:
        run_worker(args.worker[0], int(args.worker[1]))
        return

    output = Path(args.output)
    previous = output.with_suffix(".json")
    results = json.loads(previous.read_text()) if args.cases and previous.is_file() else {}
    for (case, length), reason in SKIPPED.items():  # kept results follow the current reasons too
        results.setdefault(case, {})[str(length)] = {"skipped": reason}
    cases = list(args.cases or CASES)
    for case in cases:
        results[case] = {}
    # length by length, each HetFormer case right before its Longformer counterpart, so that the load of other jobs
    # on shared cores weighs on both sides of a ratio alike
    order = [case for pair in PAIRS for case in pair[:2]] + list(CASES)
    for length in LENGTHS:
        for case in sorted(cases, key=order.index):
            results[case][str(length)] = measure(case, length, args.threads, args.timeout)
            print(case, length, results[case][str(length)], flush=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    report = "\n".join([
        "HetFormer against LongformerModel of the same size with the same per-layer windows (two-sided 64, 128, "
        "256, 256, 512, 1024, i.e. HetFormer's default 32 to 512 on each side), measured in this run:",
        "",
        *ratio_lines(results),
        "",
        f"Command: `OMP_NUM_THREADS={args.threads} python benchmarks/hetformer_memory.py` "
        f"(CPU, {args.threads} thread(s), "
        "cores shared with other jobs: compare times only within this table).",
        *(
            [f"Re-measured in a later run: `--cases {' '.join(args.cases)}`; the other rows come from the earlier run, "
             "so compare their times with care."]
            if args.cases else []
        ),
        "",
        table(results),
        "",
        *target_lines(results),
    ])
    output.with_suffix(".md").write_text(report + "\n")
    output.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, output.with_suffix(".png"))
    print(report)


if __name__ == "__main__":
    main()
