"""benchmarks/wikisum_llama_decoding.py: settings parsed over the shipped decoding, and each (checkpoint, setting)
row's ROUGE-1 paired with the first row's on the same documents (summaries stand in for the decoder's)."""

import json
import sys

import pytest

from conftest import imported_benchmark
from sumformers.text.scoring import rouge_per_example

script = imported_benchmark("wikisum_llama_decoding")

REFERENCES = ["the council approved the bridge budget .", "rain closed the schools on monday ."]
SUMMARIES = {  # beams -> the summaries that setting "writes"
    1: ["the council met .", "rain fell on monday ."],
    4: ["the council approved the budget .", "the schools closed ."],
}


def test_a_setting_changes_only_what_it_names(script):
    assert script.parse_setting("beams=4,lp=0.6") == dict(script.SHIPPED, llama_num_beams=4, llama_length_penalty=0.6)
    assert script.parse_setting("rp=1.2")["llama_repetition_penalty"] == 1.2
    with pytest.raises(SystemExit, match="unknown setting 'beam'"):
        script.parse_setting("beam=4")


def test_each_row_is_paired_with_the_first_on_the_same_documents(script, tmp_path, monkeypatch):
    data = tmp_path / "validation.jsonl"
    data.write_text("".join(json.dumps({"document": f"article {i} .", "summary": reference}) + "\n"
                            for i, reference in enumerate(REFERENCES)))

    def summaries(flag, path, documents, args):
        assert args.llama_no_repeat_word_ngram_size == 3 and len(documents) == 2
        return SUMMARIES[args.llama_num_beams], "1.00 (1)"

    monkeypatch.setattr(script, "llama_summaries", summaries)
    output = tmp_path / "table.md"
    monkeypatch.setattr(sys, "argv", ["wikisum_llama_decoding.py", "--data_file", str(data), "--start", "0",
                                      "--limit", "2", "--settings", "beams=1", "beams=4", "--output", str(output)])
    script.main()
    rows = [line.split(" | ")[1:] for line in table_rows(output)]
    scores = {beams: [s["rouge1"] for s in rouge_per_example(SUMMARIES[beams], REFERENCES)] for beams in SUMMARIES}
    gain = sum(scores[4]) / 2 - sum(scores[1]) / 2
    assert rows[0][1] == f"{sum(scores[1]) / 2:.2f}" and rows[0][2].startswith("+0.00")
    assert rows[1][1] == f"{sum(scores[4]) / 2:.2f}" and rows[1][2].startswith(f"{gain:+.2f} [")
    assert rows[1][3] == "2 / 0"  # both documents' ROUGE-1 rose


def table_rows(output) -> list[str]:
    return [line for line in output.read_text().splitlines() if line.startswith("| `")]


def test_each_checkpoint_and_the_zero_shot_base_are_paired_with_the_first_checkpoint(script, tmp_path, monkeypatch):
    data = tmp_path / "validation.jsonl"
    data.write_text("".join(json.dumps({"document": f"article {i} .", "summary": reference}) + "\n"
                            for i, reference in enumerate(REFERENCES)))
    written = {"shipped": SUMMARIES[1], "retrained": SUMMARIES[4], "base": ["council .", "monday ."]}
    decoded = []

    def summaries(flag, path, documents, args):
        decoded.append((flag, path.rsplit("/", 1)[-1]))
        return written[path.rsplit("/", 1)[-1]], "1.00 (1)"

    monkeypatch.setattr(script, "llama_summaries", summaries)
    output = tmp_path / "table.md"
    monkeypatch.setattr(sys, "argv", ["wikisum_llama_decoding.py", "--data_file", str(data), "--start", "0",
                                      "--limit", "2", "--checkpoint", str(tmp_path / "shipped"),
                                      str(tmp_path / "retrained"), "--zero_shot", str(tmp_path / "base"),
                                      "--output", str(output)])
    script.main()
    assert decoded == [("wikisum_llama", "shipped"), ("wikisum_llama", "retrained"), ("zero_shot_llama", "base")]
    rows = [line.split(" | ") for line in table_rows(output)]
    assert len(rows) == 3 and rows[2][0].endswith("(zero-shot, no adapter)")
    scores = {name: [s["rouge1"] for s in rouge_per_example(written[name], REFERENCES)] for name in written}
    for row, name in zip(rows, written):
        assert row[2] == f"{sum(scores[name]) / 2:.2f}"
        assert row[3].startswith(f"{(sum(scores[name]) - sum(scores['shipped'])) / 2:+.2f} [")
