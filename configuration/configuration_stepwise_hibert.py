"""Configurations of Stepwise HiBERT (Narayan et al. 2020, "Stepwise Extractive Summarization and Planning with
Structured Transformers"), over any BERT encoder, and of its Rotowire content planner."""

from .configuration_hibert import HiBertConfig
from .summarizer_config import ContentPlannerConfigMixin, StepwiseConfigMixin


class StepwiseHiBertConfig(StepwiseConfigMixin, HiBertConfig):
    r"""
    Stepwise HiBERT: the HiBERT encoder, where every document layer also runs self-attention over the partial
    summary (parameters shared with the document self-attention) and document-to-summary attention, and a softmax
    over the document sentences and an end-of-summary unit picks the next sentence.

    Args (besides [`HiBertConfig`]'s):
        max_summary_sentences (`int`, *optional*, defaults to 8):
            Longest partial summary the model conditions on (size of the summary-sentence position table).
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
            Pipeline default; the stepwise model sees what it already chose, so blocking is an option, as in the
            paper, not the default.
        summary_null_slot (`bool`, *optional*, defaults to `False`):
            Not in the paper (issue 57): the document-to-summary attention of every document layer also attends to
            a learned null state (a null key and value), so that a summary of one sentence is not one uniform
            signal to every document sentence (a softmax over one key gives it weight 1 whatever the query): how
            much a sentence attends to the summary then says how like it it is.
    """

    model_type = "stepwise_hibert"

    summary_null_slot: bool = False


class StepwiseHiBertPlannerConfig(ContentPlannerConfigMixin, StepwiseHiBertConfig):
    r"""
    Stepwise HiBERT as a Rotowire content planner (Narayan et al. 2020, section 7): the records of a game are its
    sentences, without document-sentence positions (the records' order carries no meaning; summary positions are
    kept); the plan is decoded greedily. Defaults as in [`~summarizer_config.ContentPlannerConfigMixin`], otherwise
    [`StepwiseHiBertConfig`]'s.

    Args (besides those):
        summary_positions_from_end (`bool`, *optional*, defaults to `False`):
            Number the plan's units from the latest (0) back instead of from the first (the paper's): a plan runs
            to 100 units, and counted from the first the unit just chosen sits at a different position every step.
    """

    model_type = "stepwise_hibert_planner"

    document_positions: bool = False
    summary_positions_from_end: bool = False

    def __post_init__(self, **kwargs):
        if self.document_positions:
            raise ValueError("a content planner's records have no order: document_positions must be False")
        self.summary_positions_from_end = bool(self.summary_positions_from_end)
        super().__post_init__(**kwargs)


__all__ = ["StepwiseHiBertConfig", "StepwiseHiBertPlannerConfig"]
