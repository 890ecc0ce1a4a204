"""Processor of the BERTSum extractive summarizer: the BERTSum layout up to the encoder's token limit."""

from .sentence_layout import SentenceLayoutProcessor


class BertSumProcessor(SentenceLayoutProcessor):
    """`[CLS] sentence [SEP]` per sentence with interval segments, cut at the encoder's 512 tokens (sentences that do
    not fit are dropped with a warning)."""


__all__ = ["BertSumProcessor"]
