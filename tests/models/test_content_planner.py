"""Stepwise HiBERT and Stepwise ETCSum as Rotowire content planners (Narayan et al. 2020, section 7): plans a planner
can decode, the game split, the no-repeat rule with its repeatable units in the search and in the model's mask, the
end unit and the length limit, HiBERT's invariance to the records' order, the `content-planning` pipeline over a
hand-made game, training steps and a save/load round trip."""

import dataclasses
import json
import math
import warnings

import pytest
import torch
from test_rotowire import EXPECTED_PLAN, SUMMARY, tiny_game
from transformers import AutoModel, AutoTokenizer, pipeline

from conftest import tiny_bert_config, training_script
from sumformers import (
    ContentPlanningPipeline,
    StepwiseETCSumForContentPlanning,
    StepwiseETCSumPlannerConfig,
    StepwiseHiBertConfig,
    StepwiseHiBertForContentPlanning,
    StepwiseHiBertForExtractiveSummarization,
    StepwiseHiBertPlannerConfig,
)
from sumformers.generation.stepwise_decoding import stepwise_beam_search
from sumformers.hub import export_model, write_card
from sumformers.modeling.pretrained_encoder import bundled_encoder_path
from sumformers.modeling.sentence_scoring import next_choice_logits_and_loss
from sumformers.processing.planner_inputs import SENTENCE_BREAK_TEXT
from sumformers.text.rotowire_plans import decodable_plan, plan_to_text
from sumformers.text.rotowire_records import EOS, EOT, parse_game, split_games
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")

ENCODER = dict(encoder_config=tiny_bert_config().to_dict(), encoder_name_or_path="tiny-random-bert")
HIBERT = dict(sentence_encoder_layers=2, document_layers=2, max_document_sentences=128, max_summary_sentences=32,
              num_sentences=30)
ETCSUM = dict(local_radius=8, max_document_sentences=128, max_document_tokens=2048, max_summary_sentences=32,
              num_sentences=30)


def planner(kind="hibert", **overrides):
    torch.manual_seed(0)
    if kind == "hibert":
        config = StepwiseHiBertPlannerConfig(**ENCODER, **{**HIBERT, **overrides})
        return StepwiseHiBertForContentPlanning(config).eval()
    config = StepwiseETCSumPlannerConfig(**ENCODER, **{**ETCSUM, **overrides})
    return StepwiseETCSumForContentPlanning(config).eval()


def with_players(game: dict, players) -> dict:
    """`game` with only the box-score rows `players` (indices into its players), renumbered from 0."""
    box = {column: {str(row): cells[str(player)] for row, player in enumerate(players)}
           for column, cells in game["box_score"].items()}
    return dict(game, box_score=box)


# Three games of 88, 69 and 51 records (all four players, then Kevin Love and both Bucks, then Kevin Love alone), so
# that a batch of them is padded.
GAMES = (tiny_game(), with_players(tiny_game(), [0, 2, 3]), with_players(tiny_game(), [0]))


class PlannerTester(ModelTesterMixin):
    """The model tester on the planners' real inputs: games in, one document of planning units each (`<EOS>` and the
    records' template sentences, with the repeatable units' mask); the stepwise rows and the `content-planning`
    pipeline's greedy plan."""

    examples = GAMES
    pipeline_input = with_players(tiny_game(), [0, 2])

    def encode(self, processor, game):
        encoded, _, _ = processor.encode_units(processor.game(game))
        return encoded

    def row_outputs(self, output, batch, rows):
        """The open units' scores and the end's: a repeatable unit in the plan (`<EOS>`, the rows' second unit)
        stays open, so its score is compared too."""
        values = []
        for row, (document, prefix) in enumerate(rows):
            units = batch["sentence_mask"][document].clone()
            units[[unit for unit in prefix if not batch["repeatable_mask"][document, unit]]] = False
            values.append(output.logits[row][torch.cat([units, torch.tensor([True])])])
        return values

    def check_content_planning_pipeline(self, planning, model, inputs):
        """Greedy (the planner's default beam of 1): each step takes the most probable allowed unit of the model's
        step logits (no unit twice but the repeatable ones, and those not twice in one plan sentence; no sentence
        break opening a plan or following a break; no end as the first step, only the end after `num_sentences`
        units) and reports its whole distribution; the plan names the units by id."""
        units, game = inputs.pop("units"), inputs.pop("game")
        inputs.pop("sentences")
        repeatable = set(inputs["repeatable_mask"][0].nonzero().flatten().tolist())
        assert repeatable and 0 in repeatable  # <EOS>, the team names and cities
        length = 6
        result = planning(self.pipeline_input, num_sentences=length, return_steps=True)
        chosen = []
        for step in result["steps"]:
            with torch.no_grad():
                logits = model(**inputs, summary_indices=torch.tensor([chosen], dtype=torch.long).view(1, -1)).logits[0]
            distribution = torch.softmax(logits, -1)
            allowed = logits.clone()
            allowed[[unit for unit in chosen if unit not in repeatable]] = -torch.inf
            sentence = chosen[len(chosen) - chosen[::-1].index(0) :] if 0 in chosen else chosen  # since the break
            allowed[sentence] = -torch.inf
            if not sentence:
                allowed[0] = -torch.inf  # <EOS> (unit 0) closes a sentence that names a unit
            if not chosen:
                allowed[-1] = -torch.inf
            if len(chosen) == length:
                allowed[:-1] = -torch.inf
            choice = int(allowed.argmax())
            assert step["unit"] == (EOT if choice == len(units) else units[choice])
            assert step["distribution"] == pytest.approx(distribution.tolist(), abs=1e-6)
            assert step["probability"] == pytest.approx(float(distribution[choice]), abs=1e-6)
            if step["unit"] == EOT:
                break
            chosen.append(choice)
        assert chosen and result["plan"][: len(chosen)] == [units[index] for index in chosen]
        assert result["plan_text"] == plan_to_text(game, result["plan"])

    def test_exported_pipeline_plans_as_the_package_pipeline(self, context, tmp_path):
        """The exported repo's own `content-planning` pipeline (remote code, over the package's processor here) gives
        the package pipeline's plan, a JSON line and a batch of games alike."""
        model_type = self.model_class.config_class.model_type
        repo = export_model(str(context.folder), str(tmp_path / f"sumformers_{model_type}_pipeline_export"))
        games = [self.pipeline_input, json.dumps(GAMES[2])]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = pipeline(model=str(repo), trust_remote_code=True)
            package = pipeline("content-planning", model=str(context.folder))
            assert exported.task == "content-planning" and type(exported).__module__.startswith("transformers_modules.")
            expected = [package(game, num_sentences=5) for game in games]
            for got, wanted in zip(exported(games, num_sentences=5, batch_size=2), expected):
                assert got["plan"] == wanted["plan"] and got["plan_text"] == wanted["plan_text"]
                assert got["score"] == pytest.approx(wanted["score"], abs=1e-5)


class TestStepwiseHiBertPlanner(PlannerTester):
    model_class = StepwiseHiBertForContentPlanning

    def get_config(self):
        return StepwiseHiBertPlannerConfig(**ENCODER, **HIBERT)


class TestStepwiseHiBertPlannerPositionsFromEnd(TestStepwiseHiBertPlanner):
    """The plan's units numbered from the latest back, through the same checks (batches of padded plans included)."""

    def get_config(self):
        return StepwiseHiBertPlannerConfig(**ENCODER, **HIBERT, summary_positions_from_end=True)


class TestStepwiseETCSumPlanner(PlannerTester):
    model_class = StepwiseETCSumForContentPlanning

    def get_config(self):
        return StepwiseETCSumPlannerConfig(**ENCODER, **ETCSUM)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(bundled_encoder_path())


@pytest.fixture(scope="module")
def game():
    return parse_game(tiny_game(summary=SUMMARY))


# --- plans a planner can decode, and the split -------------------------------------------------------------------


def test_decodable_plan_keeps_only_repeatable_repeats():
    plan = ["A|TEAM-NAME", "game|DAY", "P|PTS", EOS, "game|DAY", EOS, "A|TEAM-NAME", "A|TEAM-CITY", "P|PTS",
            "P|PLAYER_NAME", EOS, "P|PLAYER_NAME", "A|TEAM-CITY", EOT]
    # The second sentence held only the repeated date: it goes, and so does its break; a player's name repeats no more
    # than his points (the paper's rule), team names and cities do.
    assert decodable_plan(plan) == ["A|TEAM-NAME", "game|DAY", "P|PTS", EOS, "A|TEAM-NAME", "A|TEAM-CITY",
                                    "P|PLAYER_NAME", EOS, "A|TEAM-CITY", EOT]
    assert decodable_plan(EXPECTED_PLAN) == EXPECTED_PLAN  # no repeats in the hand-labelled plan


def test_split_by_sorted_ids():
    games = [{"id": f"g{index:02d}"} for index in reversed(range(80))]
    split = {name: split_games(games, name) for name in ("train", "dev", "test")}
    assert {name: len(part) for name, part in split.items()} == {"train": 60, "dev": 5, "test": 15}
    assert [g["id"] for g in split["dev"]] == ["g60", "g61", "g62", "g63", "g64"]
    assert split["test"][-1]["id"] == "g79" and split["train"][0]["id"] == "g00"


# --- the search: no repeats but the repeatable units, the end unit, the length limit -------------------------------

# Units: 0 <EOS>, 1 and 2 records, 3 a team name; column 4 is the end unit. Logits per step (= prefix length).
STEP_LOGITS = [
    [0.0, 5.0, 1.0, 0.0, -9.0],  # record 1
    [1.0, 5.0, 0.0, 0.0, -9.0],  # record 1 again is best but taken: <EOS>
    [4.0, 0.0, 1.0, 2.0, -9.0],  # <EOS> again (repeatable)
    [0.0, 3.0, 1.0, 4.0, -9.0],  # the team name
    [0.0, 3.0, 1.0, 4.0, -9.0],  # the team name again (repeatable)
    [0.0, 0.0, 1.0, 0.0, 5.0],  # the end
    [0.0, 0.0, 9.0, 0.0, 0.0],  # never asked: the plan has ended
]


def run_search(calls, **options):
    def score_rows(document_indices, prefixes):
        calls.append(prefixes)
        return torch.tensor([STEP_LOGITS[len(prefix)] for prefix in prefixes])

    return stepwise_beam_search(score_rows, [["<EOS>", "r1", "r2", "team"]], beam_size=1, **options)[0]


def test_greedy_search_repeats_only_repeatable_units_and_stops_at_the_end_unit():
    calls = []
    hypothesis = run_search(calls, num_sentences=10, repeatable=[{0, 3}])
    assert hypothesis.sentences == (1, 0, 0, 3, 3) and hypothesis.ended
    assert len(calls) == 6  # the end unit stopped the search before step 7
    # step 2's probability by hand: softmax of [1, 5, 0, 0, -9] at <EOS>
    assert hypothesis.steps[1].probability == pytest.approx(math.e / (math.e + math.e**5 + 2 + math.e**-9))
    # without repeatable units nothing repeats: the best allowed unit at every step, then the end once all are taken
    plain = run_search([], num_sentences=10)
    assert plain.sentences == (1, 0, 3, 2) and plain.ended
    assert len(set(plain.sentences)) == len(plain.sentences)


def test_maximum_plan_length_holds():
    hypothesis = run_search([], num_sentences=3, repeatable=[{0, 3}])
    # three units, then the one step in which only the end unit is allowed (end_at_limit)
    assert hypothesis.sentences == (1, 0, 0) and hypothesis.ended and len(hypothesis.steps) == 4
    # the end's softmax probability at step 4 (logits [0, 3, 1, 4, -9]), by hand
    expected = math.exp(-9) / (1 + math.e**3 + math.e + math.e**4 + math.exp(-9))
    assert hypothesis.steps[-1].probability == pytest.approx(expected)


def test_model_mask_keeps_repeatable_units_choosable():
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0, 0.5]])
    summary = torch.tensor([[0, 1, 3]])  # <EOS>, a record and a team name already in the plan
    row_mask = torch.ones(1, 4, dtype=torch.bool)
    repeatable = torch.tensor([[True, False, False, True]])
    masked, loss = next_choice_logits_and_loss(logits, row_mask, summary, torch.tensor([0]), repeatable)
    minimum = torch.finfo(torch.float32).min
    assert masked.tolist() == [[1.0, minimum, 3.0, 4.0, 0.5]]
    # cross-entropy of <EOS> over the open units 0, 2, 3 and the end, by hand
    assert loss.item() == pytest.approx(-1.0 + math.log(math.e + math.e**3 + math.e**4 + math.e**0.5), rel=1e-6)


# --- the processor and HiBERT's order invariance -------------------------------------------------------------------


def test_processor_units_oracle_and_repeatable_mask(tokenizer, game):
    processor = planner().processor_class(tokenizer, planner().config)
    inputs = processor(game)
    assert inputs["units"][0] == EOS and inputs["sentences"][0] == SENTENCE_BREAK_TEXT
    assert list(inputs["units"][1:]) == [record.id for record in game.records]
    assert inputs["sentence_mask"].shape == (1, len(game.records) + 1)
    repeatable = [inputs["units"][i] for i in inputs["repeatable_mask"][0].nonzero().flatten().tolist()]
    assert repeatable == [EOS, "Cavaliers|TEAM-NAME", "Cavaliers|TEAM-CITY", "Bucks|TEAM-NAME", "Bucks|TEAM-CITY"]
    features = processor.training_features(json.dumps(tiny_game(summary=SUMMARY)))
    assert [inputs["units"][i] for i in features["oracle"]] == EXPECTED_PLAN[:-1]
    assert sum(features["labels"]) == len(set(EXPECTED_PLAN[:-1]))
    with pytest.raises(ValueError, match="missing day"):
        processor({key: value for key, value in tiny_game().items() if key != "day"})
    small = planner(max_document_sentences=50)
    with pytest.raises(ValueError, match="89 planning units; the model reads 50 sentences"):
        small.processor_class(tokenizer, small.config)(game)


def unit_scores(model, tokenizer, game, prefix_ids):
    """{unit id: logit} of the next step after the plan prefix `prefix_ids`."""
    inputs = model.processor_class(tokenizer, model.config)(game)
    units = inputs.pop("units")
    inputs.pop("sentences"), inputs.pop("game")
    prefix = torch.tensor([[units.index(unit) for unit in prefix_ids]])
    with torch.no_grad():
        logits = model(**inputs, summary_indices=prefix).logits[0]
    return {unit: logits[index].item() for index, unit in enumerate(units)}, logits[-1].item()


@pytest.mark.parametrize("prefix", [[], ["Bucks|TEAM-NAME", "Kevin Love|PTS", EOS]])
def test_hibert_planner_scores_do_not_depend_on_the_records_order(tokenizer, game, prefix):
    permuted = list(game.records)
    torch.manual_seed(5)
    permuted = [permuted[i] for i in torch.randperm(len(permuted)).tolist()]
    shuffled = dataclasses.replace(game, records=tuple(permuted))
    model = planner()
    scores, end = unit_scores(model, tokenizer, game, prefix)
    shuffled_scores, shuffled_end = unit_scores(model, tokenizer, shuffled, prefix)
    assert set(scores) == set(shuffled_scores) and len(scores) == 89
    for unit, score in scores.items():
        assert shuffled_scores[unit] == pytest.approx(score, abs=1e-4), unit
    assert shuffled_end == pytest.approx(end, abs=1e-4)
    # The same weights with document positions: the order then changes the scores (the check above can fail).
    torch.manual_seed(0)
    config = StepwiseHiBertConfig(**ENCODER, **HIBERT)
    positional = StepwiseHiBertForExtractiveSummarization(config).eval()
    positional.load_state_dict(model.state_dict(), strict=False)
    positional.processor_class = model.processor_class
    with_positions, _ = unit_scores(positional, tokenizer, game, prefix)
    shuffled_positions, _ = unit_scores(positional, tokenizer, shuffled, prefix)
    assert max(abs(with_positions[unit] - shuffled_positions[unit]) for unit in scores) > 1e-2


def test_positions_from_the_end_count_the_units_chosen_after_each(tokenizer, game):
    model = planner(summary_positions_from_end=True)
    with torch.no_grad():  # larger weights, so that where a summary unit sits shows in the scores
        for parameter in model.parameters():
            parameter.add_(0.2 * torch.randn_like(parameter))
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    assert model.summary_position_ids(mask).tolist() == [[2, 1, 0, 0], [0, 0, 0, 0]]
    prefix = ["Bucks|TEAM-NAME", "Kevin Love|PTS", EOS]
    # the same weights counting from the first unit, with the position table's first three rows reversed: the
    # same scores after this three-unit prefix, and other scores after a two-unit one (positions relative to its end)
    from_start = planner()
    from_start.load_state_dict(model.state_dict())
    with torch.no_grad():
        from_start.summary_positions.weight[:3] = model.summary_positions.weight[:3].flip(0)
    scores, end = unit_scores(model, tokenizer, game, prefix)
    start_scores, start_end = unit_scores(from_start, tokenizer, game, prefix)
    assert all(start_scores[unit] == pytest.approx(score, abs=1e-4) for unit, score in scores.items())
    assert start_end == pytest.approx(end, abs=1e-4)
    scores, _ = unit_scores(model, tokenizer, game, prefix[1:])
    start_scores, _ = unit_scores(from_start, tokenizer, game, prefix[1:])
    assert max(abs(start_scores[unit] - score) for unit, score in scores.items()) > 1e-2


# --- the pipeline ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["hibert", "etcsum"])
def test_pipeline_plans_a_hand_made_game(tokenizer, game, kind):
    model = planner(kind)
    planning = ContentPlanningPipeline(model=model, tokenizer=tokenizer)
    bad = {"id": "broken"}
    results = planning([tiny_game(), json.dumps(tiny_game()), bad], num_sentences=12)
    assert results[2] == {"error": results[2]["error"]} and "missing" in results[2]["error"]
    assert results[0] == results[1]  # a dict and its JSON line give one plan
    result = results[0]
    plan = result["plan"]
    assert len(plan) <= 13 and (plan[-1] == EOT or len(plan) == 12)
    records = [unit for unit in plan if unit not in (EOS, EOT)]
    repeated = {unit for unit in records if records.count(unit) > 1}
    assert all(unit.endswith(("|TEAM-NAME", "|TEAM-CITY")) for unit in repeated)
    assert [step["unit"] for step in result["steps"]] == plan
    assert result["sentence_breaks"] == [i for i, unit in enumerate(plan) if unit == EOS]
    assert result["plan_text"] == plan_to_text(game, plan)
    assert result["score"] == pytest.approx(sum(math.log(step["probability"]) for step in result["steps"]), abs=1e-5)
    for step in result["steps"]:
        if step["unit"] not in (EOS, EOT):
            assert step["sentence"] == game.record(step["unit"]).sentence
    # greedy: the first unit is the model's most probable one but the end (min_sentences=1), with its softmax
    # probability over every unit and the end
    scores, end = unit_scores(model, tokenizer, game, [])
    values = torch.tensor(list(scores.values()))
    first = int(values.argmax())
    assert plan[0] == list(scores)[first]
    probability = torch.softmax(torch.cat([values, torch.tensor([end])]), dim=0)[first]
    assert result["steps"][0]["probability"] == pytest.approx(probability.item(), rel=1e-4)
    with pytest.raises(ValueError, match="a Rotowire game is a JSON object"):
        planning(42)


def with_end_shifted(model, shift: float):
    """`model` with `shift` added to its end-of-plan logit at every step."""

    def shift_the_end(module, inputs, output):
        output.logits[:, -1] += shift

    model.register_forward_hook(shift_the_end)
    return model


def test_pipeline_min_sentences_holds_the_end_back(tokenizer):
    # with the end pushed up it is every step's most probable choice, so the plan stops after its first unit unless
    # min_sentences holds the end back: then exactly that many units, and the end
    planning = ContentPlanningPipeline(model=with_end_shifted(planner(), 100.0), tokenizer=tokenizer)
    assert len(planning(tiny_game(), num_sentences=12)["plan"]) == 2
    plan = planning(tiny_game(), num_sentences=12, min_sentences=5)["plan"]
    assert len(plan) == 6 and plan[-1] == EOT and EOT not in plan[:-1]


@pytest.mark.parametrize("config_class", [StepwiseHiBertPlannerConfig, StepwiseETCSumPlannerConfig])
def test_the_card_says_when_a_sentence_break_bias_departs_from_the_paper(tmp_path, config_class):
    for bias, folder in ((0.0, tmp_path / "paper"), (-3.0, tmp_path / "biased")):
        folder.mkdir()
        write_card(folder, config_class(**ENCODER, sentence_break_bias=bias), {"model_name": "planner"})
    assert "sentence_break_bias" not in (tmp_path / "paper" / "README.md").read_text()
    assert "Not the paper's: `sentence_break_bias` -3.0 is added to `<EOS>`'s logit" in (
        tmp_path / "biased" / "README.md").read_text()


def test_pipeline_names_the_plan_length_as_every_summarizer_does(tokenizer):
    # num_sentences and min_sentences, the stepwise summarizers' words (config fields and pipeline options alike); the
    # retired max_plan_length is an unknown option. The end unit is pushed down so that the plan runs to the limit.
    planning = ContentPlanningPipeline(model=with_end_shifted(planner(), -100.0), tokenizer=tokenizer)
    plan = planning(tiny_game(), num_sentences=3)["plan"]
    assert len(plan) == 4 and plan[-1] == EOT
    with pytest.raises(TypeError, match="unknown option.*max_plan_length"):
        planning(tiny_game(), max_plan_length=3)


def test_pipeline_sentence_break_bias_from_the_call_or_the_config(tokenizer):
    # +50 makes the break certain wherever it is allowed (after every unit that is not a break), -50 leaves it no
    # probability while a record is allowed (always, in a 12-unit plan over 88 records); the config's value is the
    # default, the call's overrides it. The end unit is pushed down so that the plans run to the length limit.
    model = with_end_shifted(planner(), -100.0)
    planning = ContentPlanningPipeline(model=model, tokenizer=tokenizer)
    broken = planning(tiny_game(), num_sentences=12, sentence_break_bias=50.0)["plan"]
    assert len(broken) == 13 and broken[1:-1:2] == [EOS] * 6 and EOS not in broken[0::2]
    unbroken = planning(tiny_game(), num_sentences=12, sentence_break_bias=-50.0)["plan"]
    assert len(unbroken) == 13 and EOS not in unbroken
    model.config.sentence_break_bias = 50.0
    from_config = ContentPlanningPipeline(model=model, tokenizer=tokenizer)
    assert from_config(tiny_game(), num_sentences=12)["plan"] == broken
    assert from_config(tiny_game(), num_sentences=12, sentence_break_bias=-50)["plan"] == unbroken
    with pytest.raises(ValueError, match="sentence_break_bias must be a finite number"):
        from_config(tiny_game(), sentence_break_bias=float("nan"))


# --- training and saving --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["hibert", "etcsum"])
def test_training_steps_reduce_the_loss(tokenizer, kind):
    model = planner(kind).train()
    processor = model.processor_class(tokenizer, model.config)
    feature = processor.training_features(tiny_game(summary=SUMMARY))
    collator = training_script("train_stepwise").StepwiseCollator(processor.collate, stepwise=True)
    batch = collator([feature])
    oracle = feature["oracle"]
    assert batch["labels"].tolist() == oracle + [len(feature["labels"])]  # each next unit, then the end
    assert batch["summary_indices"].shape == (len(oracle) + 1, len(oracle))
    assert batch["repeatable_mask"].shape == batch["sentence_mask"].shape
    if kind == "etcsum":  # its rows re-encode the whole table: the first 6 steps keep the test short
        batch.update(summary_indices=batch["summary_indices"][:6, :5], row_documents=batch["row_documents"][:6],
                     labels=batch["labels"][:6])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = model(**batch).loss
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # the first loss is the cross-entropy of a near-uniform softmax over the open units
    assert losses[0] == pytest.approx(math.log(len(feature["labels"]) + 1), rel=0.1)
    assert losses[-1] < 0.8 * losses[0]


def test_collator_samples_plan_steps(tokenizer):
    model = planner("hibert")
    processor = model.processor_class(tokenizer, model.config)
    feature = processor.training_features(tiny_game(summary=SUMMARY))
    oracle, width = feature["oracle"], len(feature["labels"])
    collator_class = training_script("train_stepwise").StepwiseCollator
    batch = collator_class(processor.collate, True, steps_per_document=4, seed=3)([feature, feature])
    assert batch["row_documents"].tolist() == [0] * 4 + [1] * 4
    for prefix, label in zip(batch["summary_indices"].tolist(), batch["labels"].tolist()):
        step = sum(index >= 0 for index in prefix)  # each row is a real step: the oracle prefix, then its next unit
        assert prefix[:step] == oracle[:step] and label == (oracle + [width])[step]
    steps = [sum(index >= 0 for index in prefix) for prefix in batch["summary_indices"].tolist()]
    assert len(set(steps[:4])) == 4 and steps[:4] == sorted(steps[:4])  # four distinct steps of the game, in order
    again = collator_class(processor.collate, True, steps_per_document=4, seed=3)([feature, feature])
    assert torch.equal(again["summary_indices"], batch["summary_indices"])  # the seed fixes the draw
    everything = collator_class(processor.collate, True, steps_per_document=len(oracle) + 5)([feature])
    assert everything["labels"].tolist() == oracle + [width]  # a game with fewer steps gives all of them
    with pytest.raises(ValueError, match="steps_per_document must be at least 1"):
        collator_class(processor.collate, True, steps_per_document=0)


@pytest.mark.parametrize("kind", ["hibert", "etcsum"])
def test_save_and_load_round_trip(tokenizer, game, tmp_path, kind):
    model = planner(kind)
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model) and loaded.config.beam_size == 1
    if kind == "hibert":
        assert loaded.config.document_positions is False and loaded.sentence_positions is None
    prefix = ["Bucks|TEAM-NAME", EOS]
    (scores, end), (loaded_scores, loaded_end) = (unit_scores(m, tokenizer, game, prefix) for m in (model, loaded))
    assert loaded_scores == pytest.approx(scores, abs=1e-6) and loaded_end == pytest.approx(end, abs=1e-6)
    # the no-repeat mask survives: <EOS> and the team name stay open after the prefix, the minimum marks none of them
    assert min(loaded_scores["<EOS>"], loaded_scores["Bucks|TEAM-NAME"]) > -1e3
