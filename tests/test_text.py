import pysbd
import pytest

from sumformers.text import sentences as text
from sumformers.text.sentences import (
    has_repeated_trigram,
    has_trigram_overlap,
    lead_k,
    novel_ngram_ratio,
    select_sentences,
    source_facts,
    split_sentences,
    summary_length_stats,
    to_sentences,
    trigrams,
)

NEWS = (
    'Mr. Smith went to Washington on Jan. 5. He met Dr. Jones at 3 p.m. "It was great," he said. '
    "The U.S. team won 3-1! Did they celebrate? Yes."
)


def _plain_pysbd(raw):
    return [s.strip() for s in pysbd.Segmenter(language="en", clean=False).segment(raw) if s.strip()]


def test_split_sentences_matches_pysbd_on_news_text():
    expected = _plain_pysbd(NEWS)
    assert split_sentences(NEWS) == expected
    assert expected[0] == "Mr. Smith went to Washington on Jan. 5."
    assert expected[1] == 'He met Dr. Jones at 3 p.m. "It was great," he said.'
    assert len(expected) == 5


def test_split_sentences_line_breaks_end_sentences_like_pysbd():
    raw = "Speaker A: yeah okay\nSpeaker B: right so um\n\n\nSpeaker A: Yes. Then we go.\r\nEnd"
    assert split_sentences(raw) == _plain_pysbd(raw)
    assert split_sentences(raw) == [
        "Speaker A: yeah okay",
        "Speaker B: right so um",
        "Speaker A: Yes.",
        "Then we go.",
        "End",
    ]


@pytest.mark.parametrize("raw", ["", "   ", "\n\n\t", "\u200b", "\x00 \u200b\n\ufeff"])
def test_split_sentences_empty_or_invisible_text(raw):
    assert split_sentences(raw) == []


def test_split_sentences_odd_unicode_does_not_crash():
    raw = "Nul\x00here. Zero\u200bwidth. Lone \ud800 surrogate. \u200b \ufeff Last"
    expected = ["Nul\x00here.", "Zero\u200bwidth.", "Lone \ud800 surrogate.", "\u200b \ufeff Last"]
    assert split_sentences(raw) == expected


@pytest.mark.parametrize("bad", [None, 3, ["a. b."], b"bytes."])
def test_split_sentences_rejects_non_str(bad):
    with pytest.raises(TypeError, match="expects a str"):
        split_sentences(bad)


def test_long_line_windowing_keeps_the_sentences(monkeypatch):
    long_line = " ".join(f"Sentence number {i} talks about item {i % 7}." for i in range(120))
    expected = _plain_pysbd(long_line)
    assert len(expected) == 120
    monkeypatch.setattr(text, "_MAX_SEGMENT_CHARS", 300)
    assert split_sentences(long_line) == expected


def test_long_line_without_spaces_is_cut_into_windows(monkeypatch):
    monkeypatch.setattr(text, "_MAX_SEGMENT_CHARS", 100)
    assert split_sentences("X" * 250) == ["X" * 100, "X" * 100, "X" * 50]


def test_to_sentences_uses_lines_when_present_else_pysbd():
    assert to_sentences("First highlight .\n\nSecond one . Still second .\n") == [
        "First highlight .",
        "Second one . Still second .",
    ]
    assert to_sentences("One sentence. Another one.") == ["One sentence.", "Another one."]


def test_lead_k():
    assert lead_k(["a", "b", "c", "d"]) == [0, 1, 2]
    assert lead_k(["a", "b"], num_sentences=3) == [0, 1]
    assert lead_k(["a", "b"], num_sentences=0) == []
    with pytest.raises(ValueError):
        lead_k(["a"], num_sentences=-1)


def test_trigrams_are_lowercased_word_and_punctuation_tokens():
    assert trigrams("The Cat sat, happily") == {
        ("the", "cat", "sat"),
        ("cat", "sat", ","),
        ("sat", ",", "happily"),
    }
    assert trigrams("two words") == set()


def test_has_trigram_overlap_presumm_block_tri():
    selected = ["The cat sat on the mat .", "Dogs bark ."]
    assert has_trigram_overlap("Yesterday THE CAT SAT down .", selected)
    assert not has_trigram_overlap("The cat slept on a mat .", selected)
    assert not has_trigram_overlap("The cat sat", [])


def test_select_sentences_rank_order_and_blocking():
    sentences = [
        "the cat sat on the mat",  # 0
        "a dog ran in the park",  # 1
        "yesterday the cat sat down",  # 2: shares "the cat sat" with 0
        "birds sing",  # 3
    ]
    ranking = [2, 0, 1, 3]
    assert select_sentences(ranking, sentences, num_sentences=3) == [2, 0, 1]
    assert select_sentences(ranking, sentences, num_sentences=3, trigram_blocking=True) == [2, 1, 3]
    assert select_sentences([1, 1, 0], sentences, num_sentences=2) == [1, 0]
    assert select_sentences(ranking, sentences, num_sentences=0) == []
    with pytest.raises(ValueError, match="out of range"):
        select_sentences([7], sentences, num_sentences=1)


def test_select_sentences_word_budget_skips_sentences_that_do_not_fit():
    sentences = ["the cat sat on the mat", "a dog ran in the park", "yesterday the cat sat down", "birds sing"]
    ranking = [2, 0, 1, 3]  # 5, 6, 6 and 2 words
    assert select_sentences(ranking, sentences, num_sentences=3, max_words=12) == [2, 0]  # 1 (17) and 3 (13) do not fit
    assert select_sentences(ranking, sentences, num_sentences=3, max_words=13) == [2, 0, 3]
    assert select_sentences(ranking, sentences, num_sentences=3, max_words=4) == [3]
    assert select_sentences(ranking, sentences, num_sentences=3, max_words=11, trigram_blocking=True) == [2, 1]
    with pytest.raises(ValueError, match="max_words"):
        select_sentences(ranking, sentences, num_sentences=3, max_words=0)


def test_source_facts_counts_the_numbers_and_names_found_in_the_article():
    document = "Cayman Naib, 13, was last seen on Wednesday in Newtown Square. Police searched 1,500 acres."
    # stated: Naib (not first word), 13, Wednesday, 1500, Monday, Philadelphia, 2,000 -> 2000; "Police" opens its
    # sentence, "Cayman" too
    summary = "Cayman Naib, 13, vanished on Wednesday.\nPolice searched 1500 acres on Monday near Philadelphia.\n" \
              "Cayman's family offered 2,000 dollars."
    assert source_facts(summary, document) == (4, 7)  # Naib, 13, Wednesday, 1500 appear
    assert source_facts("no facts here at all.", document) == (0, 0)
    assert source_facts("police searched 1,500 acres over 3 days.", document) == (1, 2)  # lowercased: numbers only


def test_novel_ngram_ratio_hand_computed():
    document = "The cat sat on the mat."
    summary = "The cat sat quietly."
    # unigrams: the cat sat quietly . -> only "quietly" is novel: 1/5
    assert novel_ngram_ratio(summary, document, 1) == pytest.approx(1 / 5)
    # bigrams: (the cat) (cat sat) (sat quietly) (quietly .) -> 2/4 novel
    assert novel_ngram_ratio(summary, document, 2) == pytest.approx(2 / 4)
    assert novel_ngram_ratio("cat", document, 2) == 0.0
    with pytest.raises(ValueError):
        novel_ngram_ratio(summary, document, 0)


def test_summary_length_stats_hand_computed():
    stats = summary_length_stats(["one two three .\nfour five .", "a b c d e f g h i j", "Hi there. Bye."])
    # words: 7, 10, 3; sentences: 2 (lines), 1, 2 (pysbd)
    assert stats == {
        "num_summaries": 3,
        "mean_words": pytest.approx(20 / 3),
        "median_words": 7.0,
        "mean_sentences": pytest.approx(5 / 3),
        "median_sentences": 2.0,
    }
    with pytest.raises(ValueError):
        summary_length_stats([])


def test_has_repeated_trigram():
    assert has_repeated_trigram(["The cat sat on the mat .", "Then the cat sat again ."])
    # a trigram repeated inside one sentence is not cross-sentence redundancy
    assert not has_repeated_trigram(["the cat sat and the cat sat", "dogs bark loudly"])
    assert not has_repeated_trigram([])


# Lowercased text (the 40k CNN/DM set): pysbd reads boundaries from capitals and merges these sentences.
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "the u.s. military said on friday. mr. smith, 45, agreed. it cost $3.5 million!",
            ["the u.s. military said on friday.", "mr. smith, 45, agreed.", "it cost $3.5 million!"],
        ),
        (
            '"we won," he said. "it was great." then he left... the end',
            ['"we won," he said.', '"it was great."', "then he left...", "the end"],
        ),
        (
            "he is ranked no. 1 in the world. the answer was no. he left.",
            ["he is ranked no. 1 in the world.", "the answer was no.", "he left."],
        ),
        (
            "george w. bush met dr. jones at 10 a.m. on jan. 5 in washington. staff sgt. tyrone l. hadnott spoke.",
            ["george w. bush met dr. jones at 10 a.m. on jan. 5 in washington.", "staff sgt. tyrone l. hadnott spoke."],
        ),
        ("it ended (after the vote.) did it?! yes.\nnew line", ["it ended (after the vote.)", "did it?!", "yes.",
                                                                  "new line"]),
    ],
)
def test_lowercase_text_is_split_at_end_punctuation_except_after_abbreviations(raw, expected):
    assert split_sentences(raw) == expected
    assert text.split_lowercase_sentences(raw) == expected


def test_lowercase_segmentation_finds_boundaries_pysbd_misses_and_cased_text_keeps_pysbd():
    lowered = NEWS.lower()
    # pysbd on the lowercased news merges "the u.s. team won 3-1! did they celebrate?"; the lowercase splitter finds
    # the sentences pysbd finds in the cased text
    assert len(_plain_pysbd(lowered)) == 4
    assert split_sentences(lowered) == [sentence.lower() for sentence in _plain_pysbd(NEWS)]
    assert split_sentences(NEWS) == _plain_pysbd(NEWS)  # one capital letter: pysbd, as before
