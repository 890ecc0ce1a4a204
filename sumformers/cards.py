"""Model cards: huggingface_hub `ModelCard`s with metadata (datasets, metrics, base model, model-index), filled from
a per-architecture template in `model_cards/` and the card info a training run records; the same measured figures
as Hub `.eval_results/` YAML entries; and the card's first section, the call that runs the model."""

from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .modeling.pretrained_encoder import portable_encoder_name
from .registry import architecture_for
from .remote_code import collect_remote_code, required_packages

# The scores a card reports (x 100), as the training scripts' evaluations name them: ROUGE of summaries, BLEU of
# realized text, content selection and ordering of content plans (the paper reports CS alone for plans: their CO is
# this package's extension, and named so).
METRIC_NAMES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeLsum": "ROUGE-L (sum)", "bleu": "BLEU",
                "cs_precision": "CS precision", "cs_recall": "CS recall", "cs_f1": "CS F1",
                "co": "CO (not in the paper)"}


def metric_type(metric: str) -> str:
    return "rouge" if metric.startswith("rouge") else metric


def scores_text(scores: dict) -> str:
    """The reported scores of `scores`, e.g. "ROUGE-1 40.12, ROUGE-2 18.03, ROUGE-L (sum) 36.50"."""
    reported = [metric for metric in scores if metric in METRIC_NAMES]
    return ", ".join(f"{METRIC_NAMES[metric]} {scores[metric]:.2f}" for metric in reported)


def decoding_settings(generation_config, reason: str | None = None) -> str:
    """The beam search the generation config holds, as the card names it, with why it departs from the defaults
    (n-gram blocking, a minimum length) when it does."""
    penalty = getattr(generation_config, "length_penalty_type", None) or "transformers"
    formula = "((5 + |Y|) / 6) ** alpha, GNMT's" if penalty == "gnmt" else "|Y| ** alpha, transformers'"
    blocking, minimum = generation_config.no_repeat_ngram_size, generation_config.min_new_tokens
    settings = [
        f"beam {generation_config.num_beams}",
        f"length penalty alpha {generation_config.length_penalty} ({formula})",
        f"repeated {blocking}-grams of WordPieces blocked" if blocking else "no n-gram blocking",
    ]
    if minimum:
        settings.append(f"at least {minimum} WordPieces written")
    because = f" ({reason.strip()})" if (blocking or minimum) and reason else ""
    return ", ".join(settings) + because


def card_template(model_type: str) -> Path:
    return Path(str(resources.files("sumformers.model_cards") / f"{model_type}.md"))


def exported_repo_requirements(config) -> list[str]:
    """What an exported repo of this architecture needs installed: transformers, torch and its code's packages."""
    architecture = architecture_for(config)
    code = collect_remote_code(*architecture.remote_code_classes)
    return ["transformers", "torch", *required_packages(code)]


def measured_results(card_info: dict) -> list[tuple[str, EvalResult]]:
    """(metric, model-index entry) for each reported score of `card_info["results"]`, rounded as the card shows it:
    the one source of the card's model-index and of its `.eval_results/` entries."""
    return [
        (
            metric,
            EvalResult(
                task_type="summarization",
                dataset_type=(card_info.get("datasets") or ["unknown"])[0],
                dataset_name=card_info.get("dataset_name", "unknown"),
                dataset_split=card_info.get("split"),
                metric_type=metric_type(metric),
                metric_name=METRIC_NAMES[metric],
                metric_value=round(float(value), 2),
            ),
        )
        for metric, value in card_info.get("results", {}).items()
        if metric in METRIC_NAMES
    ]


def eval_results_files(card_info: dict) -> dict[str, str]:
    """The Hub's `.eval_results/*.yaml` entries (https://huggingface.co/docs/hub/eval-results: a list of
    `{dataset: {id, task_id}, value, notes}`, one value each) for the card's measured figures: one file per dataset,
    one entry per metric, `task_id` the metric's id (`rouge1`, `cs_f1`, ...: none of these datasets is a Hub Benchmark
    with an `eval.yaml` that defines tasks), `notes` the metric's name and the evaluated split. Empty without scores."""
    entries = [
        {
            "dataset": {"id": result.dataset_type, "task_id": metric},
            "value": result.metric_value,
            "notes": f"{result.metric_name} x 100, {result.dataset_name}, split {result.dataset_split}",
        }
        for metric, result in measured_results(card_info)
    ]
    if not entries:
        return {}
    file_name = entries[0]["dataset"]["id"].rsplit("/", 1)[-1] + ".yaml"
    return {file_name: yaml.safe_dump(entries, sort_keys=False, allow_unicode=True)}


@dataclass(frozen=True)
class Usage:
    """The call a card shows first: the pipeline's input and options as Python source, the lines that make the input
    (`imports`, `setup`), and what `print(result)` shows (keys as the pipeline returns them, values illustrative)."""

    input: str = '"Your article ..."'
    options: str = ""
    result: str = "{'summary': 'The summary ...'}"
    imports: str = ""
    setup: str = ""


_READ_A_GAME = 'game = json.loads(open("games.jsonl").readline())  # one Rotowire game, a line of rotowire/games.jsonl'
USAGE = {
    "extractive-summarization": Usage(
        options="num_sentences=3",
        result=r"""{'summary': 'Second sentence.\nFourth sentence.\nFifth sentence.', 'sentences': [1, 3, 4],
 'scores': [0.71, 0.52, 0.47]}""",
    ),
    "stepwise-summarization": Usage(
        options="beam_size=3, num_sentences=4",
        result=r"""{'summary': 'Second sentence.\nThird sentence.\nFourth sentence.', 'sentences': [1, 2, 3],
 'scores': [0.18, 0.33, 0.21], 'selection_order': [2, 3, 1],
 'steps': [{'sentence': 2, 'probability': 0.33, 'score': -1.09}, ...,
           {'sentence': None, 'probability': 0.41, 'score': -5.44}],
 'score': -5.44}""",
    ),
    "abstractive-summarization": Usage(),
    "wikisum": Usage(
        input='{"title": "Solar power", "documents": ["First source ...", "Second source ..."]}',
        options='ranker="tfidf", max_input_tokens=1024, num_beams=4',
        result="""{'summary': 'solar power is ...',
 'paragraphs': [{'index': 3, 'document': 1, 'rank': 0, 'score': 0.42, 'tokens': 25, 'text': 'Solar power is ...'},
                ...],
 'input_tokens': 231}""",
    ),
    "content-planning": Usage(
        input="game",
        imports="import json",
        setup=_READ_A_GAME,
        result="""{'plan': ['Rockets|TEAM-NAME', 'Hawks|TEAM-NAME', ..., '<EOS>', ..., '<EOT>'],
 'steps': [{'unit': 'Rockets|TEAM-NAME', 'sentence': 'The Rockets were the visiting team.',
            'probability': 0.33}, ...],
 'sentence_breaks': [10, 36], 'plan_sentences': [['Rockets|TEAM-NAME', ...], ...],
 'plan_text': ['The Rockets were the visiting team. The Hawks were the home team. ...', ...],
 'score': -86.2}""",
    ),
    "wikisum-llama": Usage(options="max_new_tokens=120"),
    "table-to-text": Usage(
        input="game",
        imports="import json",
        setup=_READ_A_GAME,
        result="""{'summary': 'The Atlanta Hawks ( 41 - 29 ) defeated ...',
 'sentences': ['The Atlanta Hawks ( 41 - 29 ) defeated ...', ...],
 'plan': ['Hawks|TEAM-NAME', 'Hawks|TEAM-CITY', ..., '<EOS>', ...], 'plan_source': 'template'}""",
    ),
}
# Architectures whose call differs from their task's
USAGE_BY_MODEL_TYPE = {
    "hetformer": replace(
        USAGE["extractive-summarization"], input='"A long meeting transcript or article ..."', options=""
    ),
}
PIPELINE_NAMES = {"content-planning": "planner", "table-to-text": "realizer"}


def usage_section(config, repo_id: str) -> str:
    """A card's first section: what to install, the `pipeline(task, model=repo, trust_remote_code=True)` call of the
    package's task, and what the result looks like."""
    task = architecture_for(config).task
    usage = USAGE_BY_MODEL_TYPE.get(config.model_type) or USAGE[task]
    name = PIPELINE_NAMES.get(task, "summarizer")
    arguments = ", ".join(filter(None, [usage.input, usage.options]))
    imports = f"{usage.imports}\n\n" if usage.imports else ""
    setup = f"{usage.setup}\n\n" if usage.setup else ""
    return f"""## Use

```bash
pip install sumformers
```

```python
{imports}from transformers import pipeline

{setup}{name} = pipeline("{task}", model="{repo_id}", trust_remote_code=True)
result = {name}({arguments})
print(result)
```

`result` looks like this (values shortened):

```python
{usage.result}
```

`{task}` is a task of sumformers that the repo's own code brings (`trust_remote_code=True`): transformers 5 has no
`summarization` pipeline, so `pipeline("summarization", ...)` cannot run this model. The repo's code needs only
`pip install {" ".join(exported_repo_requirements(config))}`; with sumformers installed,
`sumformers.load_pipeline("{repo_id}")` runs the installed package's code instead, without `trust_remote_code`."""


def build_model_card(config, card_info: dict) -> ModelCard:
    """`card_info` (all optional): `model_name`, `repo_id`, `datasets` (Hub ids), `dataset_name`, `split`,
    `results` ({metric: value x 100}), `training` (markdown), `decoding` (markdown: the generation config's settings
    where a template shows them), `evaluation` (markdown), `comparisons` (markdown: benchmark tables beyond the model's
    own scores, where a template shows them), `deviations` (markdown: where the model departs from its paper, and
    why, where a template shows them), `quality_note` (one sentence: how a demonstration model compares with
    the simple baseline it does not beat, with the numbers of its evaluation; the card's first line).
    `training_seconds` and `training_hardware` are not shown: a run's training time and hardware as data, for a
    card whose `training` text does not say them in the training scripts' words (`benchmarks/quality_cnndm.py`)."""
    # the pretrained model the weights start from: the encoder, or the decoder WikiSum over Llama adapts
    encoder = getattr(config, "base_model_name_or_path", None) or portable_encoder_name(
        getattr(config, "encoder_name_or_path", None)
    )
    results = card_info.get("results", {})
    eval_results = [result for _, result in measured_results(card_info)]
    model_name = card_info.get("model_name", f"sumformers-{config.model_type}")
    repo_id = card_info.get("repo_id", f"your-name/{model_name}")
    # WikiSum and the encoder-decoders write new text; every other architecture picks sentences of the input
    task = architecture_for(config).task
    writes = task in ("abstractive-summarization", "wikisum", "wikisum-llama", "table-to-text")
    style = "abstractive-summarization" if writes else "extractive-summarization"
    # What the Hub shows a reader comes from `library_name` and `pipeline_tag`. With `library_name: transformers`
    # and `pipeline_tag: summarization` its "Use this model" snippet is `pipeline("summarization", ...)`, a task
    # transformers 5 removed ("no longer supported in transformers v5"); without `library_name` the Hub infers
    # transformers from config.json. `sumformers` is a library the Hub writes no snippet for, so the call a reader
    # sees is the card's own first section (the package's task with `trust_remote_code=True`). `pipeline_tag:
    # summarization` stays: it files the model under the Summarization task, where users look for it. The tags name
    # the package, its pipeline task, extractive or abstractive, the architecture and `custom_code` (the repo's code
    # runs with `trust_remote_code`); not `transformers`, a library tag that would again suggest its snippet.
    card_data = ModelCardData(
        language="en",
        license="apache-2.0",
        library_name="sumformers",
        pipeline_tag="summarization",
        tags=list(dict.fromkeys(["sumformers", "summarization", task, style, config.model_type, "custom_code"])),
        datasets=card_info.get("datasets"),
        metrics=list(dict.fromkeys(metric_type(metric) for metric in results if metric in METRIC_NAMES)) or None,
        base_model=encoder,
        model_name=model_name if eval_results else None,
        eval_results=eval_results or None,
    )
    card = ModelCard.from_template(
        card_data,
        template_path=str(card_template(config.model_type)),
        model_name=model_name,
        repo_id=repo_id,
        usage=usage_section(config, repo_id),
        encoder=encoder,
        requirements=" ".join(exported_repo_requirements(config)),
        max_tokens=getattr(config, "max_position_embeddings", "?"),
        inter_sentence_layers=getattr(config, "inter_sentence_layers", 0),
        num_sentences=getattr(config, "num_sentences", None),
        trigram_blocking=getattr(config, "trigram_blocking", True),
        relative_attention=getattr(config, "relative_attention", None),
        long_position_embeddings=getattr(config, "long_position_embeddings", None),
        training=card_info.get("training"),
        decoding=card_info.get("decoding"),
        evaluation=card_info.get("evaluation"),
        comparisons=card_info.get("comparisons"),
        deviations=card_info.get("deviations"),
        config=config,
    )
    if card_info.get("quality_note"):
        # the first line a reader sees, so that a demonstration model is not taken for a usable one
        card.text = f"\n**{card_info['quality_note'].strip()}**\n" + card.text
    return card
