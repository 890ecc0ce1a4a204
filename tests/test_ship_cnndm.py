"""benchmarks/ship_cnndm.py's account of a shipped CNN/DM model's training, for a GPU and for a CPU run."""

from argparse import Namespace

import pytest

from conftest import imported_benchmark

script = imported_benchmark("ship_cnndm")

GPU_RUN = "39563 documents (149491 training rows) from `train` of cnn_dailymail/train_large.jsonl.gz, 582 steps"
CPU_RUN = "3200 documents (3200 training rows) from `train` of cnn_dailymail/train_large.jsonl.gz (a random subset"


def settings(**changes):
    defaults = dict(model="ETCSum", hardware="h200", command=None, call="three models side by side",
                    end_bias=None, pooling="no differently")
    return Namespace(**dict(defaults, **changes))


def test_a_gpu_run_is_told_with_all_articles_and_the_carried_encoder(script):
    text = script.card_training_text(settings(), GPU_RUN)
    assert text.startswith("The 39,563 CNN/DailyMail training articles")
    assert "int8 rows" in text  # the GPU call's MiniLM is not the installed one
    assert "one NVIDIA H200" in text and "the call trained three models side by side" in text
    assert f"Run: {GPU_RUN} Deviations from the paper" in text


def test_a_cpu_run_is_told_with_its_subset_and_command_and_no_carried_encoder(script):
    text = script.card_training_text(settings(hardware="cpu", command="python train_stepwise.py --x 1"), CPU_RUN)
    assert text.startswith("3,200 of the 39,563 CNN/DailyMail training articles")
    assert "int8" not in text and "H200" not in text
    assert "Trained on 2 CPU cores with the GPU recipe's settings (`python train_stepwise.py --x 1`" in text
    assert "tiled past 512" in text  # ETCSum's own deviations


def test_a_stepwise_model_states_its_end_bias(script):
    text = script.card_training_text(settings(model="Stepwise ETCSum", end_bias=-3.0), GPU_RUN)
    assert "the end unit's logit biased by -3 (not in the paper" in text


def test_a_continued_run_keeps_the_gpu_run_it_started_from_then_tells_its_own(script):
    started = script.card_training_text(settings(model="Stepwise HiBERT", end_bias=-2.1), GPU_RUN)
    continued = "3000 documents (11319 oracle-order training rows) from `train` (a random subset, seed 57)"
    command = "python train_stepwise.py --init_from x"
    text = script.card_training_text(
        settings(model="Stepwise HiBERT", end_bias=-1.4, hardware="cpu", command=command), continued, started
    )
    assert text.startswith("The 39,563 CNN/DailyMail training articles") and "int8 rows" in text
    assert (f"Run: {GPU_RUN} Then continued on 2 CPU cores over its own frozen sentence vectors (`{command}`): "
            f"{continued} Deviations from the paper") in text
    assert "biased by -1.4" in text and "biased by -2.1" not in text
    cpu_started = script.card_training_text(settings(hardware="cpu", command=command), CPU_RUN)
    with pytest.raises(SystemExit, match="GPU recipe"):
        script.card_training_text(settings(hardware="cpu", command=command), continued, cpu_started)
