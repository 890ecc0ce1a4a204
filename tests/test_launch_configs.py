"""The accelerate configs in training_scripts/accelerate/: each resolved by accelerate's own launcher code (what
`accelerate launch --config_file ...` would start: distributed type, processes, GPUs, mixed precision, the FSDP
settings its processes receive), FSDP's wrap policy applied to every shipped model, and the CPU config launched for
real with a training script (tests/test_multiprocess_training.py launches it with train_extractive.py)."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO_ROOT, skip_without_installed_base, tiny_bert_config

CONFIGS = REPO_ROOT / "training_scripts" / "accelerate"
SCRIPT = str(REPO_ROOT / "training_scripts" / "train_stepwise.py")


def resolved(config: str, *overrides: str):
    """accelerate's launch arguments for `config` (with command-line `overrides`) after it merged the file in, and
    the environment its launcher gives the training processes."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env

    args = launch_command_parser().parse_args(["--config_file", str(CONFIGS / config), *overrides, SCRIPT])
    args, _, _ = _validate_launch_command(args)
    if args.multi_gpu or args.use_fsdp:
        return args, prepare_multi_gpu_env(args)
    return args, prepare_simple_launcher_cmd_env(args)[1]


def test_the_shipped_configs_are_the_four_documented_ones():
    assert sorted(path.name for path in CONFIGS.iterdir()) == ["fsdp.yaml", "multi_cpu.yaml", "multi_gpu.yaml",
                                                              "single_gpu.yaml"]
    documented = (REPO_ROOT / "docs" / "launch_configs.md").read_text()
    assert all(f"--config_file training_scripts/accelerate/{path.name}" in documented for path in CONFIGS.iterdir())


def test_single_gpu_is_one_plain_process_on_the_first_gpu():
    args, env = resolved("single_gpu.yaml")
    assert (args.num_processes, args.multi_gpu, args.use_fsdp, args.cpu) == (1, False, False, False)
    assert str(args.gpu_ids) == "0" and env["ACCELERATE_USE_CPU"] == "False"
    # accelerate 1.15 narrows the process to that GPU; 1.16 leaves the variable unset for one process, whose device
    # is then the first GPU
    assert env.get("CUDA_VISIBLE_DEVICES", "0") == "0"
    assert env["ACCELERATE_MIXED_PRECISION"] == "no"  # the script's --bf16 decides, and its card records it


@pytest.mark.parametrize("config", ["multi_gpu.yaml", "multi_cpu.yaml"])
def test_the_ddp_configs_start_one_process_per_device_through_torchrun(config):
    args, env = resolved(config)
    assert (args.multi_gpu, args.use_fsdp, args.num_processes, args.num_machines) == (True, False, 2, 1)
    assert "ACCELERATE_USE_FSDP" not in env and env["ACCELERATE_MIXED_PRECISION"] == "no"
    # the README's 8-GPU command: the count on the command line wins over the file's
    args, _ = resolved(config, "--num_processes", "8")
    assert args.num_processes == 8


def test_fsdp_shards_with_fsdp2_wrapping_each_models_own_layers():
    args, env = resolved("fsdp.yaml", "--num_processes", "8")
    assert (args.use_fsdp, args.multi_gpu, args.num_processes) == (True, False, 8)
    assert {key: env[key] for key in ("ACCELERATE_USE_FSDP", "FSDP_VERSION", "FSDP_AUTO_WRAP_POLICY",
                                      "FSDP_STATE_DICT_TYPE", "FSDP_RESHARD_AFTER_FORWARD", "FSDP_OFFLOAD_PARAMS")} \
        == {"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2", "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
            "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT", "FSDP_RESHARD_AFTER_FORWARD": "true",
            "FSDP_OFFLOAD_PARAMS": "false"}
    # no class names in the file: each model's `_no_split_modules` decides (a list naming every family's layers
    # would fail every model that lacks one of them)
    assert "FSDP_TRANSFORMER_CLS_TO_WRAP" not in env


# What FSDP wraps in each shipped model, one unit a module: the pretrained encoder's blocks and the family's own.
WRAPPED = {
    "bertsum-minilm-cnndm": {"BertEmbeddings": 1, "BertLayer": 6, "InterSentenceLayer": 2},
    "copytransformer-circular2d-cnndm": {"EncoderLayer": 3, "DecoderLayer": 3},
    "etcsum-minilm-cnndm": {"ETCLayer": 6},
    "hetformer-minilm-qmsum": {"HetFormerLayer": 6},
    "hibert-minilm-cnndm": {"BertEmbeddings": 1, "BertLayer": 6, "HiBertDocumentLayer": 2},
    "realizer-minilm-rotowire": {"BertEmbeddings": 1, "BertLayer": 6, "DecoderLayer": 6},
    "stepwise-etcsum-minilm-cnndm": {"ETCLayer": 6},
    "stepwise-hibert-minilm-cnndm": {"BertEmbeddings": 1, "BertLayer": 6, "HiBertDocumentLayer": 2},
    "stepwise-hibert-planner-minilm-rotowire": {"BertEmbeddings": 1, "BertLayer": 6, "HiBertDocumentLayer": 2},
    "wikisum-smollm2-td-cnndm": {"LlamaDecoderLayer": 30},
    "wikisum-tdmca-copy-minilm-cnndm": {"WikiSumDecoderLayer": 5},
}


@pytest.fixture(scope="module")
def fsdp_environment():
    _, env = resolved("fsdp.yaml")
    saved = dict(os.environ)
    os.environ.update(env)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_the_shipped_models_are_the_ones_checked():
    assert sorted(path.parent.name for path in (REPO_ROOT / "checkpoints").glob("*/config.json")) == sorted(WRAPPED)


@pytest.mark.parametrize("checkpoint", sorted(WRAPPED))
def test_the_fsdp_wrap_policy_puts_each_layer_of_every_shipped_model_in_its_own_unit(checkpoint, fsdp_environment):
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy

    import sumformers

    skip_without_installed_base(REPO_ROOT / "checkpoints" / checkpoint)
    model = sumformers.load_pipeline(str(REPO_ROOT / "checkpoints" / checkpoint)).model
    plugin = FullyShardedDataParallelPlugin()  # from the environment the launcher gives each process
    assert plugin.fsdp_version == 2 and plugin.transformer_cls_names_to_wrap is None
    policy = fsdp2_prepare_auto_wrap_policy(plugin, model)  # what accelerate applies before fully_shard
    wrapped = [module for module in model.modules() if policy(module)]
    assert Counter(type(module).__name__ for module in wrapped) == WRAPPED[checkpoint]
    # each name is a class of the package or of transformers (the encoder's), not a name FSDP merely matched
    assert all(type(module).__module__.startswith(("sumformers.modeling.", "transformers.models.")) for module in
               wrapped)
    # no parameter is in two units, and the outer unit keeps what is left (embeddings tied to an output layer)
    inner = {id(parameter) for module in wrapped for parameter in module.parameters()}
    assert sum(parameter.numel() for module in wrapped for parameter in module.parameters()) == sum(
        parameter.numel() for parameter in model.parameters() if id(parameter) in inner)
    assert sum(parameter.numel() for parameter in model.parameters()) > len(inner) > 0


@pytest.mark.slow
def test_the_cpu_config_trains_the_stepwise_model_on_two_processes(tmp_path, minilm_tokenizer):
    import torch
    from test_training import write_corpus
    from transformers import BertModel

    encoder = tmp_path / "encoder"
    torch.manual_seed(0)
    BertModel(tiny_bert_config(num_hidden_layers=2)).save_pretrained(encoder)
    minilm_tokenizer.save_pretrained(encoder)
    data = tmp_path / "train.jsonl"
    write_corpus(data, 16)
    output = tmp_path / "run"
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / "multi_cpu.yaml"), SCRIPT,
        "--model_type", "stepwise_hibert", "--model_name_or_path", str(encoder),
        "--config_overrides", json.dumps({"sentence_encoder_layers": 2, "document_layers": 1}),
        "--train_file", str(data), "--validation_file", str(data), "--eval_split", "validation[:4]",
        "--output_dir", str(output), "--per_device_train_batch_size", "2", "--max_steps", "2", "--save_steps", "2",
        "--do_train", "--do_eval",
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    # 2 steps of 2 documents on each of 2 processes: a quarter of the 32 oracle-order rows of 16 documents
    state = json.loads((output / "checkpoint-2" / "trainer_state.json").read_text())
    assert (state["global_step"], state["epoch"]) == (2, pytest.approx(0.5))
    assert {path.name for path in (output / "checkpoint-2").glob("rng_state*")} == {"rng_state_0.pth",
                                                                                   "rng_state_1.pth"}
    card = json.loads((output / "final" / "sumformers_card.json").read_text())
    assert "batch 2 documents x 2 processes" in card["training"]
    assert card["evaluation"].startswith("4 documents of `validation[:4]`")
    assert json.loads((output / "eval_results.json").read_text())["rouge1"] == pytest.approx(card["results"]["rouge1"])
    # the final model loads and summarizes
    import sumformers

    article = Path(data).read_text().splitlines()[0]
    summary = sumformers.load_pipeline(str(output / "final"))(json.loads(article)["document"])
    assert 1 <= len(summary["sentences"]) <= 4
