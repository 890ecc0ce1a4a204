"""Configuration of BertSumExtAbs (Liu & Lapata 2019, the abstractive baseline), an encoder-decoder summarizer over
any BERT/RoBERTa encoder (the sentence planner built on it: `configuration_sentence_planner`)."""

from transformers import PretrainedConfig

from .summarizer_config import PretrainedEncoderConfigMixin, check_positive_integers

DECODER_INITS = ("random", "encoder", "shared")


class BertSumAbsConfig(PretrainedEncoderConfigMixin, PretrainedConfig):
    r"""
    The encoder is the pretrained BERT/RoBERTa model (`encoder_config`); the decoder is a post-norm Transformer decoder
    of the same width (self-attention, cross-attention, feed-forward, each followed by add & LayerNorm: the sentence
    planner paper's equations 2-4). Decoder input and output embeddings are the encoder's word embeddings (tied).

    Args:
        encoder_config (`PretrainedConfig` or `dict`, *optional*): the BERT/RoBERTa encoder's configuration (a
            sub-config; defaults to a BERT config).
        encoder_name_or_path (`str`, *optional*): where the encoder weights came from (Hub id or path).
        decoder_layers (`int`, *optional*, defaults to 6): decoder layers.
        decoder_attention_heads (`int`, *optional*): decoder heads (default: the encoder's).
        decoder_ffn_dim (`int`, *optional*): decoder feed-forward size (default: the encoder's intermediate size).
        decoder_init (`str`, *optional*, defaults to `"random"`): `"random"` (the paper's BertSumExtAbs baseline) or
            `"encoder"`: decoder layer `i` starts from encoder layer `i` (self-attention and feed-forward; the
            cross-attention is new, BERT2BERT style), which needs far less training; or `"shared"`: decoder layer
            `i`'s self-attention and feed-forward ARE encoder layer `i`'s modules (one set of parameters used by both,
            Rothe et al.'s BERT2BERT-share, Narayan et al.'s ROBERTASHARE), the cross-attention new.
        max_target_positions (`int`, *optional*, defaults to 512): longest summary in tokens.
        dropout (`float`, *optional*, defaults to 0.1): dropout of the decoder.
        label_smoothing (`float`, *optional*, defaults to 0.1): label smoothing of the training loss.
        max_sentence_tokens, min_sentence_tokens (`int`): the BERTSum input layout (see `BertSumConfig`).
        decoder_start_token, eos_token, sentence_separator_token (`str`): the summary's begin, end and sentence
            separator tokens (PreSumm's `[unused0]`, `[unused1]`, `[unused2]`); their ids are set from the tokenizer.
        no_repeat_word_ngram_size (`int`, *optional*, defaults to 3): the pipeline's blocking of repeated word
            n-grams (PreSumm's trigram blocking on words). The other decoding defaults (beam 5, length penalty 0.95,
            50 to 200 tokens) live in the model's `generation_config`, as transformers keeps them.
    """

    model_type = "bertsumabs"

    decoder_layers: int = 6
    decoder_attention_heads: int | None = None
    decoder_ffn_dim: int | None = None
    decoder_init: str = "random"
    max_target_positions: int = 512
    dropout: float = 0.1
    label_smoothing: float = 0.1
    max_sentence_tokens: int = 200
    min_sentence_tokens: int = 5
    decoder_start_token: str = "[unused0]"
    eos_token: str = "[unused1]"
    sentence_separator_token: str = "[unused2]"
    sentence_separator_token_id: int | None = None
    # the encoder's frame of a lone sentence ([CLS] ... [SEP]), as the sentence planner encodes summary sentences
    sentence_start_token_id: int | None = None
    sentence_end_token_id: int | None = None
    no_repeat_word_ngram_size: int = 3
    pad_token_id: int | None = None  # default: the encoder's
    is_encoder_decoder: bool = True

    def __post_init__(self, **kwargs):
        if self.decoder_init not in DECODER_INITS:
            raise ValueError(f"decoder_init must be one of {DECODER_INITS}, got {self.decoder_init!r}")
        super().__post_init__(**kwargs)  # builds the encoder sub-config, whose sizes the decoder defaults to
        self._default_to_encoder()
        self._check_decoder_sizes()

    def _default_to_encoder(self) -> None:
        encoder = self.encoder_config
        self.decoder_attention_heads = self.decoder_attention_heads or encoder.num_attention_heads
        self.decoder_ffn_dim = self.decoder_ffn_dim or encoder.intermediate_size
        if self.pad_token_id is None:
            self.pad_token_id = encoder.pad_token_id

    def _check_decoder_sizes(self) -> None:
        encoder = self.encoder_config
        check_positive_integers(
            decoder_layers=self.decoder_layers,
            decoder_attention_heads=self.decoder_attention_heads,
            decoder_ffn_dim=self.decoder_ffn_dim,
            max_target_positions=self.max_target_positions,
        )
        if encoder.hidden_size % self.decoder_attention_heads:
            raise ValueError(
                f"decoder_attention_heads={self.decoder_attention_heads} must divide the hidden size "
                f"{encoder.hidden_size}"
            )
        if self.decoder_init in ("encoder", "shared") and (
            self.decoder_layers > encoder.num_hidden_layers
            or self.decoder_attention_heads != encoder.num_attention_heads
            or self.decoder_ffn_dim != encoder.intermediate_size
        ):
            raise ValueError(
                f"decoder_init={self.decoder_init!r} reuses encoder layers: the decoder needs at most "
                f"{encoder.num_hidden_layers} layers of the encoder's heads and feed-forward size"
            )

    @property
    def vocab_size(self) -> int:
        return self.encoder_config.vocab_size

    def set_special_tokens(self, tokenizer) -> None:
        """Resolve the summary's begin, end and separator tokens to the tokenizer's ids (a one-line error if the
        vocabulary lacks one: pass other token strings)."""
        ids = {}
        for name in ("decoder_start_token", "eos_token", "sentence_separator_token"):
            token = getattr(self, name)
            token_id = tokenizer.convert_tokens_to_ids(token)
            if token_id is None or token_id == tokenizer.unk_token_id:
                raise ValueError(f"the tokenizer has no {name} {token!r}: set {name} to a token of its vocabulary")
            ids[name] = token_id
        self.decoder_start_token_id = self.bos_token_id = ids["decoder_start_token"]
        self.eos_token_id = ids["eos_token"]
        self.sentence_separator_token_id = ids["sentence_separator_token"]
        self.sentence_start_token_id = tokenizer.cls_token_id
        self.sentence_end_token_id = tokenizer.sep_token_id
        self.pad_token_id = tokenizer.pad_token_id


__all__ = ["BertSumAbsConfig"]
