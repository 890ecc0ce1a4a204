import io
import json
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from sumformers_cli import ERROR_EXIT
from sumformers_cli import main as command_line

ARTICLE = (
    "The city council met on Monday night. Members voted to approve a new budget for schools. "
    "The budget adds money for teachers and books. A local group said the vote came too late. "
    "The mayor is expected to sign the plan this week."
)


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_summarize_a_text_file_writes_jsonl(model_dir, tmp_path):
    source = tmp_path / "article.txt"
    source.write_text(ARTICLE)
    output = tmp_path / "out.jsonl"
    assert (
        command_line(["summarize", str(source), "--model", model_dir, "--output", str(output), "--num-sentences", "2"])
        == 0
    )
    (row,) = read_jsonl(output)
    assert row["id"] == "article" and len(row["sentences"]) == 2 and len(row["scores"]) == 2
    assert row["summary"].count("\n") == 1
    # A word budget: the sentences have 7-10 words, so within 12 words only the best-scored one fits.
    assert (
        command_line(["summarize", str(source), "--model", model_dir, "--output", str(output), "--num-sentences", "1"])
        == 0
    )
    (best,) = read_jsonl(output)
    arguments = ["summarize", str(source), "--model", model_dir, "--output", str(output), "--max-words", "12"]
    assert command_line(arguments) == 0
    (budgeted,) = read_jsonl(output)
    assert budgeted["sentences"] == best["sentences"] and len(budgeted["summary"].split()) <= 12


def test_summarize_jsonl_keeps_good_lines_and_reports_bad_ones(model_dir, tmp_path, capsys):
    source = tmp_path / "docs.jsonl"
    source.write_text(
        json.dumps({"id": "a", "document": ARTICLE})
        + "\n{not json\n"
        + json.dumps({"id": "c", "text": "no document field"})
        + "\n"
        + json.dumps({"id": "d", "documents": ["First review is great.", "Second review is bad."]})
        + "\n"
        + json.dumps({"id": "e", "document": ""})
        + "\n"
    )
    output = tmp_path / "out.jsonl"
    assert command_line(["summarize", str(source), "--model", model_dir, "--output", str(output)]) == ERROR_EXIT
    rows = read_jsonl(output)
    assert [row["id"] for row in rows] == ["a", "docs:2", "c", "d", "e"]
    assert len(rows[0]["sentences"]) == 3
    assert "not valid JSON" in rows[1]["error"] and "no `document`" in rows[2]["error"]
    assert rows[3]["sentences"] and rows[4] == {"id": "e", "summary": "", "sentences": [], "scores": []}
    assert capsys.readouterr().err.count("sumformers: error: ") == 2


def test_summarize_a_folder_and_undecodable_bytes(model_dir, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "one.txt").write_text(ARTICLE)
    (folder / "two.txt").write_bytes(b"Caf\xe9 owners met today. They talked about rent. Prices keep rising.")
    output = tmp_path / "out.jsonl"
    with pytest.warns(UserWarning, match=r"two.txt: bytes that are not UTF-8 were replaced with U\+FFFD"):
        assert command_line(["summarize", str(folder), "--model", model_dir, "--output", str(output)]) == 0
    rows = read_jsonl(output)
    assert [row["id"] for row in rows] == ["one", "two"]
    assert "\ufffd" in rows[1]["summary"] and len(rows[1]["sentences"]) == 3


def test_missing_input_is_a_one_line_error(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "sumformers_cli", "summarize", str(tmp_path / "nope.txt")],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == ERROR_EXIT
    assert completed.stderr.strip().splitlines() == [
        f"sumformers: error: {tmp_path / 'nope.txt'}: no such file or folder"
    ]


def test_export_command_writes_a_repo(model_dir, tmp_path):
    target = tmp_path / "repo"
    assert command_line(["export", model_dir, str(target)]) == 0
    assert (target / "config.json").is_file() and (target / "model.safetensors").is_file()
    completed = subprocess.run(
        [sys.executable, "-m", "sumformers_cli", "export", model_dir, str(target)], capture_output=True, text=True
    )
    assert completed.returncode == ERROR_EXIT and "not empty" in completed.stderr


def test_summarize_with_an_abstractive_model(minilm_tokenizer, tmp_path, capsys):
    import torch
    from transformers import pipeline

    from conftest import tiny_bertsumabs_config
    from sumformers import SentencePlannerForConditionalGeneration

    torch.manual_seed(0)
    folder = tmp_path / "planner"
    SentencePlannerForConditionalGeneration(tiny_bertsumabs_config(planner=True)).save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    source, output = tmp_path / "article.txt", tmp_path / "out.jsonl"
    source.write_text(ARTICLE)
    arguments = ["summarize", str(source), "--model", str(folder), "--output", str(output)]
    assert command_line([*arguments, "--num-beams", "2", "--max-new-tokens", "6"]) == 0
    (row,) = read_jsonl(output)
    expected = pipeline("abstractive-summarization", model=str(folder))(ARTICLE, num_beams=2, max_new_tokens=6)
    assert row == {"id": "article", "summary": expected["summary"]}
    with pytest.raises(SystemExit):
        command_line([*arguments, "--num-sentences", "2"])
    assert "--num-sentences does not apply to a abstractive-summarization model" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# Standard input, HTML files, stopping with Ctrl-C or SIGTERM, whole load errors


def test_summarize_reads_standard_input(model_dir, tmp_path, monkeypatch):
    source, output = tmp_path / "article.txt", tmp_path / "out.jsonl"
    source.write_text(ARTICLE)
    assert command_line(["summarize", str(source), "--model", model_dir, "--output", str(output)]) == 0
    (from_file,) = read_jsonl(output)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(ARTICLE.encode())))
    assert command_line(["summarize", "-", "--model", model_dir, "--output", str(output)]) == 0
    assert read_jsonl(output) == [{**from_file, "id": "stdin"}]
    # JSONL on standard input: one result per line
    lines = "".join(json.dumps({"id": name, "document": ARTICLE}) + "\n" for name in ("a", "b"))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    assert command_line(["summarize", "-", "--model", model_dir, "--output", str(output)]) == 0
    assert read_jsonl(output) == [{**from_file, "id": "a"}, {**from_file, "id": "b"}]


def test_summarize_an_html_file_reads_its_main_text(model_dir, tmp_path):
    from test_readable_input import PAGE, PAGE_MAIN_TEXT

    (tmp_path / "page.html").write_text(PAGE)
    (tmp_path / "page.txt").write_text(PAGE_MAIN_TEXT)
    for name in ("page.html", "page.txt"):
        arguments = ["summarize", str(tmp_path / name), "--model", model_dir, "--num-sentences", "10"]
        assert command_line([*arguments, "--output", str(tmp_path / f"{name}.jsonl")]) == 0
    (from_page,), (from_text,) = read_jsonl(tmp_path / "page.html.jsonl"), read_jsonl(tmp_path / "page.txt.jsonl")
    assert from_page == from_text and len(from_page["sentences"]) == 6
    assert "<" not in from_page["summary"] and "alert" not in from_page["summary"]


@pytest.mark.parametrize("stop, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_summarize_keeps_every_finished_result_in_whole_lines(model_dir, tmp_path, stop, status):
    source, output = tmp_path / "docs.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"id": str(n), "document": f"{n}. {ARTICLE}"}) + "\n" for n in range(3000)))

    def lines_written():
        return output.read_text().count("\n") if output.exists() else 0

    arguments = ["summarize", str(source), "--model", model_dir, "--output", str(output)]
    process = subprocess.Popen(
        [sys.executable, "-m", "sumformers_cli", *arguments],
        stderr=subprocess.PIPE,
        text=True,
        # a child started in the background of a shell inherits SIGINT ignored; a terminal's Ctrl-C is not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while lines_written() < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    seen = lines_written()
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == status, stderr
    rows = read_jsonl(output)
    assert [row["id"] for row in rows] == [str(n) for n in range(len(rows))] and seen <= len(rows) < 3000
    assert output.read_text().endswith("\n")  # no line half written
    messages = [line for line in stderr.replace("\r", "\n").splitlines() if line.startswith("sumformers")]
    name = signal.Signals(stop).name
    assert messages == [f"sumformers: interrupted by {name}; {len(rows)} results written to {output}"]
    assert "Traceback" not in stderr


def article_file(folder) -> str:
    (folder / "article.txt").write_text(ARTICLE)
    return str(folder / "article.txt")


def pickle_checkpoint(model_dir, folder, payload) -> str:
    """`model_dir` with its weights saved as a pickle (`pytorch_model.bin`) holding `payload` beside the tensors."""
    import shutil

    import torch
    from safetensors.torch import load_file

    shutil.copytree(model_dir, folder)
    weights = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save({**weights, "payload": payload}, folder / "pytorch_model.bin")
    return str(folder)


class RunsCode:
    """Unpickling this creates a file: what a malicious checkpoint would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_a_pickle_that_could_run_code_is_refused_in_one_whole_line(model_dir, tmp_path, capsys):
    marker = tmp_path / "code-ran"
    folder = pickle_checkpoint(model_dir, tmp_path / "pickled", RunsCode(marker))
    with pytest.raises(SystemExit) as exit:
        command_line(["summarize", article_file(tmp_path), "--model", folder])
    assert exit.value.code == ERROR_EXIT and not marker.exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"sumformers: error: could not load model {folder}: its weights are a pickle holding more ")
    # torch's whole message, its options included, without its terminal codes
    for part in ("you have two options, do those steps only if", "(1) In PyTorch 2.6", "(2) Alternatively",
                 "WeightsUnpickler error: Unsupported global: GLOBAL getattr was not an allowed global"):
        assert part in line
    assert "\x1b" not in line


def test_a_corrupt_checkpoint_is_one_whole_line(model_dir, tmp_path, capsys):
    folder = pickle_checkpoint(model_dir, tmp_path / "corrupt", None)
    weights = tmp_path / "corrupt" / "pytorch_model.bin"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(SystemExit):
        command_line(["summarize", article_file(tmp_path), "--model", folder])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"sumformers: error: could not load model {folder}: PytorchStreamReader failed reading")
    assert line.endswith("or the file was modified after saving.") and "See the original errors" not in line
