"""Configuration of the sentence planner (Marfurt & Henderson 2021): BertSumAbs with a sentence generator."""

from .configuration_bertsumabs import BertSumAbsConfig
from .summarizer_config import check_positive_integers


class SentencePlannerConfig(BertSumAbsConfig):
    r"""
    BertSumAbs plus the sentence planner's sentence generator (Marfurt & Henderson 2021).

    Args:
        sentence_generator_layers (`int`, *optional*, defaults to 2): causal Transformer layers over the summary's
            sentence vectors (a zero vector first), with cross-attention to the document.
        guidance_weight (`float`, *optional*, defaults to 1.0): weight lambda of the guidance loss (MSE between the
            predicted and the encoder's next-sentence vector); 0 is the paper's ablation without guidance.
        (and every `BertSumAbsConfig` argument)
    """

    model_type = "sentence_planner"

    sentence_generator_layers: int = 2
    guidance_weight: float = 1.0

    def __post_init__(self, **kwargs):
        check_positive_integers(sentence_generator_layers=self.sentence_generator_layers)
        if self.guidance_weight < 0:
            raise ValueError(f"guidance_weight must be at least 0, got {self.guidance_weight}")
        super().__post_init__(**kwargs)


__all__ = ["SentencePlannerConfig"]
