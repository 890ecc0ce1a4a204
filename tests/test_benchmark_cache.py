"""benchmarks/_common.py's summary cache: chunks of DECODE_CHUNK documents, so an interrupted decoding resumes."""

import pytest

from conftest import imported_benchmark

common = imported_benchmark("_common", "common")


class Interrupted(Exception):
    pass


def test_an_interrupted_decoding_resumes_after_its_last_whole_chunk(common, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "DECODE_CHUNK", 2)
    documents = ["a", "b", "c", "d", "e"]
    calls = []

    def decode(chunk, fail_at=None):
        calls.append(list(chunk))
        if fail_at is not None and chunk[0] == fail_at:
            raise Interrupted
        return [text.upper() for text in chunk], {"a": 1.0, "c": 2.0, "e": 4.0}[chunk[0]]

    with pytest.raises(Interrupted):  # the second chunk fails: the first is on disk
        common.cached_summaries(str(tmp_path), "Model A", ["key"], documents, lambda c: decode(c, "c"), 1)
    assert calls == [["a", "b"], ["c", "d"]]
    calls.clear()
    summaries, seconds = common.cached_summaries(str(tmp_path), "Model A", ["key"], documents, decode, 2)
    assert calls == [["c", "d"], ["e"]]  # the cached chunk is not decoded again
    assert summaries == ["A", "B", "C", "D", "E"]
    # seconds per document weighted by the chunks' sizes, (2 x 1 + 2 x 2 + 1 x 4) / 5; both thread counts named
    assert seconds == "2.00 (1/2)"
    assert len(list(tmp_path.glob("model_a-*.json"))) == 3


def test_the_cache_key_separates_settings_and_documents(common, tmp_path):
    calls = []

    def decode(chunk):
        calls.append(list(chunk))
        return list(chunk), 0.5

    common.cached_summaries(str(tmp_path), "m", ["beam 4"], ["x", "y"], decode, 1)
    common.cached_summaries(str(tmp_path), "m", ["beam 4"], ["x", "y"], decode, 1)
    common.cached_summaries(str(tmp_path), "m", ["beam 1"], ["x", "y"], decode, 1)
    common.cached_summaries(str(tmp_path), "m", ["beam 4"], ["x", "z"], decode, 1)
    assert calls == [["x", "y"], ["x", "y"], ["x", "z"]]
