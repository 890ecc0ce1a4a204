"""No document lost on the way in (issue #56): the command's readers (`sumformers.input_records`) split JSON Lines on
"\\n" alone, decide a stream's format by its content for files and standard input alike, and give every input record
one output line, in order; the pipelines read text without boundaries, refuse junk in one line, and model names that
are not models say what they are."""

import io
import json
import sys
import tracemalloc
import types
import warnings

import pytest

from conftest import REPO_ROOT
from sumformers import cli
from sumformers.input_records import SAMPLE_LINES, path_records, stream_records
from sumformers_cli import ERROR_EXIT
from sumformers_cli import main as command_line

ARTICLE = (
    "The city council met on Monday night. Members voted to approve a new budget for schools. "
    "The budget adds money for teachers and books. A local group said the vote came too late. "
    "The mayor is expected to sign the plan this week."
)
BINARY_LINE = b"\x00\xff\xfe binary \x0c\xc2\x85 junk\x1c\x1d\x1e\xe2\x80\xa8 end"


def jsonl_bytes(count: int, bad_line: int | None = None) -> bytes:
    lines = [json.dumps({"id": f"doc{n}", "document": f"Item {n}. {ARTICLE}"}).encode() for n in range(1, count + 1)]
    if bad_line is not None:
        lines[bad_line - 1] = BINARY_LINE
    return b"\n".join(lines) + b"\n"


def records_of(data: bytes, suffix: str = "") -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the binary line's replaced bytes
        return list(stream_records(io.BytesIO(data), "input", suffix=suffix))


def summarize_stdin(monkeypatch, data: bytes, *arguments) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return command_line(["summarize", "-", *arguments])


def read_rows(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


# ---------------------------------------------------------------------------------------------------------------
# Readers


def test_stdin_with_one_binary_line_keeps_the_other_199_documents(model_dir, tmp_path, monkeypatch, capsys):
    # before: one output line, "id": "stdin", its summary raw JSON text; exit 0
    output = tmp_path / "out.jsonl"
    status = summarize_stdin(monkeypatch, jsonl_bytes(200, bad_line=100), "--model", model_dir, "--output",
                             str(output))
    rows = read_rows(output)
    assert status == ERROR_EXIT and len(rows) == 200
    assert [row["id"] for row in rows] == [f"doc{n}" if n != 100 else "stdin:100" for n in range(1, 201)]
    assert rows[99]["error"].startswith("stdin:100: not valid JSON")
    assert all(len(row["sentences"]) == 3 for n, row in enumerate(rows) if n != 99)
    assert capsys.readouterr().err.count("sumformers: error: ") == 1


@pytest.mark.parametrize("separator", ["\u2028", "\u0085", "\u2029", "\x0c", "\x1c", "\r"])
def test_records_holding_unicode_line_ends_are_read_whole_as_datasets_reads_them(separator, tmp_path):
    # before: a file's record broken at U+2028, U+0085, form feeds... ("not valid JSON"); stdin lost them all
    rows = [{"id": "a", "document": f"First part.{separator}Second part."}, {"id": "b", "document": ARTICLE}]
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    source = tmp_path / "docs.jsonl"
    source.write_bytes(data)
    expected = [{"id": row["id"], "document": row["document"]} for row in rows]
    assert list(path_records(source)) == expected
    assert [{**record, "id": record["id"]} for record in records_of(data)] == expected

    from datasets import load_dataset

    assert load_dataset("json", data_files=str(source), split="train")["document"] == [row["document"] for row in rows]


def test_one_binary_line_is_one_error_and_later_line_numbers_stay_right(tmp_path):
    # before: one binary line became 12 error lines (211 outputs for 200 inputs)
    source = tmp_path / "docs.jsonl"
    data = jsonl_bytes(200, bad_line=100)
    data = data.replace(b'{"id": "doc150", ', b'{')  # line 150 has no id: it is named by its line number
    source.write_bytes(data)
    with pytest.warns(UserWarning, match=r"docs.jsonl:100: bytes that are not UTF-8 were replaced"):
        records = list(path_records(source))
    assert len(records) == 200 and [index for index, r in enumerate(records, 1) if "error" in r] == [100]
    assert records[99]["error"].startswith(f"{source}:100: not valid JSON")
    assert records[149]["id"] == "docs:150" and records[199]["id"] == "doc200"


@pytest.mark.parametrize("suffix, note", [(".json", False), ("", False), (".ndjson", False), (".txt", True)])
def test_jsonl_is_jsonl_whatever_the_file_is_named(suffix, note, tmp_path, capsys):
    # before: a .json or extension-less JSONL file was summarized as one document with \" escapes in it
    source = tmp_path / f"docs{suffix}"
    source.write_bytes(jsonl_bytes(3))
    assert [record["id"] for record in path_records(source)] == ["doc1", "doc2", "doc3"]
    err = capsys.readouterr().err
    assert (err == f"sumformers: note: {source} is named {suffix} but its first lines are JSON objects: read as "
            "jsonl\n") if note else err == ""


def test_files_and_standard_input_are_read_the_same_way(tmp_path):
    for data in (jsonl_bytes(3, bad_line=1), ARTICLE.encode(), b"", json.dumps({"document": ARTICLE}).encode()):
        source = tmp_path / "input"
        source.write_bytes(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from_file = [{k: v.replace(str(source), "input") for k, v in r.items()} for r in path_records(source)]
        assert from_file == records_of(data)


def test_a_stream_mostly_of_json_objects_is_jsonl_and_text_is_text():
    # the first lines decide: one bad line among JSON objects is an error of its own, not the end of JSON Lines
    assert len(records_of(jsonl_bytes(SAMPLE_LINES, bad_line=1))) == SAMPLE_LINES
    text = f'{ARTICLE}\n{{"not": "a record"}}\nMore text here.\n'.encode()
    assert records_of(text) == [{"id": "input", "document": text.decode()}]
    # a .jsonl name breaks a tie: two of four lines are JSON objects
    tied = b'{"document": "One."}\nplain\n{"document": "Two."}\nplain\n'
    assert len(records_of(tied)) == 1 and len(records_of(tied, suffix=".jsonl")) == 4


def test_crlf_bom_blank_lines_and_a_last_line_without_newline(monkeypatch, model_dir, tmp_path):
    data = b"\xef\xbb\xbf" + jsonl_bytes(3).replace(b"\n", b"\r\n", 1).replace(b"\n", b"\n\n   \n", 1).rstrip(b"\n")
    records = records_of(data)
    assert [record["id"] for record in records] == ["doc1", "doc2", "doc3"] and not any("error" in r for r in records)
    assert records[0]["document"] == f"Item 1. {ARTICLE}"
    output = tmp_path / "out.jsonl"
    assert summarize_stdin(monkeypatch, data, "--model", model_dir, "--output", str(output)) == 0
    assert [row["id"] for row in read_rows(output)] == ["doc1", "doc2", "doc3"]


def test_a_json_file_of_one_object_or_an_array_of_them(tmp_path, capsys):
    source = tmp_path / "docs.json"
    source.write_text(json.dumps([{"id": "a", "document": ARTICLE}, {"id": "b", "text": "?"}], indent=2))
    records = list(path_records(source))
    assert records[0] == {"id": "a", "document": ARTICLE} and "docs.json, item 2: no `document`" in records[1]["error"]
    source.write_text('{\n  "document": "Pretty printed."\n}\n')
    assert list(path_records(source)) == [{"id": "docs:1", "document": "Pretty printed."}]
    source.write_text("{ not json")
    ((record),) = path_records(source)
    assert record["error"].startswith(f"{source}: neither JSON Lines nor one JSON value")
    assert capsys.readouterr().err == ""  # one JSON value is what a .json name says: no note


class _GeneratedJsonl(io.RawIOBase):
    """`size` bytes of JSON Lines made as they are read, so that the test itself holds no more than a block."""

    def __init__(self, size: int):
        self.line = (json.dumps({"document": ARTICLE + " " + "x" * 9_000}) + "\n").encode()
        self.left, self.offset = size, 0

    def readable(self):
        return True

    def readinto(self, buffer):
        count = min(len(buffer), self.left)
        start = self.offset % len(self.line)
        buffer[:count] = (self.line * (count // len(self.line) + 2))[start : start + count]
        self.offset, self.left = self.offset + count, self.left - count
        return count


class _FirstSentence:
    """A stand-in summarizer (the command's streaming is under test, not a model): each text's first sentence."""

    task = "extractive-summarization"
    model = types.SimpleNamespace(reads_multiple_documents=False)

    def __call__(self, inputs, batch_size=None):
        return [{"summary": text.split(". ")[0]} for text in inputs]


def test_100_mb_of_jsonl_through_standard_input_in_constant_memory(monkeypatch, tmp_path):
    # before: standard input was read whole (sys.stdin.buffer.read()) and every record listed before the first summary
    size = 100 * 2**20
    stream = io.BufferedReader(_GeneratedJsonl(size), buffer_size=2**16)
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=stream))
    monkeypatch.setattr(cli, "_pipeline_and_options", lambda args: (_FirstSentence(), {}))
    output = tmp_path / "out.jsonl"
    tracemalloc.start()
    try:
        assert command_line(["summarize", "-", "--output", str(output)]) == ERROR_EXIT  # the last line is cut short
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with open(output, encoding="utf-8") as written:
        rows = [json.loads(line) for line in written]
    assert len(rows) == size // len(stream.raw.line) + 1
    assert rows[0] == {"id": "stdin:1", "summary": "The city council met on Monday night"}
    assert [index for index, row in enumerate(rows) if "error" in row] == [len(rows) - 1]
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB held to read 100 MiB"


# ---------------------------------------------------------------------------------------------------------------
# What the pipelines read


def unpunctuated(text: str) -> str:
    """Text as speech recognition writes it: lowercased, without punctuation or line breaks."""
    return " ".join("".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split())


@pytest.fixture(scope="module")
def shipped_pipeline():
    from sumformers.hub import load_pipeline

    loaded = {}

    def get(name):
        if name not in loaded:
            loaded[name] = load_pipeline(name)
        return loaded[name]

    return get


def test_unpunctuated_text_is_read_as_word_windows_with_a_warning(shipped_pipeline):
    # before: the whole input (707 or 3,360 words) came back as the "summary" of the default and of HetFormer
    from sumformers.text.sentences import NO_BOUNDARY_WARNING, WINDOW_WORDS

    rows = [json.loads(line) for line in open(REPO_ROOT / "examples" / "cnn_three_articles.jsonl", encoding="utf-8")]
    short = unpunctuated(rows[0]["document"])
    long = unpunctuated(" ".join(row["document"] for row in rows) * 3)
    for name, text in (("stepwise-hibert-minilm-cnndm", short), ("hetformer-minilm-qmsum", long)):
        summarizer = shipped_pipeline(name)
        with pytest.warns(UserWarning, match="Text without sentence boundaries") as caught:
            result = summarizer(text)
        assert NO_BOUNDARY_WARNING in [str(warning.message) for warning in caught]
        sentences = result["summary"].split("\n")
        budget = summarizer.model.config.num_sentences
        assert 1 <= len(sentences) <= budget and all(len(s.split()) <= WINDOW_WORDS for s in sentences), name
        assert len(result["summary"].split()) <= budget * WINDOW_WORDS < len(text.split()) / 5


def test_word_windows_are_even_and_keep_every_word():
    from sumformers.text.sentences import split_sentences, word_windows

    text = " ".join(f"w{i}" for i in range(45))
    assert [len(window.split()) for window in word_windows(text, 20)] == [15, 15, 15]
    assert " ".join(word_windows(text, 20)) == text and word_windows("a  b", 1) == ["a", "b"]
    # a long stretch that has full stops is split at them first (pysbd merges such stretches in raw CNN articles)
    stretch = " ".join(["This sentence has exactly ten words in it, no more."] * 9)
    assert len(split_sentences(stretch)) == 9
    with pytest.warns(UserWarning, match="Text without sentence boundaries"):
        assert len(split_sentences(stretch.replace(". ", ", "))) == 5  # 90 words in windows of 18


def test_raw_cnn_articles_have_no_sentence_past_the_limit(data_dir):
    from sumformers.text.sentences import MAX_SENTENCE_WORDS, split_sentences

    documents = [json.loads(line)["document"] for line in open(data_dir / "cnn_dailymail" / "validation.jsonl")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lengths = [len(sentence.split()) for document in documents[:300] for sentence in split_sentences(document)]
    assert max(lengths) <= MAX_SENTENCE_WORDS  # before: 630 words, 346 sentences past 80 in the 1,000 articles


def test_junk_is_refused_in_one_line_and_costs_a_batch_nothing(tiny_bertsum, minilm_tokenizer):
    # before: a 1,000,000-character base64 blob gave a 40,001-character "summary"
    import base64
    import random

    from transformers import pipeline

    summarizer = pipeline("extractive-summarization", model=tiny_bertsum(), tokenizer=minilm_tokenizer)
    blob = base64.b64encode(random.Random(0).randbytes(750_000)).decode()
    numbers = " ".join(str(n * 7919 % 10007) for n in range(400))
    for junk in (blob, numbers, "0x" + "f3a9" * 100):
        with pytest.raises(ValueError, match=r"^not prose: \d+% of its [\d,]+ characters") as refused:
            summarizer(junk)
        assert "\n" not in str(refused.value)
    alone = summarizer(ARTICLE)
    results = summarizer([ARTICLE, blob, ARTICLE])
    assert results[0] == results[2] == alone and results[1]["error"].startswith("not prose: 0% of its 1,000,000")
    # prose with a URL, numbers and words of other scripts is prose
    for text in (ARTICLE + " See https://example.com/" + "a" * 80 + " for 2024-25 figures.",
                 "\u4eca\u5929\u5e02\u8bae\u4f1a\u5f00\u4f1a\u8ba8\u8bba\u5b66\u6821\u9884\u7b97\u3002" * 20):
        assert "error" not in summarizer([text])[0]


def test_a_page_with_too_little_main_text_says_so(tiny_bertsum, minilm_tokenizer, tmp_path, model_dir, capsys):
    # before: the page's navigation menu ("Home | World | Sport") was its summary
    from transformers import pipeline

    page = ("<html><body><nav><a href='/'>Home</a> | <a href='/w'>World</a> | <a href='/s'>Sport</a></nav>"
            "<div>Breaking news soon.</div><footer>Copyright 2026 Example News</footer></body></html>")
    summarizer = pipeline("extractive-summarization", model=tiny_bertsum(), tokenizer=minilm_tokenizer)
    message = "the HTML page's main text is 3 words (menus and boilerplate left out): too short to summarize"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        summarizer(page)
    assert summarizer([page, ARTICLE])[0] == {"error": message}
    source = tmp_path / "page.html"
    source.write_text(page)
    assert command_line(["summarize", str(source), "--model", model_dir]) == ERROR_EXIT
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"id": "page", "error": f"{source}: {message}"}


# ---------------------------------------------------------------------------------------------------------------
# Model names


def test_a_misspelt_shipped_name_lists_the_shipped_names_closest_first(tmp_path):
    # before: "couldn't connect to huggingface.co" (and 29 s of retries online)
    from sumformers.hub import load_pipeline

    with pytest.raises(ValueError) as refused:
        load_pipeline("stepwise-hibert-minlm-cnndm")
    message = str(refused.value)
    assert "shipped, closest first: stepwise-hibert-minilm-cnndm, " in message and "huggingface" not in message
    (tmp_path / "folder").mkdir()
    for name, says in ((str(tmp_path / "folder"), "the folder holds no config.json (not a model folder)"),
                       (str(tmp_path / "missing"), "no such folder")):
        with pytest.raises(ValueError, match="^" + name + ": " + says.replace("(", r"\(").replace(")", r"\)")):
            load_pipeline(name)


def test_a_demo_quality_model_warns_once_per_load():
    from sumformers.hub import load_model

    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            load_model("wikisum-tdmca-copy-minilm-cnndm")
        notes = [str(w.message) for w in caught if "Demo quality" in str(w.message)]
        assert notes == ["wikisum-tdmca-copy-minilm-cnndm: Demo quality, not a usable summarizer: ROUGE-1 27.61 "
                         "(ROUGE-Lsum 25.45) on 500 held-out CNN/DM articles, below Lead-3's 34.50 (31.08) on the "
                         "same articles (the evaluation table below)."]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_model("bertsum-minilm-cnndm")
    assert not [w for w in caught if "Demo quality" in str(w.message)]
