"""Training over the frozen parts of a model, computed once per training document (in batches, without gradients;
under bfloat16 autocast where bfloat16 is native: a GPU, or a CPU with AVX512-BF16 or AMX; else in float32, several
times faster where bfloat16 is emulated) and kept as bfloat16 bits in a memory-mapped file that later runs reuse when
its key matches (a `<file>.json` beside it: a digest of what the values depend on, every document's tokens included):

- the encoder's bottom layers (--frozen_layers K with --bottom_state_cache; the extractive and abstractive scripts):
  [documents, tokens, hidden], each step running only the layers above (`BottomLayersMixin.run_layers`);
- the frozen windowed BERT of the CopyTransformer's BERT-conditioned variants (--bert_feature_cache; the abstractive
  script): [tokens of all documents, 4 * BERT hidden] in one ragged file, each document's rows right after the
  previous one's (so that the few documents of 2,048 tokens do not pad all the others), each step projecting the
  cached features (`forward(bert_features=...)`) instead of running BERT. The key is the BERT's weights, the window,
  stride and framing tokens, and the documents' token ids, not the variant: stacking, concatenation,
  encoder_layers=0 and the BERT-conditioned decoder over the same documents and BERT share one file.

The model reads float32 values (exactly the stored bfloat16 ones); under bfloat16 autocast they are used as such.
"""

import hashlib
import json
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger("sumformers.training")

# Documents read at a time to key a cache (their token ids as Python lists).
KEY_BATCH = 1000
# Batches between two progress lines while a cache is computed.
LOG_EVERY = 50


def _document_key(header: list, features, columns: dict) -> tuple[str, np.ndarray]:
    """The sha1 of `header` (as JSON) and of every document's `columns` (each as its numpy dtype, in that order), and
    the documents' token counts (of the first column)."""
    digest = hashlib.sha1(json.dumps(header).encode())
    lengths = []
    for batch in features.select_columns(list(columns)).iter(batch_size=KEY_BATCH):
        for values in zip(*(batch[column] for column in columns)):
            for value, dtype in zip(values, columns.values()):
                digest.update(np.asarray(value, dtype=dtype).tobytes())
            lengths.append(len(values[0]))
    return digest.hexdigest(), np.asarray(lengths, dtype=np.int64)


def _bf16_bits(values: torch.Tensor) -> np.ndarray:
    """The bfloat16 rounding of `values`, as uint16 bits."""
    return values.detach().to("cpu", torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def _from_bf16_bits(bits: np.ndarray) -> torch.Tensor:
    """float32 values of bfloat16 bits (exact)."""
    bits = np.require(bits, np.uint16, ["C_CONTIGUOUS", "WRITEABLE"])  # a copy of a read-only memmap's rows
    return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float()


def _cached_bits(path: str, key: str, shape: list[int], what: str, compute) -> np.memmap:
    """A read-only uint16 memmap of `shape` at `path`: the file as it is when its key file holds `key` and `shape`,
    else filled by `compute(memmap)` first. The key file is removed before and written after, so that a run stopped
    halfway leaves no file that looks valid."""
    path = Path(path)
    key_path = path.with_suffix(path.suffix + ".json")
    shape = [int(size) for size in shape]
    if path.is_file() and key_path.is_file() and json.loads(key_path.read_text()) == {"key": key, "shape": shape}:
        logger.info("%s: reusing %s", what, path)
        return np.memmap(path, dtype=np.uint16, mode="r", shape=tuple(shape))
    path.parent.mkdir(parents=True, exist_ok=True)
    key_path.unlink(missing_ok=True)
    size = 2 * math.prod(shape)
    free = shutil.disk_usage(path.parent).free + (path.stat().st_size if path.is_file() else 0)
    if size > free:  # a memmap that runs out of disk kills the process (SIGBUS) instead of raising
        raise OSError(f"{what}: {path} needs {size / 2**30:.1f} GiB, {free / 2**30:.1f} GiB are free there")
    logger.info("%s: computing %s (%s, %.2f GiB)", what, path, " x ".join(map(str, shape)), size / 2**30)
    values = np.memmap(path, dtype=np.uint16, mode="w+", shape=tuple(shape))
    compute(values)
    values.flush()
    del values
    key_path.write_text(json.dumps({"key": key, "shape": shape}))
    return np.memmap(path, dtype=np.uint16, mode="r", shape=tuple(shape))


def _document_batches(features, collate, batch_size: int, what: str):
    """(index of the first document, collated batch) over `features` in order, logging progress."""
    count = len(features)
    for number, start in enumerate(range(0, count, batch_size)):
        end = min(start + batch_size, count)
        yield start, collate(features.select(range(start, end)).to_list())
        if number % LOG_EVERY == 0 or end == count:
            logger.info("%s: %d / %d documents", what, end, count)


def _with_cache_rows(features, training_args):
    """`features` with each document's row in the cache (`cache_row`), which the Trainer then passes on to the
    collator."""
    training_args.remove_unused_columns = False
    return features.add_column("cache_row", list(range(len(features))))


# ----------------------------------------------------------------------------------------------------------------
# The encoder's bottom layers
# ----------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def cached_bottom_states(model, features, collate, frozen_layers: int, path: str, batch_size: int = 32) -> np.memmap:
    """[documents, tokens, hidden] bfloat16 bits (uint16) of the encoder's bottom `frozen_layers` layers for every
    training document, computed once (under bfloat16 autocast where it is native) and kept in `path` (reused when its
    key matches: the encoder's name, the frozen depth and every document's tokens)."""
    key, lengths = _document_key(
        [model.config.encoder_name_or_path, frozen_layers], features,
        {"input_ids": np.int32, "token_type_ids": np.int8},
    )
    shape = [len(features), int(lengths.max()), model.config.hidden_size]

    def compute(states):
        from .training import cpu_bfloat16_is_native

        model.eval()
        autocast = cpu_bfloat16_is_native()
        for start, batch in _document_batches(features, collate, batch_size, "bottom-layer states"):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                bottom = model.bottom_states(
                    batch["input_ids"], frozen_layers, batch["attention_mask"], batch["token_type_ids"]
                )
            bits = _bf16_bits(bottom)
            states[start : start + len(bits), : bits.shape[1]] = bits
        model.train()

    return _cached_bits(path, key, shape, "bottom-layer states", compute)


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
        batch["bottom_states"] = _from_bf16_bits(np.stack([self.states[f["cache_row"], :width] for f in features]))
        batch["bottom_layers"] = self.frozen_layers
        return batch


def train_over_cached_states(model, features, collate, frozen_layers: int, cache_path: str | None, training_args):
    """The training features and collator for a run whose bottom `frozen_layers` encoder layers stay frozen: their
    states cached in `cache_path` (`cached_bottom_states`), each feature pointing at its row (`cache_row`)."""
    if not cache_path:
        raise ValueError("--frozen_layers needs --bottom_state_cache (a file for the cached states)")
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    with training_args.main_process_first(desc="bottom-layer states"):
        states = cached_bottom_states(base, features, collate, frozen_layers, cache_path)
    return _with_cache_rows(features, training_args), BottomStateCollator(collate, states, frozen_layers)


# ----------------------------------------------------------------------------------------------------------------
# The CopyTransformer's frozen windowed BERT
# ----------------------------------------------------------------------------------------------------------------


def check_bert_feature_cache(config) -> None:
    """A one-line error unless the model reads a frozen windowed BERT (a BERT-conditioned CopyTransformer)."""
    if not getattr(config, "uses_bert", False):
        raise ValueError(
            "--bert_feature_cache caches the frozen BERT's features of the BERT-conditioned CopyTransformer "
            f"(encoder_input 'bert_windowed' or 'bert_concat'); this model has encoder_input="
            f"{getattr(config, 'encoder_input', None)!r}"
        )


def bert_identity(bert) -> list:
    """What a `WindowedEncoder`'s features depend on besides the tokens: a digest of the frozen encoder's weights
    (whatever name it was loaded under), the window, the stride, the framing tokens and the layers read."""
    from .modeling.windowed_encoder import FEATURE_LAYERS

    digest = hashlib.sha1()
    for name, value in sorted(bert.encoder.state_dict().items()):
        digest.update(name.encode())
        digest.update(value.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return [digest.hexdigest(), bert.window, bert.stride, bert.cls_token_id, bert.sep_token_id, FEATURE_LAYERS]


@torch.no_grad()
def cached_bert_features(model, features, collate, path: str, batch_size: int = 16, device=None):
    """The frozen windowed BERT features (`model.encoder.bert.frozen_features`) of every training document, computed
    once on `device` (default: the model's; under bfloat16 autocast where it is native) and kept in `path`, reused
    when its key matches (`bert_identity` and every document's token ids). Returns the [tokens of all documents,
    features] bfloat16 bits (uint16) and the documents' offsets: document i is rows offsets[i]:offsets[i + 1]."""
    check_bert_feature_cache(model.config)
    bert = model.encoder.bert
    key, lengths = _document_key(["windowed BERT features", *bert_identity(bert)], features, {"input_ids": np.int32})
    offsets = np.concatenate([[0], np.cumsum(lengths)])

    def compute(values):
        from .training import cpu_bfloat16_is_native

        on = torch.device(device) if device is not None else next(bert.parameters()).device
        bert.to(on)
        autocast = on.type != "cpu" or cpu_bfloat16_is_native()
        for start, batch in _document_batches(features, collate, batch_size, "BERT features"):
            with torch.autocast(on.type, dtype=torch.bfloat16, enabled=autocast):
                computed = bert.frozen_features(batch["input_ids"].to(on), batch["attention_mask"].to(on))
            for row, bits in enumerate(_bf16_bits(computed)):
                first, last = offsets[start + row], offsets[start + row + 1]
                values[first:last] = bits[: last - first]

    return _cached_bits(path, key, [offsets[-1], bert.feature_size], "BERT features", compute), offsets


class BertFeatureCollator:
    """The processor's batch plus `bert_features` [batch, tokens, features] (float32, zeros where padded, as
    `frozen_features` gives them) of its documents, read from the ragged cache (each feature's `cache_row`)."""

    def __init__(self, collate, values: np.memmap, offsets: np.ndarray):
        self.collate = collate
        self.values = values
        self.offsets = offsets

    def __call__(self, features: list[dict]) -> dict:
        batch = self.collate(features)
        bits = np.zeros((*batch["input_ids"].shape, self.values.shape[1]), dtype=np.uint16)
        for row, feature in enumerate(features):
            first, last = self.offsets[feature["cache_row"]], self.offsets[feature["cache_row"] + 1]
            if last - first != len(feature["input_ids"]):
                raise ValueError(f"cache row {feature['cache_row']} holds {last - first} tokens, the document "
                                 f"{len(feature['input_ids'])}: the cache was made for other documents")
            bits[row, : last - first] = self.values[first:last]
        batch["bert_features"] = _from_bf16_bits(bits)
        return batch


def train_over_cached_bert_features(model, features, collate, cache_path: str, training_args):
    """The training features and collator for a BERT-conditioned CopyTransformer whose frozen BERT's features are
    cached in `cache_path` (`cached_bert_features`, on the training device), each feature pointing at its document
    (`cache_row`)."""
    with training_args.main_process_first(desc="BERT features"):
        values, offsets = cached_bert_features(model, features, collate, cache_path, device=training_args.device)
    return _with_cache_rows(features, training_args), BertFeatureCollator(collate, values, offsets)


__all__ = [
    "BertFeatureCollator",
    "BottomStateCollator",
    "bert_identity",
    "cached_bert_features",
    "cached_bottom_states",
    "check_bert_feature_cache",
    "train_over_cached_bert_features",
    "train_over_cached_states",
]
