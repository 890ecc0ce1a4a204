"""benchmarks/ship_cnndm.py's account of a shipped CNN/DM model's training, for a GPU and for a CPU run."""

from argparse import Namespace

import pytest

from conftest import imported_benchmark

script = imported_benchmark("ship_cnndm")

GPU_RUN = "39563 documents (149491 training rows) from `train` of cnn_dailymail/train_large.jsonl.gz, 582 steps"
CPU_RUN = "3200 documents (3200 training rows) from `train` of cnn_dailymail/train_large.jsonl.gz (a random subset"


def settings(**changes):
    defaults = dict(model="ETCSum", hardware="h200", command=None, call="three models side by side",
                    end_bias=None, pooling="no differently")
    return Namespace(**dict(defaults, **changes))


def test_a_gpu_run_is_told_with_all_articles_and_the_carried_encoder(script):
    text = script.card_training_text(settings(), GPU_RUN)
    assert text.startswith("The 39,563 CNN/DailyMail training articles")
    assert "int8 rows" in text  # the GPU call's MiniLM is not the installed one
    assert "one NVIDIA H200" in text and "the call trained three models side by side" in text
    assert f"Run: {GPU_RUN} Deviations from the paper" in text


def test_a_cpu_run_is_told_with_its_subset_and_command_and_no_carried_encoder(script):
    text = script.card_training_text(settings(hardware="cpu", command="python train_stepwise.py --x 1"), CPU_RUN)
    assert text.startswith("3,200 of the 39,563 CNN/DailyMail training articles")
    assert "int8" not in text and "H200" not in text
    assert "Trained on 2 CPU cores with the GPU recipe's settings (`python train_stepwise.py --x 1`" in text
    assert "tiled past 512" in text  # ETCSum's own deviations


def test_a_stepwise_model_states_its_end_bias(script):
    text = script.card_training_text(settings(model="Stepwise ETCSum", end_bias=-3.0), GPU_RUN)
    assert "the end unit's logit biased by -3 (not in the paper" in text


def test_a_continued_run_keeps_the_gpu_run_it_started_from_then_tells_its_own(script):
    started = script.card_training_text(settings(model="Stepwise HiBERT", end_bias=-2.1), GPU_RUN)
    continued = "3000 documents (11319 oracle-order training rows) from `train` (a random subset, seed 57)"
    command = "python train_stepwise.py --init_from x"
    text = script.card_training_text(
        settings(model="Stepwise HiBERT", end_bias=-1.4, hardware="cpu", command=command), continued, started
    )
    assert text.startswith("The 39,563 CNN/DailyMail training articles") and "int8 rows" in text
    assert (f"Run: {GPU_RUN} Then continued on 2 CPU cores over its own frozen sentence vectors (`{command}`): "
            f"{continued} Deviations from the paper") in text
    assert "biased by -1.4" in text and "biased by -2.1" not in text
    cpu_started = script.card_training_text(settings(hardware="cpu", command=command), CPU_RUN)
    with pytest.raises(SystemExit, match="GPU recipe"):
        script.card_training_text(settings(hardware="cpu", command=command), continued, cpu_started)


QUALITY = imported_benchmark("quality_cnndm", "quality")


def test_the_cards_figures_are_the_shipped_decodings_rows_of_the_quality_table(script, quality, tmp_path):
    def result(rouge1, vs_lead3, vs_lead_words, **extra):
        return dict(rouge1=rouge1, rouge1_interval=(rouge1 - 1, rouge1 + 1), rouge1_vs_lead3=vs_lead3,
                    rouge1_vs_lead3_interval=(vs_lead3 - 0.5, vs_lead3 + 0.5), rouge1_vs_lead_words=vs_lead_words,
                    rouge1_vs_lead_words_interval=(vs_lead_words - 0.5, vs_lead_words + 0.5), rouge2=11.0,
                    rougeLsum=27.0, mean_sentences=2.8, mean_words=59.84, redundancy=0.0, rouge1_cnn=30.0,
                    rouge1_dailymail=41.0, seconds=None, **extra)

    decoding = "beam 3, 1-4 sentences, END bias -2.1"
    rows = [("Lead-3", "first 3", "no", result(29.0, 0.0, 0.0)),
            ("HiBERT", "top 3", "yes", result(30.0, 1.0, 0.2)),  # another model
            ("Stepwise HiBERT", decoding, "yes", result(39.25, 1.67, -0.125)),
            ("Stepwise HiBERT", decoding + ", <= 60 words", "no", result(38.0, 0.7, 0.1))]  # not shipped
    report = "\n\n".join([quality.format_table("validation_large[:1000]", rows, {"all": 3, "cnn": 1, "dailymail": 2}),
                          quality.format_table("validation[:300] (CNN)", rows[2:3], {"all": 3, "cnn": 3})])
    results = tmp_path / "table.md"
    results.write_text(report)
    figures = script.quality_table_figures("Stepwise HiBERT", str(results))
    assert f"shipped decoding ({decoding}, trigram" in figures
    assert " ".join(figures.split()).endswith(
        "- Raw cased CNN `validation[:300]`: ROUGE-1 / 2 / Lsum 39.25 / 11.00 / 27.00, 2.80 sentences (59.8 words) a "
        "summary; ROUGE-1 over Lead-3 +1.67 [+1.17, +2.17], against the Lead of as many words -0.12 [-0.62, +0.38] "
        f"(the interval holds 0) (`{results}`).")
    assert "- Lowercased `validation_large[:1000]` (1 CNN, 2 Daily Mail articles): ROUGE-1 / 2 / Lsum 39.25" in figures
    assert all(len(line) <= 120 for line in figures.splitlines())
    with pytest.raises(SystemExit, match="no row of BERTSum"):
        script.quality_table_figures("BERTSum", str(results))
    results.write_text(report.replace("Lead of as many words", "Lead-2"))  # a table from before the column
    with pytest.raises(SystemExit, match="rerun its Command line"):
        script.quality_table_figures("Stepwise HiBERT", str(results))


def test_the_cards_figures_replace_those_of_the_same_table_and_keep_the_others(script):
    results, other = "benchmarks/results/quality_cnndm_gpu.md", "benchmarks/results/quality_cnndm_matched_length.md"
    evaluation = ("Held out: 30.88. Tables: `x.md`.\n\n"
                  f"{script.QUALITY_FIGURES}, shipped decoding; old\nwrapped:\n\n"
                  f"- Lowercased: 39.22\n  (`{results}`).\n"
                  f"- Against HiBERT at matched length: a tie\n  (`{other}`).\n"
                  f"- Over Lead-3: +1.41 (`{results}`).")
    figures = f"{script.QUALITY_FIGURES}, new.\n\n- new figures (`{results}`)."
    updated = script.with_quality_figures(evaluation, figures, results)
    kept = f"- Against HiBERT at matched length: a tie\n  (`{other}`)."
    assert updated == f"Held out: 30.88. Tables: `x.md`.\n\n{figures}\n{kept}"
    assert script.with_quality_figures(updated, figures, results) == updated  # rewriting is stable
    assert script.with_quality_figures("Held out: 30.88.", figures, results) == "Held out: 30.88.\n\n" + figures


def test_card_figures_rebuild_the_shipped_card_with_the_tables_scores(script, quality, tmp_path, monkeypatch):
    import json
    import shutil

    from conftest import REPO_ROOT

    folder = tmp_path / "checkpoints" / "hibert-minilm-cnndm"
    shutil.copytree(REPO_ROOT / "checkpoints" / "hibert-minilm-cnndm", folder)
    card = json.loads((folder / "sumformers_card.json").read_text())
    card.update(results={"rouge1": 30.29, "rouge2": 11.89, "rougeLsum": 27.05},
                evaluation="Decoding: top 3. Held out: ROUGE-1 / 2 / Lsum 30.29 / 11.89 / 27.05; tables: `t.md`.")
    (folder / "sumformers_card.json").write_text(json.dumps(card))
    result = dict(rouge1=30.55, rouge1_interval=(29.2, 31.8), rouge1_vs_lead3=0.8, rouge1_vs_lead3_interval=(-0.2, 1.8),
                  rouge1_vs_lead_words=0.35, rouge1_vs_lead_words_interval=(-0.57, 1.21), rouge2=11.91,
                  rougeLsum=27.42, mean_sentences=3.0, mean_words=67.8, redundancy=0.0, rouge1_cnn=30.55, seconds=None)
    results = tmp_path / "table.md"
    results.write_text(quality.format_table("validation[:300] (CNN)", [("HiBERT", "top 3", "yes", result)],
                                            {"all": 300, "cnn": 300}))
    monkeypatch.setattr(script, "REPO", tmp_path)
    script.write_card_figures(Namespace(model="HiBERT", results=str(results)))
    card = json.loads((folder / "sumformers_card.json").read_text())
    assert card["results"] == {"rouge1": 30.55, "rouge2": 11.91, "rougeLsum": 27.42}
    assert card["evaluation"].startswith("Decoding: top 3. Held out: ROUGE-1 / 2 / Lsum 30.55 / 11.91 / 27.42; ")
    words = " ".join(card["evaluation"].split())
    assert "against the Lead of as many words +0.35 [-0.57, +1.21] (the interval holds 0)" in words
    readme = (folder / "README.md").read_text()
    assert "value: 27.42" in readme and card["evaluation"] in readme  # the model-index and the Evaluation
