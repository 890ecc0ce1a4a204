"""The console script `sumformers` (`sumformers_cli`): fast help and one-line argument errors."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
            "sumformers.cli",
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
