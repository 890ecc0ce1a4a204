"""The `content-planning` pipeline: a stepwise planner (Stepwise HiBERT or Stepwise ETCSum over a Rotowire game's
records, Narayan et al. 2020, section 7) builds a content plan one unit at a time, greedily by default: the stepwise
search of `stepwise_decoding`, whose no-repeat rule exempts the repeatable units (the sentence break ``<EOS>``, team
names and cities) across plan sentences but not within one, with the model's end-of-summary unit as ``<EOT>`` and a
maximum plan length."""

import math

from ..text.rotowire_plans import plan_sentences, plan_to_text
from ..text.rotowire_records import EOS, EOT
from .base import reject_unknown_options
from .stepwise_summarization import StepwiseSummarizationPipeline


class ContentPlanningPipeline(StepwiseSummarizationPipeline):
    """Content plans of Rotowire games.

    Inputs: a game as in ``rotowire/games.jsonl`` (a dict, or one JSON line); a list of them is a batch, where a
    malformed game gets ``{"error": message}`` and the others are planned.

    Options (defaults from the model config; the plan's length in the words of every summarizer): `num_sentences`
    (120: the most units before ``<EOT>``, sentence breaks included), `min_sentences` (1: the fewest, as `min_length`
    in `generate`), `beam_size` (1: greedy, as in the paper), `sentence_break_bias` (0.0: added to the sentence
    break's logit, `stepwise_decoding`), `return_steps` (add each step's whole distribution over the units and the
    end), `max_length` (input tokens).

    Output per game: `plan` (record ids and ``<EOS>`` in order, ending with ``<EOT>`` unless the length limit cut
    it), `steps` (per step: `unit`, the record id or unit, `sentence`, the record's template sentence or None for a
    unit, and `probability`), `sentence_breaks` (the positions of ``<EOS>`` in `plan`), `plan_sentences` (record ids
    per sentence, `rotowire_plans.plan_sentences`), `plan_text` (per sentence, the template sentences a realizer
    reads, `rotowire_plans.plan_to_text`) and `score` (the sum of the steps' log-probabilities).
    """

    reads_text = False

    def _sanitize_parameters(
        self, num_sentences=None, min_sentences=None, beam_size=None, sentence_break_bias=None, return_steps=None,
        max_length=None, **kwargs,
    ):
        reject_unknown_options(kwargs)
        preprocess, forward, postprocess = super()._sanitize_parameters(
            beam_size=beam_size, num_sentences=num_sentences, min_sentences=min_sentences,
            return_steps=return_steps, max_length=max_length,
        )
        bias = self.model.config.sentence_break_bias if sentence_break_bias is None else sentence_break_bias
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not math.isfinite(bias):
            raise ValueError(f"sentence_break_bias must be a finite number, got {bias!r}")
        forward["sentence_break_bias"] = float(bias)
        return preprocess, forward, postprocess

    def _forward(self, model_inputs, **search_options):
        units, game = model_inputs.pop("units"), model_inputs.pop("game")
        # <EOS> has one index in every game's units (the first: `planner_inputs.planning_units`)
        search_options["sentence_break"] = (units if isinstance(units, tuple) else units[0]).index(EOS)
        return {**super()._forward(model_inputs, **search_options), "units": units, "game": game}

    def postprocess(self, model_outputs):
        hypothesis, units, sentences = model_outputs["hypotheses"], model_outputs["units"], model_outputs["sentences"]
        if isinstance(hypothesis, list):  # an unbatched forward output holds one-element lists
            hypothesis, sentences = hypothesis[0], sentences[0]
        plan, steps = [], []
        for step in hypothesis.steps:
            unit = EOT if step.sentence is None else units[step.sentence]
            entry = {"unit": unit, "sentence": None if unit in (EOS, EOT) else sentences[step.sentence],
                     "probability": step.probability}
            if step.distribution is not None:
                entry["distribution"] = list(step.distribution)
            plan.append(unit)
            steps.append(entry)
        return {
            "plan": plan,
            "steps": steps,
            "sentence_breaks": [position for position, unit in enumerate(plan) if unit == EOS],
            "plan_sentences": plan_sentences(plan),
            "plan_text": plan_to_text(model_outputs["game"], plan),
            "score": hypothesis.score,
        }


__all__ = ["ContentPlanningPipeline"]
