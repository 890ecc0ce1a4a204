"""The GPU attention table's code (`benchmarks/attention.py --device cuda`) run on the CPU at toy sizes, as
`--device cpu --tiny` does: every row builds, runs and is written, mask build and kernel timed apart."""

import os

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")

from conftest import imported_benchmark  # noqa: E402

benchmark_fixture = imported_benchmark("attention", "attention_benchmark")


def test_kernel_table_dry_run_on_cpu(attention_benchmark, tmp_path):
    cells = attention_benchmark.kernel_table("cpu", (256,), iterations=2, warmup=1, output_dir=tmp_path, tiny=True)
    table = (tmp_path / "attention_cpu_kernels.md").read_text()
    assert set(cells) == set(attention_benchmark.KERNEL_ROWS)
    for name, label in attention_benchmark.KERNEL_ROWS.items():
        assert f"| {label} | " in table
        build, forward, forward_backward = cells[name][256]
        assert forward > 0
        # a mask to build for our patterns and the dense mask only; no FlexAttention backward on CPU
        assert (build is not None) == (name in ("flex", "flex_per_call", "blocked", "sdpa_dense"))
        assert (forward_backward is None) == (name in ("flex", "flex_per_call"))
    assert "torch " in table and "transformers " in table  # the machine's versions
    # at 256 tokens the BlockMask computes every tile (block 0's band reaches key 135, block 1's back into block 0,
    # and block 0 holds the global keys), and the 4 global rows' SDPA adds 4/128 of a row of 2 tiles: 4.0625 of 4
    share = (4 + 4 / 128 * 2) / 4
    efficiency = cells["flash"][256][1] * share / cells["flex"][256][1]
    assert f"- 256 tokens: {share:.1%} of the tiles computed; forward {efficiency:.2f}\n" in table
