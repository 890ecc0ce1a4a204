"""Configurations of Stepwise ETCSum (Narayan et al. 2020): the ETCSum encoder with the partial summary's tokens
appended to the document's, a softmax over sentences and an end-of-summary unit; and its Rotowire content planner."""

from .configuration_etcsum import ETCSumConfig
from .summarizer_config import ContentPlannerConfigMixin, StepwiseConfigMixin


class StepwiseETCSumConfig(StepwiseConfigMixin, ETCSumConfig):
    r"""
    Stepwise ETCSum: the document's tokens followed by the partial summary's (each summary sentence's tokens as in
    the document, token type 1), one global token per document and per summary sentence plus one for the end of the
    summary; a softmax over the document sentences and the end unit picks the next sentence.

    Args (besides [`ETCSumConfig`]'s):
        max_summary_sentences (`int`, *optional*, defaults to 8):
            Longest partial summary the model conditions on.
        beam_size (`int`, *optional*, defaults to 3):
            Beam of the `stepwise-summarization` pipeline (the paper's default).
        num_sentences (`int`, *optional*, defaults to 4):
            Most sentences the `stepwise-summarization` pipeline extracts (the paper's 4 steps).
        end_at_limit (`bool`, *optional*, defaults to `True`):
            The paper's beam: a summary that reaches `num_sentences` takes one more step in which it can only end,
            so it is scored, like every other, with its end-of-summary probability (False: cut without it).
        min_sentences (`int`, *optional*, defaults to 1):
            Pipeline default: the end-of-summary unit can close the summary only from this length on.
        end_bias (`float`, *optional*, defaults to 0.0):
            Pipeline default: added to the end-of-summary unit's logit at every step (negative: longer summaries), to
            calibrate the summary length on text unlike the training text.
        trigram_blocking (`bool`, *optional*, defaults to `False`):
            Pipeline default; as in the paper, an option, not the default.
    """

    model_type = "stepwise_etcsum"

    @property
    def long_length(self) -> int:
        """Rows of the long-token position table: the document and the longest partial summary."""
        return self.max_document_tokens + self.max_summary_sentences * (self.max_sentence_tokens + 2)


class StepwiseETCSumPlannerConfig(ContentPlannerConfigMixin, StepwiseETCSumConfig):
    r"""
    Stepwise ETCSum as a Rotowire content planner (Narayan et al. 2020, section 7): it reads the whole table, every
    record's tokens as long tokens (at most 6,725 on the shared games) with one global token per record, and the
    plan so far; decoded greedily. Defaults as in [`~summarizer_config.ContentPlannerConfigMixin`] and
    `max_document_tokens` 8,192, `max_sentence_tokens` 30 (the longest record has 24 word pieces); otherwise
    [`StepwiseETCSumConfig`]'s.
    """

    model_type = "stepwise_etcsum_planner"

    max_document_tokens: int = 8192
    max_sentence_tokens: int = 30


__all__ = ["StepwiseETCSumConfig", "StepwiseETCSumPlannerConfig"]
