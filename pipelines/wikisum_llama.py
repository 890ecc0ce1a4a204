"""The `wikisum-llama` pipeline: an article in, the summary WikiSum over a pretrained Llama-family decoder writes
(`modeling_wikisum_llama`) out: the article's sentences ranked into the prompt, then decoding with the KV cache as
the model's generation config says (greedy or beam search), one prompt at a time."""

import functools

import torch

from ..generation.word_ngram_blocking import text_word_starts
from ..processing.processing_wikisum_llama import generated_text_processors
from .base import SummarizationPipeline, reject_unknown_options

# `generate()` options the pipeline passes through; the defaults are the model's generation config
GENERATION_OPTIONS = ("max_new_tokens", "min_new_tokens", "num_beams", "length_penalty", "do_sample")
# over the generated tokens only (`generated_text_processors`); the defaults are the model config's
GENERATED_TEXT_OPTIONS = ("repetition_penalty", "no_repeat_word_ngram_size")


class WikiSumLlamaPipeline(SummarizationPipeline):
    """Inputs: an article (a string); a list of those is a batch. Options: `max_new_tokens`, `min_new_tokens`,
    `num_beams`, `length_penalty`, `do_sample` (defaults: the model's generation config; beam search is T-D's only),
    `repetition_penalty` and `no_repeat_word_ngram_size` (applied to the generated tokens only, in every beam;
    defaults: the config's `generated_repetition_penalty` and `no_repeat_word_ngram_size`). Output per article:
    `summary` (one sentence a line)."""

    def _sanitize_parameters(self, **options):
        names = GENERATION_OPTIONS + GENERATED_TEXT_OPTIONS
        generation = {name: options.pop(name) for name in names if name in options}
        reject_unknown_options(options)
        return {}, generation, {}

    @functools.cached_property
    def word_texts(self):
        return text_word_starts(self.tokenizer)

    def preprocess(self, article):
        self.model_processor.check_input(article)
        return self.model_processor(self.readable_input(article))

    def _forward(self, model_inputs, repetition_penalty=None, no_repeat_word_ngram_size=None, **generation):
        config = self.model.config
        penalty = config.generated_repetition_penalty if repetition_penalty is None else repetition_penalty
        blocking = config.no_repeat_word_ngram_size if no_repeat_word_ngram_size is None else no_repeat_word_ngram_size
        summaries = []
        # one prompt at a time: a batch comes right-padded from the collator, and a decoder continues the last token
        for input_ids, attention_mask in zip(model_inputs["input_ids"], model_inputs["attention_mask"]):
            row = input_ids[attention_mask.bool()][None]
            processors = generated_text_processors(self.tokenizer, row.shape[1], penalty, blocking, self.word_texts)
            generated = self.model.generate(
                row, attention_mask=torch.ones_like(row), logits_processor=processors,
                pad_token_id=self.tokenizer.pad_token_id, **self.shared_prompt_cache(row, generation),
                **{"do_sample": False, **generation},
            )
            summaries.append(tuple(generated[0, row.shape[1] :].tolist()))
        return {"summary_ids": summaries}

    def shared_prompt_cache(self, row, generation: dict) -> dict:
        """For beam search, the prompt's KV cache (all but its last token) computed once and copied to every beam:
        `generate` would otherwise read the prompt once per beam, most of a CPU decode's time. Greedy: nothing."""
        beams = generation.get("num_beams") or self.model.generation_config.num_beams or 1
        if beams == 1 or row.shape[1] < 2:
            return {}
        cache = self.model(row[:, :-1], use_cache=True).past_key_values
        cache.batch_repeat_interleave(beams)
        return {"past_key_values": cache}

    def postprocess(self, model_outputs):
        summary_ids = model_outputs["summary_ids"]  # a batch of one (plain call) or already one item
        summary_ids = summary_ids[0] if isinstance(summary_ids, list) else summary_ids
        return {"summary": self.model_processor.decode(summary_ids)}


__all__ = ["WikiSumLlamaPipeline"]
