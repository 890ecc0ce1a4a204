"""The BERTSum layout, which the sentence-level extractive models share: each sentence becomes `[CLS] tokens [SEP]`
(`<s> ... </s>` for RoBERTa), the `[CLS]` vector represents the sentence, and token type ids alternate 0/1 per sentence
(interval segment embeddings). `SentenceLayoutProcessor` is the base of the BERTSum, HiBERT and ETCSum processors.
Copied flat into exported repos: imports only the standard library, torch, transformers and the text layer.
"""

import warnings

import torch

from ..text.sentences import split_sentences
from .processing_utils import SummarizationProcessor, with_oracle_labels


def valid_unicode(text: str) -> str:
    """Replace what cannot be encoded as UTF-8 (lone surrogates) so tokenizers and JSON writers accept the text."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


def check_document(document) -> None:
    """A TypeError naming what is expected, unless `document` is a string, a list/tuple of sentence strings or a
    `{"sentences": [...]}` dict."""
    if isinstance(document, dict) and "sentences" in document:
        document = document["sentences"]
    if isinstance(document, str):
        return
    if isinstance(document, (list, tuple)) and all(isinstance(sentence, str) for sentence in document):
        return
    raise TypeError(
        f"expected a string, a list of sentence strings or {{'sentences': [...]}}, got {type(document).__name__}"
    )


def document_sentences(document) -> list[str]:
    """The sentences of one input (see `check_document`): a string is split with `split_sentences`."""
    check_document(document)
    if isinstance(document, dict):
        document = document["sentences"]
    if isinstance(document, str):
        return split_sentences(valid_unicode(document))
    return [valid_unicode(sentence).strip() for sentence in document if sentence.strip()]


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
    sentence) and `num_document_sentences` (how many of the sentences fit; the rest are dropped with a warning naming
    the limit).
    """
    if max_length < min_sentence_tokens + 2:
        raise ValueError(f"max_length={max_length} is too small to hold one sentence")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    input_ids, token_type_ids, cls_positions = [], [], []
    # One batched call: tokenizing sentence by sentence is several times slower for long documents.
    # verbose=False: a sentence longer than the encoder limit is cut below, so its length warning is noise
    pieces = tokenizer(list(sentences), add_special_tokens=False, verbose=False)["input_ids"] if sentences else []
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
        "num_document_sentences": kept,
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


class SentenceLayoutProcessor(SummarizationProcessor):
    """Text in, BERTSum-layout tensors out: `input_ids`, `token_type_ids`, `attention_mask`, `cls_positions` (one per
    kept sentence) and `sentence_mask`, plus the kept `sentences`. Settings from the model config:
    `max_sentence_tokens`, `min_sentence_tokens`, the token limit `max_position_embeddings`, and for models with a
    sentence position table the document cap `max_document_sentences` (see `sentence_limit`)."""

    #: Whether the model reads a bounded number of document sentences (`config.max_document_sentences`).
    has_sentence_limit = False

    def check_input(self, document) -> None:
        check_document(document)

    def sentences(self, document, warn_on_truncation: bool = True) -> list[str]:
        """The sentences of `document` the model reads: beyond the model's sentence limit, cut (with a warning)."""
        sentences = document_sentences(document)
        limit = self.config.max_document_sentences if self.has_sentence_limit else None
        if limit is not None and len(sentences) > limit:
            if warn_on_truncation:
                warnings.warn(
                    f"Input truncated to the model's limit of {limit} sentences: kept {limit} of {len(sentences)}.",
                    stacklevel=3,
                )
            sentences = sentences[:limit]
        return sentences

    def encode(self, sentences: list[str], max_length: int | None = None, warn_on_truncation: bool = True) -> dict:
        """`encode_sentences` with the model's settings (lists, not tensors)."""
        return encode_sentences(
            self.tokenizer,
            sentences,
            max_length=self.token_limit(max_length),
            max_sentence_tokens=self.config.max_sentence_tokens,
            min_sentence_tokens=self.config.min_sentence_tokens,
            warn_on_truncation=warn_on_truncation,
        )

    def training_features(
        self, document, oracle, max_length: int | None = None, oracle_over_document: bool = False
    ) -> dict:
        """One training document as lists (what `collate` pads): the inputs `__call__` gives the model, cut at its
        limits without warnings, with `oracle`, the indices that `oracle(sentences)` picks among the sentences that
        were kept (in its order), and `labels`, 1.0 for those sentences and 0.0 for the other kept ones. With
        `oracle_over_document`, the oracle reads every sentence of the document (see `with_oracle_labels`)."""
        sentences = self.sentences(document, warn_on_truncation=False)
        encoded = self.encode(sentences, max_length, warn_on_truncation=False)
        whole = document_sentences(document) if oracle_over_document else None
        return with_oracle_labels(encoded, sentences[: encoded["num_document_sentences"]], oracle, whole)

    def __call__(self, document, max_length: int | None = None) -> dict:
        sentences = self.sentences(document)
        encoded = self.encode(sentences, max_length)
        kept = encoded["num_document_sentences"]
        if not encoded["cls_positions"]:
            # Nothing to score: one dummy sentence keeps the batch shapes valid; no sentence is reported.
            encoded = encode_sentences(self.tokenizer, ["."], max_length=self.token_limit(max_length))
        inputs = self.collate([encoded])
        # A tuple (not a list) so that a pipeline batch of them can be told apart from one document.
        return {**inputs, "sentences": tuple(sentences[:kept])}

    def collate(self, features: list[dict]) -> dict:
        return collate_sentence_batch(features, self.tokenizer.pad_token_id)
