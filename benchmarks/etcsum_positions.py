"""Does a new ETCSum learn where the oracle sentences stand? A short CPU training of the non-stepwise ETCSum in each
long-token position design, from the bundled MiniLM, on the first articles of a feature file (`train_stepwise.py
--save_features`), printing every 5 steps the loss and the gap between the mean logit of the oracle sentences and
that of the others (0 at initialisation; it grows once the model tells the lead sentences from the rest).

    python benchmarks/etcsum_positions.py --features_file runs/train_large_features.npz.xz --steps 60

The recipe is the GPU recipe's, scaled down: LoRA r=32 (alpha 64) on query/key/value/dense, the new modules in
full, AdamW lr 5e-4 (no weight decay) after 10 warm-up steps, gradients clipped at 1, random batches of
`--batch_size` articles.
"""

import argparse
import json
import random
import time
from types import SimpleNamespace

import torch

from sumformers.feature_files import load_features
from sumformers.modeling.pretrained_encoder import resolve_encoder
from sumformers.registry import ARCHITECTURES
from sumformers.training import apply_lora

DESIGNS = {
    "tiled": {"long_position_embeddings": "tiled"},
    "none": {"long_position_embeddings": "none"},
    "tiled-bias": {"long_position_embeddings": "tiled", "relative_attention": "bias"},
}
MODEL_INPUTS = ("input_ids", "cls_positions", "sentence_mask", "attention_mask", "token_type_ids", "labels")


def logit_gap(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean logit of the oracle sentences minus that of the other real sentences."""
    return (logits[labels == 1].mean() - logits[labels == 0].mean()).item()


def train(design: str, features: list[dict], steps: int, batch_size: int, learning_rate: float) -> list[dict]:
    torch.manual_seed(0)
    sample = random.Random(0)
    encoder = resolve_encoder("minilm")
    model = ARCHITECTURES["etcsum"].model_class.from_encoder(
        encoder, encoder_name_or_path="minilm", max_sentence_tokens=36, max_document_sentences=64, **DESIGNS[design]
    )
    from transformers import AutoTokenizer

    processor = model.processor_class(AutoTokenizer.from_pretrained(encoder), model.config)
    lora = SimpleNamespace(use_lora=True, model_name_or_path="minilm", lora_r=32, lora_alpha=64, lora_dropout=0.05,
                           lora_target_modules="query,key,value,dense", lora_layers=None)
    model = apply_lora(model, lora)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))
    model.train()
    started, log = time.monotonic(), []
    for step in range(steps):
        batch = processor.collate(sample.sample(features, batch_size))
        output = model(**{name: value for name, value in batch.items() if name in MODEL_INPUTS})
        output.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 5 == 0 or step == steps - 1:
            entry = {"design": design, "step": step, "loss": round(output.loss.item(), 4),
                     "gap": round(logit_gap(output.logits.detach(), batch["labels"]), 3),
                     "seconds": round(time.monotonic() - started)}
            print(json.dumps(entry), flush=True)
            log.append(entry)
    return log


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features_file", required=True)
    parser.add_argument("--designs", default="tiled,none", help=f"comma-separated of {sorted(DESIGNS)}")
    parser.add_argument("--documents", type=int, default=2000, help="articles drawn from (the file's first)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--max_length", type=int, default=384, help="layout tokens kept per article")
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    args = parser.parse_args()
    features = load_features(args.features_file, max_length=args.max_length)[: args.documents]
    features = [feature for feature in features if feature["oracle"]]
    for design in args.designs.split(","):
        train(design, features, args.steps, args.batch_size, args.learning_rate)


if __name__ == "__main__":
    main()
