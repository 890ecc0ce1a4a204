"""The `wikisum` pipeline: a title and documents in, the ranked paragraphs that fit in L tokens fed to a WikiSum
decoder, its generated summary out (Liu et al. 2018's two stages)."""

import torch
from transformers import Pipeline

from ..ranking import RANKERS, fit_to_budget, rank_paragraphs, split_paragraphs

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


def wikisum_inputs(inputs) -> tuple[str, list[str], str | None]:
    """(title, documents, reference) of a pipeline input: a string (one document, no title) or a dict with `title`
    (optional), `documents` (list of strings) or `document` (string), and `reference` (needed by the oracle)."""
    if isinstance(inputs, str):
        return "", [inputs], None
    if not isinstance(inputs, dict):
        raise ValueError(f"expected a string or a dict with `title` and `documents`, got {type(inputs).__name__}")
    title = inputs.get("title") or ""
    documents = inputs.get("documents", inputs.get("document"))
    if isinstance(documents, str):
        documents = [documents]
    if not isinstance(title, str):
        raise ValueError("`title` must be a string")
    if not isinstance(documents, (list, tuple)) or not all(isinstance(document, str) for document in documents):
        raise ValueError("give `documents` (a list of strings) or `document` (a string)")
    reference = inputs.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise ValueError("`reference` must be a string")
    return title, list(documents), reference


def encode_wikisum_input(tokenizer, config, title: str, ranked, max_input_tokens: int) -> tuple[list[int], list]:
    """Token ids of the decoder input ``[bos] title [sep] paragraph [sep] paragraph [sep] ... [separator]``, the
    part before the separator holding at most `max_input_tokens` tokens (the paper's L; the last paragraph is cut),
    and the (RankedParagraph, token count) pairs that were fed in. Training and the pipeline both use it."""
    if max_input_tokens < 2:
        raise ValueError(f"max_input_tokens must be at least 2, got {max_input_tokens}")
    paragraph_separator = config.paragraph_separator_token_id

    def token_ids(text):  # verbose=False: the tokenizer's own length limit (512 for MiniLM) does not apply here
        return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    prefix = ([config.bos_token_id] + token_ids(title) + [paragraph_separator])[:max_input_tokens]

    def paragraph_tokens(text):
        return token_ids(text) + [paragraph_separator]

    fitted = fit_to_budget(ranked, max_input_tokens - len(prefix), paragraph_tokens)
    input_ids = prefix + [token for _, tokens in fitted for token in tokens] + [config.separator_token_id]
    return input_ids, [(item, len(tokens)) for item, tokens in fitted]


class WikiSumPipeline(Pipeline):
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
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

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
        title, documents, reference = wikisum_inputs(inputs)
        ranker = ranker or self.model.config.ranker
        if ranker == "oracle" and reference is None:
            raise ValueError("the oracle ranker needs the reference summary in the input: {'reference': ...}")
        ranked = rank_paragraphs(split_paragraphs(documents), title=title, ranker=ranker, reference=reference)
        input_ids, fed = encode_wikisum_input(
            self.tokenizer, self.model.config, title, ranked, max_input_tokens or self.model.config.max_input_tokens
        )
        paragraphs = tuple(
            {
                "index": item.paragraph.index,
                "document": item.paragraph.document,
                "rank": item.rank,
                "score": item.score,
                "tokens": used,
                "text": item.paragraph.text,
            }
            for item, used in fed
        )
        return {
            "input_ids": torch.tensor([input_ids]),
            "attention_mask": torch.ones(1, len(input_ids), dtype=torch.long),
            # a tuple (not a list) so that a batch of them can be told apart from one input
            "paragraphs": paragraphs,
        }

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
        summary = self.tokenizer.decode(list(summary_ids), skip_special_tokens=True, clean_up_tokenization_spaces=True)
        return {
            "summary": summary.strip(),
            "paragraphs": list(single(model_outputs["paragraphs"])),
            "input_tokens": single(model_outputs["input_tokens"]),
        }
