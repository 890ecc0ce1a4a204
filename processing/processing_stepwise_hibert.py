"""Processor of HiBERT and Stepwise HiBERT: the BERTSum layout (the model cuts it into one block per sentence), with
the model's sentence limit (`max_document_sentences`, the size of its sentence position table)."""

from .planner_inputs import ContentPlanningProcessor
from .sentence_layout import SentenceLayoutProcessor


class HiBertProcessor(SentenceLayoutProcessor):
    """Sentences past `config.max_document_sentences` are dropped with a warning; each keeps at most
    `config.max_sentence_tokens` word pieces."""

    has_sentence_limit = True


class HiBertPlannerProcessor(ContentPlanningProcessor):
    """The planner's processor: a Rotowire game's records and the sentence-break unit as the document."""


__all__ = ["HiBertProcessor", "HiBertPlannerProcessor"]
