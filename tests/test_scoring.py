import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest
from rouge_score import rouge_scorer, scoring, tokenizers

from sumformers.text.evaluation import data_dir, document_sentences, read_jsonl
from sumformers.text.scoring import (
    full_oracle,
    greedy_oracle,
    oracle_labels,
    rouge_per_example,
    rouge_scores,
    rouge_tokenize,
)
from sumformers.text.sentences import to_sentences

# rouge-score used directly, the way papers call it, as the reference implementation.
LIBRARY_SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], use_stemmer=True)
LIBRARY_TOKENIZER = tokenizers.DefaultTokenizer(use_stemmer=True)

PREDICTIONS = [
    "The cats were running home. They arrived late.",
    "Markets fell sharply on Monday amid fears of a slowdown.",
    "Nothing in common",
]
REFERENCES = [
    "Cats ran home .\nThey were late for dinner .",
    "Stock markets fell on Monday .",
    "A completely different text .",
]
# The same texts one sentence per line (predictions split by pysbd, references by their "\n").
PREDICTION_LINES = [
    "The cats were running home.\nThey arrived late.",
    "Markets fell sharply on Monday amid fears of a slowdown.",
    "Nothing in common",
]


def test_rouge_tokenize_matches_rouge_score_default_tokenizer():
    raw = "Running runners ran 3.5 miles -- the U.S. Marathon's fastest! Generously, happily, connected."
    assert rouge_tokenize(raw) == LIBRARY_TOKENIZER.tokenize(raw)


def test_rouge_per_example_matches_direct_rouge_score_calls():
    per_example = rouge_per_example(PREDICTIONS, REFERENCES)
    for scores, prediction, reference in zip(per_example, PREDICTION_LINES, REFERENCES):
        expected = LIBRARY_SCORER.score(reference, prediction)
        assert scores == {key: pytest.approx(100 * expected[key].fmeasure, abs=1e-12) for key in expected}
    assert per_example[2] == {"rouge1": 0.0, "rouge2": 0.0, "rougeLsum": 0.0}
    assert per_example[0]["rouge1"] > 0 and per_example[0]["rougeLsum"] > 0


def test_rouge_scores_is_the_plain_mean_of_direct_rouge_score_calls():
    expected = [LIBRARY_SCORER.score(r, p) for p, r in zip(PREDICTION_LINES, REFERENCES)]
    means = rouge_scores(PREDICTIONS, REFERENCES)
    assert list(means) == ["rouge1", "rouge2", "rougeLsum"]
    for key in means:
        assert means[key] == pytest.approx(100 * sum(e[key].fmeasure for e in expected) / 3, abs=1e-12)


def test_rougelsum_uses_sentence_breaks_unlike_rougel():
    # Two sentences in swapped order: rougeLsum (summary-level LCS) matches both, plain LCS only one.
    prediction, reference = "Beta gamma delta. Alpha zeta eta.", "Alpha zeta eta .\nBeta gamma delta ."
    assert rouge_scores([prediction], [reference])["rougeLsum"] == pytest.approx(100.0)
    assert rouge_scorer.RougeScorer(["rougeL"]).score(reference, prediction)["rougeL"].fmeasure < 0.6


@pytest.mark.parametrize(
    "predictions, references, error",
    [
        (["a"], ["a", "b"], ValueError),
        ([], [], ValueError),
        ("a", "a", TypeError),
        ([None], ["a"], TypeError),
    ],
)
def test_rouge_scores_bad_input(predictions, references, error):
    with pytest.raises(error):
        rouge_scores(predictions, references)


# Hand computation (all words <= 3 characters, so stemming changes nothing).
# Reference "the cat sat on the mat": unigrams the:2 cat sat on mat (6), bigrams the-cat cat-sat sat-on on-the
# the-mat (5). F = 2 * overlap / (predicted total + reference total).
# Step 1: s1 "the cat sat": R1 = 2*3/(3+6) = 0.667, R2 = 2*2/(2+5) = 0.571 -> 1.238 (best; s0 0, s2 0.85, s3 0.444)
# Step 2: + s2 "on the big mat": R1 = 2*6/(7+6) = 0.923, R2 = 2*3/(5+5) = 0.6 -> 1.523
#         + s0: R1 = 6/12, R2 = 4/9 -> 0.944;  + s3 "the the the": R1 = 8/12, R2 = 4/9 -> 1.111
# Step 3: + s0 or + s3: R1 = 12/16, R2 = 6/12 -> 1.25 < 1.523, stop.
HAND_SENTENCES = ["a dog ran", "the cat sat", "on the big mat", "the the the"]
HAND_REFERENCE = "the cat sat on the mat"


def test_greedy_oracle_hand_computation():
    assert greedy_oracle(HAND_SENTENCES, HAND_REFERENCE) == [1, 2]
    assert greedy_oracle(HAND_SENTENCES, HAND_REFERENCE, num_sentences=1) == [1]
    assert greedy_oracle(HAND_SENTENCES, HAND_REFERENCE, num_sentences=0) == []
    assert greedy_oracle(HAND_SENTENCES, HAND_REFERENCE, metric="r2") == [1, 2]
    assert oracle_labels(HAND_SENTENCES, HAND_REFERENCE) == [0, 1, 1, 0]
    # The selected pair's ROUGE-1 is the hand value 12/13.
    joined = "\n".join(HAND_SENTENCES[i] for i in [1, 2])
    assert LIBRARY_SCORER.score(HAND_REFERENCE, joined)["rouge1"].fmeasure == pytest.approx(12 / 13)


def test_greedy_oracle_returns_ascending_indices_and_breaks_ties_by_position():
    reference = "the cat sat on the mat"
    assert greedy_oracle(["on the mat", "the cat sat"], reference) == [0, 1]
    assert greedy_oracle(["the cat sat", "the cat sat"], reference) == [0]


def test_greedy_oracle_counts_clipped_ngrams_not_sets():
    # PreSumm's set-based ROUGE sees "the cat" once; clipped counts credit both occurrences.
    reference = "the cat and the cat"
    assert greedy_oracle(["the cat", "the cat", "and"], reference) == [0, 1, 2]


@pytest.mark.parametrize("sentences, reference", [([], "the cat"), (["the cat"], ""), (["..."], "the cat")])
def test_greedy_oracle_degenerate_inputs(sentences, reference):
    assert greedy_oracle(sentences, reference) == []
    assert full_oracle(sentences, reference) == []


def test_greedy_oracle_bad_arguments():
    with pytest.raises(ValueError, match="metric"):
        greedy_oracle(["a"], "a", metric="r3")
    with pytest.raises(ValueError, match="num_sentences"):
        greedy_oracle(["a"], "a", num_sentences=-1)
    with pytest.raises(TypeError):
        greedy_oracle("one string", "a")


def _library_objective(sentences, selection, reference, metric):
    """The oracle objective computed with rouge-score itself; bigrams within sentences (as documented)."""
    joined = "\n".join(sentences[i] for i in sorted(selection))
    reference_lines = "\n".join(to_sentences(reference))
    library = LIBRARY_SCORER.score(reference_lines, joined)
    reference_tokens = LIBRARY_TOKENIZER.tokenize(reference)
    reference_bigrams = Counter(zip(reference_tokens, reference_tokens[1:]))
    predicted_bigrams = Counter()
    for i in selection:
        tokens = LIBRARY_TOKENIZER.tokenize(sentences[i])
        predicted_bigrams.update(zip(tokens, tokens[1:]))
    overlap = sum(min(count, predicted_bigrams[gram]) for gram, count in reference_bigrams.items())
    r2 = scoring.fmeasure(
        overlap / max(sum(predicted_bigrams.values()), 1), overlap / max(sum(reference_bigrams.values()), 1)
    )
    return {
        "r2": r2,
        "r1+r2": library["rouge1"].fmeasure + r2,
        "full": (library["rouge1"].fmeasure + r2 + library["rougeLsum"].fmeasure) / 3,
    }[metric]


def _library_greedy(sentences, reference, metric, num_sentences=None):
    """PreSumm's greedy loop calling rouge-score for every candidate: slow but obviously right."""
    selected, best = [], 0.0
    limit = len(sentences) if num_sentences is None else num_sentences
    while len(selected) < limit:
        best_index = -1
        for index in range(len(sentences)):
            if index in selected:
                continue
            score = _library_objective(sentences, selected + [index], reference, metric)
            if score > best + 1e-12:
                best, best_index = score, index
        if best_index < 0:
            break
        selected.append(best_index)
    return sorted(selected)


def _random_example(rng):
    vocab = ["the", "cat", "cats", "running", "runs", "ran", "on", "mat", "dog", "happily", "happy", "a", "of"]
    sentences = [" ".join(rng.choices(vocab, k=rng.randint(1, 9))) + " ." for _ in range(rng.randint(1, 8))]
    reference = "\n".join(" ".join(rng.choices(vocab, k=rng.randint(2, 8))) + " ." for _ in range(rng.randint(1, 3)))
    return sentences, reference


@pytest.mark.parametrize("metric", ["r1+r2", "r2", "full"])
def test_greedy_oracle_matches_rouge_score_greedy_on_random_examples(metric):
    rng = random.Random(0)
    for _ in range(40):
        sentences, reference = _random_example(rng)
        assert greedy_oracle(sentences, reference, metric=metric) == _library_greedy(sentences, reference, metric)
        assert greedy_oracle(sentences, reference, 2, metric=metric) == _library_greedy(
            sentences, reference, metric, 2
        )


def test_full_oracle_is_greedy_with_the_full_objective():
    rng = random.Random(1)
    sentences, reference = _random_example(rng)
    assert full_oracle(sentences, reference, num_sentences=3) == greedy_oracle(sentences, reference, 3, "full")


CNNDM_VALIDATION = data_dir() / "cnn_dailymail" / "validation.jsonl"


@pytest.mark.data
@pytest.mark.skipif(not CNNDM_VALIDATION.is_file(), reason="shared CNN/DM data not available")
@pytest.mark.parametrize("metric", ["r1+r2", "r2", "full"])
def test_greedy_oracle_matches_rouge_score_greedy_on_cnndm(metric):
    for row in read_jsonl(CNNDM_VALIDATION)[:8]:
        sentences = document_sentences(row)
        expected = _library_greedy(sentences, row["summary"], metric, num_sentences=3)
        assert greedy_oracle(sentences, row["summary"], num_sentences=3, metric=metric) == expected


def test_local_evaluate_metric_equals_rouge_scores(tmp_path):
    # A subprocess, so that evaluate reads a temporary HF_HOME at import and writes nothing in the home dir.
    program = (
        "import json, sys\n"
        "from sumformers.text.scoring import load_rouge_metric\n"
        "data = json.load(sys.stdin)\n"
        "metric = load_rouge_metric()\n"
        "print(json.dumps(metric.compute(predictions=data['p'], references=data['r'])))\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", program],
        input=json.dumps({"p": PREDICTIONS, "r": REFERENCES}),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == rouge_scores(PREDICTIONS, REFERENCES)
    assert (tmp_path / "hf" / "modules" / "evaluate_modules" / "metrics" / "sumformers_rouge").is_dir()


def test_bootstrap_interval_brackets_the_mean_and_collapses_for_constant_scores():
    from sumformers.text.scoring import bootstrap_interval

    assert bootstrap_interval([40.0] * 25) == (40.0, 40.0)
    low, high = bootstrap_interval([0.0, 100.0] * 50)
    # mean 50, standard error 50 / sqrt(100) = 5: the 95% interval is about 50 -/+ 1.96 * 5
    assert 39.0 < low < 41.5 and 58.5 < high < 61.0
    assert bootstrap_interval([0.0, 100.0] * 50) == (low, high)  # seeded: reproducible


@pytest.mark.parametrize("metric", ["r1+r2", "full"])
def test_selection_order_extends_one_sentence_at_a_time(metric):
    """The greedy search is deterministic: its first k picks are the k-sentence oracle, for every k."""
    order = greedy_oracle(HAND_SENTENCES, HAND_REFERENCE, metric=metric, selection_order=True)
    assert sorted(order) == greedy_oracle(HAND_SENTENCES, HAND_REFERENCE, metric=metric)
    for size in range(1, len(order) + 1):
        assert sorted(order[:size]) == greedy_oracle(HAND_SENTENCES, HAND_REFERENCE, num_sentences=size, metric=metric)
