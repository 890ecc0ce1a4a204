"""Hub pages that run (#60): every shipped checkpoint exported the way `sumformers export` writes it; the card's first
section is the call that runs it (`pip install sumformers`, `pipeline(<task>, model=<repo>, trust_remote_code=True)`,
the result's shape) and that snippet runs against the exported folder offline, with only the repo's own code; the
metadata names no removed transformers pipeline; and `.eval_results/` carries the model-index's numbers."""

import ast
import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from huggingface_hub import ModelCard
from transformers import AutoConfig

from sumformers.cards import METRIC_NAMES
from sumformers.hub import CARD_INFO_FILE, EVAL_RESULTS_FOLDER, export_model, shipped_checkpoints
from sumformers.registry import architecture_for

# WikiSum over SmolLM2 is left out: its export would merge 540 MB of SmolLM2 weights into the repo (not supported)
SHIPPED = sorted(set(shipped_checkpoints()) - {"wikisum-smollm2-td-cnndm"})
ROTOWIRE_TASKS = ("content-planning", "table-to-text")
# The realizer's snippet realizes a whole game (about ten sentences, beam 4): about 30 s here
SNIPPET_RUNS = [pytest.param(name, marks=pytest.mark.slow) if name == "realizer-minilm-rotowire" else name
                for name in SHIPPED]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> the shipped checkpoint exported into a temporary folder (each exported once per module)."""
    folders = {}

    def export(name):
        if name not in folders:
            folders[name] = export_model(name, str(tmp_path_factory.mktemp("export") / name))
        return folders[name]

    return export


def task_of(name) -> str:
    return architecture_for(AutoConfig.from_pretrained(shipped_checkpoints()[name])).task


def use_section(card_text: str) -> str:
    """The card's first section (after the front matter and the title), which must be `## Use`."""
    body = card_text.split("\n---\n", 1)[1]
    sections = re.split(r"^## ", body, flags=re.MULTILINE)
    assert sections[1].startswith("Use\n"), sections[1][:80]
    return sections[1]


def python_blocks(section: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def same_shape(example, actual) -> bool:
    """Whether a result has the keys (recursively, through lists) that the card's example shows; `...` in the example
    stands for whatever follows."""
    if isinstance(example, dict):
        return isinstance(actual, dict) and set(example) == set(actual) and all(
            same_shape(example[key], actual[key]) for key in example
        )
    if isinstance(example, list) and example and example[0] is not Ellipsis:
        return isinstance(actual, list) and (not actual or same_shape(example[0], actual[0]))
    return True


# Runs before the card's snippet: as in a bare `pip install transformers torch pysbd`, sumformers cannot be imported,
# so only the exported repo's own code (trust_remote_code) can answer the pipeline call.
WITHOUT_SUMFORMERS = "import sys\nsys.modules['sumformers'] = None\n"
PRINT_RESULT_AS_JSON = "\nimport json as _json\nprint('RESULT ' + _json.dumps(result, default=repr))\n"


@pytest.mark.parametrize("name", SNIPPET_RUNS)
def test_the_exported_cards_snippet_runs_offline_and_returns_what_the_card_shows(name, exported, tmp_path, request):
    task = task_of(name)
    workdir = tmp_path / "run"
    workdir.mkdir()
    if task in ROTOWIRE_TASKS:  # the snippet reads one game from games.jsonl in the working folder
        (workdir / "games.jsonl").write_text(request.getfixturevalue("rotowire_game_line") + "\n", encoding="utf-8")
    folder = exported(name)
    section = use_section((folder / "README.md").read_text(encoding="utf-8"))
    assert "```bash\npip install sumformers\n```" in section
    snippet, shown_result = python_blocks(section)
    (repo_id,) = re.findall(r'pipeline\("' + re.escape(task) + r'", model="([^"]+)", trust_remote_code=True\)', snippet)
    script = WITHOUT_SUMFORMERS + snippet.replace(f'"{repo_id}"', repr(str(folder))) + PRINT_RESULT_AS_JSON
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=workdir, capture_output=True, text=True, env=env, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    (line,) = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert same_shape(ast.literal_eval(shown_result), result), (shown_result, result)
    # a real answer: a summary of words, or a plan of record ids ending the game's plan
    assert result["plan"][-1] == "<EOT>" if task == "content-planning" else result["summary"].split()


@pytest.mark.parametrize("name", SHIPPED)
def test_exported_metadata_points_at_the_package_and_eval_results_carry_the_model_index(name, exported):
    folder = exported(name)
    task = task_of(name)
    card = ModelCard.load(folder / "README.md")
    # not transformers (whose Hub snippet would be the removed `pipeline("summarization")`), and no tag naming it
    assert card.data.library_name == "sumformers" and card.data.pipeline_tag == "summarization"
    assert {"sumformers", task, "custom_code"} <= set(card.data.tags) and "transformers" not in card.data.tags
    assert 'pipeline("summarization"' not in card.text.replace('`pipeline("summarization", ...)` cannot', "")

    card_info = json.loads((shipped_checkpoints()[name] / CARD_INFO_FILE).read_text(encoding="utf-8"))
    measured = {METRIC_NAMES[metric]: round(value, 2) for metric, value in card_info["results"].items()}
    model_index = {result.metric_name: result.metric_value for result in card.data.eval_results}
    assert model_index == measured
    (dataset,) = {result.dataset_type for result in card.data.eval_results}

    (eval_file,) = (folder / EVAL_RESULTS_FOLDER).iterdir()
    entries = yaml.safe_load(eval_file.read_text(encoding="utf-8"))
    assert {entry["dataset"]["id"] for entry in entries} == {dataset}
    assert {METRIC_NAMES[entry["dataset"]["task_id"]]: entry["value"] for entry in entries} == model_index
    assert oct(eval_file.stat().st_mode & 0o777) == "0o644"


def test_an_export_without_scores_writes_no_eval_results(tiny_bertsum, minilm_tokenizer, tmp_path):
    source = tmp_path / "source"
    tiny_bertsum().save_pretrained(source)
    minilm_tokenizer.save_pretrained(source)
    repo = export_model(str(source), str(tmp_path / "repo"))
    assert not (repo / EVAL_RESULTS_FOLDER).exists()
    assert ModelCard.load(repo / "README.md").data.eval_results is None
