"""The `extractive-summarization` pipeline: text (or a list of sentences) in, the top-scored sentences out, with
their indices and scores in document order."""

import torch

from ..text.sentences import is_filler, select_sentences
from .base import SummarizationPipeline, reject_unknown_options


class ExtractiveSummarizationPipeline(SummarizationPipeline):
    """Scores every sentence with a sentence-level extractive model and keeps the best `num_sentences`.

    Inputs: a string (split with `split_sentences`), or the sentences themselves as `{"sentences": [...]}`;
    a list of those is a batch (so a list of sentence lists is a batch of pre-split documents).
    Options: `num_sentences` (default: the model config's, 3), `trigram_blocking` (skip a sentence sharing a trigram
    with one already chosen; default: the model config's), `max_words` (a budget in whitespace words: a sentence
    that would exceed it is skipped, as in `stepwise-summarization`), `skip_filler` (default True: a filler sentence
    such as "OK ," or "Grad A: Mm - hmm ." (`text.sentences.is_filler`) is never chosen while the document has
    another), `max_length` (tokens; default the encoder's limit), `return_sentences` (add what the model read, as
    `sumformers.view` shows it).
    Output per document: `summary` (chosen sentences in document order, one per line), `sentences` (their indices),
    `scores` (their probabilities); with `return_sentences`, `document_sentences` (every sentence the model read, in
    order), `sentence_scores` (the probability of each) and, for a model that reads several documents,
    `sentence_documents` (the document of each).

    The model's processor turns each input into its tensors: models that read several documents (HetFormer) also
    take `{"documents": [...]}`, and may set the default summary length for that kind of input.
    """

    def _sanitize_parameters(
        self, num_sentences=None, trigram_blocking=None, max_words=None, max_length=None, return_sentences=None,
        skip_filler=None, **kwargs,
    ):
        reject_unknown_options(kwargs)
        preprocess = {} if max_length is None else {"max_length": max_length}
        postprocess = {}
        if num_sentences is not None:
            if int(num_sentences) < 1:
                raise ValueError(f"num_sentences must be at least 1, got {num_sentences}")
            postprocess["num_sentences"] = int(num_sentences)
        if trigram_blocking is not None:
            postprocess["trigram_blocking"] = bool(trigram_blocking)
        if max_words is not None:
            if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
                raise ValueError(f"max_words must be a positive integer, got {max_words!r}")
            postprocess["max_words"] = max_words
        if return_sentences is not None:
            postprocess["return_sentences"] = bool(return_sentences)
        if skip_filler is not None:
            postprocess["skip_filler"] = bool(skip_filler)
        return preprocess, {}, postprocess

    def preprocess(self, document, max_length=None):
        return self.model_processor(self.readable_input(document, max_length), max_length=max_length)

    def _forward(self, model_inputs):
        sentences = model_inputs.pop("sentences")
        document_count = model_inputs.pop("document_count", None)  # only processors of several documents give it
        batch_sentences = [sentences] if isinstance(sentences, tuple) else list(sentences)
        logits = self.model(**model_inputs).logits
        outputs = {
            "probabilities": torch.sigmoid(logits.float()),
            "sentences": batch_sentences,
            "document_count": document_count,
        }
        if "document_ids" in model_inputs:  # a multi-document model's node layout: the document of each sentence
            outputs["sentence_documents"] = model_inputs["document_ids"].gather(1, model_inputs["cls_positions"])
        return outputs

    def default_num_sentences(self, document_count) -> int:
        """The config's summary length; for several documents (HetFormer's multi-document input) its
        `multi_document_num_sentences` where it has one."""
        if isinstance(document_count, list):  # a batch of one, as the pipeline's loader collates it
            (document_count,) = document_count
        config = self.model.config
        if document_count is not None and document_count > 1:
            return getattr(config, "multi_document_num_sentences", config.num_sentences)
        return config.num_sentences

    def postprocess(
        self, model_outputs, num_sentences=None, trigram_blocking=None, max_words=None, return_sentences=False,
        skip_filler=True,
    ):
        sentences = model_outputs["sentences"]
        if isinstance(sentences, list) and len(sentences) == 1 and isinstance(sentences[0], tuple):
            sentences = sentences[0]
        probabilities = model_outputs["probabilities"][0, : len(sentences)].tolist()
        if num_sentences is None:
            num_sentences = self.default_num_sentences(model_outputs["document_count"])
        if trigram_blocking is None:
            trigram_blocking = self.model.config.trigram_blocking
        ranked = sorted(range(len(sentences)), key=lambda i: -probabilities[i])
        if skip_filler:
            ranked = [index for index in ranked if not is_filler(sentences[index])] or ranked
        chosen = select_sentences(
            ranked, list(sentences), num_sentences, trigram_blocking=trigram_blocking, max_words=max_words
        )
        chosen = sorted(chosen)
        result = {
            "summary": "\n".join(sentences[i] for i in chosen),
            "sentences": chosen,
            "scores": [probabilities[i] for i in chosen],
        }
        if return_sentences:
            result.update(document_sentences=list(sentences), sentence_scores=probabilities)
            if "sentence_documents" in model_outputs:
                result["sentence_documents"] = model_outputs["sentence_documents"][0, : len(sentences)].tolist()
        return result
