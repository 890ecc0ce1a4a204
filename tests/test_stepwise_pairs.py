"""`benchmarks/stepwise_pairs.py` (issue 57): decoding over precomputed sentence vectors picks what the pipelines
pick (with and without an end bias), the end bias is chosen by the shipped checkpoints' rule, and the seed-paired
differences are computed as by hand."""

import pytest

from conftest import REPO_ROOT, imported_benchmark

pytestmark = pytest.mark.usefixtures("one_thread")

pairs = imported_benchmark("stepwise_pairs", "pairs")
ARTICLE = (REPO_ROOT / "examples" / "cnn_missing_student.txt").read_text()


def test_seed_paired_differences_average_over_seeds_per_document(pairs):
    # two seeds, three documents
    scores = [[10.0, 20.0, 30.0], [12.0, 18.0, 33.0]]
    reference = [[9.0, 21.0, 27.0], [12.0, 16.0, 30.0]]
    # differences: seed 1 (1, -1, 3): mean 1; seed 2 (0, 2, 3): mean 5/3; per document (0.5, 0.5, 3)
    mean, (low, high), spread = pairs.seed_paired(scores, reference)
    assert mean == pytest.approx(4 / 3)
    assert spread == pytest.approx((1.0, 5 / 3))
    assert 0.5 <= low <= mean <= high <= 3.0


def test_the_tuned_end_bias_is_the_best_rouge_among_the_biases_of_3_to_4_sentences(pairs):
    reference = "The cat sat."
    # one tuning document; a more negative bias, a longer summary
    summaries = {0.0: ["the cat sat"], -1.0: ["the cat sat", "dogs bark", "birds fly"],
                 -2.0: ["the cat sat", "dogs bark", "birds fly", "fish swim"],
                 -3.0: ["the cat sat", "dogs bark", "birds fly", "fish swim", "cows moo"]}
    chosen, candidates = pairs.tuned_end_bias(lambda bias: [summaries[bias]], [reference], list(summaries))
    # ROUGE-1 F: all 3 reference words found among 3, 7, 9 and 11 words: 100, 2 (3/7) / (1 + 3/7) = 60, 50, 3/7
    assert [c["rouge1"] for c in candidates] == pytest.approx([100.0, 60.0, 50.0, 300 / 7])
    assert [c["mean_sentences"] for c in candidates] == [1, 3, 4, 5]
    assert chosen["end_bias"] == -1.0  # 100 is too short (1 sentence), 60 the best of 3 and 4 sentences
    # none in 2.5-4.5: the nearest, 5 sentences (0.5 over) against 1 (1.5 under)
    chosen, _ = pairs.tuned_end_bias(lambda bias: [summaries[bias]], [reference], [0.0, -3.0])
    assert chosen["end_bias"] == -3.0


@pytest.mark.parametrize("checkpoint", ["hibert-minilm-cnndm", "stepwise-hibert-minilm-cnndm"])
def test_decoding_over_precomputed_vectors_picks_what_the_pipeline_picks(pairs, checkpoint):
    from sumformers.hub import load_model, load_pipeline

    path = str(REPO_ROOT / "checkpoints" / checkpoint)
    model = load_model(path).eval()
    summarizer = load_pipeline(path)
    inputs = pairs.document_inputs(summarizer, [ARTICLE])[0]
    vectors = pairs.sentence_vectors(model, inputs)
    for lengths, blocking, end_bias in (((1, 4), False, 0.0), ((3, 3), False, 0.0), ((1, 4), True, 0.0),
                                        ((1, 4), False, -3.0)):
        picked = pairs.chosen_sentences(model, vectors, inputs, lengths, blocking, end_bias)
        if model.is_stepwise:
            options = {"min_sentences": lengths[0], "num_sentences": lengths[1], "beam_size": 3, "end_bias": end_bias}
        else:
            options = {"num_sentences": pairs.NON_STEPWISE_SENTENCES}
        expected = summarizer(ARTICLE, trigram_blocking=blocking, **options)["sentences"]
        assert picked == expected, (lengths, blocking, end_bias)
