"""The realizer of table-to-text generation: the shared-weights decoder (one set of parameters for the encoder and
the decoder's self-attention and feed-forward, kept through gradient steps, saving, loading and LoRA), the
processor's input layout and training pairs written out by hand on a tiny game, the sentence-by-sentence loop of the
`table-to-text` pipeline, and a few training steps."""

import functools
import json
import re
import warnings

import pytest
import torch
from test_rotowire import tiny_game
from transformers import AutoTokenizer, pipeline

from conftest import tiny_bert_config
from sumformers import RealizerConfig, RealizerForConditionalGeneration, TableToTextPipeline
from sumformers.hub import export_model
from sumformers.modeling.pretrained_encoder import bundled_encoder_path
from sumformers.processing.processing_realizer import as_game
from sumformers.text.rotowire_plans import plan_sentences
from sumformers.text.rotowire_records import ROTOWIRE_SPLITS, parse_game, read_games, split_games
from sumformers.training import ModelArguments, apply_lora
from test_generation_common import GenerationTesterMixin
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")

# Three sentences; the middle one names no record, so the oracle plan has two sentences.
SUMMARY = ("The Bucks defeated the Cavaliers 118 - 101 on Tuesday . The crowd was loud . "
           "Kevin Love scored 20 points .").split()
# Worked out by hand from the oracle's rules: entities and numbers in order of mention, one sentence per plan sentence.
PLAN = ["Bucks|TEAM-NAME", "Cavaliers|TEAM-NAME", "Bucks|TEAM-PTS", "Cavaliers|TEAM-PTS", "game|DAY", "<EOS>",
        "Kevin Love|PLAYER_NAME", "Kevin Love|PTS", "<EOT>"]
CONTEXT = ("The game was played on Tuesday, November 29, 2016. The Cavaliers were the home team. The Cavaliers are "
           "from Cleveland. The Bucks were the visiting team. The Bucks are from Milwaukee.")
# MiniLM's ids: [CLS] 101, [SEP] 102, begin [unused0] 1, end [unused1] 2, <BEG> = [unused3] 4.
CLS, SEP, START, END, BEG = 101, 102, 1, 2, 4


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(bundled_encoder_path()))


def tiny_config(tokenizer, **overrides):
    settings = dict(decoder_layers=2, dropout=0.0, max_target_positions=48, max_previous_tokens=6)
    settings.update(overrides)
    config = RealizerConfig(encoder_config=tiny_bert_config().to_dict(), encoder_name_or_path="tiny-random-bert",
                            **settings)
    config.set_special_tokens(tokenizer)
    return config


def tiny_model(tokenizer, seed=0, **overrides):
    torch.manual_seed(seed)
    return RealizerForConditionalGeneration(tiny_config(tokenizer, **overrides)).eval()


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def game():
    return parse_game(tiny_game(summary=SUMMARY))


# ----------------------------------------------------------------------------------------------------------------
# The model tester
# ----------------------------------------------------------------------------------------------------------------

# Realization steps of three lengths (records, previous sentence, target sentence) of the tiny game.
STEPS = (
    (PLAN[:5], "", "The Bucks defeated the Cavaliers 118 - 101 on Tuesday ."),
    (PLAN[6:8], "The Bucks defeated the Cavaliers 118 - 101 on Tuesday .", "Kevin Love scored 20 points ."),
    (["LeBron James|PLAYER_NAME", "LeBron James|PTS", "LeBron James|AST", "Jabari Parker|PLAYER_NAME",
      "Jabari Parker|FGM", "Jabari Parker|FGA"], "Kevin Love scored 20 points .",
     "James added 22 points and four assists , while Parker went 9 - of - 17 ."),
)


@functools.cache
def minilm():
    return AutoTokenizer.from_pretrained(str(bundled_encoder_path()))


class TestRealizer(ModelTesterMixin, GenerationTesterMixin):
    """The model tester on the realizer's real inputs: one realization step each (previous sentence, `<BEG>`, a plan
    sentence's records, the game's context), its summary sentence as labels; the `table-to-text` pipeline's sentence
    by sentence loop over a plan of the model tester's own."""

    model_class = RealizerForConditionalGeneration
    examples = STEPS
    pipeline_input = {"game": tiny_game(), "plan": [*PLAN[:5], "<EOS>", "LeBron James|PLAYER_NAME",
                                                    "LeBron James|PTS", "<EOS>", *PLAN[6:]]}
    # word logits over a 30,522-token vocabulary, as BertSumAbs's
    bf16_atol = 0.05

    def get_config(self):
        return tiny_config(minilm())

    def encode(self, processor, example):
        records, previous, sentence = example
        return dict(processor.encode_step(as_game(tiny_game()), records, previous),
                    labels=processor.target_ids(sentence))

    def pipeline_model_inputs(self, processor):
        """The first step of the pipeline's loop: the plan's first sentence, no previous sentence."""
        game, plan = self.pipeline_input["game"], self.pipeline_input["plan"]
        return processor({"game": game, "records": plan_sentences(plan)[0]})

    def check_table_to_text_pipeline(self, realizer, model, inputs):
        """Each sentence is `generate()` with the pipeline's settings on the step of its plan sentence, whose
        previous sentence is the one realized before it, decoded by the processor with the game's names recased."""
        processor, game = realizer.model_processor, as_game(self.pipeline_input["game"])
        settings = dict(num_beams=2, min_length=3, max_new_tokens=8)
        result = realizer(self.pipeline_input, **settings)
        expected, previous = [], ""
        for number, records in enumerate(plan_sentences(self.pipeline_input["plan"])):
            step = processor({"game": game, "records": records, "previous": previous})
            if number == 0:
                assert all(torch.equal(step[key], inputs[key]) for key in inputs)
            generated = model.generate(**step, **settings)[0]
            assert 3 <= len(generated) <= 9
            previous = processor.decode(generated.tolist(), game)
            expected.append(previous)
        assert len(expected) == 3 and result["sentences"] == expected
        assert result["summary"] == "\n".join(expected) and result["plan"] == self.pipeline_input["plan"]

    def test_exported_pipeline_realizes_as_the_package_pipeline(self, context, tmp_path):
        """The exported repo's own `table-to-text` pipeline (remote code) on a plan of its own and on the oracle plan.
        Its module and the model processor's are separate copies (here the package's processor, registered in
        process), so the game must be parsed, and its oracle plan taken, by the processor that reads it."""
        repo = export_model(str(context.folder), str(tmp_path / "sumformers_realizer_pipeline_export"))
        settings = dict(num_beams=1, min_length=2, max_new_tokens=4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = pipeline(model=str(repo), trust_remote_code=True)
            package = pipeline("table-to-text", model=str(context.folder))
            assert exported.task == "table-to-text" and type(exported).__module__.startswith("transformers_modules.")
            for inputs, options in ((self.pipeline_input, {}), (tiny_game(summary=SUMMARY), {"plan": "oracle"})):
                result = exported(inputs, **settings, **options)
                assert result == package(inputs, **settings, **options) and len(result["sentences"]) >= 2


# ----------------------------------------------------------------------------------------------------------------
# The shared-weights encoder-decoder
# ----------------------------------------------------------------------------------------------------------------


def test_shared_decoder_uses_the_encoder_layers_and_drops_their_parameters(tokenizer):
    shared, copied = tiny_model(tokenizer), tiny_model(tokenizer, decoder_init="encoder")
    for layer, encoder_layer in zip(shared.decoder.layers, shared.encoder.encoder.layer):
        query, key, value, output = layer.attention.projections()
        assert query is encoder_layer.attention.self.query and value is encoder_layer.attention.self.value
        assert key is encoder_layer.attention.self.key and output is encoder_layer.attention.output
    # Per layer, by hand (hidden 32, feed-forward 64): self-attention 4 x (32 x 32 + 32) + LayerNorm 64 = 4,288;
    # feed-forward 32 x 64 + 64 + 64 x 32 + 32 + LayerNorm 64 = 4,256; two decoder layers: 17,088 fewer.
    count = lambda model: sum(parameter.numel() for parameter in model.parameters())  # noqa: E731
    assert count(copied) - count(shared) == 17_088
    assert not any(".attention." in name or "feed_forward" in name for name in shared.decoder.state_dict())
    with pytest.raises(ValueError, match="decoder_init='shared' reuses encoder layers"):
        tiny_config(tokenizer, decoder_layers=3)


def test_a_gradient_step_through_the_decoder_moves_the_encoder_weights(tokenizer):
    model = tiny_model(tokenizer).train()
    inputs = torch.tensor([[CLS, 2000, 2001, SEP]])
    # Encoder states given and detached: every gradient below comes through the decoder alone.
    with torch.no_grad():
        encoder_states = model.encode(inputs)
    loss = model(encoder_outputs=(encoder_states,), attention_mask=torch.ones_like(inputs),
                 labels=torch.tensor([[2003, 2004, END]])).loss
    loss.backward()
    weight = model.encoder.encoder.layer[1].intermediate.dense.weight
    assert weight.grad is not None and weight.grad.abs().sum() > 0
    before = weight.detach().clone()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.grad is not None:
                parameter -= 0.5 * parameter.grad
    # one parameter object: the encoder's weight moved by exactly the decoder's step
    torch.testing.assert_close(model.encoder.encoder.layer[1].intermediate.dense.weight, before - 0.5 * weight.grad)
    assert model.decoder.layers[1].feed_forward._shared[0].intermediate.dense.weight is weight


def test_save_and_load_keep_the_tie_and_the_outputs(tmp_path, tokenizer):
    model = tiny_model(tokenizer)
    model.save_pretrained(tmp_path / "realizer")
    loaded = RealizerForConditionalGeneration.from_pretrained(tmp_path / "realizer").eval()
    assert loaded.config.decoder_init == "shared" and loaded.config.plan_start_token_id == BEG
    assert loaded.decoder.layers[0].attention.projections()[0] is loaded.encoder.encoder.layer[0].attention.self.query
    batch = dict(input_ids=torch.tensor([[CLS, 2000, 2001, SEP]]), labels=torch.tensor([[2003, 2004, END]]))
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)


def test_lora_on_the_encoder_layers_adapts_the_decoder_too_and_merges_once(tokenizer):
    model = tiny_model(tokenizer)
    arguments = ModelArguments(lora_target_modules="query,value", lora_r=2, lora_alpha=4, lora_dropout=0.0)
    peft_model = apply_lora(model, arguments)
    targets = sorted(peft_model.peft_config["default"].target_modules)
    # only the encoder's layers are wrapped: the decoder reaches the same LoRA layers through them
    expected = [f"encoder.encoder.layer.{i}.attention.self.{name}" for i in (0, 1) for name in ("query", "value")]
    assert targets == expected
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, 0.5)
    base = peft_model.get_base_model()
    assert type(base.decoder.layers[0].attention.projections()[0]).__name__ == "Linear"  # PEFT's lora.Linear
    assert hasattr(base.decoder.layers[0].attention.projections()[0], "lora_A")
    batch = dict(input_ids=torch.tensor([[CLS, 2000, 2001, SEP]]), labels=torch.tensor([[2003, 2004, END]]))
    with torch.no_grad():
        adapted = peft_model(**batch).logits
        merged = peft_model.merge_and_unload()
        torch.testing.assert_close(merged(**batch).logits, adapted, atol=1e-5, rtol=1e-5)
    assert isinstance(merged.decoder.layers[0].attention.projections()[0], torch.nn.Linear)
    assert not hasattr(merged.decoder.layers[0].attention.projections()[0], "lora_A")


# ----------------------------------------------------------------------------------------------------------------
# Processor
# ----------------------------------------------------------------------------------------------------------------


def test_the_papers_context_gives_the_teams_points_wins_losses_and_the_players_starting_positions(tokenizer, game):
    # appendix B.4 of the paper: date; each team's name (home or away), city, points, wins, losses; each named
    # player's team and starting position (Jabari Parker came off the bench: no position)
    processor = RealizerForConditionalGeneration.processor_class(tokenizer, tiny_config(tokenizer))
    assert processor.config.context == "paper"
    context = processor.context_text(game, ["Kevin Love|PTS", "Jabari Parker|REB", "Kevin Love|AST"])
    assert context == (
        "The game was played on Tuesday, November 29, 2016. "
        "The Cavaliers were the home team. The Cavaliers are from Cleveland. "
        "The Cavaliers scored 101 points, which is the 2nd best. The Cavaliers have 13 wins. "
        "The Cavaliers have 3 losses. "
        "The Bucks were the visiting team. The Bucks are from Milwaukee. "
        "The Bucks scored 118 points, which is the best. The Bucks have 8 wins. The Bucks have 8 losses. "
        "Kevin Love played for the Cleveland Cavaliers. Kevin Love started at forward. "
        "Jabari Parker played for the Milwaukee Bucks.")
    # so the score and the teams' records are numbers of the step's input (what numbers_from_input lets it write)
    step = processor.encode_step(game, ["Kevin Love|PTS"])["input_ids"]
    assert all(ids(tokenizer, number)[0] in step for number in ("101", "118", "13"))


def test_a_teams_zero_wins_and_losses_stay_in_the_realizers_context(tokenizer):
    # issue #58: they were dropped as surplus zeros (4 of the 320 team records of wins and losses in the shared games)
    from test_rotowire import line

    unbeaten = line("Cavaliers", "Cleveland", 101, (32, 22, 20, 27), 0, 0, 17, 35, 19, 43, 36, 74)
    game = parse_game(tiny_game(home_line=unbeaten))
    assert game.record("Cavaliers|TEAM-WINS").sentence == "The Cavaliers have 0 wins."
    processor = RealizerForConditionalGeneration.processor_class(tokenizer, tiny_config(tokenizer))
    context = processor.context_text(game, ["Kevin Love|PTS"])
    assert "The Cavaliers have 0 wins. The Cavaliers have 0 losses. The Bucks were the visiting team." in context


def test_a_realizer_config_saved_before_the_context_field_keeps_the_names_context(tokenizer, tmp_path):
    config = tiny_config(tokenizer)
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["context"] == "paper"
    del saved["context"]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert RealizerConfig.from_pretrained(tmp_path).context == "names"
    # the shipped realizer trained on that context and reads it
    from sumformers.hub import shipped_checkpoints

    assert RealizerConfig.from_pretrained(shipped_checkpoints()["realizer-minilm-rotowire"]).context == "names"
    with pytest.raises(ValueError, match="context must be one of paper, names, got 'all'"):
        tiny_config(tokenizer, context="all")


def test_step_input_is_previous_sentence_beg_records_context(tokenizer, game):
    # the context of the realizers trained before issue #40 (the shipped one's): names and cities, no numbers
    processor = RealizerForConditionalGeneration.processor_class(tokenizer, tiny_config(tokenizer, context="names"))
    records = ["Kevin Love|PLAYER_NAME", "Kevin Love|PTS"]
    previous = "the bucks won ."
    step = processor({"game": game, "records": records, "previous": previous})
    record_text = "Kevin Love played for the Cleveland Cavaliers. Kevin Love scored 20 points, which is the 2nd best."
    context = CONTEXT + " Kevin Love played for the Cleveland Cavaliers."
    expected = [CLS, *ids(tokenizer, previous), SEP, BEG, *ids(tokenizer, record_text), SEP,
                *ids(tokenizer, context), SEP]
    assert step["input_ids"].tolist() == [expected]
    assert step["token_type_ids"].tolist() == [[0] * len(expected)]
    assert step["attention_mask"].tolist() == [[1] * len(expected)]
    # the first sentence has no previous one; the previous sentence keeps its last max_previous_tokens (6) pieces
    first = processor.encode_step(game, records)["input_ids"]
    assert first[:3] == [CLS, SEP, BEG]
    long_previous = "one two three four five six seven eight"
    cut = processor.encode_step(game, records, long_previous)["input_ids"]
    assert cut[:8] == [CLS, *ids(tokenizer, "three four five six seven eight"), SEP]
    # a short limit cuts the records, never the context
    limit = 8 + 2 + len(ids(tokenizer, context)) + 1 + 5
    short = processor.encode_step(game, records, long_previous, max_length=limit)["input_ids"]
    assert short == [*cut[:9], *ids(tokenizer, record_text)[:5], SEP, *ids(tokenizer, context), SEP]
    with pytest.raises(ValueError, match="has no record 'Nobody|PTS'"):
        processor.encode_step(game, ["Nobody|PTS"])


def test_training_pairs_follow_the_oracle_plan_sentences(tokenizer, game):
    processor = RealizerForConditionalGeneration.processor_class(tokenizer, tiny_config(tokenizer))
    first, second = processor.training_features(game)  # the middle sentence has no record: no pair
    sentence_one = "The Bucks defeated the Cavaliers 118 - 101 on Tuesday ."
    assert first["labels"] == [*ids(tokenizer, sentence_one), END]
    assert second["labels"] == [*ids(tokenizer, "Kevin Love scored 20 points ."), END]
    # the previous sentence of the second pair is the first pair's sentence (the one realized before it)
    assert first["input_ids"][:3] == [CLS, SEP, BEG]
    assert second["input_ids"][:8] == [CLS, *ids(tokenizer, sentence_one)[-6:], SEP]
    batch = processor.collate([first, second])
    assert batch["labels"][1].tolist() == second["labels"] + [-100] * (len(first["labels"]) - len(second["labels"]))
    assert batch["attention_mask"][1].sum() == len(second["input_ids"])


def test_decode_restores_the_case_of_the_game_names(tokenizer, game):
    processor = RealizerForConditionalGeneration.processor_class(tokenizer, tiny_config(tokenizer))
    sequence = [START, *ids(tokenizer, "kevin love led the cavaliers on tuesday."), END, 0, 0]
    assert processor.decode(sequence, game) == "Kevin Love led the Cavaliers on Tuesday."
    assert processor.decode(sequence) == "kevin love led the cavaliers on tuesday."


def test_the_shared_split_rule():
    assert ROTOWIRE_SPLITS == {"train": (0, 60), "dev": (60, 65), "test": (65, 80)}
    games = [parse_game(tiny_game(id=f"g{index:02d}")) for index in (3, 1, 2)]
    assert [game.id for game in split_games(games, "train")] == ["g01", "g02", "g03"]
    with pytest.raises(ValueError, match="split must be one of train, dev, test"):
        split_games(games, "validation")


# ----------------------------------------------------------------------------------------------------------------
# The table-to-text pipeline
# ----------------------------------------------------------------------------------------------------------------


class ScriptedGenerate:
    """Stands in for `model.generate`: returns the given sentences in turn and records the inputs of every step."""

    def __init__(self, tokenizer, sentences):
        self.outputs = [torch.tensor([[START, *ids(tokenizer, sentence), END]]) for sentence in sentences]
        self.inputs = []

    def __call__(self, **inputs):
        self.inputs.append(inputs)
        return self.outputs[len(self.inputs) - 1]


def test_each_realized_sentence_is_the_next_steps_previous_sentence(tokenizer, game, monkeypatch):
    model = tiny_model(tokenizer)
    scripted = ScriptedGenerate(tokenizer, ["the bucks beat the cavaliers .", "kevin love scored 20 ."])
    monkeypatch.setattr(model, "generate", scripted)
    realizer = pipeline("table-to-text", model=model, tokenizer=tokenizer, plan="oracle")
    output = realizer(tiny_game(summary=SUMMARY))
    assert output["plan"] == PLAN
    assert output["sentences"] == ["The Bucks beat the Cavaliers.", "Kevin Love scored 20."]
    assert output["summary"] == "The Bucks beat the Cavaliers.\nKevin Love scored 20."
    processor = realizer.model_processor
    first, second = (step["input_ids"].tolist()[0] for step in scripted.inputs)
    assert first == processor.encode_step(game, PLAN[:5])["input_ids"]
    assert second == processor.encode_step(game, PLAN[6:8], "The Bucks beat the Cavaliers.")["input_ids"]
    assert second[:8] == [CLS, *ids(tokenizer, "the bucks beat the cavaliers .")[-6:], SEP]


def test_pipeline_with_oracle_plans_and_bad_inputs(tokenizer, game):
    model = tiny_model(tokenizer)
    realizer = pipeline("table-to-text", model=model, tokenizer=tokenizer)
    assert isinstance(realizer, TableToTextPipeline)
    settings = dict(num_beams=1, max_new_tokens=5, min_length=1)
    own_plan = {"game": tiny_game(), "plan": ["Kevin Love|PTS", "<EOS>", "Bucks|TEAM-PTS", "<EOT>"]}
    outputs = realizer([json.dumps(tiny_game(summary=SUMMARY)), own_plan, 7], plan="oracle", **settings)
    assert outputs[0]["plan"] == PLAN and len(outputs[0]["sentences"]) == 2
    assert outputs[1]["plan"] == own_plan["plan"] and len(outputs[1]["sentences"]) == 2
    # at most 5 new tokens a sentence: a sentence is at most 5 word pieces
    assert all(len(ids(tokenizer, sentence)) <= 5 for output in outputs[:2] for sentence in output["sentences"])
    assert outputs[2] == {"error": "a Rotowire game is a dict, a JSON string or a parsed Game, got int"}
    with pytest.raises(ValueError, match=r"needs a content plan: give planner=... or plan='oracle' \(this realizer "
                       r"has no plan_template\)"):
        realizer(tiny_game(summary=SUMMARY), **settings)
    with pytest.raises(ValueError, match="has no record 'Nobody|PTS'"):
        realizer({"game": tiny_game(), "plan": ["Nobody|PTS", "<EOT>"]}, **settings)
    with pytest.raises(ValueError, match="has no summary to take an oracle plan from"):
        realizer(tiny_game(), plan="oracle", **settings)


def test_pipeline_calls_the_planner_with_the_game(tokenizer):
    model = tiny_model(tokenizer)
    seen = []

    def planner(game):
        seen.append(game)
        return {"plan": ["Bucks|TEAM-NAME", "Bucks|TEAM-PTS", "<EOT>"], "probabilities": [0.9, 0.8, 0.7]}

    realizer = pipeline("table-to-text", model=model, tokenizer=tokenizer, planner=planner)
    output = realizer(tiny_game(), num_beams=1, max_new_tokens=3)
    assert seen == [tiny_game()] and output["plan"] == ["Bucks|TEAM-NAME", "Bucks|TEAM-PTS", "<EOT>"]
    assert len(output["sentences"]) == 1


def test_a_planner_path_where_the_task_is_not_registered_gets_a_one_line_error(tokenizer, monkeypatch):
    from transformers.pipelines import PIPELINE_REGISTRY

    # as in an exported repo's code without sumformers installed
    monkeypatch.delitem(PIPELINE_REGISTRY.supported_tasks, "content-planning")
    expected = ("the content-planning task is not registered here: pass the planner as a pipeline, "
                "planner=pipeline(model='some/planner', trust_remote_code=True)")
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pipeline("table-to-text", model=tiny_model(tokenizer), tokenizer=tokenizer, planner="some/planner")


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------


def test_a_few_training_steps_reduce_the_loss(tokenizer, game):
    model = tiny_model(tokenizer).train()
    processor = model.processor_class(tokenizer, model.config)
    batch = processor.collate(processor.training_features(game))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    # label-smoothed cross-entropy starts near ln(30,522) = 10.3 for a random model
    assert abs(losses[0] - 10.33) < 0.2
    assert losses[-1] < losses[0] - 2.0


def test_the_shared_games_give_pairs_in_every_split(data_dir, tokenizer):
    games = read_games(data_dir / "rotowire" / "games.jsonl")
    processor = RealizerForConditionalGeneration.processor_class(tokenizer, tiny_config(tokenizer))
    counts = {split: sum(len(processor.training_features(g)) for g in split_games(games, split))
              for split in ROTOWIRE_SPLITS}
    # measured on the 80 shared games (oracle plan sentences = realizer pairs)
    assert counts == {"train": 775, "dev": 60, "test": 198}


def test_a_game_without_a_plan_is_realized_from_the_template_plan(tokenizer, game):
    # before issue #58: "table-to-text needs a content plan" for a user who has a box score and wants text
    from sumformers.text.rotowire_plans import learn_plan_template, oracle_plan, template_plan

    template = learn_plan_template([game], [oracle_plan(game)])
    model = tiny_model(tokenizer, plan_template=template)
    realizer = pipeline("table-to-text", model=model, tokenizer=tokenizer)
    settings = dict(num_beams=1, max_new_tokens=4, min_length=1)
    output = realizer(tiny_game(), **settings)  # no summary, no plan, no planner
    expected = template_plan(game, template)
    assert output["plan"] == expected and output["plan_source"] == "template"
    assert len(output["sentences"]) == expected.count("<EOS>") + 1
    assert realizer(tiny_game(summary=SUMMARY), plan="oracle", **settings)["plan_source"] == "oracle"
    assert output == realizer(tiny_game(), plan="template", **settings)
    with pytest.raises(ValueError, match="plan_template must be a list of 'role | KEY' strings"):
        tiny_config(tokenizer, plan_template=["no role"])


def test_the_shipped_realizer_has_the_template_of_its_training_games(data_dir):
    from sumformers.checkpoints import shipped_checkpoints
    from sumformers.configuration.configuration_realizer import RealizerConfig
    from sumformers.text.rotowire_plans import learn_plan_template, oracle_plan
    from sumformers.text.rotowire_records import read_games, split_games

    train = split_games(read_games(data_dir / "rotowire" / "games.jsonl"), "train")
    config = RealizerConfig.from_pretrained(shipped_checkpoints()["realizer-minilm-rotowire"])
    assert config.plan_template == learn_plan_template(train, [oracle_plan(game) for game in train])


def test_cli_realizes_a_games_file(tmp_path, tokenizer, capsys):
    from sumformers_cli import main

    model = tiny_model(tokenizer)
    model.save_pretrained(tmp_path / "realizer")
    tokenizer.save_pretrained(tmp_path / "realizer")
    games = tmp_path / "games.jsonl"
    lines = [tiny_game(summary=SUMMARY), {"id": "doc", "document": "Hi."}]
    games.write_text("".join(json.dumps(line) + "\n" for line in lines))
    output = tmp_path / "out.jsonl"
    arguments = ["summarize", str(games), "--model", str(tmp_path / "realizer"), "--output", str(output),
                 "--num-beams", "1", "--max-new-tokens", "3"]
    with pytest.raises(SystemExit):
        main(arguments)
    assert "has no plan template: give --planner MODEL or --plan oracle" in capsys.readouterr().err
    assert main([*arguments, "--plan", "oracle"]) == 2  # the document line is an error, the game is realized
    game_row, document_row = (json.loads(line) for line in output.read_text().splitlines())
    assert game_row["id"] == "tiny" and game_row["plan"] == PLAN and len(game_row["sentences"]) == 2
    assert document_row == {"id": "doc", "error": "doc: a table-to-text model reads a Rotowire game (a line with "
                                                  "`box_score`)"}
