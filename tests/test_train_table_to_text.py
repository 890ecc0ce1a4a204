"""The table-to-text training scripts end to end on 66 tiny games (60 train, 5 dev, 1 test by `ROTOWIRE_SPLITS`):
`train_realizer.py` and `train_content_planner.py` train a few steps over a tiny random encoder, evaluate the dev
games and save a final model that their pipelines load, as the Trainer's last checkpoint does."""

import json
import os
import subprocess
import sys

import pytest
from test_rotowire import tiny_game
from transformers import pipeline

from conftest import REPO_ROOT
from sumformers.text.rotowire_plans import decodable_plan, oracle_plan
from sumformers.text.rotowire_records import parse_game

SUMMARY = ("The Bucks defeated the Cavaliers 118 - 101 on Tuesday . Kevin Love scored 20 points . "
           "LeBron James had 22 points .").split()


@pytest.fixture
def games_file(tmp_path):
    path = tmp_path / "games.jsonl"
    path.write_text("".join(json.dumps(tiny_game(id=f"g{number:02d}", summary=SUMMARY)) + "\n" for number in range(66)))
    return path


def run_script(name, *arguments, cwd):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    command = [sys.executable, str(REPO_ROOT / "training_scripts" / f"{name}.py"), *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed


def common_arguments(encoder, games_file, output, steps=2):
    return ["--model_name_or_path", str(encoder), "--train_file", str(games_file), "--output_dir", str(output),
            "--max_steps", str(steps), "--save_steps", "100", "--learning_rate", "1e-3", "--do_train", "--do_eval",
            "--use_cpu", "--report_to", "none"]


def test_the_realizer_trains_evaluates_and_its_final_model_writes_a_game(tmp_path, tiny_encoder_folder, games_file):
    output = tmp_path / "realizer"
    run_script("train_realizer", *common_arguments(tiny_encoder_folder, games_file, output),
               "--per_device_train_batch_size", "4", "--decoder_layers", "2", "--num_beams", "1",
               "--max_target_length", "24", "--context", "names", cwd=tmp_path)
    card = json.loads((output / "final" / "sumformers_card.json").read_text())
    # the context asked for (the shipped realizer's), in the config and on the card
    assert json.loads((output / "final" / "config.json").read_text())["context"] == "names"
    assert "context names" in card["training"]
    # one training pair per plan sentence: 3 sentences x 60 training games
    assert card["training"].startswith(f"180 plan sentences of the 60 `train` games of {games_file} (") and (
        "2 optimizer steps" in card["training"])
    scores = json.loads((output / "eval_results.json").read_text())
    assert 0 <= scores["bleu"] <= 100 and 0 <= scores["rouge1"] <= 100
    assert f"BLEU {scores['bleu']:.2f}" in card["evaluation"]
    game = tiny_game(summary=SUMMARY)
    realized = pipeline("table-to-text", model=str(output / "final"), plan="oracle")(game, num_beams=1)
    # the oracle plan's three sentences, each realized
    assert len(realized["sentences"]) == 3 and all(sentence.strip() for sentence in realized["sentences"])
    # the template plan of the training games' oracle plans, realized when no plan is given
    from sumformers.text.rotowire_plans import learn_plan_template, oracle_plan
    from sumformers.text.rotowire_records import parse_game

    train = [parse_game(json.loads(line)) for line in games_file.read_text().splitlines()[:60]]
    config = json.loads((output / "final" / "config.json").read_text())
    assert config["plan_template"] == learn_plan_template(train, [oracle_plan(g) for g in train])
    assert pipeline("table-to-text", model=str(output / "final"))(game, num_beams=1)["plan_source"] == "template"


@pytest.mark.parametrize(
    "model_type, overrides",
    [("stepwise_hibert_planner", {"sentence_encoder_layers": 2, "document_layers": 1}),
     ("stepwise_etcsum_planner", {})],
)
def test_the_planner_trains_evaluates_and_its_final_model_plans_a_game(
    tmp_path, tiny_encoder_folder, games_file, model_type, overrides
):
    output = tmp_path / "planner"
    run_script("train_content_planner", *common_arguments(tiny_encoder_folder, games_file, output),
               "--model_type", model_type, "--per_device_train_batch_size", "2",
               "--num_sentences", "20", "--config_overrides", json.dumps(overrides), cwd=tmp_path)
    card = json.loads((output / "final" / "sumformers_card.json").read_text())
    # one step per unit of the oracle plan less the repeats greedy decoding forbids, its <EOT> (the end) the last
    steps = len(decodable_plan(oracle_plan(parse_game(tiny_game(summary=SUMMARY)))))
    assert card["training"].startswith(f"60 Rotowire training games ({60 * steps} plan steps), 2 optimizer steps")
    assert "batch 2 games x 1 accumulation" in card["training"]
    scores = json.loads((output / "eval_results.json").read_text())
    assert {"cs_precision", "cs_recall", "cs_f1", "co"} <= set(scores)
    # besides the pooled figures, plan_scores keeps the per-game counts (lists) for a bootstrap of them
    assert all(0 <= scores[key] <= 100 for key in ("cs_precision", "cs_recall", "cs_f1", "co"))
    assert f"CS F1 {scores['cs_f1']:.2f}, CO (not in the paper) {scores['co']:.2f}" in card["evaluation"]
    plan = pipeline("content-planning", model=str(output / "final"))(tiny_game(), num_sentences=20)
    # at most 20 units, then the end of plan; every unit a record of the game or a sentence break
    records = {record.id for record in parse_game(tiny_game()).records}
    assert 1 <= len(plan["plan"]) <= 21 and plan["plan"][-1] == "<EOT>"
    assert all(unit in records or unit in ("<EOS>", "<EOT>") for unit in plan["plan"])


def test_a_time_budget_ends_planner_training_then_it_saves_and_evaluates(tmp_path, tiny_encoder_folder, games_file):
    # the GPU machine's ETCSum planner job: checkpointed, ended by the call's deadline
    output = tmp_path / "planner"
    run_script("train_content_planner", *common_arguments(tiny_encoder_folder, games_file, output, steps=3),
               "--model_type", "stepwise_etcsum_planner", "--gradient_checkpointing", "--steps_per_game", "2",
               "--per_device_train_batch_size", "2", "--num_sentences", "20", "--max_train_seconds", "0",
               cwd=tmp_path)
    card = json.loads((output / "final" / "sumformers_card.json").read_text())
    # a budget of 0 s: the first step spends it; the final model is saved and evaluated as after --max_steps
    assert "1 optimizer steps (0.03 epochs; a time budget stopped it short of 3) on CPU" in card["training"]
    scores = json.loads((output / "eval_results.json").read_text())
    assert f"CS F1 {scores['cs_f1']:.2f}" in card["evaluation"]
