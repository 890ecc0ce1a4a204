"""The console script `sumformers` (`sumformers_cli`): fast help, one-line argument errors, and how JSONL documents
reach single- and multi-document models."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import sumformers_cli

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTICLE = REPO_ROOT / "examples" / "cnn_missing_student.txt"
THREE_ARTICLES = REPO_ROOT / "examples" / "cnn_three_articles.jsonl"


def run_command(*arguments, timeout=120):
    """`sumformers ARGUMENTS` in a fresh interpreter (the installed console script when there is one)."""
    script = Path(sys.executable).with_name("sumformers")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "sumformers_cli"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    completed = subprocess.run(
        [*command, *map(str, arguments)], check=False, capture_output=True, text=True, env=env, timeout=timeout
    )
    return completed, time.perf_counter() - start


def assert_one_error_line(stderr: str, *fragments: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("sumformers: error: "), stderr
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], stderr


# ---------------------------------------------------------------------------------------------------------------
# 1. --help and argument parsing without torch


def test_parsing_imports_neither_torch_nor_transformers():
    code = (
        "import sys, sumformers_cli\n"
        "parser = sumformers_cli.build_parser()\n"
        "args = parser.parse_args(['summarize', 'in.txt', '--num-sentences', '2', '--model', 'org/name'])\n"
        "assert args.command == 'summarize' and args.num_sentences == 2\n"
        "try:\n"
        "    sumformers_cli.main(['summarize', '--help'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0\n"
        "heavy = sorted(name for name in ('torch', 'transformers', 'sumformers') if name in sys.modules)\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[-1] == "ok"
    assert "--num-sentences" in completed.stdout and "--max-words" in completed.stdout


@pytest.mark.parametrize("arguments", [["--help"], ["summarize", "--help"], ["evaluate", "--help"]])
def test_help_is_fast(arguments):
    completed, seconds = run_command(*arguments)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("usage: sumformers") and completed.stderr == ""
    assert seconds < 3, f"`sumformers {' '.join(arguments)}` took {seconds:.1f} s"


def test_usage_error_is_fast_and_one_line():
    completed, seconds = run_command("summarize")
    assert completed.returncode == sumformers_cli.ERROR_EXIT
    assert_one_error_line(completed.stderr, "required: input")
    assert seconds < 3


def test_console_script_points_at_the_light_module():
    from importlib.metadata import entry_points

    (script,) = [point for point in entry_points(group="console_scripts") if point.name == "sumformers"]
    assert script.value == "sumformers_cli:main"


# ---------------------------------------------------------------------------------------------------------------
# 2. bad arguments: one `sumformers: error:` line, exit 2, checked before any model is loaded


def main_error(capsys, arguments) -> str:
    with pytest.raises(SystemExit) as exit:
        sumformers_cli.main([str(argument) for argument in arguments])
    assert exit.value.code == sumformers_cli.ERROR_EXIT
    stderr = capsys.readouterr().err
    assert_one_error_line(stderr)
    return stderr


@pytest.mark.parametrize(
    "option",
    ["--num-sentences", "--max-words", "--batch-size", "--num-beams", "--max-new-tokens", "--max-input-tokens"],
)
@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_counts_must_be_positive_integers(capsys, option, value):
    stderr = main_error(capsys, ["summarize", ARTICLE, option, value])
    assert f"argument {option}: " in stderr
    assert f"got {value!r}" in stderr if value == "two" else f"must be a positive integer, got {value}" in stderr


def test_missing_paths_are_errors(capsys, tmp_path):
    missing = tmp_path / "missing"
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "file.txt").write_text("x")
    cases = [
        (["summarize", missing / "in.txt"], "no such file or folder"),
        (["summarize", ARTICLE, "--output", missing / "out.jsonl"], f"the folder {missing} does not exist"),
        (["summarize", ARTICLE, "--output", tmp_path], "a folder, not a file"),
        (["summarize", ARTICLE, "--model", missing / "model"], "no such folder"),
        (["summarize", ARTICLE, "--model", "./missing-model"], "no such folder"),
        (["summarize", ARTICLE, "--model", "runs/model/final"], "no such folder"),
        (["summarize", ARTICLE, "--model", tmp_path / "not-a-model"], "holds no config.json"),
        (["summarize", ARTICLE, "--model", tmp_path / "file.txt"], "a file, not a model folder"),
        (["evaluate", "--data", missing / "data.jsonl", "--baseline", "lead-3"], "--data"),
        (["evaluate", "--data", THREE_ARTICLES, "--predictions", missing / "p.jsonl"], "--predictions"),
        (["evaluate", "--data", THREE_ARTICLES], "one of the arguments --predictions --baseline is required"),
        (["evaluate", "--data", THREE_ARTICLES, "--baseline", "lead-0"], "argument --baseline"),
        (["evaluate", "--data", THREE_ARTICLES, "--predictions", THREE_ARTICLES, "--baseline", "lead"], "not allowed"),
        (["export", missing / "model", tmp_path / "out"], "no such folder"),
        (["export", tmp_path / "file.txt"], "a file, not a folder"),
        (["export", "a", "b", "c"], "export takes [MODEL] OUTPUT_DIR"),
        (["export", tmp_path / "out", "--games", THREE_ARTICLES], "--games goes with --space"),
        (["export", tmp_path / "out", "--space", "--games", missing / "games.jsonl"], "--games"),
        (["export", tmp_path / "out", "--onnx", "--space"], "--onnx writes a model folder, --space a Space"),
        (["export", tmp_path / "out", "--quantize", "int8"], "--quantize goes with --onnx"),
        (["export", tmp_path / "out", "--onnx", "--quantize", "int4"], "argument --quantize"),
        (["demo", "--games", missing / "games.jsonl"], "no such file"),
        (["summarise", ARTICLE], "invalid choice"),
    ]
    for arguments, fragment in cases:
        assert fragment in main_error(capsys, arguments), arguments


def test_bad_arguments_never_import_the_package():
    code = (
        "import sys, sumformers_cli\n"
        "for arguments in (['summarize', 'examples/cnn_missing_student.txt', '--model', './nope'],\n"
        "                  ['summarize', 'examples/cnn_missing_student.txt', '--output', 'nope/out.jsonl'],\n"
        "                  ['evaluate', '--data', 'nope.jsonl', '--baseline', 'lead-3'],\n"
        "                  ['export', 'nope/deeper/model', 'out']):  # (nope/model could be a Hub id)\n"
        "    try:\n"
        "        sumformers_cli.main(arguments)\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 2, arguments\n"
        "assert 'torch' not in sys.modules and 'sumformers' not in sys.modules\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 4
    assert all(line.startswith("sumformers: error: ") for line in completed.stderr.splitlines())


@pytest.mark.parametrize("command", ["summarize", "export"])
def test_a_model_that_cannot_be_loaded_is_one_error_line(command, tmp_path):
    # A bare name is a shipped checkpoint or a Hub id: it is left to loading, whose failure becomes one line.
    if command == "summarize":
        completed, _ = run_command("summarize", ARTICLE, "--model", "no-such-model-anywhere")
    else:
        completed, _ = run_command("export", "no-such-model-anywhere", tmp_path / "out")
    assert completed.returncode == sumformers_cli.ERROR_EXIT
    verb = "load" if command == "summarize" else "export"
    assert_one_error_line(completed.stderr, f"could not {verb} model no-such-model-anywhere: ")


def test_a_broken_model_folder_is_one_error_line(capsys, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    stderr = main_error(capsys, ["summarize", ARTICLE, "--model", folder])
    assert f"could not load model {folder}: " in stderr


def test_python_m_sumformers_cli_still_runs():
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "sumformers_cli",
            "evaluate",
            "--data",
            THREE_ARTICLES,
            "--baseline",
            "lead-3",
            "--json",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    scores = json.loads(completed.stdout)
    assert scores["num_examples"] == 3 and 0 < scores["rouge1"] < 100


# ---------------------------------------------------------------------------------------------------------------
# 4. multi-document JSONL lines: a list for models that read several documents, one text for the others


def fake_model(model_type, **attributes):
    model_class = type("FakeModel", (), attributes)
    model = model_class()
    model.config = SimpleNamespace(model_type=model_type)
    return model


def test_the_model_contract_says_which_models_read_several_documents():
    from sumformers import ARCHITECTURES

    readers = {
        name for name, architecture in ARCHITECTURES.items() if architecture.model_class.reads_multiple_documents
    }
    assert readers == {"hetformer", "wikisum"}


def test_jsonl_keeps_the_documents_list(tmp_path):
    from sumformers.input_records import path_records

    source = tmp_path / "docs.jsonl"
    rows = [
        {"id": "many", "documents": ["First review.", "Second review."]},
        {"id": "one", "document": "One text."},
        {"id": "both", "document": "Joined.", "documents": ["A.", "B."], "title": "T"},
        {"id": "bad", "documents": ["text", 3]},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    records = list(path_records(source))
    assert records[0] == {"id": "many", "documents": ["First review.", "Second review."]}
    assert records[1] == {"id": "one", "document": "One text."}
    assert records[2] == {"id": "both", "document": "Joined.", "documents": ["A.", "B."], "title": "T"}
    assert records[3]["id"] == "bad" and "no `document` string" in records[3]["error"]


def test_model_input_routes_documents_by_model():
    from sumformers.cli import model_input

    many = {"id": "m", "documents": ["First review.", "Second review."]}
    one = {"id": "o", "document": "One text."}
    both = {"id": "b", "document": "Joined.", "documents": ["A.", "B."], "title": "T"}
    extractive = "extractive-summarization"
    assert model_input(many, extractive, multiple_documents=True) == {"documents": ["First review.", "Second review."]}
    assert model_input(many, extractive, multiple_documents=False) == "First review.\n\nSecond review."
    assert model_input(one, extractive, multiple_documents=True) == "One text."
    assert model_input(one, extractive, multiple_documents=False) == "One text."
    assert model_input(both, extractive, multiple_documents=True) == {"documents": ["A.", "B."]}
    assert model_input(both, extractive, multiple_documents=False) == "Joined."
    assert model_input({"id": "e", "documents": []}, extractive, multiple_documents=True) == ""
    assert model_input(both, "wikisum", multiple_documents=True) == {"title": "T", "documents": ["A.", "B."]}
    assert model_input(one, "wikisum", multiple_documents=False) == {"title": "", "documents": ["One text."]}


@pytest.mark.parametrize(
    "model_type, expected", [("hetformer", {"documents": ["A b c.", "D e f."]}), ("bertsum", None)]
)
def test_summarize_hands_each_model_its_input(monkeypatch, tmp_path, model_type, expected):
    import sumformers.hub

    seen = []

    class FakeSummarizer:
        task = "extractive-summarization"
        model = fake_model(model_type, reads_multiple_documents=model_type == "hetformer")

        def __call__(self, inputs, batch_size, **options):
            for item in inputs:
                seen.append(item)
                yield {"summary": "s", "sentences": [0], "scores": [1.0]}

    monkeypatch.setattr(sumformers.hub, "load_pipeline", lambda name: FakeSummarizer())
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"id": "x", "documents": ["A b c.", "D e f."]}) + "\n")
    output = tmp_path / "out.jsonl"
    assert sumformers_cli.main(["summarize", str(source), "--model", "fake", "--output", str(output)]) == 0
    assert seen == [expected or "A b c.\n\nD e f."]
    assert json.loads(output.read_text()) == {"id": "x", "summary": "s", "sentences": [0], "scores": [1.0]}


# ---------------------------------------------------------------------------------------------------------------
# 7. loading noise: no load report, weight-loading bar or library deprecation warning reaches a command-line user


def test_summarize_prints_no_loading_noise():
    completed, _ = run_command("summarize", ARTICLE)
    assert completed.returncode == 0, completed.stderr
    (line,) = completed.stdout.splitlines()
    assert json.loads(line)["summary"]
    for noise in ("LOAD REPORT", "UNEXPECTED", "Loading weights", "FutureWarning", "Traceback"):
        assert noise not in completed.stderr, completed.stderr
    assert all(line.startswith("warning: ") for line in completed.stderr.splitlines()), completed.stderr
