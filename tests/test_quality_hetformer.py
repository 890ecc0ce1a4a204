"""benchmarks/quality_hetformer.py's record of an evaluation in a checkpoint's card."""

import json
import shutil

from conftest import REPO_ROOT, imported_benchmark

script = imported_benchmark("quality_hetformer")


def test_an_evaluation_is_recorded_in_the_card_info_and_its_model_card(script, tmp_path):
    shipped = REPO_ROOT / "checkpoints" / "hetformer-minilm-qmsum"
    checkpoint = tmp_path / "hetformer"
    checkpoint.mkdir()
    for name in ("config.json", "sumformers_card.json"):
        shutil.copy(shipped / name, checkpoint / name)
    before = json.loads((checkpoint / "sumformers_card.json").read_text())
    scores = {"rouge1": 21.5, "rouge2": 3.25, "rougeLsum": 19.0}
    script.record_in_card(checkpoint, scores, "35 meetings of QMSum's test split (a hand-made evaluation)")
    card = json.loads((checkpoint / "sumformers_card.json").read_text())
    assert card == dict(before, results=scores, evaluation="35 meetings of QMSum's test split (a hand-made evaluation)")
    readme = (checkpoint / "README.md").read_text()
    assert "35 meetings of QMSum's test split (a hand-made evaluation)" in readme
    assert "value: 21.5" in readme  # the model-index carries the new scores
    # a checkpoint without card info gets one holding only the evaluation
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(shipped / "config.json", bare / "config.json")
    script.record_in_card(bare, scores, "an evaluation")
    assert json.loads((bare / "sumformers_card.json").read_text()) == {"results": scores, "evaluation": "an evaluation"}


def test_hetformer_is_paired_against_each_baseline_of_the_run(script):
    references = ["the red case costs twelve euros", "users want a curved case"]
    predictions = {
        "Lead-2": ["the red case costs twelve euros", "bright colours win"],  # right, then no word in common
        "BERTSum (CNN/DM, 512 tokens)": references,  # both right
        "HetFormer": references,
        "Oracle (greedy)": references,  # not a baseline: not paired
    }
    report = script.baselines_report(predictions, references)
    sections = report.split("\n\n")
    assert [section.split("\n")[0] for section in sections] == [
        "HetFormer minus Lead-2, paired over 2 documents:",
        "HetFormer minus BERTSum (CNN/DM, 512 tokens), paired over 2 documents:",
    ]
    # differences 0 and 100 against Lead: mean +50, each bootstrap mean lies between them
    assert sections[0].split("\n")[1].startswith("- rouge1: +50.00 [")
    low, high = (float(value) for value in sections[0].split("\n")[1].split("[")[1].rstrip("]").split(", "))
    assert 0 <= low <= 50 <= high <= 100
    keys = ("rouge1", "rouge2", "rougeLsum")
    assert sections[1].split("\n")[1:] == [f"- {key}: +0.00 [+0.00, +0.00]" for key in keys]


def test_ship_makes_a_run_the_shipped_checkpoint_with_this_evaluation_on_its_card(script, tmp_path, monkeypatch):
    run = tmp_path / "run" / "final"
    shutil.copytree(REPO_ROOT / "checkpoints" / "hetformer-minilm-qmsum", run)
    card = json.loads((run / "sumformers_card.json").read_text())
    card = {"training": "40 training examples (2 inputs), 10 optimizer steps; final training loss 0.25, 60 s.",
            "datasets": card["datasets"]}  # a run without --do_eval: no evaluation, no results
    (run / "sumformers_card.json").write_text(json.dumps(card))
    monkeypatch.setattr(script, "SHIPPED", tmp_path / "checkpoints" / "hetformer-minilm-qmsum")
    report = "| system | ROUGE-1 |\n|---|---:|\n| HetFormer | 27.50 |\n\nHetFormer minus Lead-11:\n- rouge1: +1.00"
    scores = {"rouge1": 27.5, "rouge2": 4.0, "rougeLsum": 25.0}
    shipped = script.ship(str(run), report, scores, "Chosen on validation[:10] (ROUGE-1 23.00).", "CPU, 1 thread",
                          "validation[10:]")
    assert shipped == tmp_path / "checkpoints" / "hetformer-minilm-qmsum"
    assert (shipped / "adapter_model.safetensors").read_bytes() == (run / "adapter_model.safetensors").read_bytes()
    info = json.loads((shipped / "sumformers_card.json").read_text())
    assert info["training"] == card["training"] + " Trained on CPU, 1 thread."
    assert info["evaluation"] == "Chosen on validation[:10] (ROUGE-1 23.00).\n\n" + report
    assert (info["results"], info["dataset_name"], info["split"]) == (scores, "qmsum", "validation[10:]")
    readme = (shipped / "README.md").read_text()
    assert "value: 27.5" in readme and "split: validation[10:]" in readme and "| HetFormer | 27.50 |" in readme
    assert "Trained on CPU, 1 thread." in readme
