"""The `table-to-text` pipeline: a Rotowire game in, a summary out, realized sentence by sentence (Narayan et al.
2020, section 7): a content planner (or the game's oracle plan) orders the game's records into plan sentences, and
the realizer writes one summary sentence per plan sentence, each conditioned on the sentence it realized before."""

import functools
from collections.abc import Mapping

from ..generation.source_numbers import SourceNumbersLogitsProcessor, number_token_mask
from ..text.rotowire_plans import plan_sentences, template_plan
from .abstractive_summarization import GENERATION_OPTIONS
from .base import SummarizationPipeline, reject_unknown_options

ORACLE = "oracle"
TEMPLATE = "template"
PLANS = (ORACLE, TEMPLATE)


def planner_pipeline(planner):
    """A `content-planning` pipeline from a shipped checkpoint's name, a model folder or a Hub id (another task's
    model refused in one line before any game is planned); a callable (a pipeline) as it is."""
    if callable(planner):
        return planner
    if not isinstance(planner, str):
        raise ValueError(f"planner must be a content-planning model path or pipeline, got {type(planner).__name__}")
    from transformers import pipeline
    from transformers.pipelines import PIPELINE_REGISTRY

    if "content-planning" not in PIPELINE_REGISTRY.supported_tasks:  # exported code, sumformers not installed
        raise ValueError(
            f"the content-planning task is not registered here: pass the planner as a pipeline, "
            f"planner=pipeline(model={planner!r}, trust_remote_code=True)"
        )
    # The task is registered by sumformers, whose shipped checkpoints are then installed with it. The import sits in a
    # try block, which transformers' check of an exported repo's imports skips: the repo's code must load without it.
    try:
        from sumformers.checkpoints import shipped_checkpoints
    except ImportError:
        shipped = {}
    else:
        shipped = shipped_checkpoints()
    planning = pipeline(model=str(shipped.get(planner, planner)))
    if planning.task != "content-planning":
        raise ValueError(f"planner takes a content-planning model, not {planner} (task {planning.task})")
    return planning


class TableToTextPipeline(SummarizationPipeline):
    """Plans, then realizes one sentence at a time with `generate()` (the realizer's generation config: beam 4).

    Inputs: a game (a dict as in Rotowire's JSONL, one JSON line, or a parsed `Game`), or `{"game": game, "plan":
    [...]}` with its own plan; a list of those is a batch, realized one game after another.
    Options: `planner` (a `content-planning` pipeline, or its model folder or Hub id, called with the game as given
    and returning `{"plan": [...]}`), `plan="oracle"` (the oracle plan of the game's own summary, to evaluate the
    realizer alone) or `plan="template"` (the template plan of the model's `plan_template`: the default, which scores
    above the shipped planners' plans); the `generate()` options of `abstractive-summarization`;
    `max_input_length` (tokens of one step); `numbers_from_input` (True: each sentence's number tokens only from its
    step's input; default the model config's).
    Output per game: `summary` (the realized sentences, one per line), `sentences`, `plan` (record ids, `<EOS>`
    between sentences, `<EOT>` at the end) and `plan_source` (`"given"`, `"planner"`, `"oracle"` or `"template"`).
    """

    reads_text = False

    def __call__(self, inputs, *args, **kwargs):
        kwargs.pop("batch_size", None)  # the steps of a game depend on each other: a game is its own batch
        return super().__call__(inputs, *args, **kwargs)

    def _sanitize_parameters(self, planner=None, plan=None, max_input_length=None, numbers_from_input=None, **kwargs):
        generation = {name: kwargs.pop(name) for name in GENERATION_OPTIONS if name in kwargs}
        reject_unknown_options(kwargs)
        if numbers_from_input is not None and not isinstance(numbers_from_input, bool):
            raise ValueError(f"numbers_from_input must be True or False, got {numbers_from_input!r}")
        preprocess = {}
        if plan is not None:
            if plan not in PLANS:
                raise ValueError(f"plan must be {ORACLE!r} (the game's oracle plan) or {TEMPLATE!r} (the template "
                                 f"plan), got {plan!r}; give a plan of your own as the input "
                                 "{'game': ..., 'plan': [...]}")
            preprocess["plan"] = plan
        if planner is not None:
            if plan is not None:
                raise ValueError("give planner= or plan='oracle', not both")
            preprocess["planner"] = planner_pipeline(planner)
        forward = dict(generation)
        if max_input_length is not None:
            forward["max_input_length"] = max_input_length
        if numbers_from_input is not None:
            forward["numbers_from_input"] = numbers_from_input
        return preprocess, forward, {}

    @functools.cached_property
    def number_tokens(self):
        return number_token_mask(self.tokenizer)

    def preprocess(self, inputs, planner=None, plan=None):
        # The game is parsed, and its oracle plan taken, by the model's processor, which reads it in every step: in
        # an exported repo this module and the processor's are separate copies, and so are their `Game` classes.
        processor = self.model_processor
        processor.check_input(inputs)
        if isinstance(inputs, Mapping) and "game" in inputs:
            game, units, source = processor.game(inputs["game"]), list(inputs["plan"]), "given"
        else:
            game = processor.game(inputs)
            source = "planner" if planner is not None else plan or TEMPLATE
            if planner is not None:
                output = planner(inputs)
                units = list(output["plan"] if isinstance(output, Mapping) else output)
            elif plan == ORACLE:
                if not game.summary:
                    raise ValueError(f"game {game.id!r} has no summary to take an oracle plan from")
                units = processor.oracle_plan(game)
            elif self.model.config.plan_template is not None:
                units = template_plan(game, self.model.config.plan_template)
            else:
                raise ValueError("table-to-text needs a content plan: give planner=... or plan='oracle' (this "
                                 "realizer has no plan_template)")
        sentences = plan_sentences(units)
        for record_id in (record_id for sentence in sentences for record_id in sentence):
            game.record(record_id)  # an id the game lacks is a one-line ValueError here, not deep in the loop
        return {"game": game, "plan": units, "plan_sentences": sentences, "plan_source": source}

    def _forward(self, model_inputs, max_input_length=None, numbers_from_input=None, **generation):
        game, processor = model_inputs["game"], self.model_processor
        if numbers_from_input is None:
            numbers_from_input = self.model.config.numbers_from_input
        realized, previous = [], ""
        for record_ids in model_inputs["plan_sentences"]:
            step = processor({"game": game, "records": record_ids, "previous": previous}, max_length=max_input_length)
            step = {key: value.to(self.model.device) for key, value in step.items()}
            processors = []
            if numbers_from_input:
                processors.append(SourceNumbersLogitsProcessor(step["input_ids"], self.number_tokens))
            sequence = self.model.generate(**step, logits_processor=processors, **generation)[0]
            previous = processor.decode(sequence.tolist(), game)
            realized.append(previous)
        return {"sentences": realized, "plan": model_inputs["plan"], "plan_source": model_inputs["plan_source"]}

    def postprocess(self, model_outputs):
        sentences = model_outputs["sentences"]
        return {"summary": "\n".join(sentences), "sentences": sentences, "plan": model_outputs["plan"],
                "plan_source": model_outputs["plan_source"]}


__all__ = ["TableToTextPipeline"]
