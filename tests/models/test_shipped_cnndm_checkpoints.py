"""The CNN/DM checkpoints shipped in `checkpoints/` (HiBERT, Stepwise HiBERT, ETCSum, Stepwise ETCSum): small, and
their pipelines decode what their own scores say."""

from pathlib import Path

import pytest
import torch

import sumformers
from sumformers.hub import shipped_checkpoints

ARTICLE = Path(__file__).resolve().parents[2] / "examples" / "cnn_missing_student.txt"
STEPWISE = ["stepwise-hibert-minilm-cnndm", "stepwise-etcsum-minilm-cnndm"]
NON_STEPWISE = ["hibert-minilm-cnndm", "etcsum-minilm-cnndm"]


@pytest.mark.parametrize("name", STEPWISE + NON_STEPWISE)
def test_checkpoint_is_a_small_adapter(name):
    folder = shipped_checkpoints()[name]
    assert sum(path.stat().st_size for path in folder.iterdir()) < 20 * 2**20
    assert (folder / "adapter_model.safetensors").is_file() and not list(folder.glob("*.bin"))


@pytest.mark.parametrize("name", STEPWISE)
def test_greedy_steps_follow_the_step_distributions(name):
    """Beam 1: every step takes the most probable allowed choice (END only from the configured minimum length on),
    and reports that choice's probability and the running sum of log-probabilities."""
    summarizer = sumformers.load_pipeline(name)
    minimum = summarizer.model.config.min_sentences
    result = summarizer(ARTICLE.read_text(), beam_size=1, num_sentences=4, return_steps=True, max_length=512)
    chosen, score = [], 0.0
    for step in result["steps"]:
        distribution = torch.tensor(step["distribution"])
        allowed = torch.ones_like(distribution, dtype=torch.bool)
        allowed[chosen] = False
        allowed[-1] = len(chosen) >= minimum
        choice = int(torch.where(allowed, distribution, -1.0).argmax())
        assert step["sentence"] == (None if choice == len(distribution) - 1 else choice)
        assert step["probability"] == pytest.approx(float(distribution[choice]), rel=1e-4)
        score += float(torch.log(distribution[choice]))
        assert step["score"] == pytest.approx(score, rel=1e-4)
        if step["sentence"] is not None:
            chosen.append(step["sentence"])
    assert len(chosen) >= minimum and result["selection_order"] == chosen
    assert result["sentences"] == sorted(chosen)


@pytest.mark.parametrize("name", NON_STEPWISE)
def test_top_sentences_are_the_best_scored(name):
    summarizer = sumformers.load_pipeline(name)
    text = ARTICLE.read_text()
    result = summarizer(text, num_sentences=3, trigram_blocking=False, max_length=512)
    probabilities = summarizer.forward(summarizer.preprocess(text, max_length=512))["probabilities"][0]
    assert result["sentences"] == sorted(probabilities.topk(3).indices.tolist())
