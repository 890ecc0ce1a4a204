"""The README's data format and its commands on the bundled examples."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_data_format_example_reads_with_datasets_the_cli_and_evaluate(tmp_path):
    from datasets import load_dataset

    from sumformers.input_records import path_records
    from sumformers.text.evaluation import evaluate_file

    (example,) = code_blocks(section("Data format"), "json")
    path = tmp_path / "example.jsonl"
    path.write_text(example, encoding="utf-8")
    rows = [json.loads(line) for line in example.splitlines()]
    assert {"id", "summary"} <= set(rows[0]) and "document" in rows[0] and "documents" in rows[1]

    dataset = load_dataset("json", data_files=str(path), split="train")
    assert {"id", "document", "documents", "summary", "title"} <= set(dataset.column_names) and len(dataset) == 2
    records = list(path_records(path))
    assert [record["id"] for record in records] == ["news-1", "reviews-1"] and not any("error" in r for r in records)
    assert records[1]["documents"] == rows[1]["documents"]
    assert evaluate_file(path, baseline="lead-1")["num_examples"] == 2


def test_bundled_example_follows_the_data_format():
    lines = (REPO_ROOT / "examples" / "cnn_three_articles.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 3
    assert all(isinstance(row["id"], str) and isinstance(row["document"], str) for row in rows)
    assert all("\n" in row["summary"] for row in rows)  # one reference sentence per line


def readme_commands() -> list[str]:
    """The bash blocks of the command-line part and the Train section's first (smoke) block."""
    use = code_blocks(section("Use"), "bash")
    return [*use, code_blocks(section("Train"), "bash")[0]]


def use_python_block() -> str:
    (block,) = code_blocks(section("Use"), "python")
    return block


ROTOWIRE_GAMES = "../shared/data/rotowire/games.jsonl"


def test_the_python_examples_name_only_bundled_files_and_the_rotowire_data():
    """Every file the Use example opens ships with the repo, but the Rotowire games: no dataset rows are bundled, so
    the table-to-text lines read the project's data copy (a user gives their own)."""
    block = use_python_block()
    assert re.findall(r"\.\./shared/[\w./-]+", block) == [ROTOWIRE_GAMES]
    named = set(re.findall(r"(?:examples|checkpoints)/[\w./-]+", block))
    assert all((REPO_ROOT / name).exists() for name in named), named
    assert not list((REPO_ROOT / "examples").glob("rotowire*"))


def rotowire_snippet(data_dir: Path) -> str:
    """The Use example's table-to-text and content-planning lines, runnable by themselves, on `data_dir`'s games."""
    block = use_python_block()
    start, end = block.index("# table-to-text (Rotowire)"), block.index("# shipped checkpoints by name")
    snippet = block[start:end].replace(ROTOWIRE_GAMES, str(data_dir / "rotowire" / "games.jsonl"))
    return "import json\n\nimport sumformers  # noqa: F401\nfrom transformers import pipeline\n\n" + snippet


@pytest.mark.slow  # the shipped planner and realizer on a whole game, several times (a few minutes on 2 cores)
def test_the_rotowire_example_runs_from_a_fresh_clone(monkeypatch, data_dir):
    from sumformers.text.rotowire_plans import plan_sentences

    monkeypatch.chdir(REPO_ROOT)
    names = {}
    exec(compile(rotowire_snippet(data_dir), "README.md (Use)", "exec"), names)  # noqa: S102  (the README's own code)
    realized, planned = names["realized"], names["planned"]
    # one realized sentence, one summary line, per sentence of the game's oracle plan
    assert realized["summary"].split("\n") == realized["sentences"]
    assert len(realized["sentences"]) == len(plan_sentences(realized["plan"])) > 3
    game = names["game"]
    assert game["home_name"] in realized["summary"] and game["vis_name"] in realized["summary"]
    assert planned["plan"][-1] == "<EOT>" and len(planned["plan_text"]) == len(plan_sentences(planned["plan"]))


def test_command_line_and_smoke_commands_name_only_bundled_files():
    commands = "\n".join(readme_commands())
    assert "../shared" not in commands
    named = set(re.findall(r"(?:examples|checkpoints)/[\w./-]+", commands))
    assert "examples/cnn_three_articles.jsonl" in named
    assert all((REPO_ROOT / name).exists() for name in named), named


@pytest.mark.slow  # trains two steps and loads models in four fresh interpreters (about a minute on 2 cores)
def test_readme_commands_on_the_bundled_examples_run(tmp_path):
    use_block, smoke_block = readme_commands()
    evaluation = [line for line in use_block.splitlines() if re.match(r"sumformers (summarize|evaluate)", line)]
    script = "\n".join([*evaluation, smoke_block]).replace("runs/smoke", str(tmp_path / "smoke"))
    script = script.replace("summaries.jsonl", str(tmp_path / "summaries.jsonl"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    completed = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=REPO_ROOT,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert len((tmp_path / "summaries.jsonl").read_text().splitlines()) == 3
    assert "rouge1" in completed.stdout and '"num_examples": 3' in completed.stdout
    assert (tmp_path / "smoke" / "final" / "adapter_config.json").is_file()
    last = json.loads(completed.stdout.strip().splitlines()[-1])
    assert last["id"] == "cnn_missing_student" and last["summary"]
