"""ROUGE as published papers compute it, and the greedy extractive oracles.

ROUGE: rouge-score with the Porter stemmer (its default tokenizer: lowercase, runs of [a-z0-9], words longer
than 3 characters stemmed), one sentence per line, F1 x 100 averaged over examples (plain mean, no bootstrap).
``rougeLsum`` is the ROUGE-L to report; sentences come from ``sumformers.text.to_sentences``: a text's lines
when it has line breaks (the data marks reference sentences with ``"\\n"``), otherwise `split_sentences`.

Oracles follow PreSumm's ``greedy_selection``: greedily add the sentence that most raises the objective, stop
when no sentence raises it. Unlike PreSumm, n-grams are matched with clipped counts (ROUGE's own definition,
PreSumm uses sets) on the same stemmed tokens as the metric, and the scores are updated by count arithmetic
instead of re-running ROUGE for every candidate.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from nltk.stem import porter
from rouge_score import rouge_scorer, tokenize, tokenizers

from .sentences import to_sentences

__all__ = [
    "bootstrap_interval",
    "ROUGE_KEYS",
    "ORACLE_METRICS",
    "rouge_tokenize",
    "rouge_per_example",
    "rouge_scores",
    "greedy_oracle",
    "full_oracle",
    "oracle_labels",
    "load_rouge_metric",
]

ROUGE_KEYS = ("rouge1", "rouge2", "rougeLsum")
# "r1+r2": PreSumm's objective, ROUGE-1 F + ROUGE-2 F; "r2": ROUGE-2 F alone (multi-document labels);
# "full": mean of ROUGE-1, ROUGE-2 and ROUGE-Lsum F, the "Oracle (Full)" objective.
ORACLE_METRICS = ("r1+r2", "r2", "full")
_METRIC_SCRIPT_DIR = Path(__file__).resolve().parent / "metric_scripts" / "sumformers_rouge"


class _MemoizedPorterStemmer:
    """nltk's Porter stemmer (the one rouge-score uses) with a cache: stemming dominates ROUGE time and
    words repeat a lot across a corpus."""

    def __init__(self) -> None:
        self.stem = functools.lru_cache(maxsize=200_000)(porter.PorterStemmer().stem)


class _StemmingRougeTokenizer(tokenizers.Tokenizer):
    """Same tokens as ``tokenizers.DefaultTokenizer(use_stemmer=True)``, faster."""

    def __init__(self) -> None:
        self._stemmer = _MemoizedPorterStemmer()

    def tokenize(self, text: str) -> list[str]:
        return tokenize.tokenize(text, self._stemmer)


@functools.lru_cache(maxsize=1)
def _tokenizer() -> _StemmingRougeTokenizer:
    return _StemmingRougeTokenizer()


@functools.lru_cache(maxsize=1)
def _scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(list(ROUGE_KEYS), tokenizer=_tokenizer())


def rouge_tokenize(text: str) -> list[str]:
    """The tokens ROUGE compares: rouge-score's default tokenizer with Porter stemming."""
    return _tokenizer().tokenize(text)


def _check_texts(name: str, texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a list of strings, not a single string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(text).__name__}")
    return texts


def rouge_per_example(predictions: Sequence[str], references: Sequence[str]) -> list[dict[str, float]]:
    """ROUGE-1/2/Lsum F1 x 100 of each prediction against its reference."""
    predictions = _check_texts("predictions", predictions)
    references = _check_texts("references", references)
    if len(predictions) != len(references):
        raise ValueError(f"got {len(predictions)} predictions but {len(references)} references")
    scorer = _scorer()
    results = []
    for prediction, reference in zip(predictions, references):
        scores = scorer.score("\n".join(to_sentences(reference)), "\n".join(to_sentences(prediction)))
        results.append({key: 100.0 * scores[key].fmeasure for key in ROUGE_KEYS})
    return results


def rouge_scores(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean over examples of ROUGE-1/2/Lsum F1 x 100 (keys ``rouge1``, ``rouge2``, ``rougeLsum``)."""
    per_example = rouge_per_example(predictions, references)
    if not per_example:
        raise ValueError("rouge_scores needs at least one prediction")
    return {key: sum(scores[key] for scores in per_example) / len(per_example) for key in ROUGE_KEYS}


def bootstrap_interval(values: Sequence[float], resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of `values` (per-example scores): `resamples` resamples
    with replacement, a fixed seed so a table is reproducible."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("bootstrap_interval needs at least one value")
    rows = np.random.default_rng(seed).integers(0, values.size, size=(resamples, values.size))
    means = values[rows].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _f1(overlap: int, predicted_total: int, reference_total: int) -> float:
    # 2PR / (P + R) with P = overlap / predicted_total and R = overlap / reference_total.
    return 2.0 * overlap / (predicted_total + reference_total) if overlap else 0.0


def _ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


class _NgramOverlap:
    """ROUGE-N F of a growing sentence selection, updated by count arithmetic.

    N-grams are counted within each sentence; the reference's n-grams span its whole token sequence, as in
    rouge-score. Only n-grams that occur in the reference are kept per sentence: the others change the
    selection's n-gram total, never the clipped overlap.
    """

    def __init__(self, sentence_tokens: Sequence[Sequence[str]], reference_tokens: Sequence[str], n: int) -> None:
        self._reference = _ngram_counts(reference_tokens, n)
        self._reference_total = sum(self._reference.values())
        self._totals = [max(len(tokens) - n + 1, 0) for tokens in sentence_tokens]
        self._matches = [
            [(gram, count) for gram, count in _ngram_counts(tokens, n).items() if gram in self._reference]
            for tokens in sentence_tokens
        ]
        self._selected: Counter = Counter()
        self._overlap = 0
        self._total = 0

    def _overlap_gain(self, index: int) -> int:
        gain = 0
        for gram, count in self._matches[index]:
            have, cap = self._selected[gram], self._reference[gram]
            if have < cap:
                gain += min(have + count, cap) - have
        return gain

    def f_with(self, index: int) -> float:
        return _f1(self._overlap + self._overlap_gain(index), self._total + self._totals[index], self._reference_total)

    def add(self, index: int) -> None:
        self._overlap += self._overlap_gain(index)
        self._total += self._totals[index]
        self._selected.update(dict(self._matches[index]))


class _SummaryLcs:
    """ROUGE-Lsum F (rouge-score's summary-level union LCS) of a sentence selection.

    The LCS of every (reference sentence, document sentence) pair is computed once with rouge-score's own
    ``lcs_ind``; a selection's score only unions those positions and clips them by token counts.
    """

    def __init__(
        self, sentence_tokens: Sequence[Sequence[str]], reference_sentence_tokens: Sequence[Sequence[str]]
    ) -> None:
        self._reference_sentences = [list(tokens) for tokens in reference_sentence_tokens]
        self._reference_counts = Counter(token for tokens in self._reference_sentences for token in tokens)
        self._reference_total = sum(self._reference_counts.values())
        self._counts = [Counter(tokens) for tokens in sentence_tokens]
        self._totals = [len(tokens) for tokens in sentence_tokens]
        # _lcs[i][r]: positions in reference sentence r of its LCS with document sentence i.
        self._lcs = [
            [
                frozenset(rouge_scorer.lcs_ind(reference, list(tokens)))
                if self._reference_counts.keys() & counts.keys()
                else frozenset()
                for reference in self._reference_sentences
            ]
            for tokens, counts in zip(sentence_tokens, self._counts)
        ]
        self._selected: list[int] = []

    def f_with(self, index: int) -> float:
        selection = self._selected + [index]
        candidate_counts: Counter = Counter()
        for i in selection:
            candidate_counts.update(self._counts[i])
        reference_counts = Counter(self._reference_counts)
        hits = 0
        for r, reference in enumerate(self._reference_sentences):
            for position in sorted(frozenset().union(*(self._lcs[i][r] for i in selection))):
                token = reference[position]
                if candidate_counts[token] > 0 and reference_counts[token] > 0:
                    hits += 1
                    candidate_counts[token] -= 1
                    reference_counts[token] -= 1
        return _f1(hits, sum(self._totals[i] for i in selection), self._reference_total)

    def add(self, index: int) -> None:
        self._selected.append(index)


def _check_oracle_inputs(sentences: Sequence[str], reference: str, num_sentences: int | None, metric: str) -> None:
    _check_texts("sentences", sentences)
    if not isinstance(reference, str):
        raise TypeError(f"reference must be a str, got {type(reference).__name__}")
    if num_sentences is not None and (
        isinstance(num_sentences, bool) or not isinstance(num_sentences, int) or num_sentences < 0
    ):
        raise ValueError(f"num_sentences must be None or a non-negative int, got {num_sentences!r}")
    if metric not in ORACLE_METRICS:
        raise ValueError(f"unknown oracle metric {metric!r}; expected one of {', '.join(ORACLE_METRICS)}")


def greedy_oracle(
    sentences: Sequence[str],
    reference: str,
    num_sentences: int | None = None,
    metric: str = "r1+r2",
    selection_order: bool = False,
) -> list[int]:
    """Greedy extractive oracle: indices (ascending, or with ``selection_order`` in the order the search adds them)
    of the sentences that best match ``reference``.

    Each step adds the sentence that most raises the objective of the selection against the reference and
    stops when no sentence raises it or ``num_sentences`` are selected; ties go to the earlier sentence.
    ``metric``: ``"r1+r2"`` (PreSumm, ROUGE-1 F + ROUGE-2 F), ``"r2"`` (ROUGE-2 F) or ``"full"`` (mean of
    ROUGE-1, ROUGE-2 and ROUGE-Lsum F, see ``full_oracle``). Bigrams are taken within sentences, so the
    objective ignores the bigrams that join two selected sentences when they are printed one after another.
    """
    _check_oracle_inputs(sentences, reference, num_sentences, metric)
    sentence_tokens = [rouge_tokenize(sentence) for sentence in sentences]
    reference_tokens = rouge_tokenize(reference)
    parts: list[_NgramOverlap | _SummaryLcs] = [_NgramOverlap(sentence_tokens, reference_tokens, 2)]
    if metric in ("r1+r2", "full"):
        parts.append(_NgramOverlap(sentence_tokens, reference_tokens, 1))
    if metric == "full":
        reference_sentence_tokens = [rouge_tokenize(line) for line in to_sentences(reference)]
        parts.append(_SummaryLcs(sentence_tokens, reference_sentence_tokens))
    limit = len(sentences) if num_sentences is None else min(num_sentences, len(sentences))

    selected: list[int] = []
    best = 0.0
    while len(selected) < limit:
        best_index = -1
        for index in range(len(sentences)):
            if index in selected:
                continue
            # The sum ranks candidates exactly as the mean does.
            score = sum(part.f_with(index) for part in parts)
            if score > best:
                best, best_index = score, index
        if best_index < 0:
            break
        selected.append(best_index)
        for part in parts:
            part.add(best_index)
    return selected if selection_order else sorted(selected)


def full_oracle(sentences: Sequence[str], reference: str, num_sentences: int | None = None) -> list[int]:
    """"Oracle (Full)": the selection maximizing the mean of ROUGE-1, ROUGE-2 and ROUGE-Lsum F.

    Found greedily (``greedy_oracle(metric="full")``), not by exact search: exact search over subsets is
    intractable for long inputs (hundreds of sentences), so the result is a lower bound on the true optimum.
    """
    return greedy_oracle(sentences, reference, num_sentences=num_sentences, metric="full")


def oracle_labels(
    sentences: Sequence[str], reference: str, num_sentences: int | None = None, metric: str = "r1+r2"
) -> list[int]:
    """0/1 extraction label per sentence from ``greedy_oracle``."""
    selected = set(greedy_oracle(sentences, reference, num_sentences=num_sentences, metric=metric))
    return [int(index in selected) for index in range(len(sentences))]


def load_rouge_metric(**load_kwargs):
    """The local ``evaluate`` metric wrapping ``rouge_scores`` (``evaluate.load("rouge")`` needs the network).

    Results are kept in memory unless ``keep_in_memory=False`` is passed; other keyword arguments go to
    ``evaluate.load``.
    """
    import evaluate  # heavy import (datasets, pandas), only needed here

    load_kwargs.setdefault("keep_in_memory", True)
    return evaluate.load(str(_METRIC_SCRIPT_DIR), **load_kwargs)
