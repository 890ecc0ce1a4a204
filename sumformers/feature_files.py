"""Training features of the sentence-layout models (BERTSum layout: HiBERT, Stepwise HiBERT) in one compact file,
written once where the text is segmented and oracles are searched (a CPU machine) and read where the model trains (a
lent GPU, whose minutes should not go to sentence splitting, the greedy oracle or the tokenizer, and to which at most
64 MiB travel).

The file is an xz-compressed `.npz` of what the features cannot be rebuilt without: every kept sentence's word
pieces (uint16, no special tokens), the sentences per document, and the oracle (selection order). The BERTSum layout
around them (`[CLS] pieces [SEP]` per sentence, alternating token types, `cls_positions`) and the 0/1 labels are
rebuilt on reading, equal to what `SentenceLayoutProcessor.training_features` gave. All 39,563 train_large articles
cut at 768 layout tokens take about 24 MiB.
"""

import io
import json
import lzma
from pathlib import Path

import numpy as np

FORMAT = "sumformers-sentence-layout-features/1"


def save_features(features: list[dict], path: str | Path, tokenizer, settings: dict) -> None:
    """Write `features` (dicts of `training_features`, lists) to `path` (xz npz). `settings` (JSON) records what
    they depend on, e.g. the model's `max_sentence_tokens` and the input length, for `load_features` to check."""
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if max(tokenizer.vocab_size, cls_id, sep_id) >= 2**16:
        raise ValueError(f"a vocabulary of {tokenizer.vocab_size} word pieces does not fit uint16")
    pieces, piece_lengths, sentence_counts, oracle, oracle_lengths = [], [], [], [], []
    for feature in features:
        ids, starts = feature["input_ids"], feature["cls_positions"]
        ends = [*starts[1:], len(ids)]
        for start, end in zip(starts, ends):
            pieces.extend(ids[start + 1 : end - 1])  # without the sentence's [CLS] and [SEP]
            piece_lengths.append(end - start - 2)
        sentence_counts.append(len(starts))
        oracle.extend(feature["oracle"])
        oracle_lengths.append(len(feature["oracle"]))
    arrays = {
        "pieces": np.asarray(pieces, dtype=np.uint16),
        "piece_lengths": np.asarray(piece_lengths, dtype=np.uint16),
        "sentence_counts": np.asarray(sentence_counts, dtype=np.uint16),
        "oracle": np.asarray(oracle, dtype=np.uint16),
        "oracle_lengths": np.asarray(oracle_lengths, dtype=np.uint8),
        "header": np.asarray(json.dumps({"format": FORMAT, "cls_id": cls_id, "sep_id": sep_id, **settings})),
    }
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wb", preset=6) as file:
        file.write(buffer.getvalue())


def read_header(path: str | Path) -> dict:
    """The settings a feature file was written with (and its format, `cls_id`, `sep_id`)."""
    return _read(path)[1]


def _read(path):
    with lzma.open(path, "rb") as file:
        arrays = np.load(io.BytesIO(file.read()))
        header = json.loads(str(arrays["header"]))
        if header.get("format") != FORMAT:
            raise ValueError(f"{path} is not a sumformers sentence-layout feature file ({header.get('format')!r})")
        return {name: arrays[name] for name in arrays.files if name != "header"}, header


def load_features(path: str | Path, expected: dict | None = None, max_length: int | None = None) -> list[dict]:
    """The features `save_features` wrote, as `training_features` gave them (`input_ids`, `token_type_ids`,
    `attention_mask`, `cls_positions`, `num_document_sentences`, `oracle`, `labels`). Settings in `expected` must
    equal the file's, else a ValueError names the difference (features cut for another model would train it on other
    inputs).

    `max_length` shorter than the file's cuts each document to the whole sentences that fit in it (a model with a
    shorter input, e.g. BERTSum's 512 positions); oracle sentences past the cut are dropped, not searched again."""
    arrays, header = _read(path)
    for name, value in (expected or {}).items():
        if header.get(name) != value:
            raise ValueError(f"{path} was written with {name}={header.get(name)!r}; this run needs {value!r}")
    if max_length is not None and max_length > header["max_length"]:
        raise ValueError(f"{path} was cut at {header['max_length']} tokens; it cannot give {max_length}")
    limit = max_length or float("inf")
    shortest = header.get("min_sentence_tokens", 0)
    cls_id, sep_id = header["cls_id"], header["sep_id"]
    pieces = arrays["pieces"].tolist()
    piece_lengths = arrays["piece_lengths"].tolist()
    oracle = arrays["oracle"].tolist()
    features, piece_at, sentence_at, oracle_at = [], 0, 0, 0
    for count, oracle_length in zip(arrays["sentence_counts"].tolist(), arrays["oracle_lengths"].tolist()):
        input_ids, token_type_ids, cls_positions = [], [], []
        full = False
        for index, length in enumerate(piece_lengths[sentence_at : sentence_at + count]):
            # the cut `encode_sentences` makes: whole sentences, the last one shortened, nothing after one that did
            # not fit
            room = limit - len(input_ids) - 2
            full = full or room < min(length, shortest) or room <= 0
            if not full:
                cls_positions.append(len(input_ids))
                kept = min(length, room)
                input_ids.extend([cls_id, *pieces[piece_at : piece_at + kept], sep_id])
                token_type_ids.extend([index % 2] * (kept + 2))
            piece_at += length
        sentence_at += count
        count = len(cls_positions)
        chosen = [index for index in oracle[oracle_at : oracle_at + oracle_length] if index < count]
        oracle_at += oracle_length
        features.append({
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "attention_mask": [1] * len(input_ids),
            "cls_positions": cls_positions,
            "num_document_sentences": count,
            "oracle": chosen,
            "labels": [float(index in chosen) for index in range(count)],
        })
    return features


__all__ = ["load_features", "read_header", "save_features"]
