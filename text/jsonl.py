"""JSON Lines files, read with the standard library only: inference code (Rotowire records, WikiSum's processor)
imports this, and so do exported Hub repos, which must not need the evaluation packages (rouge-score, nltk)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Rows of a JSONL file, gzip-compressed if its name ends in `.gz` (one JSON object a line, blank lines
    skipped)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    rows = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {line_number}: invalid JSON ({error.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}, line {line_number}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows
