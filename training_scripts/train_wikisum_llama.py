"""Train WikiSum (T-D or T-DMCA) over a pretrained Llama-family decoder with LoRA (issue #58): the base model's
projections adapted by LoRA, the compressed layers' convolutions new and trained in full; the output is an adapter
folder (`load_wikisum_llama` puts it over the base again).

    python training_scripts/install_smollm2.py --output runs/smollm2-135m-instruct
    OMP_NUM_THREADS=1 python -u training_scripts/train_wikisum_llama.py --base runs/smollm2-135m-instruct \
        --train_file ../shared/data/cnn_dailymail/train.jsonl --variant T-D --max_minutes 25 \
        --output_dir runs/wikisum-smollm2

Each example is the prompt (`processing_wikisum_llama.prompt_ids`: the article's sentences ranked and cut at
--max_input_tokens, in the base model's chat template), then the summary and its end token; the loss is on the
summary tokens. Prompts are tokenized once and cached in `<output_dir>/prompts.json`. Training stops at --max_steps
or --max_minutes, whichever comes first, and the adapter is saved then (and every --save_steps). The learning rate
decays linearly to 0 over the run's steps, or with --decay_over minutes over --max_minutes of wall time (on a shared
CPU the clock, not the steps, ends a run; each step's rate is logged). --resume continues
the adapter in `<output_dir>/final` where its training log ends: the same examples in the same order (the seed's),
the learning-rate schedule at its step; the optimizer's moments start again (they are not saved).
"""

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="Llama-family folder or Hub id (SmolLM2-135M-Instruct)")
    parser.add_argument("--train_file", required=True, help="CNN/DM-style JSONL (.gz): document, summary")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--variant", choices=("T-D", "T-DMCA"), default="T-D")
    parser.add_argument("--local_block_size", type=int, default=256)
    parser.add_argument("--compression_stride", type=int, default=3)
    parser.add_argument("--max_input_tokens", type=int, default=512)
    parser.add_argument("--max_summary_tokens", type=int, default=96)
    parser.add_argument("--ranker", default="textrank")
    parser.add_argument("--limit", type=int, default=None, help="first N training articles")
    parser.add_argument("--lora_r", type=int, default=8)
    parser.add_argument("--lora_alpha", type=int, default=16)
    parser.add_argument("--lora_target_modules", nargs="+", default=["q_proj", "k_proj", "v_proj", "o_proj"],
                        help="the base's projections LoRA adapts (the MLP's: gate_proj up_proj down_proj)")
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--max_steps", type=int, default=-1, help="optimizer steps (<= 0: the epochs decide)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max_minutes", type=float, default=25.0, help="wall-clock limit of the training loop")
    parser.add_argument("--decay_over", choices=("steps", "minutes"), default="steps",
                        help="the learning rate decays linearly to 0 over the run's steps, or over --max_minutes of "
                             "wall time (a budget that ends the run before its steps would otherwise stop at a high "
                             "rate)")
    parser.add_argument("--save_steps", type=int, default=25)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--resume", action="store_true", help="continue the adapter in <output_dir>/final")
    return parser.parse_args(argv)


def cached_examples(args, tokenizer, config) -> list[dict]:
    """(prompt ids, summary ids) of every training article, tokenized once and kept in the output folder."""
    from sumformers.processing.processing_wikisum_llama import prompt_ids, summary_ids
    from sumformers.text.evaluation import read_jsonl

    cache = Path(args.output_dir) / "prompts.json"
    settings = [args.train_file, args.limit, config.max_input_tokens, config.ranker, config.input_order,
                config.instruction, args.max_summary_tokens]
    if cache.is_file():
        stored = json.loads(cache.read_text())
        if stored["settings"] == settings:
            return stored["examples"]
    rows = read_jsonl(args.train_file)[: args.limit]
    examples = [{"prompt": prompt_ids(tokenizer, config, row["document"]),
                 "summary": summary_ids(tokenizer, row["summary"])[-args.max_summary_tokens :]} for row in rows]
    cache.write_text(json.dumps({"settings": settings, "examples": examples}))
    return examples


def learning_rate_share(decay_over: str, step: int, total_steps: int, seconds: float, max_seconds: float) -> float:
    """The linear decay's share of the peak learning rate left: of the run's steps, or of its wall-clock budget (which
    ends the run where the steps may not have: a step schedule cut by the clock stops at a high rate)."""
    if decay_over == "minutes":
        return max(0.0, 1 - seconds / max_seconds)
    return max(0.0, 1 - step / max(total_steps, 1))


def batch_tensors(examples: list[dict], pad_id: int) -> dict:
    """Right-padded input ids, attention mask and labels (-100 on the prompt and the padding)."""
    length = max(len(e["prompt"]) + len(e["summary"]) for e in examples)
    ids = torch.full((len(examples), length), pad_id)
    labels = torch.full((len(examples), length), -100)
    mask = torch.zeros((len(examples), length), dtype=torch.long)
    for row, example in enumerate(examples):
        sequence = example["prompt"] + example["summary"]
        ids[row, : len(sequence)] = torch.tensor(sequence)
        labels[row, len(example["prompt"]) : len(sequence)] = torch.tensor(example["summary"])
        mask[row, : len(sequence)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def main(argv=None):
    args = parse_args(argv)
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoTokenizer

    from sumformers.configuration.configuration_wikisum_llama import WikiSumLlamaConfig, attention_layout
    from sumformers.modeling.modeling_wikisum_llama import WikiSumLlamaForCausalLM

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(args.base)
    config = WikiSumLlamaConfig.from_pretrained(
        args.base, base_model_name_or_path=args.base, local_block_size=args.local_block_size,
        compression_stride=args.compression_stride, max_input_tokens=args.max_input_tokens, ranker=args.ranker,
    )
    config.attention_layers = attention_layout(args.variant, config.num_hidden_layers)
    model = WikiSumLlamaForCausalLM.from_pretrained(
        args.base, config=config, dtype=torch.bfloat16 if args.bf16 else torch.float32
    )
    examples = cached_examples(args, tokenizer, model.config)
    lora = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=0.0,
                      target_modules=args.lora_target_modules,
                      modules_to_save=["compression"] if args.variant != "T-D" else None)
    log = []
    if args.resume:
        model = PeftModel.from_pretrained(model, output / "final", is_trainable=True).to(args.device)
        log = json.loads((output / "final" / "training_log.json").read_text())["log"]
    else:
        model = get_peft_model(model, lora).to(args.device)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"{len(examples)} examples, {trainable:,} trainable parameters, variant {args.variant}", flush=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.learning_rate)
    per_step = args.batch_size * args.gradient_accumulation_steps
    total_steps = math.ceil(len(examples) * args.epochs / per_step)
    total_steps = min(total_steps, args.max_steps) if args.max_steps > 0 else total_steps
    done = len(log)  # steps of the run resumed (0 for a new one)
    started = time.perf_counter()
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate_share(
        args.decay_over, done + step, total_steps, time.perf_counter() - started, 60 * args.max_minutes))
    order = [index for _ in range(math.ceil(args.epochs)) for index in random.sample(range(len(examples)),
                                                                                      len(examples))]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else examples[0]["summary"][-1]
    step = done
    earlier_seconds = log[-1]["seconds"] if log else 0.0
    model.train()
    while step < total_steps and time.perf_counter() - started < 60 * args.max_minutes:
        losses, rate = [], schedule.get_last_lr()[0]
        for micro in range(args.gradient_accumulation_steps):
            first = (step * args.gradient_accumulation_steps + micro) * args.batch_size
            batch = batch_tensors([examples[i] for i in order[first : first + args.batch_size]],
                                  pad_id)
            loss = model(**{key: value.to(args.device) for key, value in batch.items()}).loss
            (loss / args.gradient_accumulation_steps).backward()
            losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        step += 1
        log.append({"step": step, "loss": sum(losses) / len(losses), "learning_rate": rate,
                    "seconds": round(earlier_seconds + time.perf_counter() - started, 1)})
        print(json.dumps(log[-1]), flush=True)
        if step % args.save_steps == 0:
            save(model, output / "final", log, args, len(examples))
    save(model, output / "final", log, args, len(examples))
    print(f"trained {step - done} steps to step {step} ({step * per_step} examples in all) in "
          f"{time.perf_counter() - started:.0f} s", flush=True)


def save(model, folder: Path, log: list[dict], args, num_examples: int) -> None:
    """The adapter (LoRA weights, compressed layers' convolutions), the WikiSum config and the training log."""
    model.save_pretrained(folder)
    model.base_model.model.config.save_pretrained(folder)
    (folder / "training_log.json").write_text(json.dumps(
        {"arguments": vars(args), "train_examples": num_examples, "log": log}, indent=1))


if __name__ == "__main__":
    main()
