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
