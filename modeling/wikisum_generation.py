"""`generate()` settings checked before any work: a setting that would fail deep inside transformers or torch
(`num_beams=0`, `max_new_tokens=2.5`) or run for hours (`max_new_tokens=10**9`) raises a one-line ValueError instead.
WikiSum's model and the `wikisum` pipeline use it."""

import numbers
import warnings

import torch
from transformers import GenerationConfig

from ..generation.length_penalty import resolve_length_penalty_type

# generate() settings that must be whole numbers: a float or a string ends deep inside transformers or torch
INTEGER_GENERATION_SETTINGS = (
    "max_new_tokens",
    "min_new_tokens",
    "max_length",
    "min_length",
    "num_beams",
    "num_return_sequences",
    "no_repeat_ngram_size",
)


def is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class CheckedGenerationMixin:
    """Mixed in before `LengthPenaltyTypeMixin` and `GenerationMixin`: `generate()` checks its settings and the
    padding of its rows first. The model's `config.max_position_embeddings` bounds the input plus the summary, and
    its `padding_alignment` is the left padding (a multiple of it) under which a row decodes as it would alone."""

    def with_caller_maximum_length(self, generation_config: GenerationConfig | None, kwargs: dict) -> dict:
        """`generate()` keywords with `min_new_tokens` lowered to the caller's `max_new_tokens` where only the saved
        generation config asks for more: a length given at the call wins over a checkpoint's default minimum (a
        minimum the caller gives too is checked as given)."""

        def given(name):
            value = kwargs.get(name)
            return value if value is not None else getattr(generation_config, name, None)

        maximum, saved_minimum = given("max_new_tokens"), self.generation_config.min_new_tokens
        if given("min_new_tokens") is not None or not (is_integer(maximum) and is_integer(saved_minimum)):
            return kwargs
        return {**kwargs, "min_new_tokens": maximum} if saved_minimum > maximum else kwargs

    def check_generation_settings(
        self, prompt_length: int, generation_config: GenerationConfig | None = None, **kwargs
    ) -> None:
        """Raise a one-line ValueError for `generate()` settings that would otherwise fail deep inside transformers
        or torch (`num_beams=0` or `2.5`) or run for hours (`max_new_tokens=10**9`); `generate()` and the `wikisum`
        pipeline call it before any work. `prompt_length` is the length of the input the summary continues;
        `generation_config` and `kwargs` are `generate()`'s, on top of the model's `generation_config`.

        Besides transformers' own checks (`GenerationConfig.validate()`: `max_new_tokens` at least 1, ...), the
        integer settings must be integers, `num_beams` and `num_return_sequences` at least 1, `min_new_tokens`
        between 0 and `max_new_tokens`, `length_penalty_type` one of `LENGTH_PENALTY_TYPES`, and the input plus the
        summary must fit in `config.max_position_embeddings`.
        """
        resolve_length_penalty_type(kwargs.pop("length_penalty_type", None), generation_config, self.generation_config)
        for source in (kwargs, generation_config, self.generation_config):
            for name in INTEGER_GENERATION_SETTINGS:
                value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
                if value is not None and not is_integer(value):
                    raise ValueError(f"{name} must be an integer, got {value!r}")
        # transformers' own merge of the model's defaults, `generation_config` and the keywords, which runs
        # GenerationConfig.validate() (it refuses e.g. max_new_tokens <= 0)
        settings, _ = self._prepare_generation_config(generation_config, **kwargs)
        for name in ("num_beams", "num_return_sequences"):
            value = getattr(settings, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        max_new_tokens, min_new_tokens = settings.max_new_tokens, settings.min_new_tokens
        if min_new_tokens is not None and min_new_tokens < 0:
            raise ValueError(f"min_new_tokens must be at least 0, got {min_new_tokens}")
        if min_new_tokens is not None and max_new_tokens is not None and min_new_tokens > max_new_tokens:
            raise ValueError(f"min_new_tokens ({min_new_tokens}) must not exceed max_new_tokens ({max_new_tokens})")
        limit = self.config.max_position_embeddings
        where = f"the model's limit of {limit} positions (config.max_position_embeddings)"
        if prompt_length >= limit:
            raise ValueError(f"an input of {prompt_length} tokens leaves no room for a summary within {where}")
        if max_new_tokens is not None:
            total = prompt_length + max_new_tokens
            if total > limit:
                raise ValueError(
                    f"{prompt_length} input tokens + max_new_tokens={max_new_tokens} = {total} exceed {where}"
                )
            return
        # as in generate(): without max_new_tokens, an explicit max_length is the total length (the default one is
        # capped at max_position_embeddings by transformers itself)
        explicit_max_length = (
            kwargs.get("max_length") is not None
            or (generation_config is not None and generation_config.max_length is not None)
            or self.generation_config.max_length is not None
        )
        if explicit_max_length and settings.max_length > limit:
            raise ValueError(f"max_length={settings.max_length} exceeds {where}")

    def check_padding(self, attention_mask: torch.Tensor | None) -> None:
        """Raise a one-line ValueError for padding after a row's tokens (its summary would continue after the
        padding); warn in one line where left padding that is not a multiple of `padding_alignment` makes rows
        decode otherwise than alone (close, but not the same)."""
        if attention_mask is None or bool(attention_mask.all()):
            return
        real = attention_mask.bool()
        if not bool(real[:, -1].all()):
            raise ValueError("generate() continues each row at its end: pad the rows on the left (padding_side='left')")
        padding = (~real).sum(dim=1)
        unaligned = padding[padding % self.padding_alignment != 0].tolist()
        if unaligned:
            warnings.warn(
                f"rows left-padded by {unaligned} tokens do not decode exactly as they do alone (this model's left "
                f"padding should be a multiple of {self.padding_alignment} tokens): generate one row at a time, as the "
                "pipeline does, for outputs that do not depend on the batch",
                stacklevel=3,
            )

    def generate(
        self,
        inputs: torch.Tensor | None = None,
        generation_config: GenerationConfig | None = None,
        length_penalty_type: str | None = None,
        **kwargs,
    ):
        """`GenerationMixin.generate` after `check_generation_settings`: absurd settings raise a one-line ValueError
        before any work instead of failing inside transformers or torch.

        `length_penalty_type` (default: the generation config's `length_penalty_type`, else `"transformers"`) is how
        beam search normalises a finished hypothesis' log-probability: `"transformers"` divides it by
        |Y| ** `length_penalty`, `"gnmt"` by ((5 + |Y|) / 6) ** `length_penalty` (the paper's beam search, alpha
        0.6), |Y| counting the generated tokens and the end token (`generation/length_penalty.py`)."""
        prompt = next(
            (tensor for tensor in (inputs, kwargs.get("input_ids"), kwargs.get("inputs_embeds")) if tensor is not None),
            None,
        )
        kwargs = self.with_caller_maximum_length(generation_config, kwargs)
        # no input: generate() starts from the bos token alone
        self.check_generation_settings(1 if prompt is None else prompt.shape[1], generation_config, **kwargs)
        self.check_padding(kwargs.get("attention_mask"))
        return super().generate(inputs, generation_config, length_penalty_type=length_penalty_type, **kwargs)


__all__ = ["INTEGER_GENERATION_SETTINGS", "CheckedGenerationMixin", "is_integer"]
