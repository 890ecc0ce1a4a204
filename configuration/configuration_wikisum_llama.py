"""Configuration of WikiSum (Liu et al. 2018) over a pretrained Llama-family decoder (SmolLM2-135M-Instruct by
default, `modeling/pretrained_decoder.py`): the Llama settings of the base model plus the layout of the paper's
T-D (full causal attention everywhere) or T-DMCA (local-attention blocks and memory-compressed attention in
alternating layers). The paper's from-scratch decoder is `WikiSumConfig` (`configuration_wikisum.py`)."""

from transformers import LlamaConfig

from ..text.ranking import RANKERS
from .summarizer_config import check_positive_integers

LLAMA_ATTENTION_LAYERS = ("full", "local", "compressed")
INPUT_ORDERS = ("article", "rank")
DEFAULT_INSTRUCTION = "Summarize the following news article in three sentences."


def attention_layout(variant: str, num_layers: int) -> list[str]:
    """The paper's layouts for `num_layers` layers: "T-D" all full; "T-DMCA" local and memory-compressed layers
    alternating, local first (the paper's L-M-L-M-L)."""
    if variant == "T-D":
        return ["full"] * num_layers
    if variant == "T-DMCA":
        return ["local" if index % 2 == 0 else "compressed" for index in range(num_layers)]
    raise ValueError(f"variant must be 'T-D' or 'T-DMCA', got {variant!r}")


class WikiSumLlamaConfig(LlamaConfig):
    r"""
    A `LlamaConfig` (the base model's settings, read from its folder) with the WikiSum layout and input settings.

    Args:
        attention_layers (`list[str]`, *optional*): one of `"full"`, `"local"`, `"compressed"` per layer. `None`
            (default): all `"full"`, the paper's T-D, which is the base model itself. `"local"`: a query sees the
            earlier positions of its own block of `local_block_size` and the whole previous block. `"compressed"`:
            memory-compressed attention: the keys and values (after the rotary positions) of every complete group of
            `compression_stride` positions before the query's own group are compressed into one slot by a strided
            convolution (kernel = stride), and the query sees those slots plus the uncompressed keys of its own group
            up to itself. With `compression_stride=1` and the convolution's identity start this is full attention.
        local_block_size (`int`, *optional*, defaults to 256): the paper's block length.
        compression_stride (`int`, *optional*, defaults to 3): the paper's kernel size and stride.
        max_input_tokens (`int`, *optional*, defaults to 512): L, the tokens of ranked article text in a prompt.
        ranker (`str`, *optional*, defaults to `"textrank"`): the stage-1 ranker of the article's sentences
            (`text.ranking`; a news article has no title for `tfidf` to rank against).
        input_order (`str`, *optional*, defaults to `"article"`): the kept sentences in article order, or in rank
            order as the paper concatenates paragraphs (`"rank"`).
        instruction (`str`, *optional*): the request before the ranked text in the prompt (the base model's chat
            template, when its tokenizer has one, frames the two; the assistant header is the separator).
        base_model_name_or_path (`str`, *optional*): the Llama-family folder or Hub id the weights came from.
        generated_repetition_penalty (`float`, *optional*, defaults to 1.1): CTRL's repetition penalty over the
            generated tokens only (over the prompt too it keeps the summary from writing the article's names).
        no_repeat_word_ngram_size (`int`, *optional*, defaults to 0): block repeated word n-grams of this size inside
            a summary (the prompt left out; 0: off, the base model's own decoding).
    """

    model_type = "wikisum_llama"

    attention_layers: list[str] | None = None
    local_block_size: int = 256
    compression_stride: int = 3
    max_input_tokens: int = 512
    ranker: str = "textrank"
    input_order: str = "article"
    instruction: str = DEFAULT_INSTRUCTION
    base_model_name_or_path: str | None = None
    generated_repetition_penalty: float = 1.1
    no_repeat_word_ngram_size: int = 0

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.attention_layers is None:
            self.attention_layers = ["full"] * self.num_hidden_layers
        self.attention_layers = list(self.attention_layers)
        unknown = sorted(set(self.attention_layers) - set(LLAMA_ATTENTION_LAYERS))
        if unknown:
            raise ValueError(f"attention_layers may hold {LLAMA_ATTENTION_LAYERS}, got {unknown}")
        if len(self.attention_layers) != self.num_hidden_layers:
            raise ValueError(
                f"attention_layers names {len(self.attention_layers)} layers; the model has {self.num_hidden_layers}"
            )
        check_positive_integers(
            local_block_size=self.local_block_size,
            compression_stride=self.compression_stride,
            max_input_tokens=self.max_input_tokens,
        )
        if self.ranker not in RANKERS:
            raise ValueError(f"ranker must be one of {RANKERS}, got {self.ranker!r}")
        if self.input_order not in INPUT_ORDERS:
            raise ValueError(f"input_order must be one of {INPUT_ORDERS}, got {self.input_order!r}")

    @property
    def variant(self) -> str:
        """T-D (all full), T-DMCA (local and compressed only) or mixed."""
        layers = set(self.attention_layers)
        return "T-D" if layers == {"full"} else "T-DMCA" if "full" not in layers else "mixed"


__all__ = ["WikiSumLlamaConfig", "attention_layout"]
