"""Hostile and unusual text: what a pipeline reads of it (`text/readable_text.py` and the pipelines'
`readable_input`): HTML as its main text, text without a word as nothing, a very long text cut before the expensive
work."""

import warnings
from pathlib import Path

import pytest
import torch
from transformers import pipeline

from sumformers.hub import load_pipeline
from sumformers.text.readable_text import cut_to_words, has_word, html_main_text, looks_like_html, readable_text

ARTICLE = (Path(__file__).resolve().parents[1] / "examples" / "cnn_missing_student.txt").read_text()
PUNCTUATION = ",,, ;; --"
PAGE = """<!DOCTYPE html>
<html><head><title>Budget news</title><style>p { color: red; }</style><script>alert('x')</script></head>
<body><nav><a href="/">Home</a> | <a href="/news">News</a> | <a href="/contact">Contact us</a></nav>
<article><h1>Council approves budget</h1>
<p>The city council met on Monday night. Members voted to approve a new budget for schools.</p>
<p>The budget adds money for teachers and books. A local group said the vote came too late.</p>
<p>The mayor is expected to sign the plan this week.</p></article>
<footer>Copyright 2024 Example News. All rights reserved.</footer><script>document.write('tracking')</script>
</body></html>"""
PAGE_MAIN_TEXT = (
    "Council approves budget\n"
    "The city council met on Monday night. Members voted to approve a new budget for schools.\n"
    "The budget adds money for teachers and books. A local group said the vote came too late.\n"
    "The mayor is expected to sign the plan this week."
)

# ---------------------------------------------------------------------------------------------------------------
# The text layer


def test_html_is_told_from_text():
    for html in ("<p>Hi</p>", "<!DOCTYPE html><title>x</title>", "<!-- note -->", "one<br/>two", "<DIV class='a'>",
                 "Hello. <script>alert('x')</script>", "</td>"):
        assert looks_like_html(html), html
    for text in ("3 < 4 and 5 > 2", "a<b", "Write to <me@example.com>", "x -> y <- z", "I <3 it", "<unknown>",
                 ARTICLE):
        assert not looks_like_html(text), text


def test_a_word_is_a_letter_or_digit_of_any_script():
    assert all(has_word(text) for text in ("a", "7", "\u4e2d", "\u00e9t\u00e9", "-- 2024 --"))
    assert not any(has_word(text) for text in ("", PUNCTUATION, "___ \u2014 \u2026 !?", "\U0001f600 \u200b"))


def test_readable_text_blanks_the_lines_without_a_word_and_keeps_the_rest():
    assert readable_text(PUNCTUATION) == ""
    text = "First line.\n,,, ;; --\n\nSecond \u2014 line.\n***"
    assert readable_text(text) == "First line.\n\n\nSecond \u2014 line.\n"
    assert readable_text(ARTICLE) == ARTICLE  # ordinary text comes back unchanged


def test_html_gives_its_main_text_without_navigation_scripts_or_footer():
    assert html_main_text(PAGE) == PAGE_MAIN_TEXT
    assert readable_text(PAGE) == PAGE_MAIN_TEXT


def test_html_fragments_and_escaped_markup_leave_no_markup():
    assert readable_text("Hello world. <script>alert('x')</script> Goodbye now.") == "Hello world.  Goodbye now."
    assert readable_text("<b>bold</b> text") == "bold text"
    assert readable_text("<script>alert('x')</script>") == ""
    # text the page escaped to show markup comes back as markup: its line is dropped
    escaped = "<p>&lt;script&gt;alert('x')&lt;/script&gt;</p><p>Plain words here.</p>"
    assert readable_text(escaped) == "\nPlain words here."


def test_cut_to_words_keeps_the_first_words_in_all():
    assert cut_to_words(["one two three", "four five", "six"], 4) == (["one two three", "four"], 6)
    assert cut_to_words(["a b  c\n d e"], 4) == (["a b  c\n d"], 5)
    assert cut_to_words(["a b", "", "c"], 3) == (["a b", "", "c"], 3)
    assert cut_to_words(["a b"], 1) == (["a"], 2)


# ---------------------------------------------------------------------------------------------------------------
# Pipelines


@pytest.fixture
def summarizer(tiny_bertsum, minilm_tokenizer):
    return pipeline("extractive-summarization", model=tiny_bertsum(), tokenizer=minilm_tokenizer)


@pytest.fixture(scope="module")
def shipped():
    """The shipped checkpoints' pipelines, each loaded once."""
    loaded = {}

    def get(name):
        if name not in loaded:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded[name] = load_pipeline(name)
        return loaded[name]

    return get


EMPTY = {
    "extractive-summarization": {"summary": "", "sentences": [], "scores": []},
    "stepwise-summarization": {
        "summary": "", "sentences": [], "scores": [], "selection_order": [], "steps": [], "score": 0.0
    },
    "abstractive-summarization": {"summary": ""},
    "wikisum": {"summary": "", "paragraphs": [], "input_tokens": 0},
}


@pytest.mark.parametrize(
    "name",
    [
        "bertsum-minilm-cnndm",
        "hetformer-minilm-qmsum",
        "stepwise-hibert-minilm-cnndm",
        "copytransformer-circular2d-cnndm",
        "wikisum-tdmca-copy-minilm-cnndm",
    ],
)
def test_text_without_a_word_gives_an_empty_summary_in_every_text_task(shipped, name):
    summarizer = shipped(name)
    empty = EMPTY[summarizer.task]
    pre_split = {"documents": ["...", " -- "]} if summarizer.model.reads_multiple_documents else {"sentences": ["..."]}
    results = [summarizer(PUNCTUATION), summarizer(pre_split), *summarizer([PUNCTUATION, "", " \n\t"], batch_size=2)]
    assert results == [empty] * 5


@pytest.mark.parametrize("name", ["stepwise-hibert-planner-minilm-rotowire", "realizer-minilm-rotowire"])
def test_a_game_task_refuses_text_without_a_word_in_one_line(shipped, name):
    with pytest.raises(ValueError, match=r"^a Rotowire game line is one JSON object: "):
        shipped(name)(PUNCTUATION, **({"plan": "oracle"} if "realizer" in name else {}))


def test_a_document_without_a_word_in_a_batch_costs_the_others_nothing(summarizer):
    alone = summarizer(ARTICLE, num_sentences=2)
    batch = summarizer([PUNCTUATION, ARTICLE, "\u2014 *** \u2014"], num_sentences=2, batch_size=3)
    assert batch == [EMPTY["extractive-summarization"], alone, EMPTY["extractive-summarization"]]


def test_abstractive_text_without_a_word_generates_nothing(minilm_tokenizer, monkeypatch):
    from conftest import tiny_bertsumabs_config
    from sumformers import SentencePlannerForConditionalGeneration

    torch.manual_seed(0)
    model = SentencePlannerForConditionalGeneration(tiny_bertsumabs_config(planner=True)).eval()
    summarizer = pipeline("abstractive-summarization", model=model, tokenizer=minilm_tokenizer)
    settings = dict(num_beams=2, max_new_tokens=6)
    alone = summarizer(ARTICLE, **settings)
    assert summarizer([PUNCTUATION, ARTICLE], batch_size=2, **settings) == [{"summary": ""}, alone]
    calls = []
    monkeypatch.setattr(model, "generate", lambda *args, **kwargs: calls.append(kwargs))
    assert summarizer(PUNCTUATION, **settings) == {"summary": ""} and calls == []


def test_html_is_summarized_from_its_main_text(summarizer):
    from_page = summarizer(PAGE, num_sentences=10, trigram_blocking=False)
    assert from_page == summarizer(PAGE_MAIN_TEXT, num_sentences=10, trigram_blocking=False)
    assert len(from_page["sentences"]) == 6  # every sentence of the main text, and nothing else
    for markup in ("<", "alert", "Home", "Copyright", "tracking", "color"):
        assert markup not in from_page["summary"]
    sentences = summarizer({"sentences": ["<b>Bold</b> claim here.", "<script>alert('x')</script>", "Plain."]})
    assert sentences["summary"] == "Bold claim here.\nPlain."


def test_every_text_of_an_input_is_read_and_games_are_not(summarizer, shipped):
    assert summarizer.readable_input({"title": "<b>Title</b>", "documents": ["<p>A b.</p>", PUNCTUATION, 3]}) == {
        "title": "Title", "documents": ["A b.", "", 3]
    }
    assert summarizer.readable_input(["<i>One.</i>", "--"]) == ["One.", ""]
    assert summarizer.readable_input(None) is None  # for the processor to refuse
    game_line = '{"id": "g", "box_score": "<b>not read</b>"}'
    assert shipped("stepwise-hibert-planner-minilm-rotowire").readable_input(game_line) == game_line


def test_a_long_text_is_cut_before_sentence_splitting_with_a_warning(summarizer, monkeypatch):
    import sumformers.processing.sentence_layout as sentence_layout

    text = " ".join(f"Report {i} says the river rose by {i} centimetres overnight." for i in range(600))  # 6,000 words
    first_words = " ".join(text.split()[:1024])
    expected = summarizer(first_words, num_sentences=3)
    split, split_sentences = [], sentence_layout.split_sentences

    def recorded_split(text):
        split.append(text)
        return split_sentences(text)

    monkeypatch.setattr(sentence_layout, "split_sentences", recorded_split)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = summarizer(text, num_sentences=3)
    assert result == expected
    assert [len(text.split()) for text in split] == [1024]  # only the words the model can read were split
    assert (
        "Input cut to its first 1024 words (twice the model's limit of 512 tokens) before sentence splitting: "
        "4976 of 6000 words not read." in [str(warning.message) for warning in caught]
    )
    # pre-split sentences are cut the same way, and a smaller max_length cuts more
    with pytest.warns(UserWarning, match="first 200 words .* limit of 100 tokens"):
        summarizer({"sentences": text.split(". ")}, max_length=100)
