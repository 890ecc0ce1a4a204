"""The checkpoints shipped in `checkpoints/`: small, loading the standard transformers way (`AutoConfig`, the Auto
model class, `pipeline(task, model=folder)`) into the model the adapter describes, and their pipelines decode what
their own scores say."""

import json
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from test_rotowire import EXPECTED_PLAN, SUMMARY, tiny_game
from transformers import AutoConfig, pipeline

import sumformers
from sumformers import ARCHITECTURES
from sumformers.hub import shipped_checkpoints

ARTICLE = Path(__file__).resolve().parents[2] / "examples" / "cnn_missing_student.txt"
STEPWISE = ["stepwise-hibert-minilm-cnndm", "stepwise-etcsum-minilm-cnndm"]
NON_STEPWISE = ["hibert-minilm-cnndm", "etcsum-minilm-cnndm"]
REALIZER = "realizer-minilm-rotowire"
PLANNER = "stepwise-hibert-planner-minilm-rotowire"
WIKISUM = "wikisum-tdmca-copy-minilm-cnndm"
WIKISUM_LLAMA = "wikisum-smollm2-td-cnndm"  # over SmolLM2: tests/models/test_wikisum_llama.py

# The planner reads a game, the realizer generates from a plan sentence of a game and WikiSum from ranked paragraphs:
# their own tests below.
ADAPTERS = [name for name, folder in shipped_checkpoints().items()
            if (folder / "adapter_config.json").is_file() and name not in (PLANNER, REALIZER, WIKISUM, WIKISUM_LLAMA)]


@pytest.mark.parametrize("name", sorted(shipped_checkpoints()))
def test_checkpoint_is_small_and_safetensors_only(name):
    folder = shipped_checkpoints()[name]
    assert sum(path.stat().st_size for path in folder.iterdir()) < 20 * 2**20
    assert list(folder.glob("*.safetensors")) and not list(folder.glob("*.bin"))


def _first_inputs(model, tokenizer):
    """The model's processor's inputs for the bundled article (a batch of one), without the text fields."""
    inputs = model.processor_class(tokenizer, model.config)(ARTICLE.read_text(), max_length=512)
    return {
        key: value
        for key, value in inputs.items()
        if isinstance(value, torch.Tensor) and key != "default_num_sentences"
    }


@pytest.mark.parametrize("name", ADAPTERS)
def test_standard_loading_gives_the_adapter_over_its_encoder(name):
    """`pipeline(task, model=folder)` loads, through the registered Auto class, exactly the model that the adapter
    describes: the encoder rebuilt with `from_encoder`, the PEFT adapter loaded and merged (done by hand here), and
    its scores for the bundled article are the same."""
    folder = str(shipped_checkpoints()[name])
    config = AutoConfig.from_pretrained(folder)
    architecture = ARCHITECTURES[config.model_type]
    assert type(config) is architecture.config_class
    summarizer = pipeline(architecture.task, model=folder)
    assert type(summarizer.model) is architecture.model_class and not summarizer.model.training
    by_hand = PeftModel.from_pretrained(architecture.model_class.from_encoder("minilm", config=config), folder)
    by_hand = by_hand.merge_and_unload().eval()
    inputs = _first_inputs(summarizer.model, summarizer.tokenizer)
    with torch.no_grad():
        torch.testing.assert_close(summarizer.model(**inputs).logits, by_hand(**inputs).logits, rtol=0, atol=0)
    auto = architecture.auto_class.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32)
    assert auto.config._attn_implementation == "eager" and auto.dtype == torch.float32
    assert sumformers.load_pipeline(name)(ARTICLE.read_text()) == summarizer(ARTICLE.read_text())


# WikiSum over Llama is transformers' Llama with its own attention choice (eager, sdpa): not a SummarizerMixin model
@pytest.mark.parametrize("name", sorted(set(shipped_checkpoints()) - {WIKISUM_LLAMA}))
def test_a_back_end_the_model_does_not_run_is_refused_at_load(name):
    """From an adapter checkpoint too (rebuilt over its encoder by `from_encoder`), a back end the class does not
    declare is refused in one line naming the ones it runs."""
    folder = str(shipped_checkpoints()[name])
    architecture = ARCHITECTURES[AutoConfig.from_pretrained(folder).model_type]
    declared = architecture.model_class.attention_backends
    for implementation in ("flex_attention", "blocked", "flash_attention_2"):
        if implementation in declared:
            continue
        with pytest.raises(ValueError) as refusal:
            architecture.auto_class.from_pretrained(folder, attn_implementation=implementation)
        message = str(refusal.value)
        assert "\n" not in message and repr(implementation) in message
        assert all(repr(backend) in message for backend in declared), message


def test_the_shipped_wikisum_loads_the_standard_way():
    """`pipeline("wikisum", model=folder)` loads the adapter over MiniLM (its logits those of the adapter merged by
    hand) and summarizes what its model generates."""
    folder = str(shipped_checkpoints()[WIKISUM])
    summarizer = pipeline("wikisum", model=folder)
    config = AutoConfig.from_pretrained(folder)
    encoder_started = ARCHITECTURES["wikisum"].model_class.from_encoder("minilm", config=config)
    by_hand = PeftModel.from_pretrained(encoder_started, folder).merge_and_unload().eval()
    result = summarizer(
        {"title": "a missing student", "documents": [ARTICLE.read_text()]}, max_new_tokens=8, num_beams=1
    )
    inputs = summarizer.model.processor_class(summarizer.tokenizer, summarizer.model.config)(
        {"title": "a missing student", "documents": [ARTICLE.read_text()]}
    )
    with torch.no_grad():
        torch.testing.assert_close(
            summarizer.model(inputs["input_ids"]).logits, by_hand(inputs["input_ids"]).logits, rtol=0, atol=0
        )
    generated = summarizer.model.generate(
        inputs["input_ids"], attention_mask=inputs["attention_mask"], max_new_tokens=8, num_beams=1
    )
    expected = summarizer.tokenizer.decode(generated[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert result["summary"] == expected.strip()


@pytest.mark.parametrize("name", STEPWISE)
def test_greedy_steps_follow_the_step_distributions(name):
    """Beam 1: every step takes the most probable allowed choice (END only from the configured minimum length on),
    and reports that choice's probability and the running sum of log-probabilities."""
    summarizer = sumformers.load_pipeline(name)
    minimum = summarizer.model.config.min_sentences
    result = summarizer(ARTICLE.read_text(), beam_size=1, num_sentences=4, return_steps=True, max_length=512)
    chosen, score = [], 0.0
    for step in result["steps"]:
        distribution = torch.tensor(step["distribution"])
        allowed = torch.ones_like(distribution, dtype=torch.bool)
        allowed[chosen] = False
        allowed[-1] = len(chosen) >= minimum
        choice = int(torch.where(allowed, distribution, -1.0).argmax())
        assert step["sentence"] == (None if choice == len(distribution) - 1 else choice)
        assert step["probability"] == pytest.approx(float(distribution[choice]), rel=1e-4)
        score += float(torch.log(distribution[choice]))
        assert step["score"] == pytest.approx(score, rel=1e-4)
        if step["sentence"] is not None:
            chosen.append(step["sentence"])
    assert len(chosen) >= minimum and result["selection_order"] == chosen
    assert result["sentences"] == sorted(chosen)


@pytest.mark.parametrize("name", NON_STEPWISE)
def test_top_sentences_are_the_best_scored(name):
    summarizer = sumformers.load_pipeline(name)
    text = ARTICLE.read_text()
    result = summarizer(text, num_sentences=3, trigram_blocking=False, max_length=512)
    probabilities = summarizer.forward(summarizer.preprocess(text, max_length=512))["probabilities"][0]
    assert result["sentences"] == sorted(probabilities.topk(3).indices.tolist())


# Both ETC checkpoints use ETC's relative keys (`from_encoder`'s design); ETCSum (CPU, issue #39) keeps MiniLM's
# absolute positions tiled past 512, Stepwise ETCSum (GPU) was trained without absolute positions for the long tokens.
ETC_POSITIONS = {"etcsum-minilm-cnndm": "tiled", "stepwise-etcsum-minilm-cnndm": "none"}


@pytest.mark.parametrize("name", sorted(ETC_POSITIONS))
def test_the_shipped_etc_checkpoints_have_relative_keys_and_the_positions_they_trained_with(name):
    model = sumformers.load_pipeline(name).model
    assert (model.config.relative_attention, model.config.long_position_embeddings) == ("keys", ETC_POSITIONS[name])
    assert (model.embeddings.position_embeddings is None) == (ETC_POSITIONS[name] == "none")
    assert any("relative_keys" in parameter for parameter, _ in model.named_parameters())


def test_the_shipped_copy_transformer_holds_fp16_weights_a_factorized_table_and_blocks_word_trigrams():
    """The circular 2D CopyTransformer with a 128-wide factorized word table: fp16 weights whose only vocabulary-sized
    tensors are the 30,522 x 128 table and the output layer's per-word bias (the output layer reads the table through
    its projection), loaded back exactly by `pipeline(task, model=folder)`; with the config's word trigram blocking its
    summary repeats no word trigram, and without it (the benchmark tables' decoding) the summary does repeat one."""
    from safetensors.torch import load_file

    folder = shipped_checkpoints()["copytransformer-circular2d-cnndm"]
    shipped = load_file(folder / "model.safetensors")
    assert all(tensor.dtype == torch.float16 for tensor in shipped.values() if tensor.is_floating_point())
    assert {name: list(tensor.shape) for name, tensor in shipped.items() if 30522 in tensor.shape} == {
        "encoder.embed_tokens.weight": [30522, 128], "lm_head.bias": [30522]}
    assert AutoConfig.from_pretrained(folder).convolution == "circular_2d"
    summarizer = pipeline("abstractive-summarization", model=str(folder))
    state = summarizer.model.state_dict()
    assert all(torch.equal(state[name], tensor.float()) for name, tensor in shipped.items())
    assert summarizer.model.config.no_repeat_word_ngram_size == 3

    def word_trigrams(summary: str) -> list[tuple]:
        # the blocking's words: WordPiece's pre-tokenization (punctuation apart), within each sentence line
        pre_tokenize = summarizer.tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str
        words = [[word for word, _ in pre_tokenize(sentence)] for sentence in summary.split("\n")]
        return [tuple(sentence[i : i + 3]) for sentence in words for i in range(len(sentence) - 2)]

    blocked = word_trigrams(summarizer(ARTICLE.read_text())["summary"])
    assert len(blocked) > 10 and len(set(blocked)) == len(blocked)
    unblocked = word_trigrams(summarizer(ARTICLE.read_text(), no_repeat_word_ngram_size=0)["summary"])
    assert len(set(unblocked)) < len(unblocked)


def test_the_shipped_realizer_loads_the_standard_way_and_realizes_each_plan_sentence():
    """`pipeline("table-to-text", model=folder)` realizes the test game's oracle plan (worked out by hand in
    test_rotowire) exactly as the adapter over its encoder does, merged by hand and run one plan sentence at a time
    (each step reads the previous sentence)."""
    from transformers import GenerationConfig

    from sumformers import RealizerForConditionalGeneration
    from sumformers.generation.source_numbers import SourceNumbersLogitsProcessor, number_token_mask
    from sumformers.text.rotowire_plans import plan_sentences

    folder = str(shipped_checkpoints()[REALIZER])
    realizer = pipeline("table-to-text", model=folder, plan="oracle")
    game = tiny_game(summary=SUMMARY)
    result = realizer(game, num_beams=2, max_new_tokens=24)
    config = AutoConfig.from_pretrained(folder)
    by_hand = PeftModel.from_pretrained(RealizerForConditionalGeneration.from_encoder("minilm", config=config), folder)
    by_hand = by_hand.merge_and_unload().eval()
    by_hand.generation_config = GenerationConfig.from_pretrained(folder)
    processor = RealizerForConditionalGeneration.processor_class(realizer.tokenizer, config)
    numbers = number_token_mask(realizer.tokenizer)
    previous, sentences = "", []
    for records in plan_sentences(result["plan"]):
        step = processor({"game": game, "records": records, "previous": previous})
        # the shipped config's default decoding: number tokens from the step's input only
        only_input_numbers = [SourceNumbersLogitsProcessor(step["input_ids"], numbers)] * config.numbers_from_input
        sequence = by_hand.generate(**step, num_beams=2, max_new_tokens=24, logits_processor=only_input_numbers)[0]
        previous = processor.decode(sequence.tolist(), processor.game(game))
        sentences.append(previous)
    assert result["plan"] == EXPECTED_PLAN
    assert result["sentences"] == sentences and all(sentences)


def test_the_shipped_realizer_writes_only_numbers_of_its_input_by_default():
    """With `numbers_from_input` (the shipped default) every number token of a realized sentence is one of its step's
    input; without it the realizer writes the test game's final score as 116 - 101, a number the input lacks (the
    score is 118 - 101)."""
    from sumformers.generation.source_numbers import number_token_mask
    from sumformers.text.rotowire_plans import plan_sentences

    realizer = pipeline("table-to-text", model=str(shipped_checkpoints()[REALIZER]), plan="oracle")
    assert realizer.model.config.numbers_from_input
    game = tiny_game(summary=SUMMARY)
    numbers = number_token_mask(realizer.tokenizer)
    processor = realizer.model_processor

    def foreign_numbers(result):
        """Per sentence, the number tokens of the sentence that its step's input lacks."""
        foreign, previous = [], ""
        for records, sentence in zip(plan_sentences(result["plan"]), result["sentences"]):
            given = set(processor({"game": game, "records": records, "previous": previous})["input_ids"][0].tolist())
            written = realizer.tokenizer(sentence, add_special_tokens=False)["input_ids"]
            foreign.append(sorted({realizer.tokenizer.decode([i]) for i in written if numbers[i] and i not in given}))
            previous = sentence
        return foreign

    constrained, free = realizer(game), realizer(game, numbers_from_input=False)
    assert constrained["sentences"][0].endswith("118 - 101 on Tuesday.")
    assert foreign_numbers(constrained) == [[]] * len(constrained["sentences"])
    assert free["sentences"][0].endswith("116 - 101 on Tuesday.") and foreign_numbers(free)[0] == ["116"]
    with pytest.raises(ValueError, match="numbers_from_input must be True or False, got 'yes'"):
        realizer(game, numbers_from_input="yes")


def test_the_cli_realizes_the_bundled_game_with_the_shipped_realizer_by_name(tmp_path):
    """`sumformers summarize GAMES --model realizer-minilm-rotowire --plan oracle`: one row, the oracle plan of the
    game's summary, one realized sentence per plan sentence."""
    from sumformers.text.rotowire_plans import plan_sentences
    from sumformers_cli import main

    games, output = tmp_path / "games.jsonl", tmp_path / "summaries.jsonl"
    games.write_text(json.dumps(tiny_game(summary=SUMMARY)) + "\n")
    assert main(["summarize", str(games), "--model", REALIZER, "--plan", "oracle", "--output", str(output),
                 "--num-beams", "1", "--max-new-tokens", "8"]) == 0
    (row,) = [json.loads(line) for line in output.read_text().splitlines()]
    assert row["id"] == "tiny" and row["plan"] == EXPECTED_PLAN
    assert len(row["sentences"]) == len(plan_sentences(EXPECTED_PLAN))
    assert row["summary"] == "\n".join(row["sentences"])


def test_the_shipped_planner_loads_the_standard_way_and_decodes_with_its_dev_chosen_bias():
    """`pipeline("content-planning", model=folder)` loads exactly the adapter over MiniLM merged by hand, and plans
    with the config's sentence-break bias (-5, chosen on the dev games under the paper's CS; the card says it is not
    the paper's) unless the call gives another: the same plan as the hand-merged model's pipeline at -5."""
    from sumformers import ContentPlanningPipeline, StepwiseHiBertForContentPlanning
    from sumformers.text.rotowire_records import EOT

    folder = str(shipped_checkpoints()[PLANNER])
    planner = pipeline("content-planning", model=folder)
    config = AutoConfig.from_pretrained(folder)
    assert type(planner.model) is StepwiseHiBertForContentPlanning and config.sentence_break_bias == -5.0
    assert "Not the paper's: `sentence_break_bias` -5.0" in (Path(folder) / "README.md").read_text()
    encoder_started = StepwiseHiBertForContentPlanning.from_encoder("minilm", config=config)
    by_hand = PeftModel.from_pretrained(encoder_started, folder).merge_and_unload().eval()
    expected = by_hand.state_dict()
    assert planner.model.state_dict().keys() == expected.keys()
    assert all(torch.equal(value, expected[name]) for name, value in planner.model.state_dict().items())
    plan = planner(tiny_game())["plan"]
    by_hand_planning = ContentPlanningPipeline(model=by_hand, tokenizer=planner.tokenizer)
    assert plan == by_hand_planning(tiny_game(), sentence_break_bias=-5.0)["plan"]
    assert plan[-1] == EOT and sumformers.load_pipeline(PLANNER)(tiny_game())["plan"] == plan


def test_table_to_text_takes_the_shipped_planner_by_name():
    """`pipeline("table-to-text", model=..., planner=NAME)` plans with the shipped planner of that name, as the CLI's
    --planner does; a summarizer's name is refused in one line before any game is planned."""
    folder = str(shipped_checkpoints()[REALIZER])
    by_name = pipeline("table-to-text", model=folder, planner=PLANNER)
    output = by_name(tiny_game(), num_beams=1, max_new_tokens=2)
    assert output["plan"] == sumformers.load_pipeline(PLANNER)(tiny_game())["plan"]
    with pytest.raises(ValueError, match=r"^planner takes a content-planning model, not bertsum-minilm-cnndm "
                                         r"\(task extractive-summarization\)$"):
        pipeline("table-to-text", model=folder, planner="bertsum-minilm-cnndm")


def test_the_cli_plans_with_the_shipped_planner_by_name_and_refuses_another_task_as_planner(tmp_path, capsys):
    """`sumformers summarize GAMES --model realizer-minilm-rotowire --planner stepwise-hibert-planner-minilm-rotowire`
    realizes the shipped planner's plan; a summarizer given as --planner is one error line."""
    from sumformers.text.rotowire_plans import plan_sentences
    from sumformers_cli import main

    games, output = tmp_path / "games.jsonl", tmp_path / "summaries.jsonl"
    games.write_text(json.dumps(tiny_game()) + "\n")
    assert main(["summarize", str(games), "--model", REALIZER, "--planner", PLANNER, "--output", str(output),
                 "--num-beams", "1", "--max-new-tokens", "4"]) == 0
    (row,) = [json.loads(line) for line in output.read_text().splitlines()]
    assert row["plan"] == sumformers.load_pipeline(PLANNER)(tiny_game())["plan"]
    assert len(row["sentences"]) == len(plan_sentences(row["plan"]))
    with pytest.raises(SystemExit) as exit_status:
        main(["summarize", str(games), "--model", REALIZER, "--planner", "bertsum-minilm-cnndm"])
    assert exit_status.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "sumformers: error: could not load model bertsum-minilm-cnndm: planner takes a content-planning model, "
        "not bertsum-minilm-cnndm (task extractive-summarization)")
