"""The `wikisum` pipeline: a title and documents in, the ranked paragraphs that fit in L tokens fed to a WikiSum
decoder, its generated summary out (Liu et al. 2018's two stages)."""

import torch

from ..text.ranking import RANKERS
from .base import SummarizationPipeline

# Generation settings the pipeline accepts directly; anything else goes through `generate_kwargs`.
GENERATION_OPTIONS = (
    "num_beams",
    "length_penalty",
    "max_new_tokens",
    "min_new_tokens",
    "no_repeat_ngram_size",
    "do_sample",
)
DEFAULT_MAX_NEW_TOKENS = 160


class WikiSumPipeline(SummarizationPipeline):
    """Two-stage WikiSum summarization.

    Inputs: a string (one long text, no title) or ``{"title": ..., "documents": [...]}`` (``"document"`` for one
    text; ``"reference"`` for the oracle ranker); a list of those is a batch. Documents are split into paragraphs
    (blank lines, else lines).
    Options: `ranker` (one of identity, tfidf, textrank, sumbasic, oracle; default the model config's),
    `max_input_tokens` (L; default the config's), generation settings (`num_beams`, `length_penalty`,
    `max_new_tokens`, `min_new_tokens`, `no_repeat_ngram_size`, `do_sample`, or any `generate()` argument in
    `generate_kwargs`; defaults come from the model's generation config).
    Output per input: `summary`, `paragraphs` (the ranked paragraphs that were fed in, best first: `index`,
    `document`, `rank`, `score`, `tokens` used, `text`) and `input_tokens` (the decoder input length).
    An input without a paragraph (empty or whitespace-only text, no documents, a title alone) gives
    ``{"summary": "", "paragraphs": [], "input_tokens": 0}`` without generating.
    """

    def _sanitize_parameters(self, ranker=None, max_input_tokens=None, generate_kwargs=None, **options):
        unknown = sorted(set(options) - set(GENERATION_OPTIONS))
        if unknown:
            raise ValueError(
                f"unknown wikisum pipeline option(s) {unknown}; put generate() arguments in generate_kwargs"
            )
        preprocess = {}
        if ranker is not None:
            if ranker not in RANKERS:
                raise ValueError(f"ranker must be one of {RANKERS}, got {ranker!r}")
            preprocess["ranker"] = ranker
        if max_input_tokens is not None:
            if int(max_input_tokens) < 2:
                raise ValueError(f"max_input_tokens must be at least 2, got {max_input_tokens}")
            preprocess["max_input_tokens"] = int(max_input_tokens)
        generation = dict(generate_kwargs or {})
        generation.update({name: value for name, value in options.items() if value is not None})
        return preprocess, {"generate_kwargs": generation}, {}

    def preprocess(self, inputs, ranker=None, max_input_tokens=None):
        return self.model_processor(inputs, ranker, max_input_tokens)

    def _forward(self, model_inputs, generate_kwargs=None):
        paragraphs = model_inputs["paragraphs"]
        batch_paragraphs = [paragraphs] if isinstance(paragraphs, tuple) else list(paragraphs)
        settings = dict(generate_kwargs or {})
        if "max_new_tokens" not in settings and self.model.generation_config.max_new_tokens is None:
            settings["max_new_tokens"] = DEFAULT_MAX_NEW_TOKENS
        summaries = []
        # one row at a time: inputs differ a lot in length and a batch comes right-padded from the collator
        for input_ids, attention_mask in zip(model_inputs["input_ids"], model_inputs["attention_mask"]):
            row = input_ids[attention_mask.bool()][None]
            if row.shape[1] == 0:  # the processor found no paragraph: nothing to summarize
                summaries.append(())
                continue
            generated = self.model.generate(row, attention_mask=torch.ones_like(row), **settings)
            summaries.append(tuple(generated[0, row.shape[1] :].tolist()))
        return {
            "summary_ids": summaries,
            "input_tokens": [int(mask.sum()) for mask in model_inputs["attention_mask"]],
            "paragraphs": batch_paragraphs,
        }

    def postprocess(self, model_outputs):
        def single(value):  # batch of one (plain call) or already unbatched item
            return value[0] if isinstance(value, list) else value

        summary_ids = single(model_outputs["summary_ids"])
        return {
            "summary": self.model_processor.decode(summary_ids),
            "paragraphs": list(single(model_outputs["paragraphs"])),
            "input_tokens": single(model_outputs["input_tokens"]),
        }
