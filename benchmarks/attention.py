"""Speed and peak memory of sumformers' sparse attention against dense SDPA and transformers' Longformer.

Shapes: batch 1, 12 heads, head size 64, two-sided window 512, 64 global tokens (Longformer's window + global
pattern), at 4,096 / 16,384 / 32,768 tokens. Every case runs in a fresh subprocess so that peak-memory figures do not
contaminate each other; CPU memory is the peak resident set during the timed runs minus the resident set just before
them (inputs already built), CUDA memory is `torch.cuda.max_memory_allocated` above what was allocated before.

    python benchmarks/attention.py                   # CPU, 2 threads, writes benchmarks/results/attention_cpu.{md,png}
    python benchmarks/attention.py --device cuda     # GPU kernel table: benchmarks/results/attention_cuda.md
    python benchmarks/attention.py --device cpu --tiny --output-dir /tmp/x   # dry run of the GPU table's code

On the GPU (`kernel_table`), bf16, head size 64, 4,096 / 16,384 / 65,536 tokens, one process: building the mask
(pattern, layout, BlockMask or dense mask) and the kernel are timed apart with CUDA events, each the median of at
least 100 runs after warm-up, for flex, blocked, dense SDPA with the mask, SDPA without a mask (FlashAttention,
the per-block reference) and transformers' Longformer layer, forward and forward+backward, with the machine's
versions; a row that runs out of memory says so.

"Ours" cases time the attention call including building the pattern (its layout and BlockMask), which a model does
once per forward for all layers. LongformerSelfAttention includes its six projections, so the table also has
"ours, Longformer layer": the same projections around our flex attention, the like-for-like comparison.
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")

from _common import command_line  # noqa: E402

HEADS, HEAD_DIM, WINDOW, NUM_GLOBAL = 12, 64, 512, 64
LENGTHS = (4096, 16384, 32768)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
# cases slower than this are measured in one round only (the quadratic baselines at long lengths)
REPEAT_BELOW_SECONDS = 60

# name -> (label, devices it runs on)
CASES = {
    "flex_forward": ("ours: flex, forward (inference)", ("cpu", "cuda")),
    "flex_forward_backward": ("ours: flex, forward+backward", ("cuda",)),
    "blocked_forward": ("ours: blocked, forward", ("cpu", "cuda")),
    "blocked_forward_backward": ("ours: blocked, forward+backward", ("cpu", "cuda")),
    "flex_longformer_layer": ("ours: Longformer layer (projections + flex), forward", ("cpu", "cuda")),
    "longformer_forward": ("transformers LongformerSelfAttention, forward", ("cpu", "cuda")),
    "sdpa_dense_forward": ("dense SDPA, bool mask, forward", ("cpu", "cuda")),
    "sdpa_dense_forward_backward": ("dense SDPA, bool mask, forward+backward", ("cpu", "cuda")),
    "sdpa_full_forward": ("SDPA without mask (FlashAttention), forward", ("cuda",)),
    "sdpa_full_forward_backward": ("SDPA without mask (FlashAttention), forward+backward", ("cuda",)),
}


def skip_reason(case, length, device):
    if device not in CASES[case][1]:
        if case.startswith("flex") and "backward" in case:
            return "no FlexAttention backward on CPU"
        return "CUDA-only reference"
    if device == "cpu" and case == "sdpa_dense_forward_backward" and length > 16384:
        return "quadratic: about 4x the 16,384-token run, several minutes on 2 cores"
    return None


# ------------------------------------------------------------------------------------------------------------------
# Worker: one case, one length, in its own process
# ------------------------------------------------------------------------------------------------------------------


def _proc_status_mib(key):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def build_case(case, length, device, dtype):
    """Inputs for one case and a zero-argument callable that runs it once (backward included where named)."""
    import torch
    import torch.nn.functional as F
    from transformers import LongformerConfig
    from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

    from sumformers.modeling.attention import sparse_attention
    from sumformers.modeling.attention_patterns import SlidingWindowPattern

    generator = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape, requires_grad=False):
        tensor = torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)
        return tensor.requires_grad_(requires_grad)

    attention_mask = torch.ones(1, length, dtype=torch.long, device=device)
    global_mask = torch.zeros(1, length, dtype=torch.long, device=device)
    global_mask[:, :NUM_GLOBAL] = 1
    backward = case.endswith("backward")
    q, k, v = (randn(1, HEADS, length, HEAD_DIM, requires_grad=backward) for _ in range(3))
    grad_output = randn(1, HEADS, length, HEAD_DIM)

    def with_backward(forward):
        def run():
            if backward:
                forward().backward(grad_output)
            else:
                with torch.no_grad():
                    forward()

        return run

    if case in ("flex_forward", "flex_forward_backward", "blocked_forward", "blocked_forward_backward"):
        implementation = "flex_attention" if case.startswith("flex") else "blocked"
        return with_backward(
            lambda: sparse_attention(q, k, v, SlidingWindowPattern(WINDOW, attention_mask, global_mask), implementation)
        )
    if case in ("sdpa_dense_forward", "sdpa_dense_forward_backward"):
        dense_mask = SlidingWindowPattern(WINDOW, attention_mask, global_mask).dense_mask()
        return with_backward(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask))
    if case in ("sdpa_full_forward", "sdpa_full_forward_backward"):
        return with_backward(lambda: F.scaled_dot_product_attention(q, k, v))

    config = LongformerConfig(hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS, attention_window=[WINDOW])
    longformer = LongformerSelfAttention(config, layer_id=0).to(device=device, dtype=dtype).eval()
    hidden_states = randn(1, length, config.hidden_size)
    if case == "longformer_forward":
        # Longformer's mask convention: -10000 padding, 0 local, +10000 global
        longformer_mask = (global_mask * 10000.0).to(dtype)
        return with_backward(
            lambda: longformer(
                hidden_states,
                attention_mask=longformer_mask,
                is_index_masked=longformer_mask < 0,
                is_index_global_attn=longformer_mask > 0,
                is_global_attn=True,
            )[0]
        )
    if case == "flex_longformer_layer":
        global_positions = global_mask[0].nonzero()[:, 0]

        def heads(x):
            return x.view(1, -1, HEADS, HEAD_DIM).transpose(1, 2)

        def layer():
            # local rows: Longformer's local projections through our window + global pattern
            pattern = SlidingWindowPattern(WINDOW, attention_mask, global_mask)
            local = (longformer.query, longformer.key, longformer.value)
            output = sparse_attention(*(heads(layer(hidden_states)) for layer in local), pattern, "flex_attention")
            # global rows: the global projections, over every key (Longformer's second pass)
            global_query = heads(longformer.query_global(hidden_states[:, global_positions]))
            global_key = heads(longformer.key_global(hidden_states))
            global_value = heads(longformer.value_global(hidden_states))
            output[:, :, global_positions] = F.scaled_dot_product_attention(global_query, global_key, global_value)
            return output.transpose(1, 2).reshape(1, length, -1)

        return with_backward(layer)
    raise ValueError(f"unknown case {case!r}")


def run_worker(case, length, device, threads):
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    run = build_case(case, length, device, dtype)

    def synchronize():
        if device == "cuda":
            torch.cuda.synchronize()

    # Warm-up compiles flex and touches the allocator; dense attention at >= 16k is skipped here because one run
    # takes tens of seconds and warm-up effects are negligible at that size.
    if not (case.startswith("sdpa_dense") and length >= 16384):
        run()
        synchronize()
    gc.collect()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated()
    else:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # reset the peak resident set (VmHWM) to the current one
        baseline = _proc_status_mib("VmRSS")
    # best of up to 3 runs, stopping once 20 s have been spent: the machine's cores are shared
    timings = []
    while len(timings) < 3 and sum(timings) < 20:
        start = time.perf_counter()
        run()
        synchronize()
        timings.append(time.perf_counter() - start)
    if device == "cuda":
        peak_mib = (torch.cuda.max_memory_allocated() - baseline) / 2**20
    else:
        peak_mib = _proc_status_mib("VmHWM") - baseline
    print(json.dumps({"seconds": min(timings), "peak_mib": peak_mib}))


# ------------------------------------------------------------------------------------------------------------------
# Orchestration, table and plot
# ------------------------------------------------------------------------------------------------------------------


def measure(case, length, device, threads, timeout):
    command = [sys.executable, __file__, "--worker", case, str(length), "--device", device, "--threads", str(threads)]
    # A fixed mmap threshold makes glibc return every freed tensor to the system; with its default (adaptive)
    # threshold the warm-up run's memory stays resident and hides the timed run's peak.
    environment = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timed out after {timeout} s"}
    if finished.returncode != 0:
        last_line = (finished.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"failed: {last_line[:120]}"}
    return json.loads(finished.stdout.strip().splitlines()[-1])


def ratio(numerator, denominator, key):
    if "skipped" in numerator or "skipped" in denominator or denominator[key] <= 0:
        return None
    return numerator[key] / denominator[key]


def format_ratio(value):
    return "n/a" if value is None else f"{value:.1f}x"


def render(results, device, lengths, threads, rounds):
    header = "| case | " + " | ".join(f"{n:,} tokens" for n in lengths) + " |"
    lines = [
        f"# Sparse attention benchmark ({device}, {threads} threads)",
        "",
        command_line("attention.py"),
        "",
        f"batch 1, {HEADS} heads, head size {HEAD_DIM}, window {WINDOW} (two-sided), {NUM_GLOBAL} global tokens; "
        f"each cell: best time over up to {rounds} interleaved subprocess rounds of up to 3 runs each / peak memory "
        "above the inputs.",
        "",
        header,
        "|" + "---|" * (len(lengths) + 1),
    ]
    for case, (label, _) in CASES.items():
        cells = []
        for n in lengths:
            result = results[case][n]
            cells.append(
                f"skipped ({result['skipped']})"
                if "skipped" in result
                else f"{result['seconds']:.3f} s / {result['peak_mib']:.0f} MiB"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    longformer, layer, dense_training = "longformer_forward", "flex_longformer_layer", "sdpa_dense_forward_backward"
    comparisons = [
        ("LongformerSelfAttention time / flex forward time", longformer, "flex_forward", "seconds"),
        ("LongformerSelfAttention memory / flex forward memory", longformer, "flex_forward", "peak_mib"),
        ("LongformerSelfAttention time / our Longformer layer time", longformer, layer, "seconds"),
        ("LongformerSelfAttention memory / our Longformer layer memory", longformer, layer, "peak_mib"),
        ("dense SDPA fwd+bwd time / blocked fwd+bwd time", dense_training, "blocked_forward_backward", "seconds"),
        ("dense SDPA fwd time / blocked fwd time", "sdpa_dense_forward", "blocked_forward", "seconds"),
        ("dense SDPA fwd time / flex fwd time", "sdpa_dense_forward", "flex_forward", "seconds"),
    ]
    lines += ["", "## Ratios (higher is better for ours)", ""]
    lines.append("| ratio | " + " | ".join(f"{n:,}" for n in lengths) + " |")
    lines.append("|" + "---|" * (len(lengths) + 1))
    for title, numerator, denominator, key in comparisons:
        cells = [format_ratio(ratio(results[numerator][n], results[denominator][n], key)) for n in lengths]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")

    if 16384 in lengths:
        at = {case: results[case][16384] for case in results}
        targets = [
            ("flex forward >= 5x faster than LongformerSelfAttention",
             ratio(at["longformer_forward"], at["flex_forward"], "seconds"), 5.0),
            ("flex forward peak memory <= 1/10 of LongformerSelfAttention's",
             ratio(at["longformer_forward"], at["flex_forward"], "peak_mib"), 10.0),
            ("blocked forward+backward >= 5x faster than dense SDPA forward+backward",
             ratio(at["sdpa_dense_forward_backward"], at["blocked_forward_backward"], "seconds"), 5.0),
        ]
        lines += ["", "## Targets at 16,384 tokens", ""]
        for title, value, needed in targets:
            verdict = "n/a" if value is None else ("met" if value >= needed else "NOT met")
            lines.append(f"- {title}: {format_ratio(value)} ({verdict})")
    return "\n".join(lines) + "\n"


def plot(results, device, lengths, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(13, 5))
    for case, (label, _) in CASES.items():
        measured = [(n, results[case][n]) for n in lengths if "skipped" not in results[case][n]]
        if not measured:
            continue
        xs = [n for n, _ in measured]
        style = "-o" if case.startswith(("flex", "blocked")) else "--s"
        time_axes.plot(xs, [r["seconds"] for _, r in measured], style, label=label)
        memory_axes.plot(xs, [max(r["peak_mib"], 1.0) for _, r in measured], style, label=label)
    for axes, ylabel in ((time_axes, "seconds"), (memory_axes, "peak memory above inputs (MiB)")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(list(lengths), [f"{n:,}" for n in lengths])
        axes.set_xlabel("sequence length (tokens)")
        axes.set_ylabel(ylabel)
        axes.grid(True, which="both", alpha=0.3)
    time_axes.legend(fontsize=7)
    figure.suptitle(f"Sparse attention, window {WINDOW} + {NUM_GLOBAL} globals, {HEADS} heads x {HEAD_DIM} ({device})")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


# ------------------------------------------------------------------------------------------------------------------
# GPU kernel table: mask build and kernel timed apart
# ------------------------------------------------------------------------------------------------------------------

KERNEL_LENGTHS = (4096, 16384, 65536)
# name -> label; each row gives (build, forward, forward + backward) callables (build None: nothing to build)
KERNEL_ROWS = {
    "flex": "ours: flex_attention (BlockMask from the layout, built uncached)",
    "flex_per_call": "ours: flex_attention, pattern made per call (BlockMask from the cache)",
    "blocked": "ours: blocked",
    "sdpa_dense": "dense SDPA with the pattern's bool mask",
    "flash": "SDPA without mask (FlashAttention), the per-block reference",
    "longformer": "transformers LongformerSelfAttention (projections included)",
}


def timer(device):
    """A function that times `run` (median milliseconds of `iterations` runs after `warmup`): CUDA events on the
    GPU, so that only the device's work is counted, the wall clock on the CPU."""
    import statistics

    import torch

    def timed(run, iterations, warmup):
        for _ in range(warmup):
            run()
        times = []
        for _ in range(iterations):
            if device == "cuda":
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                stop.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(stop))
            else:
                started = time.perf_counter()
                run()
                times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)

    return timed


def kernel_rows(length, device, dtype, window, num_global, heads):
    """{row: (build, forward, forward_backward)} at `length` tokens; build makes the row's mask (afresh, or for
    `flex_per_call` from the cache, as a model's repeated forward does)."""
    import torch
    import torch.nn.functional as F
    from transformers import LongformerConfig
    from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

    from sumformers.modeling.attention import sparse_attention
    from sumformers.modeling.attention_patterns import SlidingWindowPattern
    from sumformers.modeling.block_masks import clear_block_mask_cache

    generator = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype).requires_grad_()

    attention_mask = torch.ones(1, length, dtype=torch.long, device=device)
    global_mask = torch.zeros(1, length, dtype=torch.long, device=device)
    global_mask[:, :num_global] = 1
    q, k, v = (randn(1, heads, length, HEAD_DIM) for _ in range(3))

    def pattern():
        return SlidingWindowPattern(window, attention_mask, global_mask)

    def uncached_block_mask():  # what a new shape or new padding costs
        clear_block_mask_cache()
        return pattern().flex_block_mask()

    built = {"flex": pattern(), "blocked": pattern()}
    built["flex"].flex_block_mask()
    built["blocked"].layout()
    dense_mask = pattern().dense_mask()

    def forward_and_backward(forward):
        def forward_only():
            with torch.no_grad():
                forward()

        return forward_only, lambda: forward().float().sum().backward()

    rows = {
        "flex": (uncached_block_mask,
                 # detached for the forward: CPU flex refuses inputs that require gradients even under no_grad
                 lambda: sparse_attention(q.detach(), k.detach(), v.detach(), built["flex"], "flex_attention"),
                 # no FlexAttention backward on CPU (sumformers would run "blocked" there)
                 forward_and_backward(lambda: sparse_attention(q, k, v, built["flex"], "flex_attention"))[1]
                 if device == "cuda" else None),
        # a model's repeated forward: the pattern made again from the same inputs, the BlockMask a cache hit
        "flex_per_call": (lambda: pattern().flex_block_mask(),
                          lambda: sparse_attention(q.detach(), k.detach(), v.detach(), pattern(), "flex_attention"),
                          forward_and_backward(lambda: sparse_attention(q, k, v, pattern(), "flex_attention"))[1]
                          if device == "cuda" else None),
        "blocked": (lambda: pattern().layout(),
                    *forward_and_backward(lambda: sparse_attention(q, k, v, built["blocked"], "blocked"))),
        "sdpa_dense": (lambda: pattern().dense_mask(),
                       *forward_and_backward(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask))),
        "flash": (None, *forward_and_backward(lambda: F.scaled_dot_product_attention(q, k, v))),
    }
    config = LongformerConfig(hidden_size=heads * HEAD_DIM, num_attention_heads=heads, attention_window=[window])
    longformer = LongformerSelfAttention(config, layer_id=0).to(device=device, dtype=dtype)
    hidden_states = randn(1, length, config.hidden_size)
    longformer_mask = (global_mask * 10000.0).to(dtype)  # -10000 padding, 0 local, +10000 global
    rows["longformer"] = (None, *forward_and_backward(lambda: longformer(
        hidden_states, attention_mask=longformer_mask, is_index_masked=longformer_mask < 0,
        is_index_global_attn=longformer_mask > 0, is_global_attn=True,
    )[0]))  # fmt: skip
    return rows


def computed_tile_share(length, device, window, num_global):
    """The share of the 128 x 128 tiles flex's layer computes for the benchmark's pattern at `length`: the BlockMask's
    tiles (partial or full), plus the global rows' dense SDPA counted as its rows' share of a row of tiles."""
    import torch

    from sumformers.modeling.attention_patterns import SlidingWindowPattern
    from sumformers.modeling.block_masks import FLEX_BLOCK

    attention_mask = torch.ones(1, length, dtype=torch.long, device=device)
    global_mask = torch.zeros(1, length, dtype=torch.long, device=device)
    global_mask[:, :num_global] = 1
    pattern = SlidingWindowPattern(window, attention_mask, global_mask)
    block_mask = pattern.flex_block_mask()
    query_tiles, key_tiles = block_mask.kv_indices.shape[-2:]
    computed = float(block_mask.kv_num_blocks.sum() + block_mask.full_kv_num_blocks.sum())
    if pattern.dense_rows_outside_flex:
        computed += num_global / FLEX_BLOCK * key_tiles
    return computed / (query_tiles * key_tiles)


def kernel_table(device, lengths, iterations, warmup, output_dir, tiny=False):
    import platform

    import torch
    import transformers

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    window, num_global, heads = (16, 4, 2) if tiny else (WINDOW, NUM_GLOBAL, HEADS)
    timed = timer(device)
    cells = {name: {} for name in KERNEL_ROWS}
    shares = {n: computed_tile_share(n, device, window, num_global) for n in lengths}
    machine = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"attention_{device}_kernels.md" if device != "cuda" else output_dir / "attention_cuda.md"

    def write_table():  # after every row, so that a call cut by its time limit keeps what it measured
        lines = [
            f"# Sparse attention kernels ({device}: {machine})",
            "",
            command_line("attention.py"),
            "",
            f"torch {torch.__version__}, transformers {transformers.__version__}, CUDA {torch.version.cuda}, Python "
            f"{platform.python_version()}; {dtype}, batch 1, {heads} heads, head size {HEAD_DIM}, window {window} "
            f"(two-sided), {num_global} global tokens. Each cell: median milliseconds of {iterations} runs after "
            f"{warmup} warm-up runs, mask build / forward / forward+backward (the kernel with the mask already "
            "built, except where the row says the pattern is made per call).",
            "",
            "| case | " + " | ".join(f"{n:,} tokens" for n in lengths) + " |",
            "|" + "---|" * (len(lengths) + 1),
        ]
        for name, label in KERNEL_ROWS.items():
            row = []
            for n in lengths:
                cell = cells[name].get(n, "not reached")
                row.append(
                    cell if isinstance(cell, str) else " / ".join("-" if t is None else f"{t:.2f}" for t in cell)
                )
            lines.append(f"| {label} | " + " | ".join(row) + " |")
        # issue 61's target: per computed tile, flex at least 85% of FlashAttention's dense throughput
        lines += [
            "",
            "Per computed tile, flex's throughput over FlashAttention's (FlashAttention's time x the share of tiles "
            "flex computes / flex's time; target at least 0.85):",
            "",
        ]
        for n in lengths:
            efficiency = []
            for kind, column in (("forward", 1), ("forward+backward", 2)):
                flex, flash = cells["flex"].get(n), cells["flash"].get(n)
                if isinstance(flex, tuple) and isinstance(flash, tuple) and flex[column] and flash[column]:
                    efficiency.append(f"{kind} {flash[column] * shares[n] / flex[column]:.2f}")
            lines.append(f"- {n:,} tokens: {shares[n]:.1%} of the tiles computed; " + (", ".join(efficiency) or "-"))
        path.write_text("\n".join(lines) + "\n")
        return path.read_text()

    for length in lengths:
        for name, (build, forward, forward_backward) in kernel_rows(
            length, device, dtype, window, num_global, heads
        ).items():
            try:
                runs = (build, forward, forward_backward)
                cells[name][length] = tuple(None if run is None else timed(run, iterations, warmup) for run in runs)
            except torch.OutOfMemoryError:
                cells[name][length] = "out of memory"
                torch.cuda.empty_cache()
            print(f"{length:>6} {KERNEL_ROWS[name]}: {cells[name][length]}", flush=True)
            write_table()
    print(write_table() + f"wrote {path}")
    return cells


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads per case")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed per case")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved measurements per case; the best is kept")
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true", help="the GPU table's code at toy sizes (a CPU dry run)")
    parser.add_argument("--iterations", type=int, default=100, help="timed runs per cell of the GPU table")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    if args.worker:
        run_worker(args.worker[0], int(args.worker[1]), args.device, args.threads)
        return
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda needs a CUDA GPU")
    if args.device == "cuda" or args.tiny:
        import torch

        torch.set_num_threads(args.threads)
        lengths = (256, 512) if args.tiny else tuple(args.lengths if args.lengths != list(LENGTHS) else KERNEL_LENGTHS)
        kernel_table(args.device, lengths, args.iterations, args.warmup, args.output_dir, tiny=args.tiny)
        return

    results = {case: {} for case in CASES}
    for length in args.lengths:
        # rounds interleave the cases, so that a burst of load from other users does not land on one case only
        for round_number in range(1, args.rounds + 1):
            for case, (label, _) in CASES.items():
                best = results[case].get(length)
                if best is not None and ("skipped" in best or best["seconds"] > REPEAT_BELOW_SECONDS):
                    continue
                reason = skip_reason(case, length, args.device)
                if reason:
                    result = {"skipped": reason}
                else:
                    result = measure(case, length, args.device, args.threads, args.timeout)
                if best is None or ("skipped" not in result and result["seconds"] < best["seconds"]):
                    results[case][length] = result
                shown = f"skipped ({result['skipped']})" if "skipped" in result else (
                    f"{result['seconds']:.3f} s, {result['peak_mib']:.0f} MiB"
                )
                print(f"{length:>6} round {round_number} {label}: {shown}", flush=True)

    table = render(results, args.device, args.lengths, args.threads, args.rounds)
    print("\n" + table)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / f"attention_{args.device}.md").write_text(table)
    plot(results, args.device, args.lengths, args.output_dir / f"attention_{args.device}.png")
    print(f"wrote {args.output_dir / f'attention_{args.device}.md'} and .png")


if __name__ == "__main__":
    main()
