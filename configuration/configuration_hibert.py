"""Configuration of the non-stepwise HiBERT (hierarchical BERT) extractive summarizer: a sentence classifier over
any BERT encoder (default: the bundled all-MiniLM-L6-v2); its stepwise variant: `configuration_stepwise_hibert`."""

from transformers import PretrainedConfig

from .summarizer_config import DEFAULT_SUMMARY_SENTENCES, PretrainedEncoderConfigMixin, check_positive_integers


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
    num_sentences: int = DEFAULT_SUMMARY_SENTENCES["extractive"]
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


__all__ = ["HiBertConfig"]
