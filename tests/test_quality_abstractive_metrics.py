"""The metric helpers of benchmarks/quality_abstractive.py against hand-computed numbers."""

from types import SimpleNamespace

import pytest

from conftest import imported_benchmark
from sumformers.text.sentences import has_repeated_trigram, to_sentences

script = imported_benchmark("quality_abstractive")


def test_words_keep_inner_apostrophes_and_drop_punctuation(script):
    assert script.words("It's Bull's car, isn't it?") == ["it's", "bull's", "car", "isn't", "it"]


@pytest.mark.parametrize(
    "summary, repeated",
    [
        ("the cat sat on the mat and the cat sat down .", True),  # within one sentence
        ("the cat sat on the mat .\nthen the cat sat down .", True),  # across two sentences
        ("the cat sat on the mat .\nthe dog ran off .", False),  # "the" twice, no trigram twice
        ("a b\nc a b\nc", False),  # "a b c" twice only across line breaks: trigrams do not cross sentences
        ("the cat sat on the mat. The Cat Sat down.", True),  # one line: pysbd sentences, lowercased
        ("it's a dog. it's a cat.", False),  # punctuation is no word: "it ' s" is no trigram
        ("", False),
    ],
)
def test_has_repeated_trigram_anywhere(script, summary, repeated):
    assert script.has_repeated_trigram_anywhere(summary) is repeated


def test_repeated_trigram_anywhere_differs_from_the_packages_across_sentences_check(script):
    within = "the cat sat on the mat and the cat sat down ."
    assert script.has_repeated_trigram_anywhere(within) and not has_repeated_trigram(to_sentences(within))
    apostrophes = "it's a dog. it's a cat."
    assert has_repeated_trigram(to_sentences(apostrophes)) and not script.has_repeated_trigram_anywhere(apostrophes)


def test_words_per_sentence_pools_all_sentences(script):
    # sentences of 3, 2 and 4 words: 9 / 3, not the mean of the summaries' means (2.5 and 4)
    assert script.words_per_sentence(["a b c\nd e", "f g h i"]) == 3.0
    assert script.words_per_sentence([""]) == 0.0


def test_abstractive_metrics(script):
    documents = ["the cat sat on the mat", "the cat sat on the mat"]
    summaries = ["the cat sat\nthe dog ran", "on the mat"]
    result = script.abstractive_metrics(summaries, documents, ["the cat sat", "the cat sat"], ["cnn", "dailymail"])
    # ROUGE-1 F: 3 of 6 summary words and all 3 reference words match, F = 2/3; then "the" alone, F = 1/3
    assert result["rouge1"] == pytest.approx(50.0)
    assert result["rouge1_cnn"] == pytest.approx(200 / 3) and result["rouge1_dailymail"] == pytest.approx(100 / 3)
    low, high = result["rouge1_interval"]
    assert 100 / 3 - 1e-9 <= low <= 50.0 <= high <= 200 / 3 + 1e-9
    # bigrams the-cat, cat-sat, sat-the, the-dog, dog-ran: 3 of 5 not in the document; the second summary none
    assert result["novel_bigrams"] == pytest.approx(30.0)
    assert result["mean_sentences"] == 1.5
    assert result["words_per_sentence"] == 3.0
    assert result["repeated_trigrams"] == 0.0
    assert result["facts_in_article"] == 100.0  # no summary states a number or a name
    assert result["mean_words"] == 4.5
    # 2 of the 3 numbers stated (4, 12, 7) are in their articles
    assert script.facts_in_article(["won 4 of 12", "lost 7"], ["4 wins in 12 games", "6 losses"]) == pytest.approx(
        200 / 3)


def test_only_the_generation_options_set_are_passed(script):
    args = SimpleNamespace(num_beams=4, max_length=None, min_length=None, length_penalty=0.0,
                           no_repeat_word_ngram_size=3)
    assert script.generation_options(args) == {"num_beams": 4, "length_penalty": 0.0, "no_repeat_word_ngram_size": 3}
    assert script.generation_options(SimpleNamespace(**dict.fromkeys(script.GENERATION_OPTIONS))) == {}


def test_describe_decoding_names_the_models_own_settings(script, tmp_path):
    assert script.describe_decoding(tmp_path, {}) == "model defaults"
    (tmp_path / "generation_config.json").write_text('{"num_beams": 4, "max_length": 140, "no_repeat_ngram_size": 3}')
    assert script.describe_decoding(tmp_path, {"num_beams": 2}) == "num_beams 2, max_length 140 (model)"
    # word n-gram blocking is the model config's (the pipeline's option), not the generation config's
    (tmp_path / "config.json").write_text('{"no_repeat_word_ngram_size": 3, "hidden_size": 8}')
    assert script.describe_decoding(tmp_path, {}) == "num_beams 4 (model), max_length 140 (model), " \
        "no_repeat_word_ngram_size 3 (model)"
