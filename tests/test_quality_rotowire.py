"""benchmarks/quality_rotowire.py: `--ship` copies a trained adapter checkpoint unchanged and its card keeps the
development scores, adds the benchmark's rows and says where the model trained."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, imported_benchmark
from sumformers.hub import shipped_checkpoints

script = imported_benchmark("quality_rotowire")


def test_ship_copies_the_adapter_and_adds_the_benchmark_rows_to_its_card(script, tmp_path, monkeypatch):
    trained = tmp_path / "runs" / "final"
    shutil.copytree(shipped_checkpoints()["realizer-minilm-rotowire"], trained)
    (trained / "training_args.bin").write_bytes(b"not shipped")
    card = {"training": "775 plan sentences, 2 optimizer steps.", "evaluation": "5 `dev` games: BLEU 5.00.",
            "datasets": ["rotowire"], "results": {"bleu": 5.0}}
    (trained / "sumformers_card.json").write_text(json.dumps(card))
    monkeypatch.setattr(script, "CHECKPOINTS", tmp_path / "checkpoints")
    table = ["| system | BLEU |", "|---|---|", "| Oracle plan + realizer | 6.00 [1.00, 9.00] |"]

    target = script.ship(str(trained), "shipped-realizer", table, "15 `test` games.", "CPU, 2 cores")

    assert target == tmp_path / "checkpoints" / "shipped-realizer" and not (target / "training_args.bin").exists()
    for name in ("adapter_model.safetensors", "adapter_config.json", "config.json", "generation_config.json"):
        assert (target / name).read_bytes() == (trained / name).read_bytes(), name
    shipped = json.loads((target / "sumformers_card.json").read_text())
    assert shipped["model_name"] == "shipped-realizer" and shipped["repo_id"] == "sumformers/shipped-realizer"
    assert shipped["training"] == "775 plan sentences, 2 optimizer steps. Trained on CPU, 2 cores."
    assert shipped["evaluation"].split("\n") == [
        "Development games (the training run's check): 5 `dev` games: BLEU 5.00.", "", "15 `test` games.", "", *table]
    assert shipped["results"] == {"bleu": 5.0}
    readme = (target / "README.md").read_text()
    assert "| Oracle plan + realizer | 6.00 [1.00, 9.00] |" in readme and "Trained on CPU, 2 cores." in readme


def test_ship_planner_sets_the_dev_chosen_bias_in_the_config_and_the_card_says_so(script, tmp_path, monkeypatch):
    trained = tmp_path / "runs" / "final"
    shutil.copytree(shipped_checkpoints()["stepwise-hibert-planner-minilm-rotowire"], trained)
    config = json.loads((trained / "config.json").read_text())
    (trained / "config.json").write_text(json.dumps({**config, "sentence_break_bias": 0.0}))
    monkeypatch.setattr(script, "CHECKPOINTS", tmp_path / "checkpoints")
    table = ["| system | CS F1 |", "|---|---|", "| Stepwise HiBERT planner, sentence-break bias -3 | 50.0 |"]

    target = script.ship(str(trained), "planner", table, "15 `test` games.", "CPU", {"sentence_break_bias": -3.0})

    assert (target / "adapter_model.safetensors").read_bytes() == (trained / "adapter_model.safetensors").read_bytes()
    assert json.loads((target / "config.json").read_text())["sentence_break_bias"] == -3.0
    readme = (target / "README.md").read_text()
    assert "Not the paper's: `sentence_break_bias` -3.0 is added to `<EOS>`'s logit" in readme
    assert "| Stepwise HiBERT planner, sentence-break bias -3 | 50.0 |" in readme


SHIP_PLANNER = ["--ship_planner", "CPU", "--hibert", "runs/planner"]


@pytest.mark.parametrize(("options", "message"), [
    ([*SHIP_PLANNER, "--ship_sentence_break_bias", "-3"],
     "the planner's bias -3 (--ship_sentence_break_bias) must be one of --sentence_break_bias"),
    ([*SHIP_PLANNER, "--sentence_break_bias", "0", "-3", "--ship_sentence_break_bias", "-3"],
     "needs --ship_decoding_reason"),
    (["--ship_planner", "CPU"], "--ship_planner needs --hibert"),
    (["--sentence_break_bias", "-3", "--ship_sentence_break_bias", "-3"], "needs --ship_planner"),
])
def test_planner_shipping_options_are_checked_before_any_work(script, monkeypatch, capsys, options, message):
    monkeypatch.setattr("sys.argv", ["quality_rotowire.py", *options])
    with pytest.raises(SystemExit):
        script.main()
    assert message in capsys.readouterr().err


def test_a_bias_sweep_without_shipping_needs_no_zero_row(script, monkeypatch, tmp_path):
    # the shipping checks leave a plain sweep alone: it gets past them to reading the (here missing) games
    monkeypatch.setattr("sys.argv", ["quality_rotowire.py", "--sentence_break_bias", "-1", "-2",
                                     "--data", str(tmp_path / "games.jsonl")])
    with pytest.raises(ValueError, match="games.jsonl: no such file"):
        script.main()


def test_turning_numbers_from_input_on_keeps_the_adapter_and_development_line_and_replaces_the_test_table(
    script, tmp_path
):
    shipped = tmp_path / "realizer"
    shutil.copytree(shipped_checkpoints()["realizer-minilm-rotowire"], shipped)
    config = json.loads((shipped / "config.json").read_text())
    (shipped / "config.json").write_text(json.dumps({**config, "numbers_from_input": False}))
    card = json.loads((shipped / "sumformers_card.json").read_text())
    card["evaluation"] = "Development games (the training run's check): BLEU 14.35.\n\n15 `test` games.\n\n| old |"
    (shipped / "sumformers_card.json").write_text(json.dumps(card))
    adapter = (shipped / "adapter_model.safetensors").read_bytes()
    table = ["| system | BLEU |", "|---|---|", "| Oracle plan + realizer, numbers from the input | 14.00 |"]

    script.turn_numbers_from_input_on(shipped, table, "15 `test` games, numbers from the input.")

    assert (shipped / "adapter_model.safetensors").read_bytes() == adapter
    assert json.loads((shipped / "config.json").read_text())["numbers_from_input"] is True
    assert json.loads((shipped / "sumformers_card.json").read_text())["evaluation"].split("\n") == [
        "Development games (the training run's check): BLEU 14.35.", "",
        "15 `test` games, numbers from the input.", "", *table]
    readme = (shipped / "README.md").read_text()
    assert "Not the paper's: `numbers_from_input` is on by default" in readme and "| old |" not in readme
    assert "| Oracle plan + realizer, numbers from the input | 14.00 |" in readme


@pytest.mark.parametrize(("options", "message"), [
    (["--ship_numbers_from_input", "dev", "--realizer", "runs/realizer", "--numbers_from_input", "on"],
     "--ship_numbers_from_input needs --realizer checkpoints/realizer-minilm-rotowire"),
    (["--ship_numbers_from_input", "dev", "--realizer", "checkpoints/realizer-minilm-rotowire"],
     "needs --numbers_from_input ... on"),
])
def test_numbers_from_input_shipping_options_are_checked_before_any_work(script, monkeypatch, capsys, options,
                                                                         message):
    monkeypatch.chdir(shipped_checkpoints()["realizer-minilm-rotowire"].parents[1])
    monkeypatch.setattr("sys.argv", ["quality_rotowire.py", *options])
    with pytest.raises(SystemExit):
        script.main()
    assert message in capsys.readouterr().err


def test_plan_rows_give_the_papers_micro_averaged_content_selection_and_the_macro_f1_beside_it(script):
    from sumformers.text.rotowire_records import EOT

    # game 1: statistics {Love PTS, James AST} against {Love PTS, Love REB} (names dropped): P = R = F1 = 1/2;
    # game 2: {Love PTS} against {Love PTS, Love AST, Bucks PTS}: P 1, R 1/3, F1 1/2.
    plans = [["game|DAY", "Cavaliers|TEAM-NAME", "Kevin Love|PTS", "LeBron James|AST", EOT], ["Kevin Love|PTS", EOT]]
    references = [["Kevin Love|PLAYER_NAME", "Kevin Love|PTS", "Kevin Love|REB", EOT],
                  ["Kevin Love|PTS", "Kevin Love|AST", "Bucks|TEAM-PTS", EOT]]
    cells = [cell.strip() for cell in script.plan_row("x", plans, references, 3.0).split("|")[2:-1]]
    # micro: 2 shared of 3 predicted and 5 reference: P 66.7, R 40.0, F1 2PR/(P+R) = 50.0; macro F1 (50 + 50) / 2
    assert [cell.split(" [")[0] for cell in cells] == ["66.7", "40.0", "50.0", "50.0", cells[4].split(" [")[0], "3"]
    # the interval pools resampled games: every resample is one of (1/2, 1/2), (1, 1/3) or their mix
    low, high = script.pooled_selection_intervals([{"overlap": 1, "predicted": 2, "reference": 2},
                                                   {"overlap": 1, "predicted": 1, "reference": 3}])["cs_precision"]
    assert low == pytest.approx(50.0) and high == pytest.approx(100.0)
    # CO over the same statistics, the mean of the games: [Love PTS, James AST] against [Love PTS, Love REB] 1 - 1/2,
    # [Love PTS] against [Love PTS, Love AST, Bucks PTS] 1 - 2/3: (50.0 + 33.3) / 2
    assert cells[4].startswith("41.7 [")
    # the earlier definitions count the names and the date: game 1 then shares 1 of 4 and 3 records, and orders
    # [DAY, Cavaliers NAME, Love PTS, James AST] against [Love NAME, Love PTS, Love REB] at 1 - 3/4
    every = [cell.strip() for cell in script.plan_row("x", plans, references, 0.0, "all").split("|")[2:-1]]
    assert every[0].startswith("40.0 ")  # (1 + 1) shared of (4 + 1) predicted
    assert every[4].startswith("29.2 [")  # (25.0 + 33.3) / 2


def test_the_report_scores_the_same_plans_under_each_definition_asked_for(script, monkeypatch, tmp_path):
    from test_rotowire import tiny_game
    from test_train_table_to_text import SUMMARY

    from sumformers.text.rotowire_plans import learn_plan_template, oracle_plan, template_plan
    from sumformers.text.rotowire_records import parse_game

    games = tmp_path / "games.jsonl"  # 60 train, 5 dev, 1 test game
    games.write_text("".join(json.dumps(tiny_game(id=f"g{n:02d}", summary=SUMMARY)) + "\n" for n in range(66)))
    output = tmp_path / "report.md"
    monkeypatch.setattr("sys.argv", ["quality_rotowire.py", "--data", str(games), "--records", "statistics", "all",
                                     "--threads", "1", "--output", str(output)])
    script.main()

    report = output.read_text()
    game = parse_game(tiny_game(id="g65", summary=SUMMARY))
    train = [parse_game(tiny_game(id=f"g{n:02d}", summary=SUMMARY)) for n in range(60)]
    plan = template_plan(game, learn_plan_template(train, [oracle_plan(g) for g in train]))
    for records in ("statistics", "all"):
        row = script.plan_row("Template (most mentioned records)", [plan], [oracle_plan(game)], 0.0, records)
        assert row.rsplit("|", 2)[0] in report  # all but the seconds
        assert script.RECORD_DEFINITIONS[records] in report
    assert report.index(script.RECORD_DEFINITIONS["statistics"]) < report.index(script.RECORD_DEFINITIONS["all"])


def test_updating_the_planner_card_replaces_only_its_planning_table(script, tmp_path):
    shipped = tmp_path / "planner"
    shutil.copytree(shipped_checkpoints()["stepwise-hibert-planner-minilm-rotowire"], shipped)
    bias = json.loads((shipped / "config.json").read_text())["sentence_break_bias"]
    card = json.loads((shipped / "sumformers_card.json").read_text())
    card["evaluation"] = "\n\n".join(["Development games: CS F1 37.07.", "15 `test` games, old CS.",
                                      "| system | CS P | CS R |\n|---|---|---|\n| old row |", "| system | BLEU |"])
    (shipped / "sumformers_card.json").write_text(json.dumps(card))
    table = ["| system | CS P | CS R | CS F1 | CS F1 (macro) | CO (not in the paper) | seconds |",
             "|---|---|---|---|---|---|---|", "| new row |"]

    script.update_planner_card(shipped, table, "15 `test` games, the paper's CS.")

    evaluation = json.loads((shipped / "sumformers_card.json").read_text())["evaluation"]
    assert evaluation.split("\n\n") == ["Development games: CS F1 37.07.", "15 `test` games, the paper's CS.",
                                        "\n".join(table), "| system | BLEU |"]
    readme = (shipped / "README.md").read_text()
    assert "| new row |" in readme and "| old row |" not in readme
    assert json.loads((shipped / "config.json").read_text())["sentence_break_bias"] == bias  # kept

    # a bias chosen again on the dev games becomes the config's default decoding, and the card says so
    setting = "15 `test` games; " + script.planner_decoding(-2.0, "dev CS F1 40")
    script.update_planner_card(shipped, table, setting, -2.0)

    assert json.loads((shipped / "config.json").read_text())["sentence_break_bias"] == -2.0
    readme = (shipped / "README.md").read_text()
    assert "this checkpoint decodes with sentence-break bias -2 by default (dev CS F1 40)." in readme
    assert "Not the paper's: `sentence_break_bias` -2.0 is added to `<EOS>`'s logit" in readme


def test_updating_the_planner_card_checks_its_configs_bias_has_a_row_in_a_fresh_process():
    # run as users run it: the shipped config is read before anything registers the architectures
    folder = shipped_checkpoints()["stepwise-hibert-planner-minilm-rotowire"]
    bias = json.loads((folder / "config.json").read_text())["sentence_break_bias"]
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "benchmarks" / "quality_rotowire.py"), "--update_planner_card", "--hibert",
         f"checkpoints/{folder.name}", "--sentence_break_bias", str(bias + 1)],
        cwd=folder.parents[1], capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300)
    assert completed.returncode == 2
    assert f"the planner's bias {bias:g} (--ship_sentence_break_bias) must be one of" in completed.stderr


def test_updating_the_planner_card_takes_the_papers_definitions_first(script, monkeypatch, capsys):
    monkeypatch.chdir(shipped_checkpoints()["stepwise-hibert-planner-minilm-rotowire"].parents[1])
    monkeypatch.setattr("sys.argv", ["quality_rotowire.py", "--update_planner_card", "--hibert",
                                     "checkpoints/stepwise-hibert-planner-minilm-rotowire", "--records", "all",
                                     "statistics"])
    with pytest.raises(SystemExit):
        script.main()
    assert "--update_planner_card takes the paper's CS and CO (--records statistics first)" in capsys.readouterr().err
