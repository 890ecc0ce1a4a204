"""A plain article string given to the `wikisum` pipeline gets the layout its model was trained and scored with
(`config.ranking_unit`): the shipped CNN/DM model ranks sentences, as in the benchmark behind its card
(`benchmarks/wikisum.py`, documents read one sentence a line). Before, a plain string was one paragraph, fed from its
start: ROUGE-1 11.3 on 100 held-out articles against the card's 27.6."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoTokenizer

import sumformers
from conftest import REPO_ROOT, imported_benchmark
from sumformers import WikiSumConfig, WikiSumForCausalLM
from sumformers.hub import shipped_checkpoints
from sumformers.processing.processing_wikisum import WikiSumProcessor, read_wikisum_examples

script = imported_benchmark("wikisum")
SHIPPED = shipped_checkpoints()["wikisum-tdmca-copy-minilm-cnndm"]
BUNDLED = REPO_ROOT / "examples" / "cnn_three_articles.jsonl"


def bundled_articles() -> list[str]:
    return [json.loads(line)["document"] for line in BUNDLED.read_text(encoding="utf-8").splitlines()]


def benchmark_examples() -> list[dict]:
    """The bundled articles as the benchmark reads CNN/DM (`rouge_sets`, `dev_sets`)."""
    return read_wikisum_examples(str(BUNDLED), ranking_unit="sentence")


def test_a_plain_article_gives_the_shipped_decoder_the_benchmarks_input():
    config = AutoConfig.from_pretrained(SHIPPED)
    assert config.ranking_unit == "sentence"
    processor = WikiSumProcessor(AutoTokenizer.from_pretrained(SHIPPED), config)
    for article, example in zip(bundled_articles(), benchmark_examples(), strict=True):
        plain = processor(article)
        benchmark = processor({"title": example["title"], "documents": example["documents"]}, ranking_unit="paragraph")
        assert plain["input_ids"].tolist() == benchmark["input_ids"].tolist()
        assert len(plain["paragraphs"]) > 3 and plain["paragraphs"] == benchmark["paragraphs"]
        # the layout before: the article (no line breaks) was one paragraph, cut at L from its start
        whole = processor(article, ranking_unit="paragraph")
        assert len(whole["paragraphs"]) == 1 and whole["input_ids"].tolist() != plain["input_ids"].tolist()


@pytest.fixture
def tiny_sentence_ranker(minilm_tokenizer, tmp_path):
    """A tiny random WikiSum (MiniLM's vocabulary) trained, as its config says, on sentences."""
    torch.manual_seed(0)
    model = WikiSumForCausalLM(WikiSumConfig(
        embedding_size=16, hidden_size=32, num_attention_heads=4, intermediate_size=64, local_block_size=8,
        max_input_tokens=48, ranking_unit="sentence",
    )).eval()
    model.generation_config.max_new_tokens = 6
    model.save_pretrained(tmp_path / "model")
    minilm_tokenizer.save_pretrained(tmp_path / "model")
    return sumformers.load_pipeline(str(tmp_path / "model"))


def test_the_pipeline_ranks_a_plain_articles_sentences_as_the_benchmark_does(tiny_sentence_ranker, script):
    article, example = bundled_articles()[0], benchmark_examples()[0]
    plain = tiny_sentence_ranker(article)
    assert [paragraph["text"] for paragraph in plain["paragraphs"]] == [
        paragraph["text"] for paragraph in tiny_sentence_ranker(example, ranking_unit="paragraph")["paragraphs"]
    ]
    assert plain["summary"] == script.pipeline_summaries(tiny_sentence_ranker, [example])[0]
    assert len(tiny_sentence_ranker(article, ranking_unit="paragraph")["paragraphs"]) == 1
    with pytest.raises(ValueError, match=r"^ranking_unit must be one of \('paragraph', 'sentence'\), got 'word'$"):
        tiny_sentence_ranker(article, ranking_unit="word")


def test_a_config_refuses_an_unknown_ranking_unit():
    with pytest.raises(ValueError, match=r"^ranking_unit must be one of \('paragraph', 'sentence'\), got 'word'$"):
        WikiSumConfig(ranking_unit="word")
    assert WikiSumConfig().ranking_unit == "paragraph"  # models trained before the field rank paragraphs, as before


@pytest.mark.slow  # the shipped model's beam search on one article (a few seconds; minutes on a loaded machine)
def test_the_shipped_pipeline_summarizes_a_plain_article_as_the_benchmark_did(script):
    summarizer = sumformers.load_pipeline(str(SHIPPED))
    article, example = bundled_articles()[0], benchmark_examples()[0]
    summary = summarizer(article)["summary"]
    assert summary and summary == script.pipeline_summaries(summarizer, [example])[0]
