"""The sentence-by-sentence realizer of table-to-text generation (Narayan et al. 2020, section 7 and appendix A.3):
BertSumAbs with a shared-weights decoder (decoder_init="shared": the decoder's self-attention and feed-forward are the
encoder's layers, the paper's ROBERTASHARE idea over the bundled MiniLM), reading one plan sentence at a time
(`RealizerProcessor`) and writing that summary sentence; the `table-to-text` pipeline runs the loop."""

from transformers import GenerationConfig

from ..configuration.configuration_realizer import RealizerConfig
from .modeling_bertsumabs import BertSumAbsForConditionalGeneration


class RealizerForConditionalGeneration(BertSumAbsForConditionalGeneration):
    """`input_ids` as `RealizerProcessor` lays them out; `labels`: one summary sentence and the end token."""

    config_class = RealizerConfig

    @staticmethod
    def default_generation_config(config: RealizerConfig) -> GenerationConfig:
        """One sentence: beam 4, no length penalty, 4 to `max_target_positions` tokens."""
        generation_config = BertSumAbsForConditionalGeneration.default_generation_config(config)
        generation_config.update(num_beams=4, length_penalty=1.0, min_length=4, max_length=config.max_target_positions)
        return generation_config


__all__ = ["RealizerForConditionalGeneration"]
