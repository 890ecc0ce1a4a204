"""Configuration of the WikiSum decoder-only summarizer (Liu et al. 2018, "Generating Wikipedia by Summarizing Long
Sequences"): T-D (full causal attention) and T-DMCA (local and memory-compressed attention, optional mixture of
experts)."""

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from ..text.ranking import RANKERS, RANKING_UNITS
from .summarizer_config import KnownSettingsConfigMixin

ATTENTION_LAYER_TYPES = ("full", "local", "compressed")
DECODER_INITS = ("random", "encoder")
LAYER_NORM_POSITIONS = ("pre", "post")
POSITION_EMBEDDINGS = ("timing", "learned")
# the paper's T-DMCA: L-M-L-M-L
DEFAULT_ATTENTION_LAYERS = ("local", "compressed", "local", "compressed", "local")


class WikiSumConfig(KnownSettingsConfigMixin, PretrainedConfig):
    r"""
    Args:
        vocab_size (`int`, *optional*, defaults to 30522):
            Vocabulary size (the bundled MiniLM WordPiece by default).
        embedding_size (`int`, *optional*, defaults to 128):
            Width of the token embedding table, which is also the output softmax (the two are tied). Smaller than
            `hidden_size` keeps a 30k vocabulary cheap; a linear projection maps it to `hidden_size` and back.
        hidden_size (`int`, *optional*, defaults to 256):
            Width of the decoder layers.
        attention_layers (`list[str]`, *optional*, defaults to L-M-L-M-L, `["local", "compressed", ...]`):
            One attention type per layer: `"full"` (causal self-attention over every earlier position, the paper's
            T-D), `"local"` (blocks of `local_block_size`: a query sees the earlier positions of its own block and the
            whole previous block) or `"compressed"` (memory-compressed: keys and values shortened by a strided
            convolution, a query sees only compressed slots made entirely of earlier positions, plus one learned
            always-visible slot). The default is the paper's T-DMCA layout L-M-L-M-L.
        num_attention_heads (`int`, *optional*, defaults to 4):
            Heads per attention layer.
        intermediate_size (`int`, *optional*, defaults to 1024):
            Inner size of the dense feed-forward layers.
        local_block_size (`int`, *optional*, defaults to 256):
            Block length of the local layers.
        compression_stride (`int`, *optional*, defaults to 3):
            Kernel size and stride of the key/value compression of the compressed layers.
        moe_layers (`list[int]`, *optional*, defaults to `[]`):
            Indices of the layers whose feed-forward block is a mixture of experts.
        num_experts (`int`, *optional*, defaults to 8):
            Experts per mixture-of-experts layer.
        num_experts_per_token (`int`, *optional*, defaults to 2):
            Experts each token is routed to (top-k gating).
        expert_intermediate_size (`int`, *optional*, defaults to 512):
            Inner size of each expert's feed-forward network.
        router_aux_loss_coef (`float`, *optional*, defaults to 0.01):
            Weight of the load-balancing loss added to the language-modelling loss.
        hidden_dropout (`float`, *optional*, defaults to 0.1):
            Dropout on the residual branches and embeddings.
        attention_dropout (`float`, *optional*, defaults to 0.0):
            Dropout on attention probabilities (not supported by `flex_attention`).
        layer_norm_eps (`float`, *optional*, defaults to 1e-6):
        initializer_range (`float`, *optional*, defaults to 0.02):
        separator_token_id (`int`, *optional*, defaults to 103):
            The token between the extracted input and the summary (`[MASK]` of the MiniLM vocabulary, a token that
            never occurs in text).
        paragraph_separator_token_id (`int`, *optional*, defaults to 102):
            The token after the title and after every extracted paragraph (`[SEP]`).
        max_input_tokens (`int`, *optional*, defaults to 1024):
            Default L of the pipeline: tokens of title and ranked paragraphs fed to the decoder.
        max_position_embeddings (`int`, *optional*, defaults to 16384):
            The longest sequence (decoder input and generated summary together) that `generate()` and the `wikisum`
            pipeline accept; a longer request is refused with a ValueError before any work. The timing signal is
            computed rather than learned, so `forward` itself takes any length (the memory benchmark trains past
            it); the limit stops a mistaken setting (`max_new_tokens=10**9`) from running for hours and keeps
            positions well inside the timing signal's longest wavelength (2 pi 10^4, about 62,800 positions, past
            which its slowest component wraps around). 16384 covers the paper's longest T-DMCA input (L = 11,000)
            with room for a summary. With `position_embeddings="learned"` it is the size of the position table, and
            `forward` refuses longer sequences too.
        ranker (`str`, *optional*, defaults to `"tfidf"`):
            Default stage-1 ranker of the pipeline, one of `identity`, `tfidf`, `textrank`, `sumbasic`, `oracle`.
        ranking_unit (`str`, *optional*, defaults to `"paragraph"`):
            What the pipeline's ranker ranks by default, as the model was trained (`train_wikisum.py
            --ranking_unit`): `"paragraph"`, the input's paragraphs as given (blank lines, else lines), or
            `"sentence"`, each document split into sentences first, so that a plain article string is ranked
            sentence by sentence.
        encoder_name_or_path (`str`, *optional*):
            Where the initial weights came from (a Hub id), recorded for model cards: the word embeddings only
            (`decoder_init="random"`) or the whole decoder (`"encoder"`).
        decoder_init (`str`, *optional*, defaults to `"random"`):
            How `WikiSumForCausalLM.from_encoder` started the decoder, recorded for cards: `"random"` (the paper's
            from-scratch decoder; word embeddings from a PCA of the encoder's) or `"encoder"` (vocabulary, word
            embeddings, every layer's attention, feed-forward and LayerNorms copied from a BERT-style encoder, the
            layer settings below set to match it). Loading a saved model never reads the encoder again.
        encoder_layer_map (`list[int]`, *optional*):
            With `decoder_init="encoder"`: the encoder layer each decoder layer was copied from (recorded for cards).
        layer_norm_position (`str`, *optional*, defaults to `"pre"`):
            `"pre"`: LayerNorm before each sublayer and once after the last layer (Tensor2Tensor's layout, the
            default). `"post"`: BERT's layout, a LayerNorm over the embeddings and after each residual addition and
            none at the end, so that weights copied from BERT are used the way they were trained.
        hidden_act (`str`, *optional*, defaults to `"relu"`):
            Activation of the feed-forward blocks (Tensor2Tensor: ReLU; BERT: GELU).
        attention_bias (`bool`, *optional*, defaults to `False`):
            Whether the query, key, value and output projections have biases (BERT's do).
        scale_embedding (`bool`, *optional*, defaults to `True`):
            Multiply the projected word embeddings by sqrt(hidden_size) (Tensor2Tensor) before the timing signal is
            added; BERT adds its position embeddings to the unscaled word embeddings.
        timing_signal_scale (`float`, *optional*, defaults to 1.0):
            Factor on the sinusoidal timing signal (the only position information). `from_encoder` sets it to the
            size of the encoder's learned position vectors (see there).
        position_embeddings (`str`, *optional*, defaults to `"timing"`):
            `"timing"`: the sinusoidal timing signal (the paper's; any length). `"learned"`: a learned table of
            `max_position_embeddings` vectors instead, which `from_encoder` copies from the encoder's (so that the
            copied layers see the positions they were trained with; at most the encoder's 512 positions).
        copy_mechanism (`bool`, *optional*, defaults to `False`):
            Not in the paper: a pointer-generator head (`modeling/pointer_generator.py`, the CopyTransformer's) whose
            copy attention reads the final states of the input positions before the separator, so that a summary
            token is p_gen P_copy(w) + (1 - p_gen) P_vocab(w). `forward` then returns log-probabilities as logits:
            the mixture from the separator on, the vocabulary softmax before it.
    """

    model_type = "wikisum"
    keys_to_ignore_at_inference = ["past_key_values"]

    vocab_size: int = 30522
    embedding_size: int = 128
    hidden_size: int = 256
    attention_layers: list[str] | None = None
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    local_block_size: int = 256
    compression_stride: int = 3
    moe_layers: list[int] | None = None
    num_experts: int = 8
    num_experts_per_token: int = 2
    expert_intermediate_size: int = 512
    router_aux_loss_coef: float = 0.01
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.0
    layer_norm_eps: float = 1e-6
    initializer_range: float = 0.02
    pad_token_id: int = 0
    bos_token_id: int = 101
    eos_token_id: int = 102
    separator_token_id: int = 103
    paragraph_separator_token_id: int = 102
    max_input_tokens: int = 1024
    max_position_embeddings: int = 16384
    ranker: str = "tfidf"
    ranking_unit: str = "paragraph"
    encoder_name_or_path: str | None = None
    decoder_init: str = "random"
    encoder_layer_map: list[int] | None = None
    layer_norm_position: str = "pre"
    hidden_act: str = "relu"
    attention_bias: bool = False
    scale_embedding: bool = True
    timing_signal_scale: float = 1.0
    position_embeddings: str = "timing"
    copy_mechanism: bool = False
    tie_word_embeddings: bool = True

    def __post_init__(self, **kwargs):
        self.attention_layers = list(self.attention_layers or DEFAULT_ATTENTION_LAYERS)
        self.moe_layers = sorted(set(self.moe_layers or []))
        if self.encoder_layer_map is not None:
            self.encoder_layer_map = list(self.encoder_layer_map)
        self._check_layout()
        self._check_choices()
        # the decoder input is L tokens and the separator, and a summary needs at least one position after it
        if not 2 <= self.max_input_tokens <= self.max_position_embeddings - 2:
            raise ValueError(
                f"max_input_tokens must be in [2, max_position_embeddings - 2 = {self.max_position_embeddings - 2}], "
                f"got {self.max_input_tokens}"
            )
        super().__post_init__(**kwargs)
        # derived from the layout (a saved config.json repeats it)
        self.num_hidden_layers = len(self.attention_layers)

    def _check_layout(self) -> None:
        layers = self.attention_layers
        unknown = sorted(set(layers) - set(ATTENTION_LAYER_TYPES))
        if unknown:
            raise ValueError(f"attention_layers may hold {ATTENTION_LAYER_TYPES}, got {unknown}")
        if any(not 0 <= index < len(layers) for index in self.moe_layers):
            raise ValueError(f"moe_layers {self.moe_layers} must index the {len(layers)} layers")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} must be a multiple of num_attention_heads {self.num_attention_heads}"
            )
        experts, per_token = self.num_experts, self.num_experts_per_token
        if self.moe_layers and not 1 <= per_token <= experts:
            raise ValueError(f"num_experts_per_token must be in [1, num_experts={experts}], got {per_token}")
        if self.local_block_size < 1 or self.compression_stride < 1:
            raise ValueError("local_block_size and compression_stride must be positive")
        if self.encoder_layer_map is not None and len(self.encoder_layer_map) != len(layers):
            raise ValueError(
                f"encoder_layer_map names {len(self.encoder_layer_map)} layers for {len(layers)} decoder layers"
            )

    def _check_choices(self) -> None:
        for name, choices in (
            ("ranker", RANKERS),
            ("ranking_unit", RANKING_UNITS),
            ("decoder_init", DECODER_INITS),
            ("layer_norm_position", LAYER_NORM_POSITIONS),
            ("position_embeddings", POSITION_EMBEDDINGS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")
        if self.hidden_act not in ACT2FN:
            raise ValueError(f"hidden_act must be an activation transformers knows (ACT2FN), got {self.hidden_act!r}")

    @property
    def variant(self) -> str:
        """The paper's name for this layout: T-D (all full), T-DMCA (local and compressed), with "-MoE" when used."""
        name = (
            "T-D"
            if set(self.attention_layers) == {"full"}
            else "T-DMCA"
            if "full" not in self.attention_layers
            else "mixed"
        )
        return name + ("-MoE" if self.moe_layers else "")
