"""benchmarks/wikisum.py --part rouge: the per-example ROUGE over several references, the Lead-3 and extractive
rows, and the table a model's summaries give (a tiny saved model on hand-written examples)."""

import argparse

import pytest
import torch

from conftest import imported_benchmark
from sumformers import WikiSumConfig, WikiSumForCausalLM
from sumformers.text.scoring import rouge_per_example

script = imported_benchmark("wikisum")

ARTICLE = "\n".join(
    [
        "the storm reached the coast on monday .",
        "thousands of homes lost power overnight .",
        "schools stayed closed across the county .",
        "officials expect repairs to take a week .",
        "the storm weakened as it moved inland .",
    ]
)
EXAMPLES = [
    {"id": "a", "title": "", "documents": [ARTICLE], "summary": "the storm reached the coast .\nhomes lost power ."},
    {"id": "b", "title": "", "documents": ["one sentence only ."], "summary": "one sentence ."},
]


def test_rouge_is_the_mean_over_the_references(script):
    references = [["the cat sat on the mat .", "dogs bark at night ."]]
    scores = script.reference_rouge(["the cat sat on the mat ."], references)[0]
    # a perfect match with the first reference and no common word with the second
    assert scores["rouge1"] == pytest.approx(50.0) and scores["rougeLsum"] == pytest.approx(50.0)
    single = rouge_per_example(["the cat sat ."], ["the cat sat on the mat ."])[0]
    assert script.reference_rouge(["the cat sat ."], [["the cat sat on the mat ."]])[0] == pytest.approx(single)


def test_lead_3_and_the_extractive_stage(script):
    baselines = script.baseline_summaries(EXAMPLES, "tfidf")
    lead = baselines["Lead-3"]
    assert lead[0].split("\n") == ARTICLE.split("\n")[:3] and lead[1] == "one sentence only ."
    extractive = baselines["extractive stage alone (tfidf, reference length)"]
    # tf-idf against no title keeps the article's order; the cut is the reference's 10 words (periods count)
    assert extractive[0].split() == ARTICLE.split()[:10]
    assert extractive[1].split() == "one sentence only .".split()[:3]


def save_tiny_model(folder, tokenizer, max_new_tokens: int) -> None:
    torch.manual_seed(0)
    config = WikiSumConfig(
        embedding_size=16, hidden_size=32, num_attention_heads=4, intermediate_size=64, local_block_size=8,
        attention_layers=["local", "compressed", "local"], max_input_tokens=48,
    )  # fmt: skip
    model = WikiSumForCausalLM(config).eval()
    model.generation_config.max_new_tokens = max_new_tokens
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def record_results(script, monkeypatch) -> dict:
    references = [[example["summary"]] for example in EXAMPLES]
    monkeypatch.setattr(script, "rouge_sets", lambda rows: {"toy": (EXAMPLES[:rows], references[:rows])})
    written = {}
    monkeypatch.setattr(
        script, "write_results", lambda part, text, data: written.update(part=part, text=text, data=data)
    )
    return written


def test_rouge_part_scores_each_system_and_shows_the_models_summaries(script, minilm_tokenizer, tmp_path, monkeypatch):
    save_tiny_model(tmp_path, minilm_tokenizer, max_new_tokens=5)
    written = record_results(script, monkeypatch)
    script.rouge_benchmark({"tiny": str(tmp_path)}, 2)
    rows = {row["system"]: row for row in written["data"]}
    assert written["part"] == "rouge" and len(rows) == 3
    lead = rows["Lead-3"]
    hand = [rouge_per_example([summary], [example["summary"]])[0]["rougeLsum"] for summary, example in
            zip(script.baseline_summaries(EXAMPLES, "tfidf")["Lead-3"], EXAMPLES)]  # fmt: skip
    assert lead["rougeLsum"] == pytest.approx(sum(hand) / 2)
    assert lead["rougeLsum_interval"][0] <= lead["rougeLsum"] <= lead["rougeLsum_interval"][1]
    model_row = rows[f"tiny ({tmp_path})"]
    summaries = [item["summary"] for item in model_row["shown"]]
    assert model_row["examples"] == 2 and model_row["seconds_per_example"] > 0
    assert model_row["repeated_trigram_rate"] in (0.0, 0.5, 1.0)
    assert all(f"- tiny ({tmp_path}): {summary!r}" in written["text"] for summary in summaries)
    assert "Lead-3: " not in written["text"]  # only the models' summaries are shown
    # shipping takes a training script's adapter checkpoint only (a full model is no small shipped checkpoint)
    monkeypatch.setattr(script, "REPO", tmp_path / "repo")
    with pytest.raises(SystemExit, match="not an adapter checkpoint"):
        script.rouge_benchmark({"tiny": str(tmp_path)}, 2, ship="wikisum-shipped", trained_on="CPU")
    assert not (tmp_path / "repo").exists()


def test_rouge_part_adds_a_row_decoded_with_ngram_blocking(script, minilm_tokenizer, tmp_path, monkeypatch):
    from transformers import pipeline

    save_tiny_model(tmp_path, minilm_tokenizer, max_new_tokens=24)  # a random model repeats itself at this length
    written = record_results(script, monkeypatch)
    script.rouge_benchmark({"tiny": str(tmp_path)}, 2, decodings=[{"no_repeat_ngram_size": 2}])
    rows = {row["system"]: row for row in written["data"]}
    saved, blocked = rows[f"tiny ({tmp_path})"], rows[f"tiny, no_repeat_ngram_size=2 ({tmp_path})"]
    inputs = [{"title": example["title"], "documents": example["documents"]} for example in EXAMPLES[:2]]
    summarizer = pipeline("wikisum", model=str(tmp_path))
    expected = [output["summary"] for output in summarizer(inputs, no_repeat_ngram_size=2)]
    assert [item["summary"] for item in blocked["shown"]] == expected
    assert [item["summary"] for item in saved["shown"]] != expected
    for summary in expected:  # no WordPiece bigram twice
        pieces = minilm_tokenizer.tokenize(summary)
        assert len(set(zip(pieces, pieces[1:]))) == len(pieces) - 1


def test_dev_part_decodes_the_development_articles_with_each_added_option(
    script, minilm_tokenizer, tmp_path, monkeypatch
):
    from transformers import pipeline

    save_tiny_model(tmp_path, minilm_tokenizer, max_new_tokens=12)
    written = record_results(script, monkeypatch)
    development = EXAMPLES[1:]
    monkeypatch.setattr(script, "dev_sets", lambda: {"dev": (development, [[development[0]["summary"]]])})
    options = [{"min_new_tokens": 10}, {"num_beams": 1, "length_penalty": 2.0}]
    script.rouge_benchmark({"tiny": str(tmp_path)}, 2, decodings=options, development=True)
    assert written["part"] == "dev" and "(development articles, for decoding choices)" in written["text"]
    rows = {row["system"]: row for row in written["data"]}
    assert {row["dataset"] for row in rows.values()} == {"dev"}  # the reported sets are not read
    summarizer = pipeline("wikisum", model=str(tmp_path))
    inputs = [{"title": example["title"], "documents": example["documents"]} for example in development]
    for system, added in [("tiny", {}), ("tiny, min_new_tokens=10", options[0]),
                          ("tiny, num_beams=1, length_penalty=2.0", options[1])]:  # fmt: skip
        expected = [output["summary"] for output in summarizer(inputs, **added)]
        assert [item["summary"] for item in rows[f"{system} ({tmp_path})"]["shown"]] == expected


def test_decoding_options_are_a_json_object(script):
    assert script.generate_options('{"min_new_tokens": 40}') == {"min_new_tokens": 40}
    for text, message in [("min_new_tokens=40", "not JSON"), ("[40]", "expected a JSON object"),
                          ("{}", "expected a JSON object")]:  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            script.generate_options(text)


def test_perplexity_part_scores_each_model_and_start_as_computed_by_hand(
    script, minilm_tokenizer, tmp_path, monkeypatch
):
    """Two variants of one model (T-DMCA and its T-D relayout, untrained) at two lengths: every table entry is the
    summary tokens' cross-entropy of a plain forward pass, the start rows equal the untrained variants, and the
    paired difference is the difference of the two."""
    from sumformers.processing.processing_wikisum import encode_wikisum_input
    from sumformers.text.ranking import rank_paragraphs, split_paragraphs

    save_tiny_model(tmp_path / "tdmca", minilm_tokenizer, max_new_tokens=5)
    tdmca = WikiSumForCausalLM.from_pretrained(tmp_path / "tdmca", attn_implementation="eager").eval()
    WikiSumForCausalLM.from_trained_decoder(tdmca, attention_layers=["full"] * 3).save_pretrained(tmp_path / "td")
    minilm_tokenizer.save_pretrained(tmp_path / "td")
    monkeypatch.setattr(script, "perplexity_examples", lambda queries_per_meeting: EXAMPLES)
    monkeypatch.setattr(script, "PERPLEXITY_LENGTHS", (16, 48))
    monkeypatch.setattr(script, "RESULTS_DIR", tmp_path / "results")
    written = record_results(script, monkeypatch)
    models = {"T-D": str(tmp_path / "td"), "T-DMCA": str(tmp_path / "tdmca")}
    script.perplexity_benchmark(models, start=str(tmp_path / "tdmca"), queries_per_meeting=2)

    values = {(row["model"], row["L"]): row["log_perplexity"] for row in written["data"]}
    assert set(values) == {
        (m, L) for m in ("T-D", "T-DMCA", "T-D at the start", "T-DMCA at the start") for L in (16, 48)
    }
    td = WikiSumForCausalLM.from_pretrained(tmp_path / "td", attn_implementation="eager").eval()
    for label, model in (("T-D", td), ("T-DMCA", tdmca)):
        for length in (16, 48):
            nats, tokens = 0.0, 0
            for example in EXAMPLES:
                ranking = rank_paragraphs(split_paragraphs(example["documents"]), example["title"], "tfidf")
                input_ids, _ = encode_wikisum_input(minilm_tokenizer, model.config, example["title"], ranking, length)
                summary = minilm_tokenizer(example["summary"], add_special_tokens=False)["input_ids"] + [102]
                with torch.no_grad():
                    all_logits = model(torch.tensor([input_ids + summary])).logits[0]
                predicted = all_logits[len(input_ids) - 1 : -1]
                nats += torch.nn.functional.cross_entropy(predicted, torch.tensor(summary), reduction="sum").item()
                tokens += len(summary)
            assert values[label, length] == pytest.approx(nats / tokens, rel=1e-5)
            assert values[f"{label} at the start", length] == pytest.approx(values[label, length], rel=1e-5)
    difference = values["T-DMCA", 48] - values["T-D", 48]
    parameters = sum(p.numel() for p in tdmca.parameters()) / 1e6
    row = f"| T-DMCA | {parameters:.2f}M | L=48 | {values['T-DMCA', 16]:.3f} | {values['T-DMCA', 48]:.3f} |"
    assert row in written["text"]  # trained at its max_input_tokens, 48
    assert "| T-DMCA - T-D | " in written["text"] and f"{difference:+.3f} [" in written["text"]
    assert (tmp_path / "results" / "wikisum_perplexity.png").is_file()


def test_paired_difference_interval_over_examples(script):
    reference = [(10.0, 4), (6.0, 2), (3.0, 1)]
    # the same extra nats per token in every example: every resample gives it
    shifted = [(nats + 0.5 * tokens, tokens) for nats, tokens in reference]
    assert script.paired_difference_interval(shifted, reference) == pytest.approx((0.5, 0.5))
    # two examples better by 1 nat a token, one worse by 1: the interval spans the token-weighted -5/7
    mixed = [(6.0, 4), (4.0, 2), (4.0, 1)]
    low, high = script.paired_difference_interval(mixed, reference)
    assert -1.0 <= low < -5 / 7 < high <= 1.0


def test_card_part_writes_the_perplexity_and_memory_tables_into_the_shipped_card(
    script, minilm_tokenizer, tmp_path, monkeypatch
):
    import json

    from sumformers.hub import CARD_INFO_FILE, write_card

    folder = tmp_path / "repo" / "checkpoints" / "wikisum-shipped"
    save_tiny_model(folder, minilm_tokenizer, max_new_tokens=5)
    config = WikiSumForCausalLM.config_class.from_pretrained(folder)
    write_card(folder, config, {"model_name": "wikisum-shipped", "evaluation": "ROUGE-L 25"})
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(script, "REPO", tmp_path / "repo")
    monkeypatch.setattr(script, "RESULTS_DIR", results)
    (results / "wikisum_perplexity.md").write_text("## Perplexity at growing L\n\n| model | L=256 |\n|---|---|\n")
    with pytest.raises(SystemExit, match="wikisum_memory.md is missing; run --part memory first"):
        script.card_benchmark("wikisum-shipped")
    (results / "wikisum_memory.md").write_text("## Memory\n\n| variant | largest L |\n|---|---|\n| T-D | 5120 |\n")
    script.card_benchmark("wikisum-shipped")
    readme = (folder / "README.md").read_text()
    assert "ROUGE-L 25" in readme
    section = readme.split("## The paper's comparisons\n", 1)[1].split("## Limitations", 1)[0]
    assert "### Perplexity at growing L\n\n| model | L=256 |" in section
    assert "### Memory\n\n| variant | largest L |\n|---|---|\n| T-D | 5120 |" in section
    assert json.loads((folder / CARD_INFO_FILE).read_text())["comparisons"].endswith("| T-D | 5120 |")
    # a card without comparisons has no such section
    write_card(folder, config, {"model_name": "wikisum-shipped"})
    assert "## The paper's comparisons" not in (folder / "README.md").read_text()


def test_the_memory_part_doubles_then_bisects_to_each_variants_largest_length(script):
    """`largest_lengths` with made-up peaks (MB = L / 100 for T-D eager, L / 1,000 for the others, a limit of 100
    MB): eager fits 8,192 and not 16,384, then the bisections try 12,288 (no) and 10,240 (no); the others fit every
    length up to the stop."""
    tried = []

    def run_case(layout, implementation, length):
        tried.append((implementation, length))
        peak = length / (100 if implementation == "eager" else 1000)
        return {"status": "ok", "peak_mb": peak, "before_step_mb": 0.0, "seconds": 0.1}

    results, largest = script.largest_lengths(4096, 65536, run_case, limit_mb=100, skip_predicted=False)
    tdmca, eager, sdpa = script.VARIANTS  # the model's own layout is measured first
    assert tried[0] == ("blocked", 4096)
    assert [length for implementation, length in tried if implementation == "eager"] == [
        4096, 8192, 16384, 12288, 10240]
    assert largest == {eager: 8192, sdpa: 65536, tdmca: 65536}
    assert len(results) == len(tried)


def test_on_a_gpu_an_out_of_memory_case_is_the_limit_and_nothing_is_skipped_by_prediction(script):
    """With the allocator's cap (a GPU), a case that raises out-of-memory ends the doubling; prediction from the
    peaks would skip 8,192 here (quadratic growth past 1.5 x the limit) but is off, so that case runs."""
    def run_case(layout, implementation, length):
        if length > 6000:
            return {"status": "out of memory"}
        return {"status": "ok", "peak_mb": (length / 1024) ** 2 * 10, "before_step_mb": 0.0, "seconds": 0.1}

    results, largest = script.largest_lengths(1024, 16384, run_case, limit_mb=400, skip_predicted=False)
    assert set(largest.values()) == {5120}  # 4096 fits, 8192 not; bisections: 6144 (no), then 5120 (yes)
    statuses = {(case["L"], case["status"]) for case in results}
    assert (8192, "out of memory") in statuses and not any(status.startswith("skipped") for _, status in statuses)
    # on CPU (prediction on): peaks 10, 40, 160 MB extrapolate to 640 MB at 8,192, past 1.5 x 400: skipped
    results, _ = script.largest_lengths(1024, 16384, run_case, limit_mb=400, skip_predicted=True)
    assert results[3] == {"variant": results[3]["variant"], "L": 8192, "status": "skipped: predicted 0.6 GB"}
