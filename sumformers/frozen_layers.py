"""Training with the encoder's bottom layers frozen: their token states are computed once per training document under
bfloat16 autocast and kept in a memory-mapped file (reused by later runs whose documents, encoder and depth match),
and each step runs only the layers above (`BottomLayersMixin.run_layers`). Used by the extractive and abstractive
training scripts (--frozen_layers, --bottom_state_cache)."""

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger("sumformers.training")


def _cache_key(model, features, frozen_layers: int) -> str:
    """What the cached states depend on: the encoder, the frozen depth and every document's tokens."""
    digest = hashlib.sha1(json.dumps([model.config.encoder_name_or_path, frozen_layers]).encode())
    for feature in features:
        digest.update(np.asarray(feature["input_ids"], dtype=np.int32).tobytes())
        digest.update(np.asarray(feature["token_type_ids"], dtype=np.int8).tobytes())
    return digest.hexdigest()


@torch.no_grad()
def cached_bottom_states(model, features, collate, frozen_layers: int, path: str, batch_size: int = 32) -> np.memmap:
    """[documents, tokens, hidden] bfloat16 bits (uint16) of the encoder's bottom `frozen_layers` layers for every
    training document, computed under bfloat16 autocast once and kept in `path` (reused when its key matches)."""
    path = Path(path)
    key_path = path.with_suffix(path.suffix + ".json")
    width = max(len(input_ids) for input_ids in features["input_ids"])
    shape = [len(features), width, model.config.hidden_size]
    key = _cache_key(model, features, frozen_layers)
    if path.is_file() and key_path.is_file() and json.loads(key_path.read_text()) == {"key": key, "shape": shape}:
        logger.info("bottom-layer states: reusing %s", path)
        return np.memmap(path, dtype=np.uint16, mode="r", shape=tuple(shape))
    path.parent.mkdir(parents=True, exist_ok=True)
    states = np.memmap(path, dtype=np.uint16, mode="w+", shape=tuple(shape))
    model.eval()
    for start in range(0, len(features), batch_size):
        batch = collate(features.select(range(start, min(start + batch_size, len(features)))).to_list())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bottom = model.bottom_states(
                batch["input_ids"], frozen_layers, batch["attention_mask"], batch["token_type_ids"]
            )
        bits = bottom.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        states[start : start + len(bits), : bits.shape[1]] = bits
        if start % (batch_size * 50) == 0:
            logger.info("bottom-layer states: %d / %d documents", start + len(bits), len(features))
    states.flush()
    key_path.write_text(json.dumps({"key": key, "shape": shape}))
    model.train()
    return np.memmap(path, dtype=np.uint16, mode="r", shape=tuple(shape))


class BottomStateCollator:
    """The processor's batch with the token inputs replaced by the cached bottom-layer states of its documents
    (each feature's `cache_row`)."""

    def __init__(self, collate, states: np.memmap, frozen_layers: int):
        self.collate = collate
        self.states = states
        self.frozen_layers = frozen_layers

    def __call__(self, features: list[dict]) -> dict:
        batch = self.collate(features)
        width = batch.pop("input_ids").shape[1]
        batch.pop("token_type_ids")
        rows = np.stack([self.states[feature["cache_row"], :width] for feature in features])
        batch["bottom_states"] = torch.from_numpy(rows.view(np.int16)).view(torch.bfloat16).float()
        batch["bottom_layers"] = self.frozen_layers
        return batch


def train_over_cached_states(model, features, collate, frozen_layers: int, cache_path: str | None, training_args):
    """The training features and collator for a run whose bottom `frozen_layers` encoder layers stay frozen: their
    states cached in `cache_path` (`cached_bottom_states`), each feature pointing at its row (`cache_row`)."""
    if not cache_path:
        raise ValueError("--frozen_layers needs --bottom_state_cache (a file for the cached states)")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    states = cached_bottom_states(base, features, collate, frozen_layers, cache_path)
    features = features.add_column("cache_row", list(range(len(features))))
    training_args.remove_unused_columns = False  # the collator needs `cache_row`
    return features, BottomStateCollator(collate, states, frozen_layers)


__all__ = ["BottomStateCollator", "cached_bottom_states", "train_over_cached_states"]
