"""The contract every sumformers model keeps, declared once on `SummarizerMixin` and read by the pipelines, the
training scripts and the hub code (instead of probing models with `hasattr`).

It also makes the small adapter checkpoints load the standard way. A shipped or trained checkpoint holds
`config.json`, the tokenizer (a generating model: `generation_config.json`) and a PEFT adapter (`adapter_config.json`,
`adapter_model.safetensors`: LoRA plus the new modules) over a pretrained encoder installed separately.
`from_pretrained` (and so `AutoModel.from_pretrained` and `pipeline(task, model=...)`) rebuilds the model over that
encoder, loads the adapter and its decoding settings and merges it; a folder or repo with full weights
(`model.safetensors`, as `save_pretrained` and `sumformers export` write) loads as usual.
"""


import torch
from transformers import GenerationConfig, PreTrainedModel
from transformers.generation.utils import ALL_CACHE_NAMES
from transformers.utils import cached_file, logging

from .pretrained_encoder import encoder_attention, quiet_loading

logger = logging.get_logger(__name__)

ADAPTER_CONFIG = "adapter_config.json"
FULL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
GENERATION_CONFIG = "generation_config.json"
# `from_pretrained` arguments that locate files (passed on to every file look-up).
HUB_ARGUMENTS = ("cache_dir", "force_download", "proxies", "token", "revision", "local_files_only", "subfolder")
# The keyword under which `generate()` hands a model its decoding cache: `past_key_values` in transformers 5.23,
# `cache` from 5.24 on (which still takes `past_key_values` from callers, with a deprecation warning).
GENERATE_CACHE_KEYWORD = ALL_CACHE_NAMES[0]


def decoding_cache(past_key_values, cache):
    """The decoding cache a generating model's `forward` was given, under either name (see GENERATE_CACHE_KEYWORD):
    a `forward` that read only `past_key_values` would decode every step of a 5.24 `generate()` without its past."""
    if cache is not None and past_key_values is not None:
        raise ValueError("give the decoding cache as `cache` or as `past_key_values`, not both")
    return past_key_values if cache is None else cache


class RegisteredProcessor:
    """`Model.processor_class` and `model.processor_class`: the processor bound to the model's config class in
    transformers' `AutoProcessor` mapping (which the sumformers registry fills), or, for an exported repo's remote
    code, the class its config's `auto_map["AutoProcessor"]` names. Looked up rather than imported, so that modeling
    never imports processing."""

    def __get__(self, model, model_class):
        from transformers.models.auto.processing_auto import PROCESSOR_MAPPING

        config = getattr(model, "config", None)
        for config_class in dict.fromkeys((type(config), model_class.config_class)):
            if config_class in PROCESSOR_MAPPING:
                return PROCESSOR_MAPPING[config_class]
        reference = (getattr(config, "auto_map", None) or {}).get("AutoProcessor")
        if reference is not None:
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            return get_class_from_dynamic_module(reference, config._name_or_path)
        raise LookupError(f"no processor is registered for {model_class.config_class.__name__} (import sumformers)")


class SummarizerMixin:
    """Mixed into every sumformers `PreTrainedModel` (before `PreTrainedModel` in the bases).

    Class attributes each model declares:
    - `pretrained_modules`: the top-level modules `from_encoder` fills from the pretrained encoder;
    - `new_modules`: the modules that are not (or not only) pretrained weights: trained in full and saved with an
      adapter checkpoint. Names may be nested modules inside pretrained ones (HiBERT's `summary_attention`);
    - `lora_layers`: the module list of pretrained layers LoRA may adapt (a dotted path), None where LoRA does not
      apply;
    - `processor_class` (read only, not declared here): the processor that turns text into this model's inputs and
      its choices back into text, as the registry binds it to the config class (see `RegisteredProcessor`);
    - `is_stepwise`: the model scores the next choice given a partial summary (`stepwise-summarization`, and the
      `content-planning` planners, whose summary is a plan);
    - `reads_multiple_documents`: one input may be several documents (`{"documents": [...]}`);
    - `attention_backends`: the `attn_implementation` values the model runs (with transformers' `_supports_sdpa` and
      `_supports_flex_attn` set to match); any other is refused when the model is made (`from_pretrained`,
      `from_config`, the constructor) or switched (`set_attn_implementation`), since a name transformers knows would
      otherwise be accepted and fail in `forward`. "blocked" (`attention.py`) is accepted here only: transformers'
      own models refuse it;
    - `default_attention`: the back end used when none is asked for (None: transformers' choice, "sdpa" where the
      model sets `_supports_sdpa`, else "eager");
    - `dense_attention_layers`: where a model that runs "blocked" or "flex_attention" has layers without a sparse
      pattern (which run SDPA for those back ends, `attention.attention_forward`), what they are: a one-line
      warning names them when the model is made with such a back end.

    Code reads the first three from a model instance (`model.new_modules`), so that a class whose contract depends on
    its config defines them as properties instead (WikiSum: a decoder started from the encoder is pretrained and
    adapted, one started from scratch has nothing pretrained and trains in full).
    """

    pretrained_modules: tuple[str, ...] = ()
    new_modules: tuple[str, ...] = ()
    lora_layers: str | None = None
    processor_class = RegisteredProcessor()
    is_stepwise = False
    reads_multiple_documents = False
    attention_backends: tuple[str, ...] = ("eager",)
    default_attention: str | None = None
    dense_attention_layers: str | None = None

    def get_correct_attn_implementation(self, requested_attention: str | None, is_init_check: bool = False) -> str:
        # transformers' own hook, called wherever a back end is chosen (construction, `from_pretrained`,
        # `from_config`, `set_attn_implementation`): the one place a model's default applies and a choice is checked
        requested_attention = requested_attention or self.default_attention
        if requested_attention is not None and requested_attention not in self.attention_backends:
            *others, last = map(repr, self.attention_backends)
            supported = f"{', '.join(others)} or {last}" if others else last
            raise ValueError(
                f"{type(self).__name__} does not run attn_implementation={requested_attention!r}: it runs {supported}"
            )
        if requested_attention == "blocked":  # ours alone: transformers' table does not hold it
            chosen = requested_attention
        else:
            chosen = super().get_correct_attn_implementation(requested_attention, is_init_check)
        if chosen in ("blocked", "flex_attention") and self.dense_attention_layers:
            logger.warning_once(
                f"{type(self).__name__}: {self.dense_attention_layers} run 'sdpa' for attn_implementation={chosen!r} "
                "(dense attention has no sparse layout)"
            )
        return chosen

    def set_attn_implementation(self, attn_implementation, allow_all_kernels: bool = False):
        """transformers' switch, with the choice checked by `get_correct_attn_implementation` and each transformers
        model inside (a pretrained encoder) given the closest back end it runs (`encoder_attention`, which warns)."""
        if not isinstance(attn_implementation, str):
            return super().set_attn_implementation(attn_implementation, allow_all_kernels)
        chosen = self._check_and_adjust_attn_implementation(attn_implementation, allow_all_kernels=allow_all_kernels)
        self.config._attn_implementation = chosen
        for name, module in self.named_modules():
            if isinstance(module, PreTrainedModel) and not isinstance(module, SummarizerMixin):
                layer = f"{type(self).__name__}.{name}"
                module.set_attn_implementation(encoder_attention(module.config, chosen, layer))

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        # `set_attn_implementation` on a built model: every sumformers attention layer reads
        # `config._attn_implementation` at each call, so a change applies at once. transformers guesses this from the
        # module's source instead, and where it guesses no, it warns and leaves the model's layers as they were while
        # still switching a pretrained encoder inside (which accepted back ends the model cannot run)
        return True

    @classmethod
    def from_encoder(cls, encoder_path: str, config=None, **config_kwargs):
        """A model whose `pretrained_modules` start from the pretrained BERT/RoBERTa encoder at `encoder_path`."""
        raise NotImplementedError(f"{cls.__name__} does not start from a pretrained encoder")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        hub_arguments = {name: kwargs[name] for name in HUB_ARGUMENTS if name in kwargs}
        if not is_adapter_checkpoint(pretrained_model_name_or_path, **hub_arguments):
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        return cls._from_adapter_checkpoint(str(pretrained_model_name_or_path), hub_arguments, **kwargs)

    @classmethod
    def _from_adapter_checkpoint(cls, path: str, hub_arguments: dict, **kwargs):
        from peft import PeftModel

        config = kwargs.pop("config", None)
        if config is None:
            config = cls.config_class.from_pretrained(path, **hub_arguments)
        attn_implementation = kwargs.pop("attn_implementation", None)
        if attn_implementation is not None:
            config._attn_implementation = attn_implementation
        dtype = kwargs.pop("dtype", None) or kwargs.pop("torch_dtype", None)
        device_map = kwargs.pop("device_map", None)
        base = cls.from_encoder(config.encoder_name_or_path, config=config)
        if base.can_generate() and is_present(path, GENERATION_CONFIG, **hub_arguments):
            base.generation_config = GenerationConfig.from_pretrained(path, **hub_arguments)
        with quiet_loading():
            model = PeftModel.from_pretrained(base, path, **hub_arguments).merge_and_unload()
        if isinstance(dtype, str) and dtype != "auto":
            dtype = getattr(torch, dtype)
        if isinstance(dtype, torch.dtype):
            model = model.to(dtype)
        if isinstance(device_map, (str, torch.device)) and str(device_map) != "auto":
            model = model.to(device_map)
        return model.eval()


def is_present(name_or_path, file_name: str, **hub_arguments) -> bool:
    """Whether a folder or Hub repo holds `file_name`."""
    return (
        cached_file(
            str(name_or_path),
            file_name,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
            **hub_arguments,
        )
        is not None
    )


def is_adapter_checkpoint(name_or_path, **hub_arguments) -> bool:
    """Whether a folder or Hub repo holds an adapter checkpoint (adapter files and no full weights)."""
    return is_present(name_or_path, ADAPTER_CONFIG, **hub_arguments) and not any(
        is_present(name_or_path, name, **hub_arguments) for name in FULL_WEIGHTS
    )


__all__ = ["GENERATE_CACHE_KEYWORD", "SummarizerMixin", "decoding_cache", "is_adapter_checkpoint"]
