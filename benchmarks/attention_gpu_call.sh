#!/usr/bin/env bash
# Issue 61's GPU call, at most about 3 minutes: the sparse attention's CUDA tests (flex against the eager reference for
# every pattern, the BlockMask built without a device-to-host sync), then the kernel table
# (`benchmarks/attention.py --device cuda`: mask build and kernel timed apart at 4k/16k/64k tokens), each under its own
# time limit; the table is rewritten after every row, so a cut call keeps what it measured. Everything lands in $OUT
# (attention_cuda.md, the two logs, the machine's versions). Nothing is carried: the machine's own torch runs it.
#   bash benchmarks/attention_gpu_call.sh                                     # there (device tool)
#   DEVICE=cpu OUT=/tmp/attention_call bash benchmarks/attention_gpu_call.sh  # its CPU dry run here (toy sizes)
set -uo pipefail
DEVICE=${DEVICE:-cuda} OUT=${OUT:-/tmp/gpu-out} TEST_SECONDS=${TEST_SECONDS:-70} TABLE_SECONDS=${TABLE_SECONDS:-100}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ "$DEVICE" = cuda ]; then
    # this checkout as a package beside the machine's torch and transformers
    export PYTHONPATH=/tmp/sumformers-site TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-16}
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/sumformers-site . \
        || exit 1
    nvidia-smi > "$OUT/machine.txt" 2>&1
fi
python3 -c "import platform, torch, transformers; print('python', platform.python_version(), 'torch', \
torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.version.cuda)" >> "$OUT/machine.txt"

# from another folder: `python -m` puts the working folder first on sys.path, where sumformers/ is only the face
repo=$PWD
(cd /tmp && timeout "$TEST_SECONDS" python3 -m pytest -v -p no:cacheprovider "$repo/tests/test_attention.py" \
    -k "cuda or gpu") > "$OUT/log_tests.txt" 2>&1
status=$?
tail -n 3 "$OUT/log_tests.txt"
echo "CUDA attention tests: exit $status (124: cut at $TEST_SECONDS s)" | tee -a "$OUT/log_tests.txt"

if [ "$DEVICE" = cuda ]; then
    table=(--device cuda)
else  # the GPU table's code at toy sizes
    table=(--device cpu --tiny --threads 1 --iterations 3 --warmup 1)
fi
timeout "$TABLE_SECONDS" python3 benchmarks/attention.py "${table[@]}" --output-dir "$OUT" \
    > "$OUT/log_table.txt" 2>&1
echo "kernel table: exit $? (124: cut at $TABLE_SECONDS s)" | tee -a "$OUT/log_table.txt"
cat "$OUT"/attention_*.md
