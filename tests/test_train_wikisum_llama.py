"""training_scripts/train_wikisum_llama.py: the learning-rate schedule decays linearly to 0 over the run's steps (the
default) or over its wall-clock budget (--decay_over minutes), whichever the run is cut by; LoRA on the attention
projections unless --lora_target_modules names others."""

import pytest

from conftest import training_script

script = training_script("train_wikisum_llama")


def test_the_step_schedule_is_unchanged_by_the_clock():
    defaults = script.parse_args(["--base", "b", "--train_file", "t", "--output_dir", "o"])
    assert defaults.decay_over == "steps"
    assert defaults.lora_target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]  # the shipped adapter's
    assert script.learning_rate_share("steps", 50, 250, seconds=1e9, max_seconds=60) == pytest.approx(0.8)
    assert script.learning_rate_share("steps", 250, 250, seconds=0, max_seconds=60) == 0.0


def test_the_minutes_schedule_reaches_zero_when_the_budget_ends_whatever_the_steps():
    assert script.learning_rate_share("minutes", 0, 250, seconds=0, max_seconds=1920) == 1.0
    assert script.learning_rate_share("minutes", 50, 250, seconds=480, max_seconds=1920) == pytest.approx(0.75)
    assert script.learning_rate_share("minutes", 9, 250, seconds=2000, max_seconds=1920) == 0.0
