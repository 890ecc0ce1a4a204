"""`pipeline(task)` without a model (#60, part 7): every task sumformers adds resolves, offline, to its shipped default
checkpoint (`registry.DEFAULT_CHECKPOINTS`, registered through transformers' `default=`), and answers a real example
exactly as `pipeline(task, model=<that folder>)` does. Before: `KeyError: 'default'` from inside transformers."""

import json
from pathlib import Path

import pytest
from transformers import pipeline
from transformers.pipelines import PIPELINE_REGISTRY

import sumformers
from conftest import REPO_ROOT, skip_without_installed_base
from sumformers.checkpoints import shipped_checkpoints
from sumformers.registry import ARCHITECTURES, DEFAULT_CHECKPOINTS, register_all, task_of_model_folder

TASKS = sorted({architecture.task for architecture in ARCHITECTURES.values()})
ROTOWIRE_TASKS = ("content-planning", "table-to-text")


def test_every_task_registers_a_shipped_default_of_that_task_at_the_package_version():
    register_all()
    assert sorted(DEFAULT_CHECKPOINTS) == TASKS
    for task in TASKS:
        folder, revision = PIPELINE_REGISTRY.supported_tasks[task]["default"]["model"]
        assert Path(folder) == shipped_checkpoints()[DEFAULT_CHECKPOINTS[task]]
        assert task_of_model_folder(folder) == task
        assert revision == sumformers.__version__


# What a Rotowire game is asked, to keep each test well under 20 s (a full plan and its realization take about 80 s
# here): a plan of two units, and one plan sentence (of that game's records) to realize.
ROTOWIRE_OPTIONS = {"content-planning": {"num_sentences": 2, "beam_size": 1}}
# and a short summary of the article from WikiSum over SmolLM2 (about 2 s a sentence here)
OPTIONS = ROTOWIRE_OPTIONS | {"wikisum-llama": {"max_new_tokens": 30}}
ONE_PLAN_SENTENCE = ["Rockets|TEAM-NAME", "Hawks|TEAM-NAME", "Rockets|TEAM-WINS", "Hawks|TEAM-WINS", "<EOT>"]


def real_example(task, request):
    """The bundled CNN article (examples/), or for the Rotowire tasks one dev game from the shared data."""
    if task in ROTOWIRE_TASKS:
        game = json.loads(request.getfixturevalue("rotowire_game_line"))
        return {"game": game, "plan": ONE_PLAN_SENTENCE} if task == "table-to-text" else game
    return (REPO_ROOT / "examples" / "cnn_missing_student.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("task", TASKS)
def test_pipeline_without_a_model_answers_as_its_shipped_default(task, request):
    example = real_example(task, request)
    folder = str(shipped_checkpoints()[DEFAULT_CHECKPOINTS[task]])
    skip_without_installed_base(folder)
    by_default = pipeline(task)
    assert by_default.model.name_or_path == folder
    options = OPTIONS.get(task, {})
    result = by_default(example, **options)
    assert result == pipeline(task, model=folder)(example, **options)
    # a real answer: a summary of words, or a plan of record ids ending the game's plan
    assert result["plan"][-1] == "<EOT>" if task == "content-planning" else result["summary"].split()
