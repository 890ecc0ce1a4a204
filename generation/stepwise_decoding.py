"""Beam search over extraction steps (Narayan et al. 2020): at each step a stepwise model gives a distribution over
the document's sentences plus an end-of-summary unit, conditioned on the sentences chosen so far.

Search, per document:
- a hypothesis is a sequence of choices (sentence indices, possibly closed by END) and its score, the sum of the
  log-probabilities of its choices;
- every step expands each live hypothesis with each allowed choice and keeps the `beam_size` best expansions of the
  document; expansions that chose END are finished, the others stay live;
- allowed choices: sentences not yet chosen (or chosen before but `repeatable`: a content planner's sentence break
  and team names), that share no trigram with a chosen one (`trigram_blocking`) and fit the word budget
  (`max_words`, whitespace words); END once the summary has `min_sentences` sentences (1: never as the
  first choice), or whenever no sentence is allowed;
- with a `sentence_break` unit (a content planner's ``<EOS>``), a repeatable unit comes back only in a later plan
  sentence, and a break only closes a sentence that names a unit: every oracle plan sentence of the Rotowire data
  names each unit once, and a planner that may repeat team names freely loops on one of them;
- `sentence_break_bias` is added to the sentence break's logit before the softmax (as a `transformers` logit-bias
  processor does; the probabilities reported are then those of the biased distribution): a negative bias lengthens
  plan sentences where greedy search breaks after every unit, because the break, a fifth of all oracle targets, is
  the single most probable unit whenever the model spreads its mass over the records;
- `end_bias` is added to the end-of-summary unit's logit in the same way: a negative bias lengthens summaries (the
  length a model learned on one kind of text, say lowercased news, recalibrated for another);
- at most `num_sentences` sentences: with `end_at_limit` (the paper's rule: every hypothesis is scored on a complete
  summary) a hypothesis that reaches the limit takes one more step in which END is its only choice, so it pays for
  its end as finished ones do; without it, the search stops after `num_sentences` choices and such hypotheses are kept
  as they are, cut without END;
- search also stops when no hypothesis is live, or as soon as the best finished hypothesis scores at least as high as
  every live one: log-probabilities are never positive, so a live hypothesis can only lose score, and stopping then
  changes no result.
The best finished hypothesis is returned (ties go to the one found first).

Model-agnostic: the model is reached through `score_rows(document_indices, prefixes) -> logits [rows, width]`, where
column `width - 1` is END and the columns before it are the document's sentences. Copied flat into
exported repos: imports only the standard library, torch and the (also copied) text module.
"""

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch

from ..text.sentences import trigrams


@dataclass(frozen=True)
class Step:
    """One choice of a hypothesis: `sentence` (None for END), the model's `probability` of it and the hypothesis's
    `score` after it (sum of log-probabilities so far); `distribution` is the whole step distribution over
    ``[sentences...; END]`` when requested."""

    sentence: int | None
    probability: float
    score: float
    distribution: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Hypothesis:
    steps: tuple[Step, ...] = ()

    @property
    def score(self) -> float:
        return self.steps[-1].score if self.steps else 0.0

    @property
    def sentences(self) -> tuple[int, ...]:
        """Chosen sentence indices in selection order."""
        return tuple(step.sentence for step in self.steps if step.sentence is not None)

    @property
    def ended(self) -> bool:
        return bool(self.steps) and self.steps[-1].sentence is None


def _check_positive(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer{' or None' if allow_none else ''}, got {value!r}")


class _DocumentSearch:
    """The beam of one document and the facts about its sentences that the constraints need."""

    def __init__(
        self,
        sentences: Sequence[str],
        trigram_blocking: bool,
        min_sentences,
        num_sentences,
        max_words,
        repeatable,
        sentence_break=None,
    ):
        # what the document offers; `num_sentences`: the summary's most
        self.num_document_sentences = len(sentences)
        self.repeatable = frozenset(repeatable)
        self.sentence_break = sentence_break
        self.min_sentences = min_sentences
        self.num_sentences = num_sentences
        self.words = [len(sentence.split()) for sentence in sentences]
        self.trigrams = [trigrams(sentence) for sentence in sentences] if trigram_blocking else None
        self.max_words = max_words
        self.live = [Hypothesis()] if sentences else []
        self.finished: list[Hypothesis] = []

    def allowed_sentences(self, hypothesis: Hypothesis) -> list[int]:
        chosen = hypothesis.sentences
        if len(chosen) >= self.num_sentences:
            return []
        used_words = sum(self.words[i] for i in chosen)
        chosen_trigrams = set().union(*(self.trigrams[i] for i in chosen)) if self.trigrams and chosen else set()
        allowed = [
            index
            for index in range(self.num_document_sentences)
            if (index not in chosen or index in self.repeatable)
            and (self.max_words is None or used_words + self.words[index] <= self.max_words)
            and (not chosen_trigrams or chosen_trigrams.isdisjoint(self.trigrams[index]))
        ]
        if self.sentence_break is None:
            return allowed
        breaks = [position for position, index in enumerate(chosen) if index == self.sentence_break]
        current = set(chosen[breaks[-1] + 1 :] if breaks else chosen)  # the plan sentence being built
        return [index for index in allowed if index not in current and (index != self.sentence_break or current)]

    def done(self) -> bool:
        if not self.live:
            return True
        best_finished = max((h.score for h in self.finished), default=None)
        return best_finished is not None and best_finished >= max(h.score for h in self.live)

    def best(self) -> Hypothesis:
        candidates = self.finished + self.live
        return max(candidates, key=lambda h: h.score) if candidates else Hypothesis()


def stepwise_beam_search(
    score_rows: Callable[[list[int], list[tuple[int, ...]]], torch.Tensor],
    documents: Sequence[Sequence[str]],
    beam_size: int,
    num_sentences: int,
    trigram_blocking: bool = False,
    min_sentences: int = 1,
    max_words: int | None = None,
    return_distributions: bool = False,
    end_at_limit: bool = True,
    repeatable: Sequence[Collection[int]] | None = None,
    sentence_break: int | None = None,
    sentence_break_bias: float = 0.0,
    end_bias: float = 0.0,
) -> list[Hypothesis]:
    """Decode a batch of documents (each a list of sentence strings) together; returns the best hypothesis of each.

    `score_rows(document_indices, prefixes)` scores one row per live hypothesis of every unfinished document: the
    index of its document in `documents` and its chosen sentences in selection order. `repeatable`: per document,
    the sentence indices that may be chosen again (default: none); `sentence_break`: the index of a planner's
    sentence-break unit in every document (default: none), whose logit `sentence_break_bias` shifts. See the module
    docstring for the search and its constraints. `beam_size` and `num_sentences` have no defaults here: the
    pipeline passes the model config's (`summarizer_config.DEFAULT_SUMMARY_SENTENCES` unless set).
    """
    _check_positive("beam_size", beam_size)
    _check_positive("num_sentences", num_sentences)
    _check_positive("min_sentences", min_sentences)
    _check_positive("max_words", max_words, allow_none=True)
    if repeatable is None:
        repeatable = [()] * len(documents)
    if len(repeatable) != len(documents):
        raise ValueError(f"repeatable has {len(repeatable)} entries for {len(documents)} documents")
    if sentence_break_bias and sentence_break is None:
        raise ValueError("sentence_break_bias needs a sentence_break unit (a content planner's)")
    searches = [
        _DocumentSearch(sentences, trigram_blocking, min_sentences, num_sentences, max_words, again, sentence_break)
        for sentences, again in zip(documents, repeatable)
    ]
    for _ in range(num_sentences + int(end_at_limit)):
        active = [(d, search) for d, search in enumerate(searches) if not search.done()]
        if not active:
            break
        rows = [(d, hypothesis) for d, search in active for hypothesis in search.live]
        logits = score_rows([d for d, _ in rows], [hypothesis.sentences for _, hypothesis in rows]).float()
        if sentence_break_bias or end_bias:
            logits = logits.clone()
            if sentence_break_bias:
                logits[:, sentence_break] += sentence_break_bias
            logits[:, -1] += end_bias
        log_probs = torch.log_softmax(logits, dim=-1)
        row = 0
        for d, search in active:
            expansions = []
            for hypothesis in search.live:
                row_log_probs = log_probs[row].tolist()
                row += 1
                end_column = len(row_log_probs) - 1
                if end_column < search.num_document_sentences:
                    raise ValueError(
                        f"the model scored {end_column} sentences and END, but document {d} has "
                        f"{search.num_document_sentences}"
                    )
                distribution = tuple(math.exp(value) for value in row_log_probs) if return_distributions else None
                choices = search.allowed_sentences(hypothesis)
                if len(hypothesis.steps) >= search.min_sentences or not choices:
                    choices = choices + [end_column]
                for choice in choices:
                    score = hypothesis.score + row_log_probs[choice]
                    step = Step(
                        sentence=None if choice == end_column else choice,
                        probability=math.exp(row_log_probs[choice]),
                        score=score,
                        distribution=distribution,
                    )
                    expansions.append(Hypothesis(hypothesis.steps + (step,)))
            # sorted() is stable: equal scores keep the order of generation (beam rank, then sentence index, END last)
            kept = sorted(expansions, key=lambda h: -h.score)[:beam_size]
            search.live = [h for h in kept if not h.ended]
            search.finished.extend(h for h in kept if h.ended)
    return [search.best() for search in searches]


__all__ = ["Hypothesis", "Step", "stepwise_beam_search"]
