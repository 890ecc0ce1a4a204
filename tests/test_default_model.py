"""The shipped default model: small, loads offline over the installed MiniLM, is as good as Lead-3 on the bundled real
articles, and (slow) reproduces the scores its model card reports on 300 held-out CNN/DM documents."""

import json

import pytest

import sumformers
from conftest import REPO_ROOT
from sumformers.hub import DEFAULT_MODEL, shipped_checkpoints
from sumformers.text.scoring import rouge_scores
from sumformers.text.sentences import lead_k, split_sentences


@pytest.fixture(scope="module")
def default_summarizer():
    return sumformers.load_pipeline()


def test_the_default_checkpoint_is_small_and_self_describing():
    folder = shipped_checkpoints()[DEFAULT_MODEL]
    assert sum(path.stat().st_size for path in folder.iterdir()) < 20 * 2**20
    card = json.loads((folder / "sumformers_card.json").read_text())
    assert set(card["results"]) == {"rouge1", "rouge2", "rougeLsum"}
    assert "model-index" in (folder / "README.md").read_text()


def test_default_model_is_as_good_as_lead_3_on_the_bundled_articles(default_summarizer):
    rows = [json.loads(line) for line in open(REPO_ROOT / "examples" / "cnn_three_articles.jsonl")]
    outputs = default_summarizer([row["document"] for row in rows], num_sentences=3, trigram_blocking=False)
    references = [row["summary"] for row in rows]
    lead = [
        "\n".join(split_sentences(row["document"])[i] for i in lead_k(split_sentences(row["document"])))
        for row in rows
    ]
    model_scores = rouge_scores([output["summary"] for output in outputs], references)
    lead_scores = rouge_scores(lead, references)
    assert model_scores["rouge1"] >= lead_scores["rouge1"] - 1.0, (model_scores, lead_scores)
    for output, row in zip(outputs, rows):
        sentences = split_sentences(row["document"])
        assert len(output["sentences"]) == 3 and output["sentences"] == sorted(output["sentences"])
        assert output["summary"].split("\n") == [sentences[i] for i in output["sentences"]]
        assert all(0.0 <= score <= 1.0 for score in output["scores"])


@pytest.mark.slow
def test_default_model_reproduces_its_card_scores(default_summarizer, data_dir):
    """The card's figures, recomputed: 300 held-out CNN/DM validation documents (about 4 minutes on 2 cores)."""
    rows = [json.loads(line) for line, _ in zip(open(data_dir / "cnn_dailymail" / "validation.jsonl"), range(300))]
    card = json.loads((shipped_checkpoints()[DEFAULT_MODEL] / "sumformers_card.json").read_text())
    outputs = default_summarizer([row["document"] for row in rows], batch_size=8)
    scores = rouge_scores([output["summary"] for output in outputs], [row["summary"] for row in rows])
    assert scores == pytest.approx(card["results"], abs=0.05)
