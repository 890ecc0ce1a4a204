"""What the summarizer configurations share: the pretrained BERT/RoBERTa encoder a model is built over (the sub-config
`encoder_config`, and `encoder_name_or_path`), their checks, and the settings of the stepwise models.

transformers turns every config class into a dataclass: its annotated class attributes are the fields (typed
defaults), its generated `__init__` takes them as keywords, and checks run in `__post_init__`. The mixins here are
dataclasses too (fields and `__post_init__`, no `__init__`), so that a config class that mixes one in takes its
fields and defaults; a mixin placed earlier in the bases overrides the defaults of the classes after it."""

import contextlib
import contextvars
import dataclasses
import difflib
import functools

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

# Encoders that reserve padding_idx + 1 position rows before the first token.
_ROBERTA_STYLE = ("roberta", "xlm-roberta", "camembert")

#: Default summary lengths (`num_sentences`: the most sentences a summary takes; a content planner's, plan units) of
#: every kind of summarizer, the one table the configs, training scripts and benchmarks read.
DEFAULT_SUMMARY_SENTENCES = {
    "extractive": 3,  # top 3 (PreSumm's CNN/DailyMail setting, and the non-stepwise models' of every paper here)
    "multi_document": 9,  # HetFormer on several documents (the paper's Multi-News setting)
    "stepwise": 4,  # the Stepwise paper's 4 steps
    "content_plan": 120,  # the longest Rotowire plan, in units before its end
}

# The mixins hold fields only: no generated __init__, __repr__ or __eq__ (each config class gets its own).
_config_mixin = dataclasses.dataclass(init=False, repr=False, eq=False, kw_only=True)


# What `PretrainedConfig` takes besides its fields (how to run a model, not a setting of it).
TRANSFORMERS_KEYWORDS = frozenset(
    {"attn_implementation", "experts_implementation", "output_attentions", "torch_dtype", "num_labels", "name_or_path"}
)
# True while a saved config is read (`from_dict`, `from_json_file`).
_reading_saved_config = contextvars.ContextVar("reading_saved_config", default=False)


@contextlib.contextmanager
def reading_saved_config():
    token = _reading_saved_config.set(True)
    try:
        yield
    finally:
        _reading_saved_config.reset(token)


@_config_mixin
class KnownSettingsConfigMixin:
    """A config made in code refuses a keyword that is not one of its fields (nor one of `TRANSFORMERS_KEYWORDS`), and
    `update` a key that is not: transformers would keep it as a stray attribute that nothing reads, so that a typo or
    a setting since renamed silently runs with the default. A saved config (config.json) still loads as transformers
    loads any: its keys that are no field are kept, since a file written by another version may hold settings since
    renamed or dropped (the class's `from_dict` maps those that matter)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)  # transformers makes the class a dataclass and writes its `__init__`
        made = cls.__init__

        @functools.wraps(made)
        def __init__(self, **settings):
            # the keywords as the caller gave them: a `__post_init__` may add some for its base (`bos_token_id`)
            if not _reading_saved_config.get():
                self._check_known(set(settings) - TRANSFORMERS_KEYWORDS)
            made(self, **settings)

        cls.__init__ = __init__

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        with reading_saved_config():
            return super().from_dict(config_dict, **kwargs)

    @classmethod
    def from_json_file(cls, json_file):
        with reading_saved_config():
            return super().from_json_file(json_file)

    def update(self, config_dict: dict) -> None:
        self._check_known(set(config_dict))
        super().update(config_dict)

    def _check_known(self, names: set[str]) -> None:
        fields = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(names - fields)
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, fields)
                hints.append(f"{name} (did you mean {' or '.join(close)}?)" if close else name)
            raise ValueError(f"{type(self).__name__} has no setting {', '.join(hints)}")


@_config_mixin
class PretrainedEncoderConfigMixin(KnownSettingsConfigMixin):
    """For a `PretrainedConfig` whose model is built over a pretrained encoder.

    `encoder_config` is a transformers sub-config (`sub_configs_defaults`): given as a config or as its dict (what
    config.json holds, `encoder.config.to_dict()` in configs saved before it was a sub-config), it is the encoder's
    own config class (`AutoConfig` by its `model_type`; a BERT config by default)."""

    sub_configs_defaults = {"encoder_config": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder_config: dict | PretrainedConfig | None = None
    encoder_name_or_path: str | None = None

    def __post_init__(self, **kwargs):
        # the portable name lives in encoder_name_or_path
        self.encoder_config = portable_settings(self.encoder_config)
        super().__post_init__(**kwargs)

    @property
    def hidden_size(self) -> int:
        return self.encoder_config.hidden_size

    @property
    def max_position_embeddings(self) -> int:
        """Token positions the encoder reads (RoBERTa's reserved rows not counted)."""
        return self.encoder_config.max_position_embeddings - position_offset(self.encoder_config)


def portable_settings(config: dict | PretrainedConfig | None) -> dict | None:
    """A pretrained model's settings as a sub-config is made from them: a copy (the model it came from keeps its own
    config) without `_name_or_path`, since a local path would leak into exported repos."""
    if config is None:
        return None
    settings = config.to_dict() if isinstance(config, PretrainedConfig) else config
    return {key: value for key, value in settings.items() if key != "_name_or_path"}


def position_offset(encoder_config: PretrainedConfig) -> int:
    """Position rows before the first token: RoBERTa reserves padding_idx + 1 of them."""
    return encoder_config.pad_token_id + 1 if encoder_config.model_type in _ROBERTA_STYLE else 0


def check_positive_integers(**settings) -> None:
    for name, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


@_config_mixin
class StepwiseConfigMixin:
    """The settings of a stepwise model (the longest partial summary it conditions on) and of its
    `stepwise-summarization` pipeline, placed before a non-stepwise config class in the bases."""

    max_summary_sentences: int = 8
    beam_size: int = 3
    num_sentences: int = DEFAULT_SUMMARY_SENTENCES["stepwise"]
    min_sentences: int = 1
    trigram_blocking: bool = False
    end_at_limit: bool = True
    end_bias: float = 0.0

    def __post_init__(self, **kwargs):
        # the last step conditions on num_sentences - 1 sentences, or with end_at_limit the END step on num_sentences
        needed = self.num_sentences if self.end_at_limit else self.num_sentences - 1
        if needed > self.max_summary_sentences:
            raise ValueError(
                f"num_sentences={self.num_sentences} needs partial summaries of {needed} sentences, more than "
                f"max_summary_sentences={self.max_summary_sentences}"
            )
        self.end_bias = float(self.end_bias)
        super().__post_init__(**kwargs)


@_config_mixin
class ContentPlannerConfigMixin:
    """A stepwise model as a Rotowire content planner (Narayan et al. 2020, section 7): its document sentences are a
    game's templated records (316 to 421 a game) plus the sentence-break unit, its summary is the plan (at most 103
    units on the shared games), decoded greedily. Placed before a stepwise config class in the bases.

    Defaults: `max_document_sentences` 512, `max_summary_sentences` 128, `num_sentences` 120 (the longest plan, in
    units before the end of plan), `beam_size` 1 (greedy, as in the paper) and `sentence_break_bias` 0.0 (added to
    the sentence break's logit at decoding, `stepwise_decoding`; 0 is the paper's decoding)."""

    max_document_sentences: int = 512
    max_summary_sentences: int = 128
    num_sentences: int = DEFAULT_SUMMARY_SENTENCES["content_plan"]
    beam_size: int = 1
    sentence_break_bias: float = 0.0

    def __post_init__(self, **kwargs):
        self.sentence_break_bias = float(self.sentence_break_bias)
        super().__post_init__(**kwargs)


__all__ = [
    "DEFAULT_SUMMARY_SENTENCES",
    "TRANSFORMERS_KEYWORDS",
    "ContentPlannerConfigMixin",
    "KnownSettingsConfigMixin",
    "PretrainedEncoderConfigMixin",
    "StepwiseConfigMixin",
    "check_positive_integers",
    "portable_settings",
    "position_offset",
]
