"""What the summarize, view and demo commands read: a file, a folder of files or standard input, as records, one a
document, streamed so that a JSONL input of any size is read in constant memory.

A stream is JSON Lines or one text whatever its name says: its first lines decide (`SAMPLE_LINES`), and a file's
suffix only breaks a tie, with a one-line note on standard error when the two disagree. Records are split on "\\n"
alone, as JSON Lines defines them (`str.splitlines` also breaks at U+2028, U+0085 and form feeds, which JSON strings
may hold); a line that cannot be used becomes an error record with its 1-based line number, so that the output has
one line per input record, in order.
"""

import json
import sys
import warnings
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path

from .text.readable_text import html_main_text

STDIN = "-"
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
HTML_SUFFIXES = (".html", ".htm")
TEXT_SUFFIXES = (".txt", ".md", *HTML_SUFFIXES)
# The lines a stream's format is read from: JSON Lines when most of its first non-blank lines are JSON objects.
SAMPLE_LINES = 10
_UTF8_BOM = b"\xef\xbb\xbf"


def decoded_text(data: bytes, name) -> str:
    """`data` read as UTF-8; undecodable bytes are replaced (with a warning naming `name`) rather than failing the
    document."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        warnings.warn(f"{name}: bytes that are not UTF-8 were replaced with U+FFFD")
        return data.decode("utf-8", errors="replace")


def read_text_file(path: Path) -> str:
    """Read text as UTF-8 (see `decoded_text`), without a leading byte order mark."""
    return decoded_text(path.read_bytes().removeprefix(_UTF8_BOM), path)


def read_records(name: str) -> Iterator[dict]:
    """The records of the summarize command's input: `path_records` of a path, or standard input's for `-`."""
    if name == STDIN:
        return stream_records(sys.stdin.buffer, "stdin")
    return path_records(Path(name))


def path_records(source: Path) -> Iterator[dict]:
    """Records of a text file, an HTML file (its main text), a JSONL file (`document` or `documents` per line), a
    folder of those, or a pipe; a missing path or a folder without such files is a ValueError at once.

    Records are {"id", "document"} and/or {"documents": [...]} (a JSONL line's list of strings, kept as a list: the
    command decides how a model reads it), with "title" and "reference" (its `summary`) when the line has them,
    {"id", "game"} for a Rotowire game (a line with a `box_score`, for table-to-text), or {"id", "error"} for an
    entry that cannot be used, so that one bad line does not cost the others.
    """
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.is_file() and p.suffix in (*TEXT_SUFFIXES, *JSONL_SUFFIXES))
        if not files:
            raise ValueError(f"{source} holds no .txt, .md, .html, .json or .jsonl files")
        return chain.from_iterable(_file_records(path) for path in files)
    if not source.exists():
        raise ValueError(f"{source}: no such file or folder")
    return _file_records(source)


def _file_records(path: Path) -> Iterator[dict]:
    with open(path, "rb") as handle:  # a pipe or a device too: /dev/stdin, a shell's <(...)
        yield from stream_records(handle, path.stem, name=str(path), suffix=path.suffix)


def stream_records(handle, stem: str, name: str | None = None, suffix: str = "") -> Iterator[dict]:
    """The records of a binary stream (see `path_records`): `stem` names a record without an id (`stem:line`) and
    a text document, `name` (default: `stem`) the stream in errors and notes, `suffix` is its file name's."""
    name = name or stem
    lines = _numbered_lines(handle)
    sample, non_blank = [], []
    for number, line in lines:
        sample.append((number, line))
        if line.strip():
            non_blank.append(line)
            if len(non_blank) == SAMPLE_LINES:
                break
    content = _content_format(non_blank, suffix)
    named = "jsonl" if suffix in JSONL_SUFFIXES else "text" if suffix in TEXT_SUFFIXES else None
    # a .json file that is not JSON Lines may be one JSON value (`_json_file_records`): no disagreement to note
    if named is not None and named != content and suffix != ".json":
        print(f"sumformers: note: {name} is named {suffix} but its first lines are "
              f"{'JSON objects' if content == 'jsonl' else 'not JSON Lines'}: read as {content}", file=sys.stderr)
    if content == "jsonl":
        for number, line in chain(sample, lines):
            if line.strip():
                yield jsonl_record(decoded_text(line, f"{name}:{number}"), number, name, stem)
        return
    text = decoded_text(b"".join(line for _, line in chain(sample, lines)), name)
    if suffix == ".json":
        yield from _json_file_records(text, name, stem)
        return
    if suffix in HTML_SUFFIXES:
        try:
            text = html_main_text(text)
        except ValueError as error:
            yield {"id": stem, "error": f"{name}: {error}"}
            return
    yield {"id": stem, "document": text}


def _numbered_lines(handle) -> Iterator[tuple[int, bytes]]:
    """A binary stream's lines split on b"\\n" alone, numbered from 1, the first without a UTF-8 byte order mark."""
    for number, line in enumerate(handle, start=1):
        yield number, line.removeprefix(_UTF8_BOM) if number == 1 else line


def _content_format(lines: list[bytes], suffix: str) -> str:
    """"jsonl" when most of a stream's first non-blank `lines` are JSON objects, or some are and its name ends in a
    JSON suffix; else "text"."""
    objects = sum(_is_json_object(line) for line in lines)
    if 2 * objects > len(lines) or (objects and suffix in JSONL_SUFFIXES):
        return "jsonl"
    return "text"


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def _json_file_records(text: str, name: str, stem: str) -> Iterator[dict]:
    """A `.json` file that is not JSON Lines: one JSON object (a record) or an array of them, else an error."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        yield {"id": stem, "error": f"{name}: neither JSON Lines nor one JSON value ({error.msg})"}
        return
    rows = value if isinstance(value, list) else [value]
    for number, row in enumerate(rows, start=1):
        yield record_of_row(row, f"{stem}:{number}", f"{name}, item {number}")


def jsonl_record(line: str, number: int, name: str, stem: str) -> dict:
    """The record of JSONL line `number`; one without `id` gets `<stem>:<number>`, an error names `<name>:<number>`."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        return {"id": f"{stem}:{number}", "error": f"{name}:{number}: not valid JSON ({error.msg})"}
    return record_of_row(row, f"{stem}:{number}", f"{name}:{number}")


def record_of_row(row, default_id: str, where: str) -> dict:
    """The record of one parsed JSON value (see `path_records`); `where` places it in errors."""
    if not isinstance(row, dict):
        return {"id": default_id, "error": f"{where}: expected a JSON object, got {type(row).__name__}"}
    record = {"id": str(row.get("id", default_id))}
    if "box_score" in row:
        return {**record, "game": row}
    if isinstance(row.get("document"), str):
        record["document"] = row["document"]
    documents = row.get("documents")
    if isinstance(documents, list) and all(isinstance(part, str) for part in documents):
        record["documents"] = documents
    if "document" not in record and "documents" not in record:
        return {**record, "error": f"{where}: no `document` string (or `documents` list of strings)"}
    # two-stage (WikiSum) models rank the paragraphs of each document against the title
    if isinstance(row.get("title"), str):
        record["title"] = row["title"]
    if isinstance(row.get("summary"), str):  # the reference summary `view` shows beside the model's
        record["reference"] = row["summary"]
    return record


def batched(records: Iterable[dict], size: int) -> Iterator[list[dict]]:
    """`records` in lists of `size` (the last one shorter)."""
    batch = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
