"""Sentence splitting, sentence selection and summary statistics shared by the whole package.

This module is copied flat into exported Hub repositories, so it imports only the standard library and
blingfire, never other sumformers modules.

Sentences: cased text is split with blingfire, lowercased text (no capital letter to read boundaries from) with the
rules of `split_lowercase_sentences`; both were measured against hand-checked boundaries of development CNN/DM
articles (docs/sentence_splitting.md, `benchmarks/sentence_splitting.py`).

Word tokens here (for trigram blocking, novelty and redundancy) are lowercased runs of word characters plus
single punctuation marks, which approximates the pre-tokenized, lowercased text PreSumm worked on.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
import warnings
from collections.abc import Sequence

import blingfire

__all__ = [
    "split_sentences",
    "split_lowercase_sentences",
    "word_windows",
    "to_sentences",
    "lead_k",
    "word_tokens",
    "trigrams",
    "has_trigram_overlap",
    "select_sentences",
    "novel_ngram_ratio",
    "source_facts",
    "summary_length_stats",
    "has_repeated_trigram",
    "strip_transcript_markup",
    "document_texts",
    "speaker_turn",
    "is_transcript",
    "is_filler",
    "meeting_units",
]

# A line break always ends a sentence: text is split line by line.
_LINE_BREAK_RE = re.compile(r"[\r\n]+")
# blingfire encodes its input as UTF-8, which a lone surrogate cannot be: such characters are read as "?" (one
# character for one, so its offsets still fit the original line).
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_WORD_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"\S+")
# Meeting transcripts (QMSum) mark non-speech events as {vocalsound}, {disfmarker}, ...
_TRANSCRIPT_MARKUP_RE = re.compile(r"\{\w+\}")
# Lowercased text (the 40k CNN/DM set) hides the capital letters cased splitters read boundaries from (on it blingfire
# finds 7% of the boundaries, pysbd 65%). There a boundary is end punctuation, closing quotes or brackets, then
# whitespace, unless the word before the full stop is an abbreviation. The word before the punctuation is captured
# with it, so that checking it needs no look back along the line.
_LOWERCASE_BOUNDARY_RE = re.compile(r"(\S*?)([.!?]+)[\"'\u2019\u201d)\]]*\s+")
# Titles, ranks and other abbreviations that news text writes before a name or a number, rarely at a sentence end.
_NON_FINAL_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft gen gov sen rep lt col sgt capt cmdr adm maj cpl pvt rev hon pres supt det insp "
    "vs v inc corp co jan feb aug sept sep oct nov dec no nos vol approx dept univ ave blvd".split()
)
# Abbreviations that stand before a number only ("no. 1", "jan. 5"); before a word they end the sentence.
_BEFORE_NUMBER_ABBREVIATIONS = frozenset("no nos vol jan feb aug sept sep oct nov dec".split())
# A single letter is an initial ("george w. bush"): never a sentence end.
_INITIAL_RE = re.compile(r"[a-z]")
# u.s., p.m., ph.d.: parts of one or two letters joined by full stops. They end sentences too ("moved to the u.s.")
# and lowercased text cannot show where: one is read as a sentence end when an opening quote or one of these words
# follows, words that in the first 8,000 `train_large` articles never follow "u.s.", "u.k.", "u.n." or "d.c."
# inside a sentence.
_INITIALISM_RE = re.compile(r"(?:[a-z]{1,2}\.)+[a-z]{1,2}")
_SENTENCE_STARTERS = frozenset("the he she it we his her their".split())
# A question or exclamation in quotes followed by its speech tag is one sentence: '"are you ok?" she asked.',
# '"what?" elizaldo said last week.'. A tag is short: a speech verb as its first or second word, at most five words
# before the next punctuation mark ('"...everything?" camus said many people are afraid when ...' is a new sentence).
_QUESTION_IN_QUOTES_RE = re.compile(r"[?!]+[\"'\u2019\u201d]+\s*$")
_CLAUSE_RE = re.compile(r"[^.,;:!?\"\u201c\u201d]*")
_SPEECH_TAG_WORDS = 5
_SPEECH_VERBS = frozenset(
    "said says asked asks added adds told tells wrote writes replied replies shouted yelled cried whispered "
    "exclaimed insisted recalled explained continued joked laughed".split()
)
# A "sentence" longer than this has no usable boundary: speech-recognition output without full stops, or a stretch
# a splitter merged. On the 1,000 raw CNN validation articles pysbd (the splitter before blingfire) merged such
# stretches in 218 articles, up to 630 words; on the lowercased ones 0.03% of sentences passed 80 words.
MAX_SENTENCE_WORDS = 80
# What is left without a boundary is read as windows of at most this many words: the median news sentence, so that a
# summary of k windows is as long as one of k sentences.
WINDOW_WORDS = 20
NO_BOUNDARY_WARNING = (
    f"Text without sentence boundaries: stretches of more than {MAX_SENTENCE_WORDS} words were read as windows of "
    f"at most {WINDOW_WORDS} words."
)


def _is_visible(sentence: str) -> bool:
    """True when the sentence has a character other than whitespace, control, format (zero-width) or surrogate."""
    return any(not ch.isspace() and unicodedata.category(ch)[0] != "C" for ch in sentence)


def _split_cased_line(line: str) -> list[str]:
    """blingfire's sentences of `line`, cut from the line itself between its sentence ends, so that no character
    is lost (blingfire drops the invisible ones between sentences)."""
    _, spans = blingfire.text_to_sentences_and_offsets(_SURROGATE_RE.sub("?", line))
    ends = [end for _, end in spans[:-1]]
    return [line[start:end] for start, end in zip([0, *ends], [*ends, len(line)])]


def _is_boundary(line: str, match: re.Match) -> bool:
    """Whether the end punctuation of `match` ends a sentence of lowercased `line`."""
    if match.group(2) != ".":
        return not _is_speech_tag(line, match.end())
    word = match.group(1).lstrip("\"'(\u201c\u2018[").lower()  # lower: `_bounded` runs this on cased text too
    if word in _BEFORE_NUMBER_ABBREVIATIONS:
        return not line[match.end() : match.end() + 1].isdigit()
    if word in _NON_FINAL_ABBREVIATIONS or _INITIAL_RE.fullmatch(word):
        return False
    if _INITIALISM_RE.fullmatch(word):
        following = line[match.end() :].split(None, 1)[:1] or [""]
        return following[0][:1] in "\"'\u2018\u201c" or following[0].lower() in _SENTENCE_STARTERS
    return True


def _is_speech_tag(line: str, position: int) -> bool:
    """Whether the text before `position` ends a quoted question or exclamation that the words after it attribute
    (`"are you ok?" she asked`)."""
    if not _QUESTION_IN_QUOTES_RE.search(line[:position]):
        return False
    clause = _CLAUSE_RE.match(line, position).group().lower().split()
    return len(clause) <= _SPEECH_TAG_WORDS and any(word in _SPEECH_VERBS for word in clause[:2])


def _split_lowercase_line(line: str) -> list[str]:
    sentences, start = [], 0
    for match in _LOWERCASE_BOUNDARY_RE.finditer(line):
        if _is_boundary(line, match):
            sentences.append(line[start : match.end()])
            start = match.end()
    sentences.append(line[start:])
    return sentences


def _rejoin(pieces: list[str]) -> list[str]:
    """`pieces` with the cuts a cased splitter makes inside a sentence joined again: after a quoted question that
    its speech tag follows, and after a title standing alone ("Mr." of "Mr. Smith agreed.", which blingfire cuts
    off when it opens a sentence)."""
    joined = [pieces[0]]
    for piece in pieces[1:]:
        previous = joined[-1]
        lone_title = previous.strip().rstrip(".").lower() in _NON_FINAL_ABBREVIATIONS and previous.strip()[-1:] == "."
        if lone_title or _is_speech_tag(previous + piece, len(previous)):
            joined[-1] = previous + piece
        else:
            joined.append(piece)
    return joined


def split_lowercase_sentences(text: str) -> list[str]:
    """Split lowercased English text (no capital letters to read boundaries from) into sentences: at end
    punctuation followed by whitespace, except after abbreviations (mr., initials, "no." before a number, "u.s."
    unless a sentence opener follows) and inside a quoted question that a speech tag follows.
    Stripped and filtered as `split_sentences`; line breaks always end a sentence."""
    if not isinstance(text, str):
        raise TypeError(f"split_lowercase_sentences expects a str, got {type(text).__name__}")
    return _split(text, _split_lowercase_line)


def split_sentences(text: str) -> list[str]:
    """Split raw English text into sentences with blingfire; text without any capital letter (a lowercased corpus)
    with `split_lowercase_sentences`, since blingfire reads boundaries from capitals.

    Sentences are stripped of surrounding whitespace and sentences without any visible character are
    dropped; empty or whitespace-only text gives ``[]``. Line breaks always end a sentence.
    """
    if not isinstance(text, str):
        raise TypeError(f"split_sentences expects a str, got {type(text).__name__}")
    lowercase = any(ch.isalpha() for ch in text) and not any(ch.isupper() for ch in text)
    return _split(text, _split_lowercase_line if lowercase else _split_cased_line)


def _split(text: str, segment_line) -> list[str]:
    sentences = []
    for line in _LINE_BREAK_RE.split(text):
        if not line.strip():
            continue
        for sentence in _rejoin(segment_line(line)):
            sentence = sentence.strip()
            if _is_visible(sentence):
                sentences.extend(_bounded(sentence))
    return sentences


def _bounded(sentence: str) -> list[str]:
    """`sentence` as pieces of at most `MAX_SENTENCE_WORDS` words: an over-long one split again at end punctuation
    (the lowercase rule, which needs no capitals), then what is still too long cut into `word_windows`."""
    if len(sentence.split()) <= MAX_SENTENCE_WORDS:
        return [sentence]
    pieces = []
    for piece in _split_lowercase_line(sentence):
        piece = piece.strip()
        if not _is_visible(piece):
            continue
        if len(piece.split()) > MAX_SENTENCE_WORDS:
            warnings.warn(NO_BOUNDARY_WARNING, stacklevel=2)
            pieces.extend(word_windows(piece, WINDOW_WORDS))
        else:
            pieces.append(piece)
    return pieces


def word_windows(text: str, max_words: int) -> list[str]:
    """`text` cut between words into the fewest windows of at most `max_words` words, of sizes as equal as they can
    be (what stands in for sentences where the text has no boundary); whitespace inside a window is kept."""
    spans = [match.span() for match in _WORD.finditer(text)]
    count = math.ceil(len(spans) / max_words)
    windows = []
    for index in range(count):
        first, last = len(spans) * index // count, len(spans) * (index + 1) // count - 1
        windows.append(text[spans[first][0] : spans[last][1]])
    return windows


def to_sentences(summary: str) -> list[str]:
    """Sentences of a summary: its non-empty lines when it has line breaks (the data marks sentences with
    ``"\\n"``), else ``split_sentences(summary)``."""
    if not isinstance(summary, str):
        raise TypeError(f"to_sentences expects a str, got {type(summary).__name__}")
    if "\n" in summary:
        return [line.strip() for line in summary.split("\n") if _is_visible(line)]
    return split_sentences(summary)


def lead_k(sentences: Sequence[str], num_sentences: int = 3) -> list[int]:
    """Indices of the first ``num_sentences`` sentences (fewer when the document is shorter): the Lead-k baseline."""
    if isinstance(num_sentences, bool) or not isinstance(num_sentences, int) or num_sentences < 0:
        raise ValueError(f"num_sentences must be a non-negative int, got {num_sentences!r}")
    return list(range(min(num_sentences, len(sentences))))


def word_tokens(text: str) -> list[str]:
    """Lowercased word and punctuation tokens."""
    return _WORD_TOKEN_RE.findall(text.lower())


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def trigrams(text: str) -> set[tuple[str, str, str]]:
    """Set of lowercased word trigrams of ``text``."""
    return set(_ngrams(word_tokens(text), 3))


def has_trigram_overlap(candidate: str, selected: Sequence[str]) -> bool:
    """PreSumm's trigram blocking test: does ``candidate`` share a trigram with any selected sentence?"""
    candidate_trigrams = trigrams(candidate)
    return any(not candidate_trigrams.isdisjoint(trigrams(sentence)) for sentence in selected)


def select_sentences(
    ranked_indices: Sequence[int],
    sentences: Sequence[str],
    num_sentences: int,
    trigram_blocking: bool = False,
    max_words: int | None = None,
) -> list[int]:
    """Take up to ``num_sentences`` sentence indices in rank order, skipping repeats, with ``trigram_blocking``
    candidates that share a trigram with an already selected sentence, and with ``max_words`` candidates that would
    take the summary past that many whitespace words (the stepwise decoder's budget rule).

    Returns the indices in selection (rank) order; callers sort them to print the summary in document order.
    """
    if isinstance(num_sentences, bool) or not isinstance(num_sentences, int) or num_sentences < 0:
        raise ValueError(f"num_sentences must be a non-negative int, got {num_sentences!r}")
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1):
        raise ValueError(f"max_words must be a positive int or None, got {max_words!r}")
    selected: list[int] = []
    selected_trigrams: set[tuple[str, str, str]] = set()
    words = 0
    for index in ranked_indices:
        if len(selected) >= num_sentences:
            break
        if not 0 <= index < len(sentences):
            raise ValueError(f"sentence index {index} out of range for {len(sentences)} sentences")
        if index in selected:
            continue
        length = len(sentences[index].split())
        if max_words is not None and words + length > max_words:
            continue
        if trigram_blocking:
            candidate_trigrams = trigrams(sentences[index])
            if not candidate_trigrams.isdisjoint(selected_trigrams):
                continue
            selected_trigrams |= candidate_trigrams
        selected.append(index)
        words += length
    return selected


def novel_ngram_ratio(summary: str, document: str, n: int) -> float:
    """Share of the summary's n-gram occurrences (with repeats) that never occur in the document.

    A summary with no n-gram (fewer than ``n`` tokens) gives 0.0.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    summary_ngrams = _ngrams(word_tokens(summary), n)
    if not summary_ngrams:
        return 0.0
    document_ngrams = set(_ngrams(word_tokens(document), n))
    return sum(gram not in document_ngrams for gram in summary_ngrams) / len(summary_ngrams)


# A word, or a number with its inner separators ("1,500", "3.5", "10:30").
_FACT_WORD_RE = re.compile(r"[^\W_]+(?:[.,:]\d+)*")


def _fact_form(word: str) -> str:
    return word.lower().replace(",", "")


def source_facts(summary: str, document: str) -> tuple[int, int]:
    """How many of the facts `summary` states appear in `document`, and how many it states. A fact is a number (a
    word with a digit, thousands commas ignored: "1,500" is "1500") or a capitalised word that does not open its
    sentence (a name or a place; a lowercased summary states numbers only); it appears when the document has the same
    word, case aside. Pretrained decoders invent such facts; copying models cannot."""
    document_words = {_fact_form(word) for word in _FACT_WORD_RE.findall(document)}
    stated = []
    for sentence in to_sentences(summary):
        for position, word in enumerate(_FACT_WORD_RE.findall(sentence)):
            if any(character.isdigit() for character in word) or (position > 0 and word[0].isupper()):
                stated.append(_fact_form(word))
    return sum(word in document_words for word in stated), len(stated)


def summary_length_stats(summaries: Sequence[str]) -> dict[str, float]:
    """Mean and median length of summaries in whitespace words and in sentences (``to_sentences``)."""
    if not summaries:
        raise ValueError("summary_length_stats needs at least one summary")
    words = [len(summary.split()) for summary in summaries]
    sentences = [len(to_sentences(summary)) for summary in summaries]
    return {
        "num_summaries": len(summaries),
        "mean_words": statistics.fmean(words),
        "median_words": float(statistics.median(words)),
        "mean_sentences": statistics.fmean(sentences),
        "median_sentences": float(statistics.median(sentences)),
    }


def has_repeated_trigram(summary_sentences: Sequence[str]) -> bool:
    """Redundancy check: does a trigram occur in two different sentences of the summary?"""
    seen: set[tuple[str, str, str]] = set()
    for sentence in summary_sentences:
        sentence_trigrams = trigrams(sentence)
        if not sentence_trigrams.isdisjoint(seen):
            return True
        seen |= sentence_trigrams
    return False


def strip_transcript_markup(text: str) -> str:
    """`text` without `{vocalsound}`-style transcript markup; spaces are collapsed within each line and the line
    breaks (one speaker turn a line) kept."""
    return "\n".join(" ".join(_TRANSCRIPT_MARKUP_RE.sub(" ", line).split()) for line in text.split("\n"))


def document_texts(value, strip_markup: bool = False) -> list[str]:
    """A dataset's text field (one string, or a list of documents) as a list of document texts, transcript markup
    removed with `strip_markup`."""
    texts = list(value) if isinstance(value, (list, tuple)) else [value or ""]
    return [strip_transcript_markup(text) if strip_markup else text for text in texts]


# Meeting transcripts hold one turn a line, "Speaker: utterance" (QMSum: "Grad A: ...", "Project Manager: ...",
# "The Chair (Hon. Anthony Rota (Nipissing, Lib.)): ..."): a tag of at most 80 characters without a colon. The
# utterance may be empty ("Marketing: {vocalsound}" once markup is stripped).
_SPEAKER_TURN_RE = re.compile(r"([^\s:][^:\n]{0,79}?):(?:\s+(.*))?")
# A text is a transcript when at least this share of its non-blank lines (and at least 3 of them) are speaker turns.
TRANSCRIPT_TURN_SHARE = 0.8
# Words of backchannels and discourse markers: a unit of nothing else ("OK ,", "Yeah . Yeah .", "Mm - hmm .",
# "Oh , I see .", "Thank you .") carries no content. Words are runs of letters or digits, so "mm-hmm" is mm + hmm
# and "'kay" is kay; "that 's right" is that + s + right.
FILLER_WORDS = frozenset(
    "yeah yes yep yup yeh ya no nope nah ok okay kay mm mmm mhm hmm hm huh uh um uhm ah aha oh ooh eh er erm "
    "right alright sure so and but or well wow cool great good fine exactly true really indeed thanks thank you "
    "hi hello bye sorry anyway oops i see mean know that s it".split()
)
_UNIT_WORD_RE = re.compile(r"[^\W_]+")
# Meeting units shorter than this many words (speaker tag aside) are joined to a neighbouring sentence of the same
# turn. Chosen on QMSum development meetings (docs/hetformer.md): 1, no joining; 4 and 8 scored lower, 12 higher
# with summaries 1.8 times as long.
MEETING_MIN_UNIT_WORDS = 1


def speaker_turn(line: str) -> tuple[str, str] | None:
    """`(speaker, utterance)` of a transcript line "Speaker: utterance", or None for a line without a speaker tag."""
    match = _SPEAKER_TURN_RE.fullmatch(line.strip())
    return (match.group(1), match.group(2) or "") if match else None


def is_transcript(text: str) -> bool:
    """Whether `text` reads as a meeting transcript: at least 3 non-blank lines, and at least
    `TRANSCRIPT_TURN_SHARE` of them speaker turns (`speaker_turn`)."""
    lines = [line for line in text.split("\n") if line.strip()]
    turns = sum(speaker_turn(line) is not None for line in lines)
    return len(lines) >= 3 and turns >= TRANSCRIPT_TURN_SHARE * len(lines)


def _content_words(unit: str) -> list[str]:
    """The lowercased words of `unit` without its speaker tag."""
    turn = speaker_turn(unit)
    return _UNIT_WORD_RE.findall((turn[1] if turn else unit).lower())


def is_filler(unit: str) -> bool:
    """Whether `unit` (a sentence, with or without a speaker tag) is filler: no word at all, or only
    `FILLER_WORDS` ("Grad A: OK ," "Yeah . Yeah ." "Mm - hmm ."). Such a unit is never a summary sentence."""
    return all(word in FILLER_WORDS for word in _content_words(unit))


def _turn_units(sentences: list[str], min_words: int) -> list[str]:
    """The units of one turn: its sentences without filler, each shorter than `min_words` words joined to the next
    one (the turn's last short ones to the unit before them; a turn of short sentences only stays one unit)."""
    units, pending = [], []
    for sentence in sentences:
        if is_filler(sentence):
            continue
        pending.append(sentence)
        if sum(len(_UNIT_WORD_RE.findall(piece)) for piece in pending) >= min_words:
            units.append(" ".join(pending))
            pending = []
    if pending:
        if units:
            units[-1] = " ".join([units[-1], *pending])
        else:
            units.append(" ".join(pending))
    return units


def meeting_units(text: str, min_words: int = MEETING_MIN_UNIT_WORDS, speaker_tags: bool = True) -> list[str]:
    """The summary units of a meeting transcript (one turn a line, see `is_transcript`): each turn split into
    sentences (`split_sentences`), filler sentences (`is_filler`) dropped, sentences of fewer than `min_words` words
    joined to a neighbour in the same turn, so that a turn of only filler gives no unit and a long turn several.
    With `speaker_tags` the first unit of each turn keeps its "Speaker: " tag as context (what the model reads and
    the summary shows); the tag never counts as content (`is_filler`, `min_words`)."""
    units = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        turn = speaker_turn(line)
        speaker, utterance = turn if turn else (None, line)
        turn_units = _turn_units(split_sentences(utterance), min_words)
        if turn_units and speaker and speaker_tags:
            turn_units[0] = f"{speaker}: {turn_units[0]}"
        units.extend(turn_units)
    return units
