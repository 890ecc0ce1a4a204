"""What the sumformers pipelines share: the model's own processor, inputs read as a model can read them, and batches
that survive a bad item."""

import functools
import warnings

from transformers import Pipeline

from ..text.readable_text import check_prose, cut_to_words, readable_text


def reject_unknown_options(options: dict) -> None:
    """A misspelt or retired option (say `max_steps`) is an error, not silently ignored."""
    if options:
        raise TypeError(f"unknown option(s) {sorted(options)}")


def _is_text_list(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)


def _is_document(value) -> bool:
    return isinstance(value, str) or _is_text_list(value)


def _readable_texts(document) -> list[str]:
    """The texts of one document (a string or its sentences) as `readable_text` has them, checked as prose together
    (`check_prose`)."""
    texts = [readable_text(text) for text in ([document] if isinstance(document, str) else document)]
    check_prose(" ".join(texts))
    return texts


def _map_documents(inputs, read):
    """`inputs` with `read` applied to each of its documents: the input itself (a string or a sentence list), a
    dict's `document` and `sentences`, and each of its `documents`; anything else comes back as it is."""
    if _is_document(inputs):
        return read(inputs)
    if not isinstance(inputs, dict):
        return inputs
    mapped = dict(inputs)
    for field in ("document", "sentences"):
        if _is_document(inputs.get(field)):
            mapped[field] = read(inputs[field])
    if isinstance(inputs.get("documents"), (list, tuple)):
        mapped["documents"] = [read(item) if _is_document(item) else item for item in inputs["documents"]]
    return mapped


class SummarizationPipeline(Pipeline):
    """A `Pipeline` whose `preprocess` goes through the processor the model declares (`model.processor_class`).

    Text inputs are first read as the model can read them (`readable_input`): HTML as its main text, lines of only
    whitespace and punctuation as blank (a text of nothing else gives an empty summary), and a text far past what the
    model reads cut before it is split into sentences and tokenized, with a warning that names the limit.

    A list of inputs is a batch: an item the processor rejects (`None`, a number, a malformed dict) gets
    `{"error": message}` in its place and the other items are summarized as usual. A single bad input raises the
    processor's one-line TypeError or ValueError.
    """

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    #: Whether the inputs are texts (the pipelines over Rotowire games set False: a game is read as it is).
    reads_text = True

    @functools.cached_property
    def model_processor(self):
        return self.model.processor_class(self.tokenizer, self.model.config)

    def word_limit(self, max_length: int | None = None) -> int:
        """The most words of a document worth splitting into sentences and tokenizing: twice the tokens the model
        reads. A word is at least one token; the margin keeps the sentences that follow one the model cuts short (at
        `max_sentence_tokens`)."""
        return 2 * self.model_processor.token_limit(max_length)

    def readable_document(self, document, max_length: int | None = None):
        """One document (a string or its sentences) with each text as `readable_text` has it, cut at `word_limit`
        words with a warning; a one-line ValueError for text that is not prose (`check_readable`)."""
        texts = _readable_texts(document)
        limit = self.word_limit(max_length)
        kept, words = cut_to_words(texts, limit)
        if words > limit:
            warnings.warn(
                f"Input cut to its first {limit} words (twice the model's limit of "
                f"{self.model_processor.token_limit(max_length)} tokens) before sentence splitting: "
                f"{words - limit} of {words} words not read.",
                stacklevel=3,
            )
        return kept[0] if isinstance(document, str) else kept

    def readable_input(self, inputs, max_length: int | None = None):
        """What the model's processor gets of an input: its documents as `readable_document` has them (a string, a
        sentence list, a dict's `document`, `sentences` and each of its `documents`) and a dict's `title` as
        `readable_text` has it. Anything else comes back as it is, for the processor to check."""
        if not self.reads_text:
            return inputs
        readable = _map_documents(inputs, functools.partial(self.readable_document, max_length=max_length))
        if isinstance(inputs, dict) and isinstance(inputs.get("title"), str):
            readable["title"] = readable_text(inputs["title"])
        return readable

    def check_readable(self, inputs) -> None:
        """The one-line ValueError `readable_input` would raise for this input: an HTML page without enough main
        text, text that is not prose."""
        if self.reads_text:
            _map_documents(inputs, _readable_texts)

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, list):
            errors = {}
            for index, item in enumerate(inputs):
                try:
                    self.model_processor.check_input(item)
                    self.check_readable(item)
                except (TypeError, ValueError) as error:
                    errors[index] = str(error)
            if errors:
                valid = [item for index, item in enumerate(inputs) if index not in errors]
                results = iter(super().__call__(valid, *args, **kwargs) if valid else [])
                return [{"error": errors[index]} if index in errors else next(results) for index in range(len(inputs))]
        return super().__call__(inputs, *args, **kwargs)


__all__ = ["SummarizationPipeline", "reject_unknown_options"]
