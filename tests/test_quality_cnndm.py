"""benchmarks/quality_cnndm.py's decoding settings: the rows at a matched number of sentences."""

import argparse

import pytest

from conftest import REPO_ROOT, imported_benchmark

script = imported_benchmark("quality_cnndm")
STEPWISE = REPO_ROOT / "checkpoints" / "stepwise-hibert-minilm-cnndm"
ARTICLE = (REPO_ROOT / "examples" / "cnn_missing_student.txt").read_text()
ARGS = argparse.Namespace(end_bias=None, etcsum_max_length=512)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_stepwise_model_at_exactly_k_sentences_may_end_only_after_k(script):
    options, description = script.decoding_options("Stepwise HiBERT", STEPWISE, ARGS, sentences=3)
    assert (options["num_sentences"], options["min_sentences"], options["beam_size"]) == (3, 3, 3)
    assert description == "beam 3, exactly 3 sentences"
    # without it: the model's own range and end bias (the shipped default's -2.1)
    options, description = script.decoding_options("Stepwise HiBERT", STEPWISE, ARGS)
    assert (options["num_sentences"], options["min_sentences"], options["end_bias"]) == (4, 1, -2.1)
    assert description == "beam 3, 1-4 sentences, END paid at 4, END bias -2.1"


def test_the_non_stepwise_models_ignore_the_stepwise_length(script):
    hibert = REPO_ROOT / "checkpoints" / "hibert-minilm-cnndm"
    assert script.decoding_options("HiBERT", hibert, ARGS, sentences=2) == ({"num_sentences": 3}, "top 3")


@pytest.fixture(scope="module")
def shipped_default():
    import sumformers

    return sumformers.load_pipeline(str(STEPWISE))


@pytest.mark.parametrize("sentences", [2, 3, 4])
def test_the_shipped_default_writes_exactly_k_sentences_when_asked(script, shipped_default, sentences):
    options, _ = script.decoding_options("Stepwise HiBERT", STEPWISE, ARGS, sentences=sentences)
    options.pop("end_at_limit")  # the cache key's, not the pipeline's (as in model_summaries)
    summary = shipped_default(ARTICLE, **options, trigram_blocking=False)["summary"]
    assert len(summary.split("\n")) == sentences
