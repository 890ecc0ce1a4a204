"""The extractive training script under `accelerate launch` with two CPU processes (gloo), resuming, and saving a
small adapter checkpoint that the package loads."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, tiny_bert_config

TOPICS = ["river", "budget", "school", "storm", "market", "museum", "bridge", "festival"]


def write_corpus(path: Path, count: int) -> None:
    with path.open("w") as f:
        for number in range(count):
            topic = TOPICS[number % len(TOPICS)]
            sentences = [
                f"The {topic} story number {number} begins in the town.",
                f"Officials said the {topic} plan will cost more.",
                "People gathered near the hall on a cold evening.",
                f"Experts expect the {topic} debate to continue next year.",
            ]
            f.write(json.dumps({"id": str(number), "document": " ".join(sentences), "summary": sentences[1]}) + "\n")


@pytest.fixture
def tiny_encoder(tmp_path, minilm_tokenizer):
    from transformers import BertModel

    folder = tmp_path / "encoder"
    BertModel(tiny_bert_config(num_hidden_layers=2)).save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return folder


def launch(args, cwd):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    # accelerate 1.15's `--cpu` always takes its single-process launcher; `--multi_gpu` starts torchrun with two
    # processes, and the script's `--use_cpu` makes them train on the CPU over gloo.
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--multi_gpu",
        str(REPO_ROOT / "training_scripts" / "train_extractive.py"), *args,
    ]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout + completed.stderr


def test_two_process_training_resumes_and_saves_a_loadable_checkpoint(tmp_path, tiny_encoder):
    data = tmp_path / "train.jsonl"
    write_corpus(data, 16)
    output = tmp_path / "run"
    common = [
        "--model_name_or_path", str(tiny_encoder), "--train_file", str(data), "--validation_file", str(data),
        "--eval_split", "validation[:4]", "--output_dir", str(output), "--per_device_train_batch_size", "2",
        "--save_steps", "2", "--inter_sentence_layers", "1", "--do_train", "--do_eval", "--use_cpu",
    ]
    first = launch([*common, "--max_steps", "2"], tmp_path)
    assert (output / "checkpoint-2").is_dir()
    state = json.loads((output / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and state["epoch"] == pytest.approx(0.5)  # 2 x 2 processes x 2 of 16
    assert "x 2 processes" in json.loads((output / "final" / "sumformers_card.json").read_text())["training"]
    assert "eval ROUGE" in first

    second = launch([*common, "--max_steps", "4"], tmp_path)
    assert f"resuming from {output / 'checkpoint-2'}" in second
    resumed = json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())
    # 4 steps x 2 processes x 2 documents = 16 documents = one epoch of the corpus.
    assert resumed["global_step"] == 4 and resumed["epoch"] == pytest.approx(1.0)
    # the card's time counts this launch's two steps, and says so
    assert json.loads((output / "train_results.json").read_text())["resumed_from_step"] == 2
    assert "(the steps after 2: the run resumed there)" in json.loads(
        (output / "final" / "sumformers_card.json").read_text())["training"]

    final = output / "final"
    assert (final / "adapter_model.safetensors").stat().st_size < 20 * 2**20
    scores = json.loads((output / "eval_results.json").read_text())
    assert set(scores) >= {"rouge1", "rouge2", "rougeLsum"} and all(0 <= v <= 100 for v in scores.values())

    import sumformers

    summarizer = sumformers.load_pipeline(str(final))
    result = summarizer(" ".join(["First sentence about a river.", "Second one about a storm.", "Third."]))
    assert len(result["sentences"]) == 3 and result["summary"].count("\n") == 2


def test_the_arguments_seed_a_new_models_initial_weights(monkeypatch, tmp_path):
    import torch

    from sumformers.training import parse_arguments

    def initial_weights(seed):
        monkeypatch.setattr(sys, "argv", ["train", "--output_dir", str(tmp_path), "--seed", str(seed)])
        parse_arguments()
        return torch.nn.Linear(4, 4).weight.detach().clone()

    assert torch.equal(initial_weights(7), initial_weights(7))
    assert not torch.equal(initial_weights(7), initial_weights(8))


def test_a_random_training_subset_is_seeded_and_needs_a_size(tmp_path):
    from sumformers.training import DataArguments, load_splits, training_source

    path = tmp_path / "ordered.jsonl"
    path.write_text("".join(json.dumps({"document": f"doc {index}.", "summary": "s."}) + "\n" for index in range(20)))

    def documents(**settings):
        train, _ = load_splits(DataArguments(train_file=str(path), **settings))
        return train["document"]

    assert documents(max_train_samples=5) == [f"doc {index}." for index in range(5)]
    subset = documents(max_train_samples=5, train_subset_seed=0)
    assert len(set(subset)) == 5 and subset != documents(max_train_samples=5)
    assert subset == documents(max_train_samples=5, train_subset_seed=0)  # the same documents every run
    assert documents(max_train_samples=5, train_subset_seed=1) != subset
    with pytest.raises(ValueError, match="give both"):
        documents(train_subset_seed=0)
    # the card says which documents
    assert training_source(DataArguments(train_file="t.jsonl", max_train_samples=5, train_subset_seed=0)) == (
        "`train` (a random subset, seed 0) of t.jsonl"
    )
    assert training_source(DataArguments(train_file="t.jsonl", max_train_samples=5)) == (
        "`train` (its first documents) of t.jsonl"
    )
    assert training_source(DataArguments(train_file="t.jsonl")) == "`train` of t.jsonl"


def test_a_features_file_run_trains_on_the_documents_a_run_over_the_split_would(tmp_path):
    # --train_subset_seed used to be ignored with --features_file: the file's first documents trained instead
    from sumformers.training import DataArguments, load_splits, subset_description, training_subset

    path = tmp_path / "ordered.jsonl"
    path.write_text("".join(json.dumps({"document": f"doc {index}.", "summary": "s."}) + "\n" for index in range(20)))
    file_documents = [f"doc {index}." for index in range(20)]  # a features file holds the split in its order
    for settings in ({"max_train_samples": 5, "train_subset_seed": 42}, {"max_train_samples": 5}, {}):
        arguments = DataArguments(train_file=str(path), **settings)
        train, _ = load_splits(arguments)
        assert training_subset(file_documents, arguments) == train["document"]
    seeded = DataArguments(max_train_samples=5, train_subset_seed=42)
    assert training_subset(file_documents, seeded) != file_documents[:5]
    assert subset_description(seeded) == " (a random subset, seed 42)"
    with pytest.raises(ValueError, match="give both"):
        training_subset(file_documents, DataArguments(train_subset_seed=0))


def test_cards_name_shared_data_files_by_their_place_in_the_shared_folder(tmp_path, monkeypatch):
    from sumformers.training import DataArguments, training_source

    monkeypatch.setenv("SUMFORMERS_DATA_DIR", str(tmp_path / "data"))
    files = f"{tmp_path}/data/qmsum/train.jsonl,{tmp_path}/data/../data/fewsum/train.jsonl,elsewhere/t.jsonl"
    assert training_source(DataArguments(train_file=files)) == (
        "`train` of qmsum/train.jsonl,fewsum/train.jsonl,elsewhere/t.jsonl"
    )


def test_the_card_gives_the_last_logged_loss_also_for_a_resumed_run_with_no_step_left():
    from types import SimpleNamespace

    from transformers import TrainerState
    from transformers.trainer_utils import TrainOutput

    from sumformers.training import final_training_loss

    state = TrainerState(log_history=[{"loss": 5.5, "step": 10}, {"eval_loss": 4.0}, {"loss": 3.25, "step": 20}])
    # a run resumed at its last step: the Trainer reports a mean loss of 0 over no steps
    resumed = TrainOutput(global_step=20, training_loss=0.0, metrics={"train_runtime": 1.4})
    assert final_training_loss(SimpleNamespace(state=state), resumed) == "final training loss 3.2500, 1 s"
    resumed.metrics["resumed_from_step"] = 12  # as `train_resuming` records it
    assert final_training_loss(SimpleNamespace(state=state), resumed) == (
        "final training loss 3.2500, 1 s (the steps after 12: the run resumed there)"
    )
    unlogged = TrainOutput(global_step=3, training_loss=2.0, metrics={})
    assert final_training_loss(SimpleNamespace(state=TrainerState()), unlogged) == "final training loss not logged, 0 s"


def test_the_card_says_how_long_and_on_what_hardware_the_run_trained(monkeypatch):
    from types import SimpleNamespace

    import torch
    from transformers import TrainerState

    from sumformers.training import trained_length

    state = TrainerState(global_step=600, epoch=1.0)
    trainer = SimpleNamespace(state=state, args=SimpleNamespace(device=torch.device("cpu"),
                                                                train_sampling_strategy="random"))
    assert trained_length(trainer) == "600 optimizer steps (1.00 epochs) on CPU"
    # a CUDA device is named by the GPU's name (asked of torch, which needs no GPU here when stubbed)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: f"NVIDIA H200 ({device})")
    trainer.args.device = torch.device("cuda", 0)
    assert trained_length(trainer) == "600 optimizer steps (1.00 epochs) on NVIDIA H200 (cuda:0)"
    # a run that a time budget ended says so, and how far short of its planned steps
    trainer.state, trainer.args.device = TrainerState(global_step=12, epoch=0.4, max_steps=600), torch.device("cpu")
    assert trained_length(trainer) == "12 optimizer steps (0.40 epochs; a time budget stopped it short of 600) on CPU"
    # batches not drawn at random are a different recipe: the card names the sampler
    trainer.args.train_sampling_strategy = "group_by_length"
    assert trained_length(trainer).endswith("of 600) on CPU, group_by_length sampling")


def test_bf16_on_a_cpu_that_emulates_it_is_warned_of_in_one_line(monkeypatch, tmp_path, caplog):
    from transformers import BertModel, TrainingArguments

    import sumformers.training
    from sumformers.training import train

    model = BertModel(tiny_bert_config())
    for native, warnings in ((False, 1), (True, 0)):
        monkeypatch.setattr(sumformers.training, "cpu_bfloat16_is_native", lambda: native)
        caplog.clear()
        with caplog.at_level("WARNING", logger="sumformers.training"):
            train(model, TrainingArguments(output_dir=str(tmp_path), bf16=True, use_cpu=True, report_to=[]))
        assert [record.getMessage().startswith("--bf16 on a CPU without native bfloat16")
                for record in caplog.records if record.name == "sumformers.training"] == [True] * warnings


def test_the_time_budget_stops_training_after_the_step_that_spends_it():
    from transformers import TrainerControl, TrainerState

    from sumformers.training import StopAfterSeconds

    now = [100.0]
    budget = StopAfterSeconds(30, clock=lambda: now[0])
    state, control = TrainerState(), TrainerControl()
    budget.on_train_begin(None, state, control)
    stops = []
    for step_seconds in (10, 10, 9.5, 0.5, 10):
        now[0] += step_seconds
        budget.on_step_end(None, state, control)
        stops.append(control.should_training_stop)
    # 10, 20, 29.5 s: go on; 30 s: the budget is spent
    assert stops == [False, False, False, True, True]


def test_the_models_special_token_ids_survive_the_trainers_alignment_with_a_tokenizer_that_lacks_them():
    """transformers 5.17's `align_special_tokens` (what `Trainer.train` runs before `on_train_begin`) copied a BERT
    tokenizer's missing EOS as None into the config; the callback puts the model's ids back."""
    from types import SimpleNamespace

    from transformers import GenerationConfig

    from sumformers.training import KeepSpecialTokens

    model = SimpleNamespace(config=SimpleNamespace(pad_token_id=0, bos_token_id=1, eos_token_id=2),
                            generation_config=GenerationConfig(pad_token_id=0, bos_token_id=1, eos_token_id=2))
    callback = KeepSpecialTokens(model)
    # what the old alignment did with a tokenizer that has a [PAD] (0) and neither BOS nor EOS
    model.config.eos_token_id = model.config.bos_token_id = None
    model.generation_config.eos_token_id, model.generation_config.bos_token_id = [], None
    callback.on_train_begin(None, None, None)
    assert (model.config.pad_token_id, model.config.bos_token_id, model.config.eos_token_id) == (0, 1, 2)
    assert (model.generation_config.bos_token_id, model.generation_config.eos_token_id) == (1, 2)


def test_cards_say_lora_only_when_it_trained():
    from sumformers.training import ModelArguments, lora_summary

    lora = ModelArguments(use_lora=True, lora_r=32, lora_target_modules="query,value")
    assert lora_summary(lora) == "LoRA r=32 on query,value"
    assert lora_summary(ModelArguments(use_lora=True, lora_r=8, lora_layers="4,5")).endswith(" of layers 4,5")
    # it used to read "LoRA r=8 on query,value (use_lora=False)" for a model trained in full
    assert lora_summary(ModelArguments(use_lora=False, lora_r=8)) == "the pretrained layers trained in full (no LoRA)"
