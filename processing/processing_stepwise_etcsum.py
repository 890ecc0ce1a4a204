"""Processor of ETCSum and Stepwise ETCSum: the BERTSum layout as the long input (up to `max_document_tokens`),
whose `[CLS]` positions mark the sentences that get a global token each (at most `max_document_sentences`)."""

from .planner_inputs import ContentPlanningProcessor
from .sentence_layout import SentenceLayoutProcessor


class ETCSumProcessor(SentenceLayoutProcessor):
    """Sentences past `config.max_document_sentences` are dropped with a warning, and so are those past the long
    input's `config.max_document_tokens` tokens."""

    has_sentence_limit = True


class ETCSumPlannerProcessor(ContentPlanningProcessor):
    """The planner's processor: a Rotowire game's records and the sentence-break unit as the document."""


__all__ = ["ETCSumProcessor", "ETCSumPlannerProcessor"]
