"""The `wikisum` pipeline: a title and documents in, the ranked paragraphs that fit in L tokens fed to a WikiSum
decoder, its generated summary out (Liu et al. 2018's two stages)."""

import torch

from ..modeling.wikisum_generation import is_integer
from ..text.ranking import RANKERS, RANKING_UNITS
from .base import SummarizationPipeline

# Generation settings the pipeline accepts directly; anything else goes through `generate_kwargs`.
GENERATION_OPTIONS = (
    "num_beams",
    "length_penalty",
    "length_penalty_type",
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
    (blank lines, else lines), or with `ranking_unit="sentence"` into sentences.
    Options: `ranker` (one of identity, tfidf, textrank, sumbasic, oracle; default the model config's),
    `ranking_unit` ("paragraph" or "sentence": what the ranker ranks; default the model config's, the unit it was
    trained and scored with: the shipped CNN/DM model ranks sentences, so a plain article is ranked sentence by
    sentence; "paragraph" takes documents already laid out one unit a line as they are),
    `max_input_tokens` (L; default the config's), generation settings (`num_beams`, `length_penalty`,
    `length_penalty_type` ("transformers": divide a beam's log-probability by |Y| ** length_penalty; "gnmt": by
    ((5 + |Y|) / 6) ** length_penalty, the paper's), `max_new_tokens`, `min_new_tokens`, `no_repeat_ngram_size`,
    `do_sample`, or any `generate()` argument in `generate_kwargs`; defaults come from the model's generation
    config).
    Output per input: `summary`, `paragraphs` (the ranked paragraphs that were fed in, best first: `index`,
    `document`, `rank`, `score`, `tokens` used, `text`) and `input_tokens` (the decoder input length).
    An input without a paragraph (empty or whitespace-only text, no documents, a title alone) gives
    ``{"summary": "", "paragraphs": [], "input_tokens": 0}`` without generating. Settings that cannot work
    (`num_beams=0`, `max_new_tokens=10**9`, `max_input_tokens` outside [2, `config.max_position_embeddings` - 2])
    raise a one-line ValueError before any work.
    """

    def _sanitize_parameters(
        self, ranker=None, max_input_tokens=None, ranking_unit=None, generate_kwargs=None, **options
    ):
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
        if ranking_unit is not None:
            if ranking_unit not in RANKING_UNITS:
                raise ValueError(f"ranking_unit must be one of {RANKING_UNITS}, got {ranking_unit!r}")
            preprocess["ranking_unit"] = ranking_unit
        limit = self.model.config.max_position_embeddings
        if max_input_tokens is not None:
            if not is_integer(max_input_tokens):
                raise ValueError(f"max_input_tokens must be an integer, got {max_input_tokens!r}")
            # the decoder input is L tokens and the separator, and the summary needs at least one more position
            if not 2 <= max_input_tokens <= limit - 2:
                raise ValueError(
                    f"max_input_tokens must be between 2 and {limit - 2}, got {max_input_tokens} (the model's limit "
                    f"is {limit} positions, config.max_position_embeddings, for the input, separator and summary)"
                )
            preprocess["max_input_tokens"] = int(max_input_tokens)
        generation = dict(generate_kwargs or {})
        generation.update({name: value for name, value in options.items() if value is not None})
        generation = self.model.with_caller_maximum_length(None, generation)
        # Refuse absurd settings now rather than deep inside generate(): against the longest decoder input these
        # options allow (L tokens and the separator), with the default summary length _forward would use.
        longest_input = preprocess.get("max_input_tokens", self.model.config.max_input_tokens) + 1
        self.model.check_generation_settings(longest_input, **self._with_default_length(generation))
        return preprocess, {"generate_kwargs": generation}, {}

    def _with_default_length(self, generate_kwargs: dict) -> dict:
        """`generate_kwargs` with `max_new_tokens` = DEFAULT_MAX_NEW_TOKENS where neither they nor the model's
        generation config set it, raised to the minimum they ask for (a default must not contradict it)."""
        settings = dict(generate_kwargs)
        if "max_new_tokens" not in settings and self.model.generation_config.max_new_tokens is None:
            minimum = settings.get("min_new_tokens", self.model.generation_config.min_new_tokens)
            minimum = minimum if is_integer(minimum) else 0
            settings["max_new_tokens"] = max(DEFAULT_MAX_NEW_TOKENS, minimum)
        return settings

    def preprocess(self, inputs, ranker=None, max_input_tokens=None, ranking_unit=None):
        return self.model_processor(self.readable_input(inputs), ranker, max_input_tokens, ranking_unit)

    def _forward(self, model_inputs, generate_kwargs=None):
        paragraphs = model_inputs["paragraphs"]
        batch_paragraphs = [paragraphs] if isinstance(paragraphs, tuple) else list(paragraphs)
        settings = self._with_default_length(generate_kwargs or {})
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
