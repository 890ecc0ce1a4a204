"""Configuration of the non-stepwise ETCSum extractive summarizer (Narayan et al. 2020): an ETC global-local
encoder (Ainslie et al. 2020) over the document's tokens with one global token per sentence and a sigmoid per
sentence (its stepwise variant: `configuration_stepwise_etcsum`)."""

from transformers import PretrainedConfig

from .summarizer_config import DEFAULT_SUMMARY_SENTENCES, PretrainedEncoderConfigMixin, check_positive_integers

RELATIVE_ATTENTION = ("keys", "bias")
LONG_POSITION_EMBEDDINGS = ("none", "tiled")
# What a saved config that predates each setting was trained with.
LEGACY_SETTINGS = {"relative_attention": "bias", "long_position_embeddings": "tiled"}


class ETCSumConfig(PretrainedEncoderConfigMixin, PretrainedConfig):
    r"""
    Args:
        encoder_config (`PretrainedConfig` or `dict`, *optional*):
            The pretrained BERT encoder's configuration (a sub-config); defaults to a BERT config.
        encoder_name_or_path (`str`, *optional*):
            Where the encoder weights came from (a Hub id or path), recorded for model cards and adapter checkpoints.
        max_document_tokens (`int`, *optional*, defaults to 4096):
            Document tokens the model reads (BERTSum layout, `[CLS] sentence [SEP]` per sentence): the whole of most
            CNN/DailyMail articles.
        max_document_sentences (`int`, *optional*, defaults to 256):
            Document sentences (one global token each).
        max_sentence_tokens (`int`, *optional*, defaults to 62):
            Word pieces kept per sentence (with `[CLS]` and `[SEP]`, 64 tokens).
        min_sentence_tokens (`int`, *optional*, defaults to 5):
            A sentence cut by the length limit is kept only if at least this many of its tokens fit.
        local_radius (`int`, *optional*, defaults to 84):
            Long-to-long attention: a token sees this many tokens on each side (ETC's default).
        relative_pos_max_distance (`int`, *optional*, defaults to 42):
            Relative positions are clipped at this distance (the ETCSum checkpoint's setting); the relative ids are
            the clipped distances plus two long-to-global / global-to-long labels ("own sentence" or not).
        relative_attention (`str`, *optional*, defaults to `"keys"`):
            How each layer uses the relative ids. `"keys"` (ETC, after Shaw et al. 2018): a learned key vector per
            relative id and head (`score = q_i . (k_j + a_ij) / sqrt(d)`) plus a learned bias per relative id and
            head. `"bias"`: the bias only (models trained before relative keys; a saved config without this key
            loads as `"bias"`).
        long_position_embeddings (`str`, *optional*, defaults to `"tiled"`):
            Absolute positions of the long tokens. `"tiled"`: the pretrained encoder's table repeated to
            `max_document_tokens` (the Longformer recipe). `"none"`: none, as in ETC, whose checkpoints were
            pretrained with relative positions only; started from a BERT pretrained with absolute positions, such a
            model has no sense of where a sentence stands until its relative keys learn it (`etcsum_positions.py`:
            after 60 CPU steps of 4 articles the oracle sentences' logits lead the others' by 0.54 with the tiled
            table, by -0.03 without; a GPU run without them collapsed to one score for every sentence).
        hard_g2l_masking (`bool`, *optional*, defaults to `True`):
            A sentence's global token sees only its own sentence's tokens (and every global token).
        hard_l2g_masking (`bool`, *optional*, defaults to `False`):
            A token sees only its own sentence's global token (instead of all of them).
        num_sentences (`int`, *optional*, defaults to 3):
            Summary length of the `extractive-summarization` pipeline.
        trigram_blocking (`bool`, *optional*, defaults to `True`):
            Pipeline default: skip a sentence that shares a trigram with one already chosen.
        attn_implementation (`str`, *optional*):
            The sparse attention backend: "blocked" (the model's default: linear memory, trains on CPU),
            "flex_attention" (compiled; inference, best on GPU), "sdpa" or "eager" (dense masks, quadratic memory:
            short inputs and tests).
    """

    model_type = "etcsum"

    max_document_tokens: int = 4096
    max_document_sentences: int = 256
    max_sentence_tokens: int = 62
    min_sentence_tokens: int = 5
    local_radius: int = 84
    relative_pos_max_distance: int = 42
    hard_g2l_masking: bool = True
    hard_l2g_masking: bool = False
    num_sentences: int = DEFAULT_SUMMARY_SENTENCES["extractive"]
    trigram_blocking: bool = True
    relative_attention: str = "keys"
    long_position_embeddings: str = "tiled"

    def __post_init__(self, **kwargs):
        check_positive_integers(
            max_document_tokens=self.max_document_tokens,
            max_document_sentences=self.max_document_sentences,
            max_sentence_tokens=self.max_sentence_tokens,
            local_radius=self.local_radius,
        )
        if self.relative_attention not in RELATIVE_ATTENTION:
            raise ValueError(
                f"relative_attention must be one of {RELATIVE_ATTENTION}, got {self.relative_attention!r}"
            )
        if self.long_position_embeddings not in LONG_POSITION_EMBEDDINGS:
            raise ValueError(
                f"long_position_embeddings must be one of {LONG_POSITION_EMBEDDINGS}, got "
                f"{self.long_position_embeddings!r}"
            )
        super().__post_init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """A saved config (config.json) that predates `relative_attention` / `long_position_embeddings` loads with
        the design it was trained with (`LEGACY_SETTINGS`); new models get the ETC defaults."""
        config_dict = {**LEGACY_SETTINGS, **config_dict}
        return super().from_dict(config_dict, **kwargs)

    @property
    def max_position_embeddings(self) -> int:
        """Document tokens the pipelines encode (the long input without a partial summary)."""
        return self.max_document_tokens

    @property
    def long_length(self) -> int:
        """Rows of the long-token position table (`long_position_embeddings="tiled"` only)."""
        return self.max_document_tokens


__all__ = ["ETCSumConfig"]
