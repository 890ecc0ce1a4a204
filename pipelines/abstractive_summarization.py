"""The `abstractive-summarization` pipeline: text in, a generated summary out (one sentence per line), for the
encoder-decoder summarizers (BertSumExtAbs, the sentence planner, the CopyTransformer)."""

import functools

import torch

from ..generation.word_ngram_blocking import NoRepeatWordNGramLogitsProcessor, word_start_mask
from ..text.readable_text import has_word
from .base import SummarizationPipeline, reject_unknown_options

# `generate()` options the pipeline passes through; the defaults are the model's generation config.
GENERATION_OPTIONS = (
    "num_beams",
    "length_penalty",
    "min_length",
    "max_length",
    "min_new_tokens",
    "max_new_tokens",
    "do_sample",
    "early_stopping",
)


class AbstractiveSummarizationPipeline(SummarizationPipeline):
    """Encodes each document once and decodes with `generate()` (beam search with the model's defaults: PreSumm's
    beam 5, length penalty 0.95, 50 to 200 tokens), blocking repeated word n-grams as PreSumm does (on detokenized
    words, not token ids).

    Inputs: a string (split with `split_sentences`) or `{"sentences": [...]}`; a list of those is a batch.
    Options: the `generate()` options in `GENERATION_OPTIONS`, `no_repeat_word_ngram_size` (default: the model
    config's, 3; 0 turns blocking off) and `max_input_length` (document tokens; default the encoder's limit).
    Output per document: `summary` (one sentence per line); "" for a document without a word (nothing is generated).
    """

    def _sanitize_parameters(self, max_input_length=None, no_repeat_word_ngram_size=None, **kwargs):
        generation = {name: kwargs.pop(name) for name in GENERATION_OPTIONS if name in kwargs}
        reject_unknown_options(kwargs)
        if no_repeat_word_ngram_size is not None:
            if isinstance(no_repeat_word_ngram_size, bool) or not isinstance(no_repeat_word_ngram_size, int):
                raise ValueError(f"no_repeat_word_ngram_size must be an integer, got {no_repeat_word_ngram_size!r}")
            generation["no_repeat_word_ngram_size"] = no_repeat_word_ngram_size
        preprocess = {} if max_input_length is None else {"max_length": max_input_length}
        return preprocess, generation, {}

    @functools.cached_property
    def word_starts(self):
        return word_start_mask(self.tokenizer)

    def preprocess(self, document, max_length=None):
        self.model_processor.check_input(document)
        document = self.readable_input(document, max_length)
        sentences = document["sentences"] if isinstance(document, dict) else document
        has_text = any(has_word(text) for text in ([sentences] if isinstance(sentences, str) else sentences))
        # Without a word the summary is empty: the processor encodes a stand-in, which keeps a batch's shapes, and
        # its summary is never written.
        inputs = self.model_processor(document if has_text else ".", max_length=max_length)
        inputs.pop("sentences")
        return {**inputs, "has_text": torch.tensor([has_text])}

    def _forward(self, model_inputs, no_repeat_word_ngram_size=None, **generation):
        decode_inputs = {name: model_inputs.pop(name) for name in self.model_processor.decode_inputs}
        has_text = model_inputs.pop("has_text")
        if not has_text.any():  # nothing to generate
            sequences = torch.zeros((len(has_text), 1), dtype=torch.long)
            return {"sequences": sequences, "has_text": has_text, **decode_inputs}
        if no_repeat_word_ngram_size is None:
            no_repeat_word_ngram_size = self.model.config.no_repeat_word_ngram_size
        processors = []
        if no_repeat_word_ngram_size:
            config = self.model.config
            ignored = (config.decoder_start_token_id, config.pad_token_id)
            processors.append(
                NoRepeatWordNGramLogitsProcessor(no_repeat_word_ngram_size, self.word_starts, ignored_token_ids=ignored)
            )
        sequences = self.model.generate(**model_inputs, logits_processor=processors, **generation)
        # flat keys: a batched pipeline splits each key of the output into its rows
        return {"sequences": sequences, "has_text": has_text, **decode_inputs}

    def postprocess(self, model_outputs):
        if not model_outputs["has_text"][0]:
            return {"summary": ""}
        decode_inputs = {name: model_outputs[name] for name in self.model_processor.decode_inputs}
        return {"summary": self.model_processor.decode(model_outputs["sequences"][0].tolist(), **decode_inputs)}


__all__ = ["AbstractiveSummarizationPipeline"]
