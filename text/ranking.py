"""Stage 1 of WikiSum (Liu et al. 2018): rank the paragraphs of one or many documents against a query (the title),
then keep the best ones, concatenated, up to a budget of L tokens.

Rankers (``RANKERS``), each giving one score per paragraph; ties keep the input order:

- ``identity``: input order.
- ``tfidf``: the paper's formula, ``sum over distinct query words w of N_w * log(N_d / N_dw)``, where N_w counts w in
  the paragraph, N_d is the number of paragraphs and N_dw the number of paragraphs holding w. Paragraphs play the
  role of the paper's "documents": with one long input (a meeting transcript) document frequencies would all be 1.
  An empty query scores every paragraph 0, which falls back to input order.
- ``textrank``: Mihalcea & Tarau (2004): a graph with an edge between two paragraphs weighted by their overlap
  (distinct shared content words over ``log |S_i| + log |S_j|``), no self-loops, ranked by PageRank (damping 0.85;
  a paragraph without edges spreads its rank uniformly).
- ``sumbasic``: Nenkova & Vanderwende (2005): word probabilities over the content words of all paragraphs; repeatedly
  pick, among the paragraphs holding the currently most probable word, the one with the highest mean word
  probability, then square the probability of each of its words. The rank is the picking order; the score is the
  mean probability at the moment a paragraph was picked.
- ``oracle``: the paper's cheating ranker, recall of the reference's distinct word bigrams.

Words are lowercased runs of letters and digits; TextRank and SumBasic drop `STOP_WORDS` (content words only).

This module is copied flat into exported Hub repos: it imports only the standard library and numpy.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "RANKERS",
    "RANKING_UNITS",
    "STOP_WORDS",
    "Paragraph",
    "RankedParagraph",
    "split_paragraphs",
    "words",
    "content_words",
    "tfidf_scores",
    "textrank_scores",
    "sumbasic_order",
    "bigram_recall_scores",
    "rank_paragraphs",
    "fit_to_budget",
]

RANKERS = ("identity", "tfidf", "textrank", "sumbasic", "oracle")
# What a ranker ranks: the documents' paragraphs as given (blank lines, else lines), or their sentences (each document
# rewritten one sentence a line first: CNN/DM articles have no paragraph breaks).
RANKING_UNITS = ("paragraph", "sentence")

_WORD_RE = re.compile(r"[^\W_]+")
_BLANK_LINES_RE = re.compile(r"\n\s*\n")

# Function words that carry no topic, and the fillers of transcribed speech (QMSum turns are full of them).
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves yeah okay oh um uh mm hmm
    """.split()
)

_PAGERANK_DAMPING = 0.85
_PAGERANK_TOLERANCE = 1e-12
_PAGERANK_MAX_ITERATIONS = 1000


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of the input: its text, the document it came from and its position in the whole input."""

    text: str
    document: int
    index: int


@dataclass(frozen=True)
class RankedParagraph:
    """A paragraph with its ranker score and its rank (0 = best)."""

    paragraph: Paragraph
    score: float
    rank: int


def split_paragraphs(documents: str | Sequence[str]) -> list[Paragraph]:
    """Paragraphs of one document (a string) or of several (a list of strings), numbered in input order.

    A document with blank lines between blocks of text is split at them; otherwise every non-empty line is a
    paragraph (a transcript turn; a review without breaks is one paragraph). Whitespace inside a paragraph is
    collapsed.
    """
    if isinstance(documents, str):
        documents = [documents]
    if not isinstance(documents, (list, tuple)) or not all(isinstance(document, str) for document in documents):
        raise ValueError("documents must be a string or a list of strings")
    paragraphs: list[Paragraph] = []
    for document_index, document in enumerate(documents):
        text = document.replace("\r\n", "\n").replace("\r", "\n")
        blocks = [block for block in _BLANK_LINES_RE.split(text) if block.strip()]
        if len(blocks) < 2:
            blocks = text.split("\n")
        for block in blocks:
            block = " ".join(block.split())
            if block:
                paragraphs.append(Paragraph(block, document_index, len(paragraphs)))
    return paragraphs


def words(text: str) -> list[str]:
    """Lowercased runs of letters and digits."""
    return _WORD_RE.findall(text.lower())


def content_words(text: str) -> list[str]:
    """`words` without stop words."""
    return [word for word in words(text) if word not in STOP_WORDS]


def _stable_order(scores: Sequence[float]) -> list[int]:
    """Indices by descending score, ties in input order."""
    return sorted(range(len(scores)), key=lambda index: (-scores[index], index))


def tfidf_scores(paragraph_words: Sequence[Sequence[str]], query_words: Sequence[str]) -> list[float]:
    """The paper's tf-idf of each paragraph against the query: sum over distinct query words of
    ``N_w * log(N_d / N_dw)``."""
    num_paragraphs = len(paragraph_words)
    counts = [Counter(tokens) for tokens in paragraph_words]
    document_frequency = Counter(word for tokens in counts for word in tokens)
    query = [word for word in dict.fromkeys(query_words) if document_frequency[word]]
    return [
        sum(count[word] * math.log(num_paragraphs / document_frequency[word]) for word in query) for count in counts
    ]


def textrank_scores(paragraph_words: Sequence[Sequence[str]]) -> list[float]:
    """PageRank over the word-overlap graph of the paragraphs (no self-loops); scores sum to 1.

    Edge weight (Mihalcea & Tarau): distinct shared words over ``log |S_i| + log |S_j|`` (lengths in tokens); two
    one-word paragraphs sharing their word have log lengths 0 and get weight 1.
    """
    count = len(paragraph_words)
    if count == 0:
        return []
    vocabularies = [set(tokens) for tokens in paragraph_words]
    log_lengths = [math.log(len(tokens)) if tokens else 0.0 for tokens in paragraph_words]
    weights = np.zeros((count, count))
    for i in range(count):
        for j in range(i + 1, count):
            shared = len(vocabularies[i] & vocabularies[j])
            if shared:
                norm = log_lengths[i] + log_lengths[j]
                weights[i, j] = weights[j, i] = shared / norm if norm > 0 else float(shared)
    out_weight = weights.sum(axis=1)
    # row-stochastic transitions; a paragraph without edges jumps anywhere (standard dangling-node handling)
    transitions = np.where(out_weight[:, None] > 0, weights / np.maximum(out_weight, 1e-300)[:, None], 1.0 / count)
    rank = np.full(count, 1.0 / count)
    for _ in range(_PAGERANK_MAX_ITERATIONS):
        updated = (1 - _PAGERANK_DAMPING) / count + _PAGERANK_DAMPING * transitions.T @ rank
        converged = np.abs(updated - rank).sum() < _PAGERANK_TOLERANCE
        rank = updated
        if converged:
            break
    return rank.tolist()


def sumbasic_order(paragraph_words: Sequence[Sequence[str]], require_top_word: bool = True) -> list[tuple[int, float]]:
    """SumBasic's picking order over all paragraphs: [(index, mean word probability when picked)].

    With `require_top_word` (Nenkova & Vanderwende's step 3) only paragraphs holding the currently most probable
    word compete; without it every remaining paragraph does (the simplification sumy implements). Ties go to the
    word met first and to the earlier paragraph. Paragraphs without content words come last, in input order, with
    score 0.
    """
    all_words = [word for tokens in paragraph_words for word in tokens]
    probability = {word: count / len(all_words) for word, count in Counter(all_words).items()}
    # word -> paragraphs not yet picked that hold it; dict order = order of first occurrence
    holders: dict[str, set[int]] = {}
    for index, tokens in enumerate(paragraph_words):
        for word in tokens:
            holders.setdefault(word, set()).add(index)
    order = []
    while True:
        offered = [word for word, indices in holders.items() if indices]
        if not offered:
            break
        if require_top_word:
            candidates = holders[max(offered, key=lambda word: probability[word])]
        else:
            candidates = {index for word in offered for index in holders[word]}
        means = {
            index: sum(probability[word] for word in paragraph_words[index]) / len(paragraph_words[index])
            for index in candidates
        }
        best = max(means, key=lambda index: (means[index], -index))
        order.append((best, means[best]))
        for word in set(paragraph_words[best]):
            probability[word] **= 2
            holders[word].discard(best)
    picked = {index for index, _ in order}
    return order + [(index, 0.0) for index in range(len(paragraph_words)) if index not in picked]


def _bigrams(tokens: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(tokens, tokens[1:]))


def bigram_recall_scores(paragraph_words: Sequence[Sequence[str]], reference_words: Sequence[str]) -> list[float]:
    """Share of the reference's distinct bigrams that each paragraph contains (the cheating oracle)."""
    reference = _bigrams(reference_words)
    if not reference:
        return [0.0] * len(paragraph_words)
    return [len(_bigrams(tokens) & reference) / len(reference) for tokens in paragraph_words]


def rank_paragraphs(
    paragraphs: Sequence[Paragraph | str],
    title: str = "",
    ranker: str = "tfidf",
    reference: str | None = None,
) -> list[RankedParagraph]:
    """Rank paragraphs (best first) with one of `RANKERS`; ``oracle`` needs the `reference` summary."""
    if ranker not in RANKERS:
        raise ValueError(f"unknown ranker {ranker!r}; choose one of {', '.join(RANKERS)}")
    paragraphs = [p if isinstance(p, Paragraph) else Paragraph(str(p), 0, index) for index, p in enumerate(paragraphs)]
    texts = [paragraph.text for paragraph in paragraphs]
    if ranker == "identity":
        order = [(index, 0.0) for index in range(len(texts))]
    elif ranker == "sumbasic":
        order = sumbasic_order([content_words(text) for text in texts])
    else:
        if ranker == "tfidf":
            scores = tfidf_scores([words(text) for text in texts], words(title))
        elif ranker == "textrank":
            scores = textrank_scores([content_words(text) for text in texts])
        else:
            if not isinstance(reference, str):
                raise ValueError("the oracle ranker needs the reference summary (reference=...)")
            scores = bigram_recall_scores([words(text) for text in texts], words(reference))
        order = [(index, scores[index]) for index in _stable_order(scores)]
    return [RankedParagraph(paragraphs[index], float(score), rank) for rank, (index, score) in enumerate(order)]


def fit_to_budget(
    ranked: Sequence[RankedParagraph], budget: int, tokenize: Callable[[str], list] = str.split
) -> list[tuple[RankedParagraph, list]]:
    """The best paragraphs whose tokens fit in `budget`, in rank order, with their tokens; the last one is cut to
    the tokens that still fit (the paper keeps the first L tokens of the concatenation).

    `tokenize` maps a paragraph to its tokens: words for a ranker alone, a model tokenizer's ids (plus a separator)
    for the model input.
    """
    if budget < 0:
        raise ValueError(f"the token budget must be non-negative, got {budget}")
    kept = []
    for item in ranked:
        if budget <= 0:
            break
        tokens = list(tokenize(item.paragraph.text))[:budget]
        if tokens:
            kept.append((item, tokens))
            budget -= len(tokens)
    return kept
