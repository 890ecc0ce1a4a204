"""Configuration of the CopyTransformer (Aksenov et al. 2020, "Abstractive Text Summarization based on Language Model
Conditioning and Locality Modeling"): a Transformer encoder-decoder with a pointer-generator head (See et al. 2017)
over the WordPiece vocabulary of a BERT-style tokenizer."""

import contextlib
import copy
from contextvars import ContextVar

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

from .summarizer_config import KnownSettingsConfigMixin, check_positive_integers, portable_settings

# (config, width) while `generate` runs over a vocabulary the copy mechanism extends (`extended_vocabulary`)
_GENERATION_WIDTH: ContextVar[tuple | None] = ContextVar("copy_transformer_generation_width", default=None)

# What feeds the encoder: "tokens" (token and position embeddings), "bert_windowed" (the frozen BERT's windowed
# features replace the token embeddings: stacking) or "bert_concat" (the output of the lowest token-encoder layers
# concatenated with the windowed BERT features, the layers above over the result: concatenation).
ENCODER_INPUTS = ("tokens", "bert_windowed", "bert_concat")
# Convolutional self-attention in the lowest encoder layers (Yang et al. 2019).
CONVOLUTIONS = ("none", "1d", "2d", "circular_2d")
POSITION_EMBEDDINGS = ("sinusoidal", "learned")
# What the decoder reads its input tokens through: the model's own word table (shared with the encoder and the
# output layer), BERT's word embeddings (projected, scaled, plus the decoder's positions) or BERT's whole embedding
# layer (the original's: word, position and token-type embeddings and LayerNorm, then a linear layer).
DECODER_EMBEDDINGS = ("shared", "bert", "bert_embedding_layer")


class CopyTransformerConfig(KnownSettingsConfigMixin, PretrainedConfig):
    r"""
    The defaults are the paper's small ablation model (hidden 256, 4 heads, 3 + 3 layers, feed-forward 1024, dropout
    0.1), trained from scratch. The vocabulary is the WordPiece vocabulary of a BERT-style tokenizer (the bundled
    MiniLM's, 30,522 tokens), so that the processor tokenizes as BERT does and the decoder's embeddings can later come
    from BERT's word embeddings. The final distribution over the vocabulary extended by the source's unknown words is
    p(w) = p_gen P_copy(w) + (1 - p_gen) P_vocab(w): p_gen is the probability of copying.

    Args:
        vocab_size (`int`, *optional*, defaults to 30522): the tokenizer's vocabulary (MiniLM's WordPiece).
        d_model (`int`, *optional*, defaults to 256): width of every layer.
        word_embedding_size (`int`, *optional*): the width of the model's own word table. `None` (default): a
            vocabulary x `d_model` table, as the paper's. A smaller width factorizes it (ALBERT's embedding
            factorization): a vocabulary x `word_embedding_size` table and a linear map to `d_model` (no bias), the
            tied output layer the same product transposed. At 128 it saves 30,522 x 128 parameters (3.9M of the
            small model's 13.5M), so a token-input variant fits the 20 MB shipping limit.
        encoder_layers, decoder_layers (`int`, *optional*, defaults to 3): Transformer layers (pre-LayerNorm, as
            OpenNMT's Transformer, with a final LayerNorm after each stack). `encoder_layers=0` is allowed with
            `encoder_input="bert_windowed"`: the paper's "BERT encoder + Transformer decoder", whose decoder reads
            the projected BERT features (plus positions, LayerNorm) directly.
        attention_heads (`int`, *optional*, defaults to 4): heads of every self- and cross-attention.
        ffn_dim (`int`, *optional*, defaults to 1024): inner size of the feed-forward layers (ReLU).
        dropout (`float`, *optional*, defaults to 0.1): dropout on embeddings, residual branches and the feed-forward
            layers' inner activations.
        attention_dropout (`float`, *optional*, defaults to 0.1): dropout on attention probabilities (OpenNMT's).
        layer_norm_eps (`float`, *optional*, defaults to 1e-6):
        init_std (`float`, *optional*, defaults to 0.02): standard deviation of the initial weights.
        position_embedding_type (`str`, *optional*, defaults to `"sinusoidal"`): `"sinusoidal"` (Vaswani et al.,
            OpenNMT's default) or `"learned"` (a table of `max_source_positions` / `max_target_positions` rows).
        max_source_positions (`int`, *optional*, defaults to 512): document tokens the processor keeps (it cuts
            longer documents, with a warning) and the size of the learned position table; sinusoidal positions
            cover any length, so a model over windowed BERT can be given longer documents.
        max_target_positions (`int`, *optional*, defaults to 128): the longest summary in tokens, begin token included.
        label_smoothing (`float`, *optional*, defaults to 0.1): epsilon of the training loss
            (1 - epsilon) (-log p(y)) + epsilon mean_w (-log p(w)), w over the fixed vocabulary, p the mixture: what
            `F.cross_entropy(label_smoothing=epsilon)` computes for plain logits. 0 gives OpenNMT's copy loss, which
            has no smoothing.
        copy_mechanism (`bool`, *optional*, defaults to `True`): the pointer-generator head. `False` gives the
            paper's plain Transformer baseline (Table 2): p(w) = P_vocab(w), no copy attention, unknown summary words
            trained as `[UNK]`, no coverage penalty.
        coverage_penalty (`float`, *optional*, defaults to 0.0): weight beta of the coverage penalty at decoding
            (OpenNMT's stepwise "summary" penalty over the copy attention; the original decoded with 5). 0 turns it
            off. It changes which beams survive, so it acts in beam search only; see
            `sumformers.generation.coverage_penalty`.
        no_repeat_word_ngram_size (`int`, *optional*, defaults to 0): the `abstractive-summarization` pipeline's
            blocking of repeated word n-grams; 0 (off) as in the original. Beam 4, minimum length 55 and length
            penalty 0.9 live in the model's `generation_config`, as transformers keeps them.
        encoder_input (`str`, *optional*, defaults to `"tokens"`): what feeds the encoder. `"tokens"`: word and
            position embeddings. `"bert_windowed"` (the paper's stacking): the frozen BERT read in windows
            (`modeling.windowed_encoder.WindowedEncoder`: last four layers, averaged over overlapping windows, a
            trainable linear layer to `d_model`) replaces the word embeddings; positions are added as in `"tokens"`
            (BERT's own positions restart in every window). `"bert_concat"` (concatenation): the lowest
            `concat_after_layers` layers of the token encoder run as in `"tokens"`, their output concatenated with the
            windowed BERT features (projected to `d_model`) is projected back to `d_model`, and the encoder's
            remaining layers run over it.
        concat_after_layers (`int`, *optional*): with `"bert_concat"`, the encoder layers below the concatenation.
            Default: `convolution_layers`, the paper's design (Table 4): the convolutional layer's output
            concatenated with the BERT features, the two Transformer layers above it (`encoder_layers=3`) over the
            result. `encoder_layers` concatenates the whole token encoder's output (after its final LayerNorm) and
            runs no layer over it: this package's design before issue #40, which configs saved without the field
            keep.
        bert_name_or_path (`str`, *optional*): the frozen BERT of the `"bert_*"` inputs and of
            `decoder_embeddings="bert"` (default: the bundled all-MiniLM-L6-v2). It must share the model's
            vocabulary (the same ids feed both). Checkpoints leave its weights out and reload them from here.
        bert_config (`PretrainedConfig` or `dict`, *optional*): that BERT's configuration (a sub-config, set by
            `from_encoder`; read from `bert_name_or_path` when missing), so that the model is built before its
            weights load.
        bert_window (`int`, *optional*, defaults to 512): BERT positions per window, `[CLS]` and `[SEP]` included.
        bert_stride (`int`, *optional*, defaults to 256): tokens between the starts of consecutive windows.
        cls_token_id, sep_token_id (`int`, *optional*, defaults to 101 and 102): the `[CLS]` and `[SEP]` that frame
            each window (the MiniLM/BERT vocabulary's).
        decoder_embeddings (`str`, *optional*, defaults to `"shared"`): the decoder's word embeddings. `"shared"`:
            the model's own table (the encoder's and, tied, the output layer's). `"bert"` (the paper's
            BERT-conditioned decoder; needs a `"bert_*"` encoder input): BERT's word embeddings, frozen as the
            rest of BERT, through a trainable linear layer to `d_model` where the widths differ (as they are where
            they agree), scaled by sqrt(d_model) at the decoder's input as the model's own table is (unscaled they
            were a thirtieth of the positions' norm at initialisation). With `tie_word_embeddings`, the output layer
            is tied to these projected embeddings, unscaled (the decoder reads and writes one table, as OpenNMT's
            shared decoder embeddings; a per-word bias trains), and with `"bert_windowed"` the model keeps no table
            of its own (the encoder reads no tokens). `"bert_embedding_layer"` (the original code's decoder input,
            exactly): BERT's whole embedding layer (word + position + token-type-0 embeddings, then its LayerNorm,
            frozen and without dropout as the rest of BERT) through a trainable linear layer to `d_model` (at every
            width), with neither the sqrt(d_model) scaling nor positions or dropout of the decoder's own: the
            positions are BERT's (0 at the begin token), so `max_target_positions` must fit BERT's
            `max_position_embeddings`. The output layer is tied as with `"bert"` (to the projected word embeddings;
            the original's copy generator had an output layer of its own: `tie_word_embeddings=False`). Default
            `"shared"`; the shipped BERT-conditioned checkpoints were trained with `"bert"`.
        convolution (`str`, *optional*, defaults to `"none"`): convolutional self-attention
            (`modeling.convolutional_attention`) in the lowest `convolution_layers` encoder layers: `"1d"` (a window
            of positions), `"2d"` (also neighbouring heads) or `"circular_2d"` (heads wrap around); `"none"`: full
            self-attention everywhere.
        convolution_layers (`int`, *optional*, defaults to 1): how many of the lowest encoder layers use it.
        convolution_window (`int`, *optional*, defaults to 13): positions each query sees, centred on it (odd; the
            paper's sweep chose 13, 11 is its other setting).
        convolution_head_window (`int`, *optional*, defaults to 3): heads each query sees in the 2D modes (odd).
        encoder_name_or_path (`str`, *optional*): the encoder whose tokenizer (vocabulary) the model uses, recorded
            for model cards (default: the bundled MiniLM).
        pad_token_id, unk_token_id (`int`, *optional*, defaults to 0 and 100): the tokenizer's `[PAD]` and `[UNK]`.
        decoder_start_token_id, eos_token_id, sentence_separator_token_id (`int`, *optional*, defaults to 1, 2, 3):
            the summary's begin, end and sentence separator tokens (`[unused0]`, `[unused1]`, `[unused2]` of BERT
            vocabularies, as PreSumm).
        tie_word_embeddings (`bool`, *optional*, defaults to `True`): the output layer shares the decoder's word
            embeddings (the model's own table, which the encoder reads too, or with `decoder_embeddings="bert"` or
            `"bert_embedding_layer"` BERT's projected word embeddings).
    """

    model_type = "copy_transformer"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "attention_heads",
        "max_position_embeddings": "max_source_positions",
    }

    sub_configs_defaults = {
        "bert_config": SubConfigSpec(config_class=AutoConfig, model_type="bert", optional=True),
    }

    vocab_size: int = 30522
    d_model: int = 256
    word_embedding_size: int | None = None
    encoder_layers: int = 3
    decoder_layers: int = 3
    attention_heads: int = 4
    ffn_dim: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-6
    init_std: float = 0.02
    position_embedding_type: str = "sinusoidal"
    max_source_positions: int = 512
    max_target_positions: int = 128
    label_smoothing: float = 0.1
    copy_mechanism: bool = True
    coverage_penalty: float = 0.0
    no_repeat_word_ngram_size: int = 0
    encoder_input: str = "tokens"
    concat_after_layers: int | None = None
    bert_name_or_path: str | None = None
    bert_config: dict | PretrainedConfig | None = None
    bert_window: int = 512
    bert_stride: int = 256
    cls_token_id: int = 101
    sep_token_id: int = 102
    decoder_embeddings: str = "shared"
    convolution: str = "none"
    convolution_layers: int = 1
    convolution_window: int = 13
    convolution_head_window: int = 3
    encoder_name_or_path: str | None = None
    pad_token_id: int = 0
    unk_token_id: int = 100
    decoder_start_token_id: int = 1
    bos_token_id: int | None = None  # transformers' name for the first decoder token: decoder_start_token_id
    eos_token_id: int = 2
    sentence_separator_token_id: int = 3
    tie_word_embeddings: bool = True
    is_encoder_decoder: bool = True

    def __post_init__(self, **kwargs):
        self._check_choices()
        self._check_sizes()
        self._check_encoder_layers()
        self._check_bert_inputs()
        self._check_training()
        self._check_token_ids()
        if self.encoder_input == "bert_concat" and self.concat_after_layers is None:
            self.concat_after_layers = self.convolution_layers  # the paper's design (see the docstring)
        self.copy_mechanism = bool(self.copy_mechanism)
        # bert_name_or_path says where the weights come from
        self.bert_config = portable_settings(self.bert_config)
        if self.bos_token_id is None:
            self.bos_token_id = self.decoder_start_token_id
        super().__post_init__(**kwargs)

    def _check_choices(self) -> None:
        for name, choices in (
            ("encoder_input", ENCODER_INPUTS),
            ("convolution", CONVOLUTIONS),
            ("decoder_embeddings", DECODER_EMBEDDINGS),
            ("position_embedding_type", POSITION_EMBEDDINGS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name}={getattr(self, name)!r} is not supported: choose one of {choices}")

    def _check_sizes(self) -> None:
        check_positive_integers(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            decoder_layers=self.decoder_layers,
            attention_heads=self.attention_heads,
            ffn_dim=self.ffn_dim,
            max_source_positions=self.max_source_positions,
            max_target_positions=self.max_target_positions,
            convolution_layers=self.convolution_layers,
            bert_window=self.bert_window,
            bert_stride=self.bert_stride,
        )
        if self.d_model % self.attention_heads:
            raise ValueError(f"attention_heads={self.attention_heads} must divide d_model={self.d_model}")
        if self.position_embedding_type == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")

    def _check_encoder_layers(self) -> None:
        """The encoder's depth, and the convolutional layers at its bottom."""
        layers = self.encoder_layers
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
            raise ValueError(f"encoder_layers must be a non-negative integer, got {layers!r}")
        if layers == 0 and self.encoder_input != "bert_windowed":
            raise ValueError("encoder_layers=0 (BERT features straight to the decoder) needs bert_windowed input")
        if self.convolution != "none" and self.convolution_layers > layers:
            raise ValueError(f"convolution_layers={self.convolution_layers} exceeds encoder_layers={layers}")
        for name in ("convolution_window", "convolution_head_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value % 2 == 0:
                raise ValueError(f"{name} must be a positive odd integer (centred on the query), got {value!r}")

    def _check_bert_inputs(self) -> None:
        """What the BERT inputs and the BERT-conditioned decoder need of each other and of the word table."""
        if self.word_embedding_size is not None:
            check_positive_integers(word_embedding_size=self.word_embedding_size)
            if self.encoder_input == "bert_windowed" and self.decoder_reads_bert:
                raise ValueError("word_embedding_size: stacking with the BERT-conditioned decoder keeps no word table")
        if self.encoder_input == "bert_concat":
            after = self.convolution_layers if self.concat_after_layers is None else self.concat_after_layers
            if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= self.encoder_layers:
                raise ValueError(f"concat_after_layers must be an integer in 0..encoder_layers={self.encoder_layers}, "
                                 f"got {after!r}")
        elif self.concat_after_layers is not None:
            raise ValueError('concat_after_layers places the concatenation: it needs encoder_input="bert_concat"')
        if self.decoder_reads_bert and self.encoder_input == "tokens":
            raise ValueError(f'decoder_embeddings="{self.decoder_embeddings}" needs a BERT encoder input '
                             '("bert_windowed" or "bert_concat")')

    def _check_training(self) -> None:
        """Dropout, label smoothing and the coverage penalty."""
        for name in ("dropout", "attention_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.coverage_penalty < 0:
            raise ValueError(f"coverage_penalty must be at least 0, got {self.coverage_penalty}")
        if self.coverage_penalty and not self.copy_mechanism:
            raise ValueError("the coverage penalty reads the copy attention: it needs copy_mechanism=True")

    def _check_token_ids(self) -> None:
        ids = (self.pad_token_id, self.unk_token_id, self.decoder_start_token_id, self.eos_token_id,
               self.sentence_separator_token_id)
        if any(not 0 <= token_id < self.vocab_size for token_id in ids):
            raise ValueError(f"special token ids {ids} must lie in the vocabulary of {self.vocab_size}")

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """`PretrainedConfig.from_dict`; a concatenation config saved before `concat_after_layers` existed keeps the
        design it was trained with (the concatenation after the whole encoder)."""
        if config_dict.get("encoder_input") == "bert_concat" and "concat_after_layers" not in config_dict:
            config_dict = {**config_dict, "concat_after_layers": config_dict.get("encoder_layers", 3)}
        return super().from_dict(config_dict, **kwargs)

    @property
    def uses_bert(self) -> bool:
        """Whether the model holds the frozen BERT (a `"bert_*"` encoder input)."""
        return self.encoder_input != "tokens"

    @property
    def decoder_reads_bert(self) -> bool:
        """Whether the decoder reads its inputs through the frozen BERT's embeddings (`decoder_embeddings` "bert" or
        "bert_embedding_layer")."""
        return self.decoder_embeddings != "shared"

    def get_text_config(self, *args, **kwargs):
        """Within `extended_vocabulary(self, width)`, the plain call gives a copy whose `vocab_size` is `width`;
        otherwise (and for `decoder=`/`encoder=` calls) as transformers gives it."""
        extended = _GENERATION_WIDTH.get()
        if extended is not None and extended[0] is self and not args and not kwargs:
            view = copy.copy(self)
            view.vocab_size = extended[1]
            return view
        return super().get_text_config(*args, **kwargs)

    @contextlib.contextmanager
    def extended_vocabulary(self, width: int):
        """`generate` over `width` output ids: the vocabulary plus the batch's unknown source words, the width of the
        copy mechanism's scores. Beam search in transformers before 5.23 (5.17, say) reshapes the scores by
        `get_text_config().vocab_size` rather than by their own width; the model's layers keep reading
        `self.vocab_size`."""
        token = _GENERATION_WIDTH.set((self, width) if width > self.vocab_size else None)
        try:
            yield
        finally:
            _GENERATION_WIDTH.reset(token)


__all__ = ["CopyTransformerConfig"]
