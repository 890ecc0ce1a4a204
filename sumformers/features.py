"""Turning a list of sentences into encoder inputs for sentence-level extraction (BERTSum layout).

Each sentence becomes `[CLS] tokens [SEP]` (`<s> ... </s>` for RoBERTa); the `[CLS]` vector represents the sentence,
and token type ids alternate 0/1 per sentence (interval segment embeddings). Used by the pipeline and by training, so
both see exactly the same inputs. Copied flat into exported repos: imports only stdlib, torch and the (also copied) text module.
"""

import warnings

import torch

from .text import split_sentences


def valid_unicode(text: str) -> str:
    """Replace what cannot be encoded as UTF-8 (lone surrogates) so tokenizers and JSON writers accept the text."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def document_sentences(document) -> list[str]:
    """The sentences of a pipeline input: a string (split with pysbd), a list/tuple of sentence strings, or a
    `{"sentences": [...]}` dict. Anything else is a TypeError that says what is expected."""
    if isinstance(document, dict) and "sentences" in document:
        document = document["sentences"]
    if isinstance(document, str):
        return split_sentences(valid_unicode(document))
    if isinstance(document, (list, tuple)) and all(isinstance(sentence, str) for sentence in document):
        return [valid_unicode(sentence).strip() for sentence in document if sentence.strip()]
    raise TypeError(
        f"expected a string, a list of sentence strings or {{'sentences': [...]}}, got {type(document).__name__}"
    )


def encode_sentences(
    tokenizer,
    sentences: list[str],
    max_length: int = 512,
    max_sentence_tokens: int = 200,
    min_sentence_tokens: int = 5,
    warn_on_truncation: bool = True,
) -> dict:
    """Encode `sentences` into one sequence of at most `max_length` tokens.

    Returns lists (not tensors): `input_ids`, `token_type_ids`, `attention_mask`, `cls_positions` (one per kept
    sentence) and `num_sentences` (how many of the sentences fit; the rest are dropped with a warning naming the
    limit).
    """
    if max_length < min_sentence_tokens + 2:
        raise ValueError(f"max_length={max_length} is too small to hold one sentence")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    input_ids, token_type_ids, cls_positions = [], [], []
    # One batched call: tokenizing sentence by sentence is several times slower for long documents.
    pieces = tokenizer(list(sentences), add_special_tokens=False)["input_ids"] if sentences else []
    for index, piece in enumerate(pieces):
        piece = piece[:max_sentence_tokens]
        room = max_length - len(input_ids) - 2
        if room < min(len(piece), min_sentence_tokens) or room <= 0:
            break
        piece = piece[:room]
        cls_positions.append(len(input_ids))
        input_ids.extend([cls_id, *piece, sep_id])
        token_type_ids.extend([index % 2] * (len(piece) + 2))
    kept = len(cls_positions)
    if kept < len(sentences) and warn_on_truncation:
        warnings.warn(
            f"Input truncated to the model's limit of {max_length} tokens: kept {kept} of {len(sentences)} sentences.",
            stacklevel=2,
        )
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": [1] * len(input_ids),
        "cls_positions": cls_positions,
        "num_sentences": kept,
    }


def collate_sentence_batch(features: list[dict], pad_token_id: int) -> dict:
    """Pad encoded documents into a batch; `sentence_mask` marks real sentences, padded `labels` are -100."""
    batch_size = len(features)
    max_tokens = max(len(f["input_ids"]) for f in features)
    max_sentences = max(1, max(len(f["cls_positions"]) for f in features))
    batch = {
        "input_ids": torch.full((batch_size, max_tokens), pad_token_id, dtype=torch.long),
        "token_type_ids": torch.zeros((batch_size, max_tokens), dtype=torch.long),
        "attention_mask": torch.zeros((batch_size, max_tokens), dtype=torch.long),
        "cls_positions": torch.zeros((batch_size, max_sentences), dtype=torch.long),
        "sentence_mask": torch.zeros((batch_size, max_sentences), dtype=torch.bool),
    }
    has_labels = "labels" in features[0]
    if has_labels:
        batch["labels"] = torch.full((batch_size, max_sentences), -100.0)
    for row, feature in enumerate(features):
        length, count = len(feature["input_ids"]), len(feature["cls_positions"])
        batch["input_ids"][row, :length] = torch.tensor(feature["input_ids"])
        batch["token_type_ids"][row, :length] = torch.tensor(feature["token_type_ids"])
        batch["attention_mask"][row, :length] = 1
        batch["cls_positions"][row, :count] = torch.tensor(feature["cls_positions"], dtype=torch.long)
        batch["sentence_mask"][row, :count] = True
        if has_labels:
            batch["labels"][row, :count] = torch.tensor(feature["labels"][:count], dtype=torch.float)
    return batch
