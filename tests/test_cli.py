import json
import subprocess
import sys

import pytest

from sumformers import cli

ARTICLE = (
    "The city council met on Monday night. Members voted to approve a new budget for schools. "
    "The budget adds money for teachers and books. A local group said the vote came too late. "
    "The mayor is expected to sign the plan this week."
)


@pytest.fixture
def model_dir(tiny_bertsum, minilm_tokenizer, tmp_path):
    folder = tmp_path / "model"
    tiny_bertsum().save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return str(folder)


def read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_summarize_a_text_file_writes_jsonl(model_dir, tmp_path):
    source = tmp_path / "article.txt"
    source.write_text(ARTICLE)
    output = tmp_path / "out.jsonl"
    assert (
        cli.main(["summarize", str(source), "--model", model_dir, "--output", str(output), "--num-sentences", "2"])
        == 0
    )
    (row,) = read_jsonl(output)
    assert row["id"] == "article" and len(row["sentences"]) == 2 and len(row["scores"]) == 2
    assert row["summary"].count("\n") == 1
    # A word budget: the sentences have 7-10 words, so within 12 words only the best-scored one fits.
    assert (
        cli.main(["summarize", str(source), "--model", model_dir, "--output", str(output), "--num-sentences", "1"])
        == 0
    )
    (best,) = read_jsonl(output)
    assert cli.main(["summarize", str(source), "--model", model_dir, "--output", str(output), "--max-words", "12"]) == 0
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
    assert cli.main(["summarize", str(source), "--model", model_dir, "--output", str(output)]) == cli.ERROR_EXIT
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
        assert cli.main(["summarize", str(folder), "--model", model_dir, "--output", str(output)]) == 0
    rows = read_jsonl(output)
    assert [row["id"] for row in rows] == ["one", "two"]
    assert "\ufffd" in rows[1]["summary"] and len(rows[1]["sentences"]) == 3


def test_missing_input_is_a_one_line_error(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "sumformers.cli", "summarize", str(tmp_path / "nope.txt")],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == cli.ERROR_EXIT
    assert completed.stderr.strip().splitlines() == [
        f"sumformers: error: {tmp_path / 'nope.txt'}: no such file or folder"
    ]


def test_export_command_writes_a_repo(model_dir, tmp_path):
    target = tmp_path / "repo"
    assert cli.main(["export", model_dir, str(target)]) == 0
    assert (target / "config.json").is_file() and (target / "model.safetensors").is_file()
    completed = subprocess.run(
        [sys.executable, "-m", "sumformers.cli", "export", model_dir, str(target)], capture_output=True, text=True
    )
    assert completed.returncode == cli.ERROR_EXIT and "not empty" in completed.stderr


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
    assert cli.main([*arguments, "--num-beams", "2", "--max-new-tokens", "6"]) == 0
    (row,) = read_jsonl(output)
    expected = pipeline("abstractive-summarization", model=str(folder))(ARTICLE, num_beams=2, max_new_tokens=6)
    assert row == {"id": "article", "summary": expected["summary"]}
    with pytest.raises(SystemExit):
        cli.main([*arguments, "--num-sentences", "2"])
    assert "--num-sentences does not apply to a abstractive-summarization model" in capsys.readouterr().err
