"""Several training processes: the launch commands docs/training.md documents start them and they train in parallel
(each sees its own documents, all end with the same weights, one checkpoint and one evaluation of the whole eval split),
a run resumes on another number of processes, and a time budget stops every process at the same step.

The training runs go through tests/training_probe.py, which records what each process did."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from test_training import write_corpus

from conftest import REPO_ROOT, tiny_bert_config

PROBE = REPO_ROOT / "tests" / "training_probe.py"
MULTI_CPU_CONFIG = REPO_ROOT / "training_scripts" / "accelerate" / "multi_cpu.yaml"


def run_probe(launcher: list[str], script: str, args: list[str], probe_dir, cwd):
    """Runs `script` with `args` through the probe under `launcher`; returns each rank's record, rank order."""
    probe_dir.mkdir()
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TRAINING_PROBE_DIR=str(probe_dir))
    command = [*launcher, str(PROBE), script, *args]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    records = [json.loads(path.read_text()) for path in sorted(probe_dir.glob("rank*.json"))]
    return records, completed.stdout + completed.stderr


def weights(probe_dir, rank: int, when: str) -> dict:
    return torch.load(probe_dir / f"rank{rank}-{when}.pt")


@pytest.fixture
def tiny_encoder(tmp_path, minilm_tokenizer):
    from transformers import BertModel

    folder = tmp_path / "encoder"
    torch.manual_seed(0)
    BertModel(tiny_bert_config(num_hidden_layers=2)).save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_the_accelerate_config_trains_two_processes_in_parallel_and_the_run_resumes_on_one(tmp_path, tiny_encoder):
    data = tmp_path / "train.jsonl"
    write_corpus(data, 16)
    output = tmp_path / "run"
    common = [
        "--model_name_or_path", str(tiny_encoder), "--train_file", str(data), "--validation_file", str(data),
        "--eval_split", "validation[:6]", "--output_dir", str(output), "--per_device_train_batch_size", "2",
        "--save_steps", "3", "--inter_sentence_layers", "1", "--do_train", "--do_eval",
    ]
    # No --use_cpu: on a machine without a GPU the processes torchrun starts train on the CPU by themselves.
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(MULTI_CPU_CONFIG)]
    two = tmp_path / "two-processes"
    records, _ = run_probe(launcher, "train_extractive", [*common, "--max_steps", "3"], two, tmp_path)

    assert [record["world_size"] for record in records] == [2, 2]
    seen = [record["documents"] for record in records]
    # 3 steps x 2 documents on each process: 12 different documents of the 16, none on both
    assert [len(documents) for documents in seen] == [6, 6] and len(set(seen[0]) | set(seen[1])) == 12
    start, end = weights(two, 0, "start"), weights(two, 0, "end")
    assert all(torch.equal(weights(two, 1, "start")[name], start[name]) for name in start)
    assert all(torch.equal(weights(two, 1, "end")[name], end[name]) for name in end)
    assert all(not torch.equal(end[name], start[name]) for name in end)  # every trainable tensor was updated
    # one checkpoint (each process keeps its random state in it), one final model, one evaluation of all 6
    assert sorted(path.name for path in output.iterdir() if path.is_dir()) == ["checkpoint-3", "final"]
    assert {path.name for path in (output / "checkpoint-3").glob("rng_state*")} == {"rng_state_0.pth",
                                                                                   "rng_state_1.pth"}
    assert [record["evaluated"] for record in records] == [list(range(6)), []]
    assert "6 documents of `validation[:6]`" in json.loads((output / "final" / "sumformers_card.json").read_text())[
        "evaluation"]

    # The same run continued on one process, with the same 4 documents a step (2 x 2 accumulated): it starts from
    # the two processes' weights and trains on the 4 documents of the epoch they had not seen.
    one = tmp_path / "one-process"
    resumed, log = run_probe(
        [sys.executable], "train_extractive", [*common, "--max_steps", "4", "--gradient_accumulation_steps", "2"],
        one, tmp_path,
    )
    assert f"resuming from {output / 'checkpoint-3'}" in log
    assert [(record["world_size"], record["started_at"], record["ended_at"]) for record in resumed] == [(1, 3, 4)]
    assert all(torch.equal(weights(one, 0, "start")[name], end[name]) for name in end)
    assert sorted(resumed[0]["documents"] + seen[0] + seen[1]) == list(range(16))
    assert json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())["epoch"] == pytest.approx(1.0)


def test_accelerate_launch_cpu_with_several_processes_stops_with_a_clear_error(tmp_path):
    # accelerate starts one process for `--cpu --num_processes 2`: the script says so instead of training alone
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "2",
        str(REPO_ROOT / "training_scripts" / "train_extractive.py"), "--output_dir", str(tmp_path / "run"),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert completed.returncode != 0
    assert "starts one process whatever --num_processes says" in completed.stderr
    assert "training_scripts/accelerate/multi_cpu.yaml" in completed.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {}),  # one process
        ({"WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}, {"use_cpu": True}),  # torchrun
        ({"PMI_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "ACCELERATE_USE_CPU": "True"}, {"use_cpu": True}),  # mpirun
        ({"ACCELERATE_USE_CPU": "True"}, {}),  # accelerate launch --cpu, one process
    ],
)
def test_processes_launched_without_an_accelerator_train_on_the_cpu(environ, expected, monkeypatch):
    from sumformers.training import launch_defaults

    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    assert launch_defaults(environ) == expected


def test_processes_launched_on_gpus_keep_them(monkeypatch):
    from sumformers.training import launch_defaults

    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    assert launch_defaults({"WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == {}


def stop_step(rank: int, world_size: int, port: int, results) -> None:
    """Runs a `StopAfterSeconds` of 10 s over 5 steps in one of `world_size` gloo processes, whose clock advances 1 s
    a step on rank 0 and 3 s on the others; puts (rank, the step it stopped at) in `results`."""
    from torch import distributed

    from sumformers.training import StopAfterSeconds

    distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    now = [0.0]
    budget = StopAfterSeconds(10, clock=lambda: now[0])
    args, control = SimpleNamespace(device=torch.device("cpu")), SimpleNamespace(should_training_stop=False)
    budget.on_train_begin(args, None, control)
    step = 0
    while not control.should_training_stop and step < 5:
        step += 1
        now[0] += 1.0 if rank == 0 else 3.0
        budget.on_step_end(args, SimpleNamespace(global_step=step), control)
    results.put((rank, step))
    distributed.destroy_process_group()


def test_a_time_budget_stops_every_process_at_the_same_step():
    import socket

    from torch import multiprocessing

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from sumformers import training  # noqa: F401 (imported once here: the forked processes start with it)

    context = multiprocessing.get_context("fork")
    results = context.SimpleQueue()
    processes = [context.Process(target=stop_step, args=(rank, 2, port, results)) for rank in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0, 0]
    # rank 1's clock passes 10 s at step 4 (12 s); rank 0's would only at step 10: both stop at 4
    assert sorted(results.get() for _ in processes) == [(0, 4), (1, 4)]
