"""The abstractive training script end to end on a tiny encoder: the sentence planner with the decoder started from
the encoder, frozen bottom layers cached, two learning rates, evaluation through the pipeline, and a small adapter
checkpoint that loads the standard way and generates what the trained model generated."""

import json
import os
import subprocess
import sys

import pytest
import torch
from test_training import tiny_encoder, write_corpus  # noqa: F401 (a fixture)

from conftest import REPO_ROOT, training_script


def test_planner_training_saves_a_loadable_small_checkpoint(tmp_path, tiny_encoder):  # noqa: F811
    data = tmp_path / "train.jsonl"
    write_corpus(data, 8)
    output = tmp_path / "run"
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / "train_abstractive.py"),
        "--model_type", "sentence_planner", "--model_name_or_path", str(tiny_encoder),
        "--train_file", str(data), "--validation_file", str(data), "--eval_split", "validation[:2]",
        "--decoder_layers", "2", "--frozen_layers", "1", "--bottom_state_cache", str(tmp_path / "states.u16"),
        "--per_device_train_batch_size", "4", "--max_steps", "2", "--learning_rate", "1e-3",
        "--encoder_learning_rate", "1e-5", "--num_beams", "1", "--do_train", "--do_eval", "--use_cpu",
        "--output_dir", str(output),
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "eval ROUGE" in completed.stderr
    final = output / "final"
    assert (final / "adapter_model.safetensors").stat().st_size < 20 * 2**20
    card = json.loads((final / "sumformers_card.json").read_text())
    assert "decoder_init=encoder" in card["training"] and "guidance weight 1.0" in card["training"]
    assert (tmp_path / "states.u16").is_file()  # the frozen layer's states were cached

    from transformers import AutoModelForSeq2SeqLM, pipeline

    from sumformers import SentencePlannerForConditionalGeneration

    model = AutoModelForSeq2SeqLM.from_pretrained(str(final))
    assert type(model) is SentencePlannerForConditionalGeneration and model.config.decoder_init == "encoder"
    summarizer = pipeline("abstractive-summarization", model=str(final))
    article = "The river story begins in the town. Officials said the river plan will cost more."
    result = summarizer(article, num_beams=1, max_new_tokens=8, no_repeat_word_ngram_size=0)
    inputs = summarizer.model_processor(article)
    inputs.pop("sentences")
    generated = model.generate(**inputs, num_beams=1, max_new_tokens=8)[0]
    assert result["summary"] == summarizer.model_processor.decode(generated.tolist())
    assert len(generated) == 9  # the begin token and 8 new ones: the tiny model's minimum length keeps it going


def test_the_encoder_gets_its_own_learning_rate():
    script = training_script("train_abstractive")
    from conftest import tiny_bertsumabs_config
    from sumformers import BertSumAbsForConditionalGeneration

    model = BertSumAbsForConditionalGeneration(tiny_bertsumabs_config())
    optimizer = script.optimizer_with_two_rates(model, decoder_rate=1e-3, encoder_rate=2e-5, weight_decay=0.0)
    encoder_group, decoder_group = optimizer.param_groups
    assert (encoder_group["lr"], decoder_group["lr"]) == (2e-5, 1e-3)
    assert {id(p) for p in encoder_group["params"]} == {id(p) for p in model.encoder.parameters()}
    others = [p for name, p in model.named_parameters() if not name.startswith("encoder.")]
    assert {id(p) for p in decoder_group["params"]} == {id(p) for p in others}


def test_training_features_are_cached_across_evaluation_and_optimizer_flags(tmp_path, minilm_tokenizer):
    from datasets import load_dataset
    from transformers import TrainingArguments

    from conftest import tiny_bertsumabs_config
    from sumformers import BertSumAbsForConditionalGeneration
    from sumformers.training import DataArguments, map_training_features

    script = training_script("train_abstractive")
    data = tmp_path / "train.jsonl"
    write_corpus(data, 4)
    dataset = load_dataset("json", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    config = tiny_bertsumabs_config()
    processor = BertSumAbsForConditionalGeneration.processor_class(minilm_tokenizer, config)
    training_args = TrainingArguments(output_dir=str(tmp_path / "run"), use_cpu=True, report_to="none")

    def features(data_args, **settings):
        mapped = map_training_features(dataset, script.build_features, training_args, data_args, processor, False,
                                       **settings)
        return mapped.cache_files[0]["filename"], mapped

    first, mapped = features(DataArguments(eval_split="validation[:10]"), max_length=512, max_target_length=40)
    assert mapped[0]["labels"][-1] == config.eos_token_id
    # another evaluation split, sample limit or worker count reads the same cache file ...
    again, _ = features(DataArguments(eval_split="validation[5:9]", max_eval_samples=3), max_length=512,
                        max_target_length=40)
    assert again == first
    # ... what the features depend on makes new ones
    shorter, mapped = features(DataArguments(), max_length=512, max_target_length=8)
    assert shorter != first and all(len(labels) <= 7 for labels in mapped["labels"])


def test_copy_transformer_variants_of_one_length_share_their_training_features(tmp_path, minilm_tokenizer):
    """The ablations' variants tokenize alike: their features processors make equal features and one cache file,
    while another input length makes another."""
    from datasets import load_dataset
    from transformers import TrainingArguments

    from sumformers import CopyTransformerConfig, CopyTransformerForConditionalGeneration
    from sumformers.training import DataArguments, map_training_features

    script = training_script("train_abstractive")
    data = tmp_path / "train.jsonl"
    write_corpus(data, 4)
    dataset = load_dataset("json", data_files=str(data), split="train", cache_dir=str(tmp_path / "cache"))
    training_args = TrainingArguments(output_dir=str(tmp_path / "run"), use_cpu=True, report_to="none")
    processor_class = CopyTransformerForConditionalGeneration.processor_class

    def features(max_length=64, **overrides):
        processor = processor_class(minilm_tokenizer, CopyTransformerConfig(**overrides))
        mapped = map_training_features(dataset, script.build_features, training_args, DataArguments(),
                                       processor.features_processor(), False, max_length=max_length,
                                       max_target_length=20)
        direct = [script.build_features(example, processor, False, DataArguments(), max_length, 20)
                  for example in dataset]  # the variant's own processor, no cache
        assert mapped.to_list() == direct
        return mapped.cache_files[0]["filename"]

    plain = features()
    assert features(convolution="circular_2d", copy_mechanism=False, d_model=64) == plain
    assert features(encoder_input="bert_windowed", decoder_embeddings="bert") == plain
    assert features(max_length=32) != plain
    assert features(max_target_positions=16) != plain  # a field tokenizing reads


# A tiny CopyTransformer for the script (dropout and label smoothing off, so that runs can be compared).
TINY_COPY_TRANSFORMER = dict(d_model=32, attention_heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64, dropout=0.0,
                             attention_dropout=0.0, label_smoothing=0.0, max_target_positions=32)


def saved_four_layer_encoder(tmp_path, tokenizer):
    """A tiny random BERT with MiniLM's tokenizer, four layers: the windowed features concatenate the last four."""
    from transformers import BertModel

    from conftest import tiny_bert_config

    encoder = tmp_path / "encoder"
    torch.manual_seed(0)
    BertModel(tiny_bert_config(num_hidden_layers=4), add_pooling_layer=False).save_pretrained(encoder)
    tokenizer.save_pretrained(encoder)
    return encoder


def train_copy_transformer(encoder, data, output, overrides: dict, *flags, steps=12):
    """train_abstractive.py on the CopyTransformer (--config_overrides `overrides`), one batch of four documents a
    step, the loss logged every step; returns the finished process."""
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / "train_abstractive.py"),
        "--model_type", "copy_transformer", "--model_name_or_path", str(encoder),
        "--config_overrides", json.dumps(overrides), "--train_file", str(data), "--max_target_length", "24",
        "--per_device_train_batch_size", "4", "--max_steps", str(steps), "--learning_rate", "3e-3",
        "--warmup_steps", "0", "--logging_steps", "1", "--save_steps", "100", "--do_train", "--use_cpu",
        "--output_dir", str(output), *flags,
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=output.parent, timeout=600)


def logged_losses(output, steps):
    history = json.loads((output / f"checkpoint-{steps}" / "trainer_state.json").read_text())["log_history"]
    return [entry["loss"] for entry in history if "loss" in entry]


def test_copy_transformer_variants_train_in_full_and_the_loss_goes_down(tmp_path, minilm_tokenizer):
    from transformers import AutoModelForSeq2SeqLM, BertModel

    from sumformers import CopyTransformerForConditionalGeneration

    encoder = saved_four_layer_encoder(tmp_path, minilm_tokenizer)
    data = tmp_path / "train.jsonl"
    write_corpus(data, 4)
    overrides = dict(TINY_COPY_TRANSFORMER, encoder_input="bert_concat", decoder_embeddings="bert", convolution="1d")
    output = tmp_path / "run"
    completed = train_copy_transformer(encoder, data, output, overrides)
    assert completed.returncode == 0, completed.stderr[-4000:]
    losses = logged_losses(output, 12)
    # one batch of the same four documents every step: the loss falls at every step, by more than 10% in all
    assert len(losses) == 12 and all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.9 * losses[0]
    card = json.loads((output / "final" / "sumformers_card.json").read_text())
    assert "trained in full from scratch (encoder_input=bert_concat, decoder_embeddings=bert" in card["training"]
    model = AutoModelForSeq2SeqLM.from_pretrained(str(output / "final"))
    assert type(model) is CopyTransformerForConditionalGeneration and model.config.convolution == "1d"
    assert all(not parameter.requires_grad for parameter in model.frozen_bert.parameters())
    # the reloaded frozen BERT is the encoder's, and the checkpoint left it out
    assert (output / "final" / "model.safetensors").stat().st_size < 6 * 2**20
    reference = BertModel.from_pretrained(encoder).state_dict()
    assert all(torch.equal(value, reference[name]) for name, value in model.frozen_bert.state_dict().items())
    # the Trainer's checkpoint of the last step holds the tokenizer too: it loads in the pipeline as the final model
    from transformers import pipeline

    document = "The council met on Monday. It approved the budget for schools. Parents welcomed the plan."
    written = [pipeline("abstractive-summarization", model=str(folder), max_length=12, min_length=4)(document)
               for folder in (output / "checkpoint-12", output / "final")]
    assert written[0] == written[1] and written[0]["summary"]


def test_preprocessing_only_maps_the_features_that_another_variants_run_then_reads(tmp_path, minilm_tokenizer):
    encoder = saved_four_layer_encoder(tmp_path, minilm_tokenizer)
    data = tmp_path / "train.jsonl"
    write_corpus(data, 4)
    output = tmp_path / "run"
    prepared = train_copy_transformer(encoder, data, output, TINY_COPY_TRANSFORMER, "--preprocessing_only")
    assert prepared.returncode == 0, prepared.stderr[-4000:]
    assert "training features" in prepared.stderr and not (output / "final").exists()  # mapped, nothing trained
    trained = train_copy_transformer(encoder, data, output, dict(TINY_COPY_TRANSFORMER, convolution="1d"), steps=1)
    assert trained.returncode == 0, trained.stderr[-4000:]
    assert "training features" not in trained.stderr and (output / "final").is_dir()  # read from the cache


def test_copy_transformer_trains_over_cached_bert_features(tmp_path, minilm_tokenizer):
    """--bert_feature_cache: the features of the four documents (one longer than a BERT window) are computed once
    into one ragged file; the logged losses are those of the run that runs BERT in every step; another
    BERT-conditioned variant over the same documents reuses the file; a variant without BERT is refused."""
    from sumformers import CopyTransformerConfig
    from sumformers.modeling.windowed_encoder import FEATURE_LAYERS
    from sumformers.processing.processing_copy_transformer import CopyTransformerProcessor

    encoder = saved_four_layer_encoder(tmp_path, minilm_tokenizer)
    data = tmp_path / "train.jsonl"
    sentence = "The council met on Monday and approved the budget for schools."  # 12 tokens
    with data.open("w") as file:
        for count in (1, 3, 10, 50):  # 50 sentences: 600 tokens, three windows of 510 every 256
            file.write(json.dumps({"document": " ".join([sentence] * count), "summary": sentence}) + "\n")
    overrides = dict(TINY_COPY_TRANSFORMER, encoder_input="bert_windowed", max_source_positions=1024)
    cache = tmp_path / "features" / "bert.u16"
    flags = ("--max_length", "1024", "--bert_feature_cache", str(cache))
    cached = train_copy_transformer(encoder, data, tmp_path / "cached", overrides, *flags, steps=3)
    assert cached.returncode == 0, cached.stderr[-4000:]
    assert f"BERT features: computing {cache}" in cached.stderr and "BERT features: 4 / 4 documents" in cached.stderr
    # ragged: the file holds each document's own tokens, 4 x 12 BERT features each, in bfloat16
    processor = CopyTransformerProcessor(minilm_tokenizer, CopyTransformerConfig(**overrides))
    tokens = sum(len(processor.source_features(json.loads(line)["document"], 1024)["input_ids"])
                 for line in data.read_text().splitlines())
    assert tokens == 12 * (1 + 3 + 10 + 50)
    assert json.loads(cache.with_name("bert.u16.json").read_text())["shape"] == [tokens, FEATURE_LAYERS * 32]
    assert cache.stat().st_size == tokens * FEATURE_LAYERS * 32 * 2
    card = json.loads((tmp_path / "cached" / "final" / "sumformers_card.json").read_text())
    assert "frozen BERT features cached in bfloat16" in card["training"]
    # the same steps running BERT in each: the same losses (features within bf16 rounding)
    plain = train_copy_transformer(encoder, data, tmp_path / "plain", overrides, "--max_length", "1024", steps=3)
    assert plain.returncode == 0, plain.stderr[-4000:]
    assert "BERT features" not in plain.stderr
    assert logged_losses(tmp_path / "cached", 3) == pytest.approx(logged_losses(tmp_path / "plain", 3), abs=1e-3)
    # BERT encoder + Transformer decoder over the same documents and BERT reads the file as it is
    stamp = cache.stat().st_mtime_ns
    reader = train_copy_transformer(encoder, data, tmp_path / "reader", dict(overrides, encoder_layers=0), *flags,
                                    steps=1)
    assert reader.returncode == 0, reader.stderr[-4000:]
    assert f"BERT features: reusing {cache}" in reader.stderr and cache.stat().st_mtime_ns == stamp
    # without a frozen BERT: a one-line error before any data is read
    tokens_only = train_copy_transformer(encoder, data, tmp_path / "tokens", TINY_COPY_TRANSFORMER, *flags, steps=1)
    assert tokens_only.returncode != 0
    assert tokens_only.stderr.strip().splitlines()[-1] == (
        "ValueError: --bert_feature_cache caches the frozen BERT's features of the BERT-conditioned CopyTransformer "
        "(encoder_input 'bert_windowed' or 'bert_concat'); this model has encoder_input='tokens'"
    )


def test_copy_transformer_overrides_are_checked_in_one_line():
    script = training_script("train_abstractive")
    arguments = script.AbstractiveArguments(model_type="copy_transformer", config_overrides='{"convolution": "3d"}')
    with pytest.raises(ValueError, match="convolution='3d' is not supported"):
        script.copy_transformer_settings(arguments)
    with pytest.raises(ValueError, match="--config_overrides is not valid JSON"):
        script.copy_transformer_settings(script.AbstractiveArguments(config_overrides="{convolution"))
    with pytest.raises(ValueError, match="--frozen_layers caches"):
        script.copy_transformer_settings(script.AbstractiveArguments(frozen_layers=1))
