"""Backend of ``sumformers evaluate``: ROUGE of a predictions file, or of the Lead-K / oracle baselines, on a
JSONL data file."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .jsonl import read_jsonl
from .scoring import greedy_oracle, rouge_scores
from .sentences import lead_k, split_sentences

__all__ = ["data_dir", "read_jsonl", "document_sentences", "evaluate_file"]

_BASELINE_RE = re.compile(r"(lead|oracle)(?:-(\d+))?")


def data_dir() -> Path:
    """The shared data folder: ``$SUMFORMERS_DATA_DIR`` if set, else ``<repo root>/../shared/data``, where the
    repo root is the folder holding the ``sumformers`` package."""
    override = os.environ.get("SUMFORMERS_DATA_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def document_sentences(example: dict) -> list[str]:
    """Sentences of an example's ``document``, or of its ``documents`` one after another (multi-document)."""
    if isinstance(example.get("document"), str):
        return split_sentences(example["document"])
    documents = example.get("documents")
    if isinstance(documents, list) and all(isinstance(document, str) for document in documents):
        return [sentence for document in documents for sentence in split_sentences(document)]
    raise ValueError("example has no 'document' string or 'documents' list of strings")


def _summaries(rows: list[dict], path: Path) -> list[str]:
    summaries = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.get("summary"), str):
            raise ValueError(f"{path}, example {number}: missing 'summary' string field")
        summaries.append(row["summary"])
    return summaries


def _ids(rows: list[dict], path: Path) -> list[str]:
    ids = []
    for number, row in enumerate(rows, start=1):
        if "id" not in row:
            raise ValueError(f"{path}, example {number}: missing 'id' field (needed to match predictions)")
        ids.append(str(row["id"]))
    return ids


def _baseline_predictions(rows: list[dict], path: Path, baseline: str, num_sentences: int | None) -> list[str]:
    match = _BASELINE_RE.fullmatch(baseline)
    if match is None:
        raise ValueError(f"unknown baseline {baseline!r}; expected 'lead', 'lead-K', 'oracle' or 'oracle-K'")
    name, size = match.group(1), int(match.group(2)) if match.group(2) else num_sentences
    if name == "lead" and size is None:
        raise ValueError("the lead baseline needs a number of sentences (num_sentences or 'lead-K')")
    predictions = []
    for number, row in enumerate(rows, start=1):
        try:
            sentences = document_sentences(row)
        except ValueError as error:
            raise ValueError(f"{path}, example {number}: {error}") from None
        if name == "lead":
            indices = lead_k(sentences, size)
        else:
            indices = greedy_oracle(sentences, row["summary"], num_sentences=size)
        predictions.append("\n".join(sentences[index] for index in indices))
    return predictions


def evaluate_file(
    data_path: str | os.PathLike,
    predictions_path: str | os.PathLike | None = None,
    baseline: str | None = None,
    num_sentences: int | None = 3,
) -> dict:
    """ROUGE-1/2/Lsum (F1 x 100, mean over examples) against the ``summary`` field of ``data_path``.

    Give exactly one of:
    - ``predictions_path``: JSONL with ``id`` and ``summary``, matched to the data by ``id`` (predictions for
      ids not in the data are ignored);
    - ``baseline``: ``"lead"`` (first ``num_sentences`` sentences), ``"lead-K"``, ``"oracle"`` (``greedy_oracle`` with
      at most ``num_sentences`` sentences, none = no limit) or ``"oracle-K"``; the selected sentences are joined one per
      line. Multi-document examples (``documents``) are read as the sentences of all documents in order.

    Returns ``{"rouge1", "rouge2", "rougeLsum", "num_examples"}``. Bad input raises a one-line ValueError.
    """
    if (predictions_path is None) == (baseline is None):
        raise ValueError("give exactly one of predictions_path and baseline")
    data_path = Path(data_path)
    rows = read_jsonl(data_path)
    if not rows:
        raise ValueError(f"{data_path}: no examples")
    references = _summaries(rows, data_path)

    if baseline is not None:
        predictions = _baseline_predictions(rows, data_path, baseline, num_sentences)
    else:
        predictions_path = Path(predictions_path)
        prediction_rows = read_jsonl(predictions_path)
        by_id: dict[str, str] = {}
        for prediction_id, summary in zip(
            _ids(prediction_rows, predictions_path), _summaries(prediction_rows, predictions_path)
        ):
            if prediction_id in by_id:
                raise ValueError(f"{predictions_path}: duplicate prediction id {prediction_id!r}")
            by_id[prediction_id] = summary
        data_ids = _ids(rows, data_path)
        missing = [example_id for example_id in data_ids if example_id not in by_id]
        if missing:
            raise ValueError(
                f"{predictions_path}: {len(missing)} of {len(data_ids)} data ids have no prediction "
                f"(first: {', '.join(map(repr, missing[:3]))})"
            )
        predictions = [by_id[example_id] for example_id in data_ids]

    return {**rouge_scores(predictions, references), "num_examples": len(rows)}
