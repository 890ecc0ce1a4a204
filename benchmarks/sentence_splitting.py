"""Sentence boundary precision, recall and F1, and speed, of candidate splitters on the hand-checked boundary set.

The set (`tests/fixtures/sentence_boundaries.json`) holds the sentence end offsets of development CNN/DM articles:
cased raw CNN articles of `validation.jsonl` and lowercased CNN and Daily Mail articles of `validation_large.jsonl.gz`,
read from the shared data. A boundary is the offset where a sentence's text ends (after its end punctuation and
closing quotes, before the whitespace); the end of the article is not counted. A splitter's boundary counts as found
when it is at the same offset.

    python benchmarks/sentence_splitting.py            # writes benchmarks/results/sentence_splitting.md

    # Punkt is trained first (about 10 minutes a pass over the 39,563 articles) and its parameters cached
    python benchmarks/sentence_splitting.py --punkt_params /tmp/punkt_train_large.json

Splitters: pysbd (English, `clean=False`), blingfire, sentencex (multilingual rules), NLTK Punkt trained without
labels on the lowercased `train_large` articles (`PunktTrainer`, with and without its abbreviation penalty), the
package's lowercase rules (`split_lowercase_sentences`) on both casings, and the package's `split_sentences` as
shipped (blingfire on cased text, the lowercase rules on text without capitals, with its MAX_SENTENCE_WORDS windows).
Speed: articles a second on one thread over the set's articles, best of `--repeats` passes.
"""

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "sentence_boundaries.json"
sys.path.insert(0, str(REPO))


def read_articles(data_dir: Path, entries: list[dict]) -> list[str]:
    """The documents the fixture's entries name (file and row index), checked against their stored ids."""
    rows_by_file = {}
    for file in {entry["file"] for entry in entries}:
        path = data_dir / "cnn_dailymail" / file
        with (gzip.open(path, "rt", encoding="utf-8") if file.endswith(".gz") else open(path, encoding="utf-8")) as f:
            rows_by_file[file] = [json.loads(line) for line in f]
    documents = []
    for entry in entries:
        row = rows_by_file[entry["file"]][entry["index"]]
        if row["id"] != entry["id"]:
            raise ValueError(f"{entry['file']} row {entry['index']} is {row['id']}, the fixture says {entry['id']}")
        documents.append(row["document"])
    return documents


# The raw CNN text detaches quotes from their sentences (`each other. " The incidents`): whether such a quote closes
# this sentence or opens the next cannot be told from the text, so a boundary's offset is taken before the quotes and
# whitespace that follow its end punctuation, in the labels and in every splitter's output alike.
_QUOTES_AND_SPACE = frozenset("\"'\u2018\u2019\u201c\u201d") | frozenset(" \t\r\n\u00a0")


def boundary(text: str, offset: int) -> int:
    """`offset` moved back over quotes and whitespace: the canonical offset of a boundary there."""
    while offset > 0 and text[offset - 1] in _QUOTES_AND_SPACE:
        offset -= 1
    return offset


def _internal(text: str, ends) -> list[int]:
    """The canonical boundaries among `ends`, without the article's end, each once, in order."""
    last = boundary(text, len(text))
    return sorted({boundary(text, offset) for offset in ends} - {last, 0})


def ends_of(text: str, sentences) -> list[int]:
    """Boundaries after `sentences`, found one after another in `text`."""
    ends, cursor = [], 0
    for sentence in sentences:
        sentence = sentence.strip()
        if not sentence:
            continue
        start = text.find(sentence, cursor)
        if start == -1:
            raise ValueError(f"sentence not found in the text: {sentence[:60]!r}")
        cursor = start + len(sentence)
        ends.append(cursor)
    return _internal(text, ends)


def span_ends(text: str, spans) -> list[int]:
    """Boundaries after (start, end) character spans."""
    return _internal(text, [stop for _, stop in spans])


def train_punkt(documents, output: Path, abbreviation_penalty: bool = True) -> None:
    """Train Punkt's parameters (abbreviations, collocations, sentence starters, orthographic context) on
    `documents` without labels, and write them as JSON. `abbreviation_penalty=False` sets the trainer's
    IGNORE_ABBREV_PENALTY: the penalty drops a candidate abbreviation for every time it is seen without its full
    stop, so that on the 39,563 articles "u.s." and "mr." are no longer abbreviations."""
    from nltk.tokenize.punkt import PunktTrainer

    trainer = PunktTrainer()
    trainer.IGNORE_ABBREV_PENALTY = not abbreviation_penalty
    for document in documents:
        trainer.train(document, finalize=False)
    trainer.finalize_training()
    params = trainer.get_params()
    output.write_text(
        json.dumps(
            {
                "abbrev_types": sorted(params.abbrev_types),
                "collocations": sorted(params.collocations),
                "sent_starters": sorted(params.sent_starters),
                "ortho_context": dict(sorted(params.ortho_context.items())),
            }
        )
    )


def load_punkt(path: Path):
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    stored = json.loads(Path(path).read_text())
    params = PunktParameters()
    params.abbrev_types = set(stored["abbrev_types"])
    params.collocations = {tuple(pair) for pair in stored["collocations"]}
    params.sent_starters = set(stored["sent_starters"])
    for word, flags in stored["ortho_context"].items():
        params.ortho_context[word] = flags
    return PunktSentenceTokenizer(params)


def splitters(punkt_params: dict[str, Path]) -> dict:
    """Name -> function from a text to its boundary offsets."""
    import blingfire
    import pysbd
    import sentencex

    from sumformers.text.sentences import split_lowercase_sentences, split_sentences

    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    found = {
        "pysbd": lambda text: span_ends(text, [(span.start, span.end) for span in segmenter.segment(text)]),
        "blingfire": lambda text: span_ends(text, blingfire.text_to_sentences_and_offsets(text)[1]),
        "sentencex": lambda text: ends_of(text, sentencex.segment("en", text)),
    }
    for name, path in punkt_params.items():
        found[name] = lambda text, punkt=load_punkt(path): span_ends(text, punkt.span_tokenize(text))
    found["lowercase rules (split_lowercase_sentences)"] = lambda text: ends_of(text, split_lowercase_sentences(text))
    found["split_sentences (shipped)"] = lambda text: ends_of(text, split_sentences(text))
    return found


def punkt_variants(prefix: str) -> dict[str, Path]:
    """Punkt parameters trained on all of `train_large`, with and without the abbreviation penalty, cached as
    `<prefix>.json` and `<prefix>_no_penalty.json` (trained when missing)."""
    from sumformers.text.evaluation import data_dir

    variants = {}
    settings = (("punkt (train_large)", "", True), ("punkt (train_large, no penalty)", "_no_penalty", False))
    for name, suffix, penalty in settings:
        path = Path(f"{prefix}{suffix}.json")
        if not path.exists():
            print(f"training {name} into {path}", flush=True)
            with gzip.open(data_dir() / "cnn_dailymail" / "train_large.jsonl.gz", "rt", encoding="utf-8") as f:
                train_punkt((json.loads(line)["document"] for line in f), path, abbreviation_penalty=penalty)
        variants[name] = path
    return variants


def scores(predicted: list[list[int]], gold: list[list[int]]) -> dict:
    true_positives = sum(len(set(p) & set(g)) for p, g in zip(predicted, gold))
    predicted_count, gold_count = sum(map(len, predicted)), sum(map(len, gold))
    precision = true_positives / predicted_count if predicted_count else 0.0
    recall = true_positives / gold_count if gold_count else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    errors = predicted_count + gold_count - 2 * true_positives
    return {"precision": precision, "recall": recall, "f1": f1, "errors": errors}


def articles_per_second(split, documents: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for document in documents:
            split(document)
        best = min(best, time.perf_counter() - start)
    return len(documents) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", default=str(FIXTURE))
    parser.add_argument("--data_dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--punkt_params", default=str(Path(tempfile.gettempdir()) / "punkt_train_large"),
                        help="path prefix of the cached Punkt parameters (trained when missing)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "sentence_splitting.md"))
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    entries = json.loads(Path(args.fixture).read_text())["articles"]
    documents = read_articles(Path(args.data_dir), entries)
    rows = []
    for name, split in splitters(punkt_variants(args.punkt_params.removesuffix(".json"))).items():
        for casing in ("cased", "lowercased"):
            chosen = [i for i, entry in enumerate(entries) if entry["casing"] == casing]
            texts = [documents[i] for i in chosen]
            result = scores([split(text) for text in texts], [entries[i]["ends"] for i in chosen])
            result["speed"] = articles_per_second(split, texts, args.repeats)
            rows.append((name, casing, result))
            print(name, casing, result, flush=True)
    write(args, entries, rows)


def write(args, entries, rows) -> None:
    from _common import write_report

    counts = {casing: sum(entry["casing"] == casing for entry in entries) for casing in ("cased", "lowercased")}
    boundaries = {
        casing: sum(len(entry["ends"]) for entry in entries if entry["casing"] == casing) for casing in counts
    }
    body = [
        f"Hand-checked boundaries: {counts['cased']} cased CNN articles of `validation.jsonl` "
        f"({boundaries['cased']} boundaries), {counts['lowercased']} lowercased CNN and Daily Mail articles of "
        f"`validation_large.jsonl.gz` ({boundaries['lowercased']} boundaries). Speed: articles a second, one thread, "
        "best of the passes.",
        "",
        "| splitter | casing | precision | recall | F1 | errors (missed + spurious) | articles/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, casing, result in rows:
        body.append(
            f"| {name} | {casing} | {result['precision']:.4f} | {result['recall']:.4f} | {result['f1']:.4f} | "
            f"{result['errors']} | {result['speed']:.1f} |"
        )
    write_report("sentence_splitting.py", body, args.output)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "benchmarks"))
    main()
