"""Every shipped checkpoint loads from its config.json and gives the pipeline output recorded in
`shipped_outputs.json` (texts, choices and plans exactly, scores within 1e-4): a refactoring of the code must not
change what the shipped models say. A snapshot holds the sha256 of the files that decide the output (config,
generation config, adapter config, weights): a checkpoint changed without its snapshot being recorded again in the
same commit fails (a fast test, in the default run), naming the command that records its new output:

    HF_HUB_OFFLINE=1 python tests/models/test_shipped_outputs.py NAME [NAME ...]
"""

import hashlib
import json
import sys
import warnings
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "models")]

from test_rotowire import EXPECTED_PLAN, tiny_game  # noqa: E402

from conftest import ARTICLE, skip_without_installed_base  # noqa: E402
from sumformers.hub import load_pipeline, shipped_checkpoints  # noqa: E402

SNAPSHOTS = Path(__file__).with_name("shipped_outputs.json")
DECIDING_FILES = ("config.json", "generation_config.json", "adapter_config.json", "*.safetensors")


def checkpoint_key(folder: Path) -> str:
    digest = hashlib.sha256()
    for pattern in DECIDING_FILES:
        for path in sorted(folder.glob(pattern)):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def pipeline_output(name: str) -> dict:
    """The checkpoint's pipeline (as `sumformers.load_pipeline` gives it) on the bundled inputs, short decodes."""
    summarizer = load_pipeline(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if summarizer.task == "table-to-text":
            return summarizer({"game": tiny_game(), "plan": list(EXPECTED_PLAN)}, num_beams=1, max_new_tokens=12)
        if summarizer.task == "content-planning":
            result = summarizer(tiny_game())
            return {"plan": result["plan"], "score": result["score"]}
        if summarizer.task == "wikisum":
            return summarizer({"title": "Budget", "documents": [ARTICLE]}, max_new_tokens=12, num_beams=1)
        if summarizer.task == "wikisum-llama":  # the shipped decoding, long enough for its trigram blocking to act
            return summarizer(ARTICLE, max_new_tokens=60)
        if summarizer.task == "abstractive-summarization":
            return summarizer(ARTICLE, max_new_tokens=12, num_beams=1)
        return summarizer(ARTICLE)


def as_json(value):
    return json.loads(json.dumps(value))  # tuples as lists, as read back from the snapshot


def record_command(name: str) -> str:
    return f"HF_HUB_OFFLINE=1 python tests/models/test_shipped_outputs.py {name}"


def snapshot_problem(name: str, snapshots: dict) -> str | None:
    """Why the snapshot of checkpoint `name` cannot vouch for its output (none, or one recorded from other files)."""
    if name not in snapshots:
        return f"{name} has no recorded output; record it: {record_command(name)}"
    if snapshots[name]["checkpoint_key"] != checkpoint_key(shipped_checkpoints()[name]):
        return f"{name} changed since its output was recorded; record it again: {record_command(name)}"
    return None


@pytest.mark.parametrize("name", sorted(shipped_checkpoints()))
def test_every_shipped_checkpoint_has_a_current_snapshot(name):
    problem = snapshot_problem(name, json.loads(SNAPSHOTS.read_text()))
    if problem:
        pytest.fail(problem, pytrace=False)


def test_a_changed_checkpoint_is_a_failure_naming_the_record_command(tmp_path, monkeypatch):
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setitem(globals(), "shipped_checkpoints", lambda: {"demo": folder})
    snapshots = {"demo": {"checkpoint_key": checkpoint_key(folder), "output": {}}}
    assert snapshot_problem("demo", snapshots) is None
    (folder / "model.safetensors").write_bytes(b"retrained")
    assert snapshot_problem("demo", snapshots) == (
        "demo changed since its output was recorded; record it again: "
        "HF_HUB_OFFLINE=1 python tests/models/test_shipped_outputs.py demo"
    )
    assert snapshot_problem("other", snapshots).startswith("other has no recorded output")


@pytest.mark.slow  # loads every shipped checkpoint (a few minutes on the shared 2-core machine)
@pytest.mark.parametrize("name", sorted(shipped_checkpoints()))
def test_a_shipped_checkpoint_gives_its_recorded_output(name):
    snapshots = json.loads(SNAPSHOTS.read_text())
    problem = snapshot_problem(name, snapshots)
    if problem:
        pytest.fail(problem, pytrace=False)
    skip_without_installed_base(shipped_checkpoints()[name])
    assert_same(as_json(pipeline_output(name)), snapshots[name]["output"])


def assert_same(got, expected, where="output"):
    """Texts, choices and plans equal; scores within 1e-4."""
    if isinstance(expected, float):
        assert got == pytest.approx(expected, abs=1e-4), where
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), where
        for key in expected:
            assert_same(got[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for index, (item, wanted) in enumerate(zip(got, expected)):
            assert_same(item, wanted, f"{where}[{index}]")
    else:
        assert got == expected, where


def record(names: list[str]) -> None:
    snapshots = json.loads(SNAPSHOTS.read_text()) if SNAPSHOTS.is_file() else {}
    for name in names:
        folder = shipped_checkpoints()[name]
        snapshots[name] = {"checkpoint_key": checkpoint_key(folder), "output": as_json(pipeline_output(name))}
    SNAPSHOTS.write_text(json.dumps(snapshots, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record(sys.argv[1:] or sorted(shipped_checkpoints()))
