"""The `stepwise-summarization` pipeline: a stepwise extractive model (Stepwise HiBERT, Stepwise ETCSum) picks one
sentence at a time, conditioned on what it already picked, with beam search over the steps (Narayan et al. 2020)."""

import math

import torch

from ..generation.stepwise_decoding import stepwise_beam_search
from .base import SummarizationPipeline, reject_unknown_options


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _finite(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


class StepwiseSummarizationPipeline(SummarizationPipeline):
    """Beam search over extraction steps with a stepwise model.

    Inputs: a string (split with `split_sentences`), or the sentences themselves as `{"sentences": [...]}`; a list of
    those is a batch (so a list of sentence lists is a batch of pre-split documents).

    Options (defaults from the model config, which follow the paper):
    - `beam_size` (3) and `num_sentences` (4: the most sentences extracted, one per step; the summary may stop
      earlier at the end-of-summary unit);
    - `trigram_blocking`: never pick a sentence sharing a trigram with one already picked;
    - `min_sentences` (1): the end-of-summary unit can close the summary only from this length on;
    - `end_bias` (0.0): added to the end-of-summary unit's logit (negative: longer summaries);
    - `max_words`: a length budget in whitespace words (a sentence that would exceed it is never picked);
    - `return_steps`: add each step's whole distribution over the sentences and the end unit;
    - `return_sentences`: add `document_sentences`, every sentence the model read, in order (what
      `sumformers.view` shows);
    - `max_length`: input tokens (default and maximum: the model's limit).

    Output per document: `summary` (the chosen sentences in document order, one per line), `sentences` (their
    indices in document order) with `scores` (the probability each had when it was chosen), `selection_order` (the
    indices in the order they were chosen), `steps` (per step: `sentence`, None for the end unit, its
    `probability` and the beam `score` after it, the sum of log-probabilities) and `score` (the summary's beam
    score).
    """

    def _sanitize_parameters(
        self,
        beam_size=None,
        trigram_blocking=None,
        min_sentences=None,
        end_bias=None,
        num_sentences=None,
        max_words=None,
        return_steps=None,
        max_length=None,
        return_sentences=None,
        **kwargs,
    ):
        reject_unknown_options(kwargs)
        if not self.model.is_stepwise:
            raise ValueError(
                f"{type(self.model).__name__} is not a stepwise model; use the `extractive-summarization` pipeline"
            )
        config = self.model.config
        preprocess = {} if max_length is None else {"max_length": _positive("max_length", max_length)}
        forward = {
            "beam_size": _positive("beam_size", beam_size if beam_size is not None else config.beam_size),
            "num_sentences": _positive(
                "num_sentences", num_sentences if num_sentences is not None else config.num_sentences
            ),
            "trigram_blocking": bool(config.trigram_blocking if trigram_blocking is None else trigram_blocking),
            "min_sentences": _positive(
                "min_sentences", min_sentences if min_sentences is not None else config.min_sentences
            ),
            "end_bias": _finite("end_bias", config.end_bias if end_bias is None else end_bias),
            "max_words": None if max_words is None else _positive("max_words", max_words),
            "return_distributions": bool(return_steps),
            "end_at_limit": config.end_at_limit,
        }
        if forward["num_sentences"] - (not config.end_at_limit) > config.max_summary_sentences:
            raise ValueError(
                f"num_sentences={forward['num_sentences']} is more than this model can condition on "
                f"(max_summary_sentences={config.max_summary_sentences})"
            )
        return preprocess, forward, {"return_sentences": True} if return_sentences else {}

    def preprocess(self, document, max_length=None):
        return self.model_processor(self.readable_input(document, max_length), max_length=max_length)

    def _forward(self, model_inputs, **search_options):
        sentences = model_inputs.pop("sentences")
        batch_sentences = [sentences] if isinstance(sentences, tuple) else list(sentences)
        document = self.model.prepare_document(**model_inputs)
        device = model_inputs["input_ids"].device

        def score_rows(document_indices, prefixes):
            width = max(len(prefix) for prefix in prefixes)
            summary = torch.full((len(prefixes), width), -1, dtype=torch.long)
            for row, prefix in enumerate(prefixes):
                summary[row, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
            rows = torch.tensor(document_indices, dtype=torch.long, device=device)
            return self.model(**document, summary_indices=summary.to(device), row_documents=rows).logits

        if model_inputs.get("repeatable_mask") is not None:
            # the units the model keeps choosable once chosen (a planner's sentence break, team names)
            search_options["repeatable"] = [row.nonzero().flatten().tolist() for row in model_inputs["repeatable_mask"]]
        hypotheses = stepwise_beam_search(score_rows, batch_sentences, **search_options)
        return {"hypotheses": hypotheses, "sentences": batch_sentences}

    def postprocess(self, model_outputs, return_sentences=False):
        hypothesis, sentences = model_outputs["hypotheses"], model_outputs["sentences"]
        if isinstance(hypothesis, list):  # an unbatched forward output holds one-element lists
            hypothesis, sentences = hypothesis[0], sentences[0]
        chosen = [step for step in hypothesis.steps if step.sentence is not None]
        in_document_order = sorted(chosen, key=lambda step: step.sentence)
        steps = []
        for step in hypothesis.steps:
            entry = {"sentence": step.sentence, "probability": step.probability, "score": step.score}
            if step.distribution is not None:
                entry["distribution"] = list(step.distribution)
            steps.append(entry)
        result = {
            "summary": "\n".join(sentences[step.sentence] for step in in_document_order),
            "sentences": [step.sentence for step in in_document_order],
            "scores": [step.probability for step in in_document_order],
            "selection_order": [step.sentence for step in chosen],
            "steps": steps,
            "score": hypothesis.score,
        }
        if return_sentences:
            result["document_sentences"] = list(sentences)
        return result


__all__ = ["StepwiseSummarizationPipeline"]
