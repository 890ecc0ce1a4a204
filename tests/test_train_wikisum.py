"""The WikiSum training script end to end on CNN/DM-shaped rows: the article's sentences ranked as the input, the
highlights as the summary, the decoder started from a tiny encoder; the loss goes down and the saved model loads back
through `pipeline("wikisum", ...)` and writes what the model generates."""

import gzip
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO_ROOT, training_script

TOPICS = ["river", "budget", "school", "storm"]


def write_cnndm_rows(path, count: int) -> None:
    """CNN/DM-shaped rows (the fields of the shared `train_large.jsonl.gz`): lowercased article, highlights joined
    by newlines."""
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for number in range(count):
            topic = TOPICS[number % len(TOPICS)]
            article = (
                f"the {topic} story number {number} begins in the town. officials said the {topic} plan will cost "
                f"more. people gathered near the hall on a cold evening. experts expect the {topic} debate to go on."
            )
            highlights = f"officials said the {topic} plan will cost more.\nthe {topic} debate goes on."
            row = {"id": f"cnndm-{number}", "document": article, "summary": highlights, "split": "train"}
            handle.write(json.dumps(dict(row, source="cnn", text_format="lowercased", origin="test")) + "\n")


def test_cnndm_rows_become_ranked_sentence_inputs(tmp_path):
    from sumformers.processing.processing_wikisum import read_wikisum_examples

    write_cnndm_rows(tmp_path / "rows.jsonl.gz", 1)
    (example,) = read_wikisum_examples(str(tmp_path / "rows.jsonl.gz"), ranking_unit="sentence")
    assert example["title"] == "" and example["summary"].startswith("officials said the river plan")
    assert example["documents"][0].split("\n") == [
        "the river story number 0 begins in the town.",
        "officials said the river plan will cost more.",
        "people gathered near the hall on a cold evening.",
        "experts expect the river debate to go on.",
    ]
    with pytest.raises(ValueError, match="^ranking_unit must be one of"):
        read_wikisum_examples(str(tmp_path / "rows.jsonl.gz"), ranking_unit="word")
    (tmp_path / "bad.jsonl").write_text(json.dumps({"document": "text"}) + "\n")
    with pytest.raises(ValueError) as error:
        read_wikisum_examples(str(tmp_path / "bad.jsonl"))
    assert str(error.value) == (
        f"{tmp_path / 'bad.jsonl'}, row 1: needs `document` or `documents` (text) and `summary` (text)"
    )


def run_training(tmp_path, encoder_folder, *flags: str):
    """`train_wikisum.py` for 12 steps on eight CNN/DM-shaped rows, the decoder started from `encoder_folder`, with
    evaluation; returns the output folder and the logged training losses."""
    data = tmp_path / "train_large.jsonl.gz"
    write_cnndm_rows(data, 8)
    output = tmp_path / "run"
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / "train_wikisum.py"),
        "--model_name_or_path", str(encoder_folder), "--decoder_init", "encoder",
        "--train_file", str(data), "--validation_file", str(data), "--ranking_unit", "sentence",
        "--ranker", "textrank", "--max_input_tokens", "40", "--max_summary_tokens", "24",
        "--attention_layers", "local,compressed,local", "--local_block_size", "8", "--hidden_dropout", "0",
        "--per_device_train_batch_size", "4", "--max_steps", "12", "--learning_rate", "1e-2",
        "--lr_scheduler_type", "constant",
        "--logging_steps", "1", "--save_steps", "12", "--num_beams", "2", "--max_new_tokens", "6",
        "--eval_generate_samples", "2", "--max_eval_samples", "4", "--do_train", "--do_eval", "--use_cpu",
        "--report_to", "none", "--output_dir", str(output), *flags,
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    state = json.loads((output / "checkpoint-12" / "trainer_state.json").read_text())
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == 12
    return output, losses


def check_saved_decoding(final):
    """The generation config holds GNMT's length penalty (alpha 0.6, beam 2) and no n-gram blocking, and the card
    names exactly that."""
    generation = json.loads((final / "generation_config.json").read_text())
    assert generation["length_penalty_type"] == "gnmt" and generation["length_penalty"] == 0.6
    assert generation["num_beams"] == 2 and "no_repeat_ngram_size" not in generation
    settings = "beam 2, length penalty alpha 0.6 (((5 + |Y|) / 6) ** alpha, GNMT's), no n-gram blocking"
    card = json.loads((final / "sumformers_card.json").read_text())
    assert card["decoding"] == settings and settings in card["evaluation"]
    readme = (final / "README.md").read_text()
    assert f"## Decoding\n\nThe repo's `generation_config.json` (the pipeline's defaults): {settings}." in readme
    return card, readme


def check_pipeline_generates_what_the_model_does(final):
    """`pipeline("wikisum", model=<folder>)` loads the saved model and writes what its `generate()` writes."""
    from transformers import pipeline

    from sumformers import WikiSumForCausalLM

    model = WikiSumForCausalLM.from_pretrained(str(final)).eval()
    assert model.config.decoder_init == "encoder" and model.config.layer_norm_position == "post"
    summarizer = pipeline("wikisum", model=str(final))
    article = "\n".join(["the river story begins in the town.", "officials said the river plan will cost more."])
    result = summarizer(article, num_beams=2)
    inputs = summarizer.model_processor(article)
    assert result["input_tokens"] == inputs["input_ids"].shape[1]
    with torch.no_grad():
        generated = model.generate(inputs["input_ids"], attention_mask=inputs["attention_mask"], num_beams=2)
    assert result["summary"] == summarizer.model_processor.decode(generated[0, inputs["input_ids"].shape[1] :].tolist())
    return model


def test_cnndm_training_from_the_encoder_lowers_the_loss_and_loads_in_the_pipeline(tmp_path, tiny_encoder_folder):
    output, losses = run_training(tmp_path, tiny_encoder_folder)
    final = output / "final"
    # the first step's loss is about ln(30522) = 10.3 or more; twelve steps on eight repeated rows halve it
    assert losses[0] > 9.0 and max(losses[-3:]) < 0.5 * losses[0]
    assert (final / "model.safetensors").is_file() and not (final / "adapter_config.json").exists()
    card, readme = check_saved_decoding(final)
    assert "started from" in card["training"] and "ranked sentences" in card["training"]
    assert "all weights trained" in card["training"]
    assert "**Start: from `" in readme and "encoder layer\n   [0, 1, 0][i]" in readme
    check_pipeline_generates_what_the_model_does(final)


def test_lora_training_saves_an_adapter_checkpoint_that_the_pipeline_loads(tmp_path, tiny_encoder_folder):
    from safetensors import safe_open

    output, losses = run_training(
        tmp_path,
        tiny_encoder_folder,
        "--use_lora",
        "--lora_r",
        "4",
        "--ship_to",
        str(tmp_path / "shipped"),
        "--loss_on",
        "summary",
    )
    final = output / "final"
    # LoRA r=4 on a tiny random encoder learns slower than full training: the last steps average over a nat lower
    assert sum(losses[-3:]) / 3 < losses[0] - 1.0
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {path.name for path in final.iterdir()}
    assert not (final / "model.safetensors").exists()
    # LoRA on the six projections of the three layers, and the new modules of this layout (no experts)
    with safe_open(str(final / "adapter_model.safetensors"), "pt") as saved:
        names = {name.removeprefix("base_model.model.") for name in saved.keys()}
        assert {saved.get_tensor(name).dtype for name in saved.keys()} == {torch.float16}
    lora = {name for name in names if ".lora_" in name}
    projections = ("q_proj", "k_proj", "v_proj", "o_proj")
    modules = [f"attention.{name}" for name in projections] + ["feed_forward.up", "feed_forward.down"]
    assert lora == {
        f"model.layers.{i}.{module}.lora_{half}.weight" for i in range(3) for module in modules for half in "AB"
    }
    assert names - lora == {
        "model.embed_projection.weight",
        "output_projection.weight",
        "model.layers.1.attention.null_slot.key",
        "model.layers.1.attention.null_slot.value",
        *(
            f"model.layers.1.attention.{kind}_compression.{weight}"
            for kind in ("key", "value")
            for weight in ("weight", "bias")
        ),
    }
    card, _ = check_saved_decoding(final)
    assert "LoRA r=4 (alpha 32) on q_proj,k_proj,v_proj,o_proj,up,down of every layer" in card["training"]
    assert "the training's checkpoint holds only these, in fp16" in card["training"]
    assert "loss on the summary tokens alone" in card["training"]
    model = check_pipeline_generates_what_the_model_does(final)
    # the training moved the adapted weights off the encoder's copy
    from sumformers import WikiSumForCausalLM

    start = WikiSumForCausalLM.from_encoder(str(tiny_encoder_folder), config=model.config)
    assert not torch.equal(model.model.layers[0].attention.q_proj.weight, start.model.layers[0].attention.q_proj.weight)
    assert torch.equal(model.model.embed_tokens.weight, start.model.embed_tokens.weight)  # frozen
    # the Trainer's checkpoint-12 (the same adapter in fp32) loads in the pipeline as the final model does
    from transformers import pipeline

    checkpoint = pipeline("wikisum", model=str(output / "checkpoint-12")).model
    settings = [{k: v for k, v in m.config.to_dict().items() if k != "_name_or_path"} for m in (checkpoint, model)]
    assert settings[0] == settings[1]
    ids = torch.tensor([[101, 1996, 2314, 2466, 103, 1996]])
    with torch.no_grad():
        torch.testing.assert_close(checkpoint(ids).logits, model(ids).logits, atol=2e-2, rtol=0)
    # --ship_to copies the adapter checkpoint as it is (already fp16)
    shipped = tmp_path / "shipped"
    assert {path.name: path.read_bytes() for path in shipped.iterdir()} == {
        path.name: path.read_bytes() for path in final.iterdir()
    }


def test_start_from_continues_a_trained_decoder_under_the_runs_layout(tmp_path, tiny_encoder_folder, minilm_tokenizer):
    """--start_from: a saved T-DMCA continues as a T-D with experts; its copied weights are the start and the card
    says so."""
    from sumformers import WikiSumForCausalLM

    source = WikiSumForCausalLM.from_encoder(
        str(tiny_encoder_folder), decoder_init="encoder", attention_layers=["local", "compressed", "local"],
        local_block_size=8, hidden_dropout=0.0,
    )  # fmt: skip
    source.save_pretrained(tmp_path / "trained")
    minilm_tokenizer.save_pretrained(tmp_path / "trained")
    output, losses = run_training(
        tmp_path, tiny_encoder_folder, "--start_from", str(tmp_path / "trained"), "--attention_layers",
        "full,full,full", "--moe_layers", "1", "--num_experts", "2", "--learning_rate", "0",
    )  # fmt: skip
    final = output / "final"
    model = WikiSumForCausalLM.from_pretrained(str(final))
    assert model.config.attention_layers == ["full"] * 3 and model.config.moe_layers == [1]
    assert model.config.max_input_tokens == 40
    # learning rate 0: the saved weights are the start, the source's own where the names match
    weights = model.state_dict()
    for name, weight in source.state_dict().items():
        if "_compression" not in name and "null_slot" not in name:
            origin = name.replace("layers.1.feed_forward.", "layers.1.feed_forward.experts.1.")
            assert torch.equal(weights[origin], weight), name
    card = json.loads((final / "sumformers_card.json").read_text())
    assert f"continued from the trained model {tmp_path / 'trained'} under this layout" in card["training"]
    assert card["training"].startswith("T-D-MoE (full, full, full;")


def test_start_from_refuses_what_is_not_a_trained_wikisum_model(tmp_path, tiny_encoder_folder):
    data = tmp_path / "train.jsonl.gz"
    write_cnndm_rows(data, 2)
    command = [sys.executable, str(REPO_ROOT / "training_scripts" / "train_wikisum.py"), "--start_from",
               str(tiny_encoder_folder), "--train_file", str(data), "--output_dir", str(tmp_path / "run"),
               "--do_train", "--use_cpu"]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert completed.returncode != 0
    assert completed.stderr.strip().splitlines()[-1] == (
        f"ValueError: --start_from needs a trained WikiSum model folder, got {str(tiny_encoder_folder)!r}"
    )


def test_sampled_examples_are_split_into_sentences_once_per_meeting():
    from sumformers.processing.processing_wikisum import sentence_lines

    script = training_script("train_wikisum")
    meeting = ["Grad A: we start. We agree on the plan.", "Grad B: the budget is fine."]
    examples = [{"title": "", "documents": meeting}, {"title": "a query", "documents": meeting},
                {"title": "", "documents": ["One article. Two sentences."]}]  # fmt: skip
    script.one_sentence_a_line(examples)
    assert examples[0]["documents"] == sentence_lines(meeting) and examples[0]["documents"][0].count("\n") == 1
    assert examples[1]["documents"] is examples[0]["documents"]  # the query shares the meeting's one split
    assert examples[2]["documents"] == ["One article.\nTwo sentences."]


def test_summary_loss_only_labels_the_summary_tokens_and_the_end_token(minilm_tokenizer):
    from sumformers import WikiSumConfig
    from sumformers.processing.processing_wikisum import WikiSumProcessor

    processor = WikiSumProcessor(minilm_tokenizer, WikiSumConfig(max_input_tokens=48))
    examples = [
        {"title": "", "documents": ["the river rose.\nthe town flooded."], "summary": "the town flooded."},
        {"title": "", "documents": ["a short one."], "summary": "short"},
    ]
    features = [processor.training_features(example, 16) for example in examples]
    every, summary = processor.collate(features), processor.collate(features, summary_loss_only=True)
    assert torch.equal(every["input_ids"], summary["input_ids"])
    for row, feature in enumerate(features):
        start, end = feature["summary_start"], feature["summary_start"] + len(feature["summary_ids"])
        assert every["labels"][row, :end].tolist() == feature["input_ids"] + feature["summary_ids"]
        # the separator's output predicts the first summary token: labels from the summary on, the end token last,
        # cut to the positions the model scores
        width = every["labels"].shape[1]
        labelled = [-100] * start + feature["summary_ids"] + [-100] * (width - end)
        assert summary["labels"][row].tolist() == labelled[-summary["logits_to_keep"] :]
    assert features[0]["summary_ids"][-1] == minilm_tokenizer.sep_token_id


@pytest.mark.parametrize("copy_mechanism", [False, True])
def test_the_summary_loss_scores_only_the_positions_that_predict_a_label(minilm_tokenizer, copy_mechanism):
    from conftest import tiny_wikisum_config
    from sumformers import WikiSumForCausalLM
    from sumformers.processing.processing_wikisum import WikiSumProcessor

    config = tiny_wikisum_config(attention_layers=["local", "compressed", "full"], copy_mechanism=copy_mechanism)
    processor = WikiSumProcessor(minilm_tokenizer, config)
    features = [  # separator 3 ends each input, end token 2 each summary
        {"input_ids": [5, 6, 7, 8, 9, 10, 11, 3], "summary_start": 8, "summary_ids": [12, 13, 2]},
        {"input_ids": [5, 6, 7, 9, 3], "summary_start": 5, "summary_ids": [14, 15, 16, 7, 2]},
    ]
    batch = processor.collate(features, summary_loss_only=True)
    # width 11; the second row's first summary token (position 5) is predicted from position 4: 11 - 4 = 7 kept
    assert batch["logits_to_keep"] == 7 and batch["labels"].shape == (2, 7)
    torch.manual_seed(0)
    model = WikiSumForCausalLM._from_config(config).eval()
    with torch.no_grad():
        kept = model(**batch)
        every = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float().log_softmax(-1)
    assert kept.logits.shape[:2] == (2, 7)
    # the loss by hand from every position's distribution: the mean negative log-likelihood of the summary tokens
    terms = [
        -every[row, position - 1, batch["input_ids"][row, position]]
        for row, feature in enumerate(features)
        for position in range(feature["summary_start"], feature["summary_start"] + len(feature["summary_ids"]))
    ]
    torch.testing.assert_close(kept.loss, torch.stack(terms).mean())


def test_no_repeat_ngram_size_is_saved_only_when_given_and_named_on_the_card_with_its_reason():
    from sumformers import WikiSumConfig
    from sumformers.cards import build_model_card

    script = training_script("train_wikisum")
    config = WikiSumConfig()
    default = script.generation_config(config, script.WikiSumArguments())
    assert "no_repeat_ngram_size" not in json.loads(default.to_json_string(use_diff=True))
    assert default.length_penalty_type == "gnmt" and default.length_penalty == 0.6 and default.num_beams == 4
    with pytest.raises(ValueError, match="^--no_repeat_ngram_size needs --no_repeat_ngram_reason"):
        script.generation_config(config, script.WikiSumArguments(no_repeat_ngram_size=3))
    reason = "the from-scratch decoder repeats whole phrases at beam 4"
    arguments = script.WikiSumArguments(no_repeat_ngram_size=3, no_repeat_ngram_reason=reason)
    blocking = script.generation_config(config, arguments)
    assert json.loads(blocking.to_json_string(use_diff=True))["no_repeat_ngram_size"] == 3
    decoding = script.decoding_settings(blocking, arguments.no_repeat_ngram_reason)
    assert decoding.endswith(f"repeated 3-grams of WordPieces blocked ({reason})")
    assert f"{decoding}." in str(build_model_card(config, {"decoding": decoding}))
    # a minimum length is named too, the one reason after both departures from the defaults
    blocking.min_new_tokens = 40
    assert script.decoding_settings(blocking, reason).endswith(
        f"repeated 3-grams of WordPieces blocked, at least 40 WordPieces written ({reason})"
    )
    assert "(" + reason not in script.decoding_settings(default, reason)  # nothing departs: no reason shown


def test_lora_is_refused_where_it_cannot_give_a_loadable_adapter(tiny_encoder_folder, minilm_tokenizer, tmp_path):
    from sumformers.training import ModelArguments

    script = training_script("train_wikisum")
    encoder = str(tiny_encoder_folder)
    scratch = script.new_model(encoder, minilm_tokenizer, "tiny", script.WikiSumArguments())
    with pytest.raises(ValueError, match="^--use_lora needs --decoder_init encoder"):
        script.adapt_with_lora(scratch, ModelArguments(model_name_or_path=encoder, use_lora=True))
    started = script.new_model(encoder, minilm_tokenizer, "tiny", script.WikiSumArguments(decoder_init="encoder"))
    # continuing a saved model: an adapter would reload over the encoder's copy, not over the saved decoder
    started.save_pretrained(tmp_path / "saved")
    continued = ModelArguments(model_name_or_path=str(tmp_path / "saved"), use_lora=True)
    with pytest.raises(ValueError, match="^--use_lora starts from the encoder .*, not from the saved model"):
        script.adapt_with_lora(started, continued)
    continued.use_lora = False
    assert script.adapt_with_lora(started, continued) is started


def test_an_unknown_decoder_start_is_refused(tiny_encoder_folder, minilm_tokenizer):
    script = training_script("train_wikisum")
    with pytest.raises(ValueError, match="^--decoder_init must be random or encoder, got 'bert'$"):
        script.new_model(
            str(tiny_encoder_folder), minilm_tokenizer, "tiny", script.WikiSumArguments(decoder_init="bert")
        )


def test_card_names_each_deviation_of_the_configuration_with_its_reason():
    from sumformers import WikiSumConfig
    from sumformers.cards import build_model_card

    def card(**settings) -> str:
        return str(build_model_card(WikiSumConfig(decoder_init="encoder", **settings), {}))

    plain, copying = card(), card(copy_mechanism=True)
    learned = card(position_embeddings="learned", max_position_embeddings=512, max_input_tokens=256)
    assert "Copy head (not in the paper" not in plain
    assert "Copy head (not in the paper, kept for a measured reason)" in copying
    assert "log-perplexity was 4.95 with the head and 6.26 without" in copying
    assert "timing signal scaled" in plain and "timing signal scaled" not in learned
    assert "so it reads at most 512" in learned
