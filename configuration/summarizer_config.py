"""What the summarizer configurations share: the settings of the pretrained BERT/RoBERTa encoder a model is built over
(`encoder_config`, kept as a plain dict so that config.json stays readable, and `encoder_name_or_path`), their checks,
and the settings of the stepwise models.

transformers turns every config class into a dataclass, so the mixins here hold no annotated class attributes (they
would become fields), and a config class that takes its `__init__` from a mixin must name it in its own body (an
inherited one is replaced by a generated `__init__` that skips it)."""

from transformers import AutoConfig, PretrainedConfig

# Encoders that reserve padding_idx + 1 position rows before the first token.
_ROBERTA_STYLE = ("roberta", "xlm-roberta", "camembert")


class PretrainedEncoderConfigMixin:
    """For a `PretrainedConfig` whose model is built over a pretrained encoder."""

    def set_encoder(self, encoder_config: dict | PretrainedConfig | None, encoder_name_or_path: str | None) -> None:
        """Keep the encoder's settings (default: a BERT config) and where its weights came from."""
        if isinstance(encoder_config, PretrainedConfig):
            encoder_config = encoder_config.to_dict()
        encoder_config = dict(encoder_config) if encoder_config is not None else {"model_type": "bert"}
        # A local path would leak into exported repos; the portable name lives in encoder_name_or_path.
        encoder_config.pop("_name_or_path", None)
        self.encoder_config = encoder_config
        self.encoder_name_or_path = encoder_name_or_path

    def get_encoder_config(self) -> PretrainedConfig:
        settings = dict(self.encoder_config)
        return AutoConfig.for_model(settings.pop("model_type", "bert"), **settings)

    @property
    def hidden_size(self) -> int:
        return self.get_encoder_config().hidden_size

    @property
    def max_position_embeddings(self) -> int:
        """Token positions the encoder reads (RoBERTa's reserved rows not counted)."""
        encoder = self.get_encoder_config()
        return encoder.max_position_embeddings - position_offset(encoder)


def position_offset(encoder_config: PretrainedConfig) -> int:
    """Position rows before the first token: RoBERTa reserves padding_idx + 1 of them."""
    return encoder_config.pad_token_id + 1 if encoder_config.model_type in _ROBERTA_STYLE else 0


def check_positive_integers(**settings) -> None:
    for name, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


class StepwiseConfigMixin:
    """The settings of a stepwise model (the longest partial summary it conditions on) and of its
    `stepwise-summarization` pipeline, placed before a non-stepwise config class in the bases."""

    def __init__(
        self,
        max_summary_sentences: int = 8,
        beam_size: int = 3,
        num_sentences: int = 4,
        min_sentences: int = 1,
        trigram_blocking: bool = False,
        end_at_limit: bool = True,
        end_bias: float = 0.0,
        **kwargs,
    ):
        # the last step conditions on num_sentences - 1 sentences, or with end_at_limit the END step on num_sentences
        needed = num_sentences if end_at_limit else num_sentences - 1
        if needed > max_summary_sentences:
            raise ValueError(
                f"num_sentences={num_sentences} needs partial summaries of {needed} sentences, more than "
                f"max_summary_sentences={max_summary_sentences}"
            )
        self.end_at_limit = end_at_limit
        self.max_summary_sentences = max_summary_sentences
        self.beam_size = beam_size
        self.min_sentences = min_sentences
        self.end_bias = float(end_bias)
        super().__init__(num_sentences=num_sentences, trigram_blocking=trigram_blocking, **kwargs)


class ContentPlannerConfigMixin:
    """A stepwise model as a Rotowire content planner (Narayan et al. 2020, section 7): its document sentences are a
    game's templated records (316 to 421 a game) plus the sentence-break unit, its summary is the plan (at most 103
    units on the shared games), decoded greedily. Placed before a stepwise config class in the bases.

    Defaults: `max_document_sentences` 512, `max_summary_sentences` 128, `num_sentences` 120 (the longest plan, in
    units before the end of plan), `beam_size` 1 (greedy, as in the paper) and `sentence_break_bias` 0.0 (added to
    the sentence break's logit at decoding, `stepwise_decoding`; 0 is the paper's decoding)."""

    def __init__(
        self,
        max_document_sentences: int = 512,
        max_summary_sentences: int = 128,
        num_sentences: int = 120,
        beam_size: int = 1,
        sentence_break_bias: float = 0.0,
        **kwargs,
    ):
        self.sentence_break_bias = float(sentence_break_bias)
        super().__init__(
            max_document_sentences=max_document_sentences,
            max_summary_sentences=max_summary_sentences,
            num_sentences=num_sentences,
            beam_size=beam_size,
            **kwargs,
        )


__all__ = [
    "ContentPlannerConfigMixin",
    "PretrainedEncoderConfigMixin",
    "StepwiseConfigMixin",
    "check_positive_integers",
    "position_offset",
]
