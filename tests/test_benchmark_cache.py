"""benchmarks/_common.py's summary cache: chunks of DECODE_CHUNK documents, so an interrupted decoding resumes."""

import pytest

from conftest import imported_benchmark

common = imported_benchmark("_common", "common")
SECONDS = {"a": 1.0, "c": 2.0, "e": 4.0}  # seconds per document of the chunk that starts with the key


class Interrupted(Exception):
    pass


@pytest.fixture
def summarized(common, monkeypatch):
    """The chunks the summarizer was given (each a list), with timing by `SECONDS`; a chunk starting with a document
    named in `fail_at` raises."""
    monkeypatch.setattr(common, "DECODE_CHUNK", 2)
    monkeypatch.setattr(common, "timed_summaries", lambda summarizer, chunk, **options: (
        summarizer(chunk, **options), SECONDS.get(chunk[0], 0.5)))
    calls, loads = [], []

    def load_summarizer(fail_at=()):
        loads.append(1)

        def summarize(chunk, **options):
            calls.append(list(chunk))
            if chunk[0] in fail_at:
                raise Interrupted
            return [text.upper() + options.get("suffix", "") for text in chunk]

        return summarize

    return calls, loads, load_summarizer


def test_an_interrupted_decoding_resumes_after_its_last_whole_chunk(common, summarized, tmp_path):
    calls, loads, load_summarizer = summarized
    documents = ["a", "b", "c", "d", "e"]
    with pytest.raises(Interrupted):  # the second chunk fails: the first is on disk
        common.cached_summaries(str(tmp_path), "Model A", ["key"], documents, lambda: load_summarizer("c"), 1)
    assert calls == [["a", "b"], ["c", "d"]]
    calls.clear()
    summaries, seconds = common.cached_summaries(str(tmp_path), "Model A", ["key"], documents, load_summarizer, 2,
                                                 suffix="!")
    assert calls == [["c", "d"], ["e"]]  # the cached chunk is not summarized again
    assert summaries == ["A", "B", "C!", "D!", "E!"]  # (the options are not part of this key: the caller's job)
    # seconds per document weighted by the chunks' sizes, (2 x 1 + 2 x 2 + 1 x 4) / 5; both thread counts named
    assert seconds == "2.00 (1/2)"
    assert len(list(tmp_path.glob("model_a-*.json"))) == 3


def test_the_cache_key_separates_settings_and_documents_and_loads_the_model_only_when_needed(
    common, summarized, tmp_path
):
    calls, loads, load_summarizer = summarized
    common.cached_summaries(str(tmp_path), "m", ["beam 4"], ["x", "y"], load_summarizer, 1)
    common.cached_summaries(str(tmp_path), "m", ["beam 4"], ["x", "y"], load_summarizer, 1)
    assert len(loads) == 1  # all cached the second time: no model loaded
    common.cached_summaries(str(tmp_path), "m", ["beam 1"], ["x", "y"], load_summarizer, 1)
    common.cached_summaries(str(tmp_path), "m", ["beam 4"], ["x", "z", "w"], load_summarizer, 1)
    assert calls == [["x", "y"], ["x", "y"], ["x", "z"], ["w"]]
    assert len(loads) == 3  # once per call that summarized, however many chunks


def test_checkpoint_key_follows_the_weights_not_the_folder(common, tmp_path):
    import shutil

    original = tmp_path / "run" / "final"
    original.mkdir(parents=True)
    (original / "adapter_model.safetensors").write_bytes(b"weights")
    (original / "config.json").write_text('{"end_bias": 0.0}')
    (original / "README.md").write_text("a card")
    shipped = tmp_path / "checkpoints" / "model"
    shutil.copytree(original, shipped)
    (shipped / "README.md").write_text("another card")  # no weight or setting
    assert common.checkpoint_key(shipped) == common.checkpoint_key(original)
    (shipped / "config.json").write_text('{"end_bias": -2.0}')  # shipping rewrites the config
    assert common.checkpoint_key(shipped, configs=False) == common.checkpoint_key(original, configs=False)
    assert common.checkpoint_key(shipped) != common.checkpoint_key(original)
    (shipped / "adapter_model.safetensors").write_bytes(b"retrained")
    assert common.checkpoint_key(shipped, configs=False) != common.checkpoint_key(original, configs=False)
