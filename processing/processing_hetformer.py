"""Processor of HetFormer: one or several documents in, one heterogeneous node sequence out.

One sequence holds every node of the graph: for multi-document input a document node before each document, then
`[CLS] sentence [SEP]` per sentence (the BERTSum layout of `sentence_layout`; each `[CLS]` is that sentence's node),
and named-entity mentions marked with their entity-cluster id (spaCy, the `ner` extra). Transcript markup such as
`{vocalsound}` is removed first when the model was trained without it (`config.strip_markup`). A meeting transcript
(one "Speaker: utterance" line per turn) is read as meeting units rather than sentences (`config.meeting_segmentation`).
"""

import warnings

import torch

from ..configuration.configuration_hetformer import DOCUMENT, SENTENCE, TOKEN, HetFormerConfig
from ..text.entities import entity_clusters, ner_available
from ..text.sentences import is_transcript, meeting_units, strip_transcript_markup
from .processing_utils import SummarizationProcessor, with_oracle_labels
from .sentence_layout import (
    check_document,
    collate_sentence_batch,
    document_sentences,
    encode_sentences,
    valid_unicode,
)


def _fair_shares(lengths: list[int], total: int) -> list[int]:
    """Split a token budget over documents: short documents keep their length, long ones share the rest equally."""
    shares = [0] * len(lengths)
    remaining = total
    order = sorted(range(len(lengths)), key=lambda index: lengths[index])
    for rank, index in enumerate(order):
        shares[index] = min(lengths[index], remaining // (len(lengths) - rank))
        remaining -= shares[index]
    return shares


def _encode_document(tokenizer, sentences, budget, config) -> dict:
    if budget < config.min_sentence_tokens + 2:
        return encode_sentences(tokenizer, [], max_length=config.min_sentence_tokens + 2, warn_on_truncation=False)
    return encode_sentences(
        tokenizer,
        sentences,
        max_length=budget,
        max_sentence_tokens=config.max_sentence_tokens,
        min_sentence_tokens=config.min_sentence_tokens,
        warn_on_truncation=False,
    )


def _sentence_token_spans(encoded: dict) -> list[tuple[int, int]]:
    """(first token position, number of tokens kept) of each kept sentence, inside its ``[CLS] ... [SEP]``."""
    starts = encoded["cls_positions"]
    ends = starts[1:] + [len(encoded["input_ids"])]
    return [(start + 1, end - start - 2) for start, end in zip(starts, ends)]


def encode_documents(
    tokenizer,
    documents: list[list[str]],
    config: HetFormerConfig,
    max_length: int,
    mentions: list[list[list[tuple[int, int, int]]]] | None = None,
    warn_on_truncation: bool = True,
) -> dict:
    """Encode one input (one or several documents, each a list of sentences) into a HetFormer node sequence.

    Layout: for each document, a document node (multi-document input with `config.use_document_nodes`), then
    ``[CLS] sentence [SEP]`` per sentence with interval segments (`features.encode_sentences`); the `[CLS]` tokens are
    the sentence nodes. Documents that do not all fit share `max_length` fairly. `mentions` (from
    `entities.entity_clusters`: per document, per sentence, ``(start_char, end_char, cluster)``) mark every token
    overlapping a mention with its cluster id.

    Returns lists: `input_ids`, `token_type_ids`, `attention_mask`, `node_types`, `document_ids`, `entity_ids`,
    `cls_positions` and `sentence_ids` (``(document, sentence)`` of each kept sentence, in order).
    """
    document_nodes = len(documents) > 1 and config.use_document_nodes
    node_cost = int(document_nodes)
    if max_length < config.min_sentence_tokens + 2 + node_cost:
        raise ValueError(f"max_length={max_length} is too small to hold one sentence")
    encoded = [_encode_document(tokenizer, sentences, max_length - node_cost, config) for sentences in documents]
    lengths = [len(item["input_ids"]) + node_cost if item["cls_positions"] else 0 for item in encoded]
    if sum(lengths) > max_length:
        shares = _fair_shares(lengths, max_length)
        encoded = [
            _encode_document(tokenizer, sentences, share - node_cost, config) if share < length else item
            for sentences, item, share, length in zip(documents, encoded, shares, lengths)
        ]

    result = {key: [] for key in ("input_ids", "token_type_ids", "node_types", "document_ids", "entity_ids")}
    result.update(cls_positions=[], sentence_ids=[])
    sentence_type = SENTENCE if config.use_sentence_nodes else TOKEN
    for document, (sentences, item) in enumerate(zip(documents, encoded)):
        if not item["cls_positions"]:
            continue
        offset = len(result["input_ids"])
        if document_nodes:
            result["input_ids"].append(tokenizer.cls_token_id)
            result["token_type_ids"].append(0)
            result["node_types"].append(DOCUMENT)
            offset += 1
        length = len(item["input_ids"])
        result["input_ids"].extend(item["input_ids"])
        result["token_type_ids"].extend(item["token_type_ids"])
        node_types = [TOKEN] * length
        for position in item["cls_positions"]:
            node_types[position] = sentence_type
        result["node_types"].extend(node_types)
        result["document_ids"].extend([document] * (length + node_cost))
        entity_ids = [-1] * length
        if mentions is not None and any(mentions[document]):
            offsets = tokenizer(list(sentences[: len(item["cls_positions"])]), add_special_tokens=False,
                                return_offsets_mapping=True)["offset_mapping"]
            for index, (first, count) in enumerate(_sentence_token_spans(item)):
                for start, end, cluster in mentions[document][index]:
                    for token, (token_start, token_end) in enumerate(offsets[index][:count]):
                        if token_start < end and token_end > start:
                            entity_ids[first + token] = cluster
        result["entity_ids"].extend([-1] * node_cost + entity_ids)
        result["cls_positions"].extend(offset + position for position in item["cls_positions"])
        result["sentence_ids"].extend((document, index) for index in range(len(item["cls_positions"])))
    result["attention_mask"] = [1] * len(result["input_ids"])

    total = sum(len(sentences) for sentences in documents)
    if warn_on_truncation and len(result["sentence_ids"]) < total:
        warnings.warn(
            f"Input truncated to the model's limit of {max_length} tokens: kept {len(result['sentence_ids'])} of "
            f"{total} sentences.",
            stacklevel=2,
        )
    return result


def from_sentence_layout(feature: dict, config: HetFormerConfig) -> dict:
    """A single document's BERTSum-layout training feature (`feature_files.load_features`) as the HetFormer node
    sequence `encode_documents` gives for the same sentences without entity mentions: each `[CLS]` a sentence node
    (an ordinary token without `config.use_sentence_nodes`), one document, no entity ids."""
    node_types = [TOKEN] * len(feature["input_ids"])
    for position in feature["cls_positions"]:
        node_types[position] = SENTENCE if config.use_sentence_nodes else TOKEN
    return {
        **feature,
        "node_types": node_types,
        "document_ids": [0] * len(node_types),
        "entity_ids": [-1] * len(node_types),
    }


def collate_hetformer_batch(features: list[dict], pad_token_id: int) -> dict:
    """Pad encoded inputs (`encode_documents`, optionally with `labels`) into a batch of tensors."""
    batch = collate_sentence_batch(features, pad_token_id)
    length = batch["input_ids"].shape[1]
    for key, padding in (("node_types", TOKEN), ("document_ids", 0), ("entity_ids", -1)):
        batch[key] = torch.full((len(features), length), padding, dtype=torch.long)
        for row, feature in enumerate(features):
            batch[key][row, : len(feature[key])] = torch.tensor(feature[key], dtype=torch.long)
    return batch


class HetFormerProcessor(SummarizationProcessor):
    """Inputs: one document (a string, a list of sentences or `{"sentences": [...]}`) or several
    (`{"documents": [...]}`, each a string or a list of sentences). `__call__` adds `document_count`, how many
    documents the input holds (the pipeline's summary length depends on it: `multi_document_num_sentences`)."""

    def check_input(self, document) -> None:
        if isinstance(document, dict) and "documents" in document:
            documents = document["documents"]
            if isinstance(documents, str) or not isinstance(documents, (list, tuple)) or not documents:
                raise ValueError("'documents' must be a non-empty list of documents (strings or lists of sentences)")
            for item in documents:
                check_document(item)
        else:
            check_document(document)

    def documents(self, document) -> list[list[str]]:
        """The input as documents, each a list of sentences (markup stripped if the model was trained so)."""
        self.check_input(document)
        items = document["documents"] if isinstance(document, dict) and "documents" in document else [document]
        if self.config.strip_markup:
            items = [strip_transcript_markup(item) if isinstance(item, str) else item for item in items]
        return [self.units(item) for item in items]

    def units(self, document) -> list[str]:
        """The units HetFormer reads of one document: a meeting transcript's `meeting_units` (with
        `config.meeting_segmentation` "auto"), else its sentences."""
        if self.config.meeting_segmentation == "auto" and isinstance(document, str) and is_transcript(document):
            return meeting_units(valid_unicode(document), self.config.meeting_min_unit_words)
        return document_sentences(document)

    def find_entities(self, documents: list[list[str]]):
        """Entity clusters of `documents` (see `entities.entity_clusters`), or None when entities are off or spaCy
        is not installed (with a warning: the model then runs without entity links)."""
        if not self.config.use_entities:
            return None
        if not ner_available(self.config.entity_model):
            warnings.warn(
                f'spaCy or its model {self.config.entity_model!r} is missing (pip install "sumformers[ner]"): '
                "HetFormer runs without entity links.",
                stacklevel=3,
            )
            return None
        return entity_clusters(documents, self.config.entity_model)

    def entities_in_reach(self, documents: list[list[str]], limit: int):
        """`find_entities` of the sentences that fit in `limit` tokens, none for the others: the layout does not
        depend on the mentions, and on a 25k-word meeting spaCy over the whole text took a fifth of the time, for the
        40% of its units the model never reads."""
        layout = encode_documents(self.tokenizer, documents, self.config, limit, warn_on_truncation=False)
        read = [sum(1 for document, _ in layout["sentence_ids"] if document == index)
                for index in range(len(documents))]
        mentions = self.find_entities([sentences[:count] for sentences, count in zip(documents, read)])
        if mentions is None:
            return None
        return [kept + [[] for _ in sentences[count:]] for kept, sentences, count in zip(mentions, documents, read)]

    def prepare(self, document) -> dict:
        """The slow, text-only steps of featurizing `document` as plain lists, so that a training set can take them
        once through `datasets.map` and its cache: `sentence_lists` (`documents`) and `mentions` (`find_entities`;
        no mention in any sentence when entities are off)."""
        documents = self.documents(document)
        mentions = self.find_entities(documents)
        if mentions is None:
            mentions = [[[] for _ in sentences] for sentences in documents]
        return {"sentence_lists": documents, "mentions": mentions}

    def encode(
        self, documents: list[list[str]], max_length: int | None = None, mentions=None, warn_on_truncation: bool = True
    ) -> dict:
        """`encode_documents` with the model's tokenizer, settings and token limit (lists, not tensors)."""
        limit = self.token_limit(max_length)
        return encode_documents(self.tokenizer, documents, self.config, limit, mentions, warn_on_truncation)

    def training_examples(
        self,
        documents: list[list[str]],
        mentions,
        oracle,
        max_length: int | None = None,
        chunk_long_documents: bool = True,
    ) -> list[dict]:
        """Training examples of one input (`documents` and `mentions` as `prepare` gives them) as lists (what
        `collate` pads), cut at `max_length` tokens without warnings, each with `oracle` and `labels` for the
        sentences it kept (`with_oracle_labels`). With `chunk_long_documents` a single document gives one example
        per chunk of consecutive sentences that fits, so that no sentence is left out; otherwise one example."""
        mentions = mentions if self.config.use_entities else None
        if len(documents) > 1 or not chunk_long_documents:
            encoded = self.encode(documents, max_length, mentions, warn_on_truncation=False)
            kept = [documents[d][s] for d, s in encoded["sentence_ids"]]
            return [with_oracle_labels(encoded, kept, oracle)]
        examples, sentences, start = [], documents[0], 0
        while start < len(sentences):
            chunk_mentions = [mentions[0][start:]] if mentions is not None else None
            encoded = self.encode([sentences[start:]], max_length, chunk_mentions, warn_on_truncation=False)
            count = len(encoded["sentence_ids"])
            if count == 0:
                break
            examples.append(with_oracle_labels(encoded, sentences[start : start + count], oracle))
            start += count
        return examples

    def __call__(self, document, max_length: int | None = None) -> dict:
        documents = self.documents(document)
        limit = self.token_limit(max_length)
        mentions = self.entities_in_reach(documents, limit)
        encoded = encode_documents(self.tokenizer, documents, self.config, limit, mentions)
        sentences = tuple(documents[d][s] for d, s in encoded["sentence_ids"])
        if not sentences:
            # Nothing to score: one dummy sentence keeps the batch shapes valid; no sentence is reported.
            encoded = encode_documents(self.tokenizer, [["."]], self.config, limit)
        return {**self.collate([encoded]), "sentences": sentences, "document_count": len(documents)}

    def collate(self, features: list[dict]) -> dict:
        return collate_hetformer_batch(features, self.tokenizer.pad_token_id)


__all__ = ["HetFormerProcessor", "collate_hetformer_batch", "encode_documents", "from_sentence_layout"]
