"""Configurations of HiBERT (hierarchical BERT) extractive summarizers: the non-stepwise sentence classifier and
Stepwise HiBERT (Narayan et al. 2020, "Stepwise Extractive Summarization and Planning with Structured
Transformers"), over any BERT encoder (default: the bundled all-MiniLM-L6-v2)."""

from transformers import PretrainedConfig

from .summarizer_config import (
    ContentPlannerConfigMixin,
    PretrainedEncoderConfigMixin,
    StepwiseConfigMixin,
    check_positive_integers,
)


class HiBertConfig(PretrainedEncoderConfigMixin, PretrainedConfig):
    r"""
    Args:
        encoder_config (`PretrainedConfig` or `dict`, *optional*):
            The pretrained BERT encoder's configuration (a sub-config); defaults to a BERT config.
        encoder_name_or_path (`str`, *optional*):
            Where the encoder weights came from (a Hub id or path), recorded for model cards and adapter checkpoints.
        sentence_encoder_layers (`int`, *optional*, defaults to 6):
            Bottom layers of the pretrained encoder that encode each sentence on its own.
        sentence_pooling (`str`, *optional*, defaults to `"mean"`):
            How a sentence's token states become its vector: `"mean"` (the pooling all-MiniLM-L6-v2 was trained
            with) or `"first"` (the `[CLS]` state). `from_encoder` takes the encoder's own (`encoder_pooling`: its
            sentence-transformers pooling config, else `"first"`).
        document_layers (`int`, *optional*, defaults to 2):
            Transformer layers over the sentence vectors; they start as copies of the pretrained encoder's top
            `document_layers` layers.
        max_document_sentences (`int`, *optional*, defaults to 128):
            Document sentences the model reads (size of the document-sentence position table).
        document_positions (`bool`, *optional*, defaults to `True`):
            Add document-sentence position embeddings; False where the sentences' order means nothing (a content
            planner's records): the model then has no position table and its scores do not depend on that order.
        max_sentence_tokens (`int`, *optional*, defaults to 30):
            Word pieces kept per sentence; with `[CLS]` and `[SEP]` a sentence is at most 32 tokens.
        min_sentence_tokens (`int`, *optional*, defaults to 5):
            A sentence cut by the length limit is kept only if at least this many of its tokens fit.
        num_sentences (`int`, *optional*, defaults to 3):
            Summary length of the `extractive-summarization` pipeline.
        trigram_blocking (`bool`, *optional*, defaults to `True`):
            Pipeline default: skip a sentence that shares a trigram with one already chosen.
    """

    model_type = "hibert"

    sentence_encoder_layers: int = 6
    sentence_pooling: str = "mean"
    document_layers: int = 2
    max_document_sentences: int = 128
    document_positions: bool = True
    max_sentence_tokens: int = 30
    min_sentence_tokens: int = 5
    num_sentences: int = 3
    trigram_blocking: bool = True

    def __post_init__(self, **kwargs):
        if self.sentence_pooling not in ("mean", "first"):
            raise ValueError(f"sentence_pooling must be 'mean' or 'first', got {self.sentence_pooling!r}")
        check_positive_integers(
            sentence_encoder_layers=self.sentence_encoder_layers,
            document_layers=self.document_layers,
            max_document_sentences=self.max_document_sentences,
            max_sentence_tokens=self.max_sentence_tokens,
        )
        super().__post_init__(**kwargs)

    @property
    def max_position_embeddings(self) -> int:
        """Input tokens in the BERTSum layout (`[CLS] sentence [SEP]` per sentence) that fill every sentence slot."""
        return self.max_document_sentences * (self.max_sentence_tokens + 2)


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


__all__ = ["HiBertConfig", "StepwiseHiBertConfig", "StepwiseHiBertPlannerConfig"]
