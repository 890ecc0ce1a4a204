import warnings

import pytest
import torch
from transformers import pipeline

from sumformers.processing.sentence_layout import collate_sentence_batch, encode_sentences

ARTICLE = (
    "The city council met on Monday night. "
    "Members voted to approve a new budget for schools. "
    "The budget adds money for teachers and books. "
    "A local group said the vote came too late. "
    "The mayor is expected to sign the plan this week."
)
SENTENCES = [
    "The city council met on Monday night.",
    "Members voted to approve a new budget for schools.",
    "The budget adds money for teachers and books.",
    "A local group said the vote came too late.",
    "The mayor is expected to sign the plan this week.",
]


@pytest.fixture
def summarizer(tiny_bertsum, minilm_tokenizer):
    return pipeline("extractive-summarization", model=tiny_bertsum(), tokenizer=minilm_tokenizer)


def expected_summary(model, tokenizer, sentences, k):
    batch = collate_sentence_batch([encode_sentences(tokenizer, sentences)], tokenizer.pad_token_id)
    with torch.no_grad():
        probabilities = torch.sigmoid(model(**batch).logits[0]).tolist()
    chosen = sorted(sorted(range(len(sentences)), key=lambda i: -probabilities[i])[:k])
    return chosen, [probabilities[i] for i in chosen]


def test_top_k_sentences_in_document_order_with_their_scores(summarizer):
    result = summarizer(ARTICLE, num_sentences=2, trigram_blocking=False)
    chosen, scores = expected_summary(summarizer.model, summarizer.tokenizer, SENTENCES, 2)
    assert result["sentences"] == chosen
    assert result["scores"] == pytest.approx(scores, abs=1e-6)
    assert result["summary"] == "\n".join(SENTENCES[i] for i in chosen)


def test_text_and_sentence_list_inputs_agree(summarizer):
    from_text = summarizer(ARTICLE)
    assert summarizer({"sentences": SENTENCES}) == from_text
    assert summarizer([SENTENCES]) == [from_text]  # a list is a batch: here one pre-split document


def test_batching_gives_the_same_results(summarizer):
    documents = [ARTICLE, {"sentences": SENTENCES[:2]}, " ".join(SENTENCES[1:4])]
    one_by_one = [summarizer(document, num_sentences=2) for document in documents]
    batched = summarizer(documents, num_sentences=2, batch_size=3)
    assert [r["sentences"] for r in batched] == [r["sentences"] for r in one_by_one]
    for got, expected in zip(batched, one_by_one):
        assert got["summary"] == expected["summary"]
        assert got["scores"] == pytest.approx(expected["scores"], abs=1e-5)


def test_postprocess_picks_by_score_and_blocks_trigrams(summarizer):
    sentences = (
        "The storm hit the coast on Friday.",
        "Officials said the storm hit the coast hard.",  # shares "the storm hit" with sentence 0
        "Power was cut to ten thousand homes.",
        "Schools will stay closed until Tuesday.",
    )
    outputs = {"probabilities": torch.tensor([[0.9, 0.8, 0.3, 0.5]]), "sentences": [sentences]}
    plain = summarizer.postprocess(outputs, num_sentences=2, trigram_blocking=False)
    assert plain["sentences"] == [0, 1] and plain["scores"] == pytest.approx([0.9, 0.8])
    blocked = summarizer.postprocess(outputs, num_sentences=2, trigram_blocking=True)
    assert blocked["sentences"] == [0, 3] and blocked["scores"] == pytest.approx([0.9, 0.5])


def test_word_budget_skips_top_sentences_that_do_not_fit(summarizer):
    sentences = (
        "The storm hit the coast on Friday.",  # 7 words
        "Officials said the storm hit the coast hard and fast overnight.",  # 11 words
        "Power was cut.",  # 3 words
        "Schools will stay closed until Tuesday.",  # 6 words
    )
    outputs = {"probabilities": torch.tensor([[0.9, 0.8, 0.3, 0.5]]), "sentences": [sentences]}
    budget = summarizer.postprocess(outputs, num_sentences=3, trigram_blocking=False, max_words=16)
    assert budget["sentences"] == [0, 2, 3]  # 1 (7 + 11) does not fit; 3 (13) and 2 (16) do
    assert summarizer.postprocess(outputs, num_sentences=3, trigram_blocking=False)["sentences"] == [0, 1, 3]
    with pytest.raises(ValueError, match="max_words"):
        summarizer(ARTICLE, max_words=0)


def test_empty_and_whitespace_text_give_an_empty_summary(summarizer):
    for text in ("", "   \n\t "):
        assert summarizer(text) == {"summary": "", "sentences": [], "scores": []}


def test_one_sentence_is_its_own_summary(summarizer):
    result = summarizer("Only one sentence here.", num_sentences=3)
    assert result["summary"] == "Only one sentence here." and result["sentences"] == [0]


def test_very_long_input_is_truncated_with_a_warning(summarizer):
    text = " ".join(f"Report {i} says the river rose by {i} centimetres overnight." for i in range(8000))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = summarizer(text, num_sentences=3, trigram_blocking=False)
    assert any("limit of 512 tokens" in str(w.message) for w in caught)
    assert len(result["sentences"]) == 3 and max(result["sentences"]) < 60


def test_odd_unicode_is_handled(summarizer):
    text = (
        "Caf\u00e9 owners met\u200b today. \u4e2d\u6587\u53e5\u5b50\u3002 Emoji \U0001f600 here. Bad \ud800 surrogate."
    )
    result = summarizer(text, num_sentences=10, trigram_blocking=False)
    assert len(result["sentences"]) == 4
    assert "Bad ? surrogate." in result["summary"]  # the lone surrogate became "?" (blingfire: not a sentence end)
    assert "\u4e2d\u6587" in result["summary"] and "\U0001f600" in result["summary"]


def test_bad_input_type_is_a_clear_error(summarizer):
    with pytest.raises(TypeError, match="expected a string, a list of sentence strings"):
        summarizer({"document": ARTICLE})
    with pytest.raises(ValueError, match="num_sentences must be at least 1"):
        summarizer(ARTICLE, num_sentences=0)


def test_a_bad_item_in_a_batch_gets_an_error_and_the_others_their_summaries(summarizer):
    good = summarizer(ARTICLE, num_sentences=2)
    results = summarizer([ARTICLE, None, 42, {"sentences": SENTENCES}], num_sentences=2, batch_size=2)
    assert results[0] == good and results[3] == good
    assert results[1] == {
        "error": "expected a string, a list of sentence strings or {'sentences': [...]}, got NoneType"
    }
    assert results[2] == {"error": "expected a string, a list of sentence strings or {'sentences': [...]}, got int"}


def test_a_single_bad_input_is_a_one_line_type_error(summarizer):
    with pytest.raises(TypeError, match=r"^expected a string, a list of sentence strings .* got NoneType$"):
        summarizer(None)
