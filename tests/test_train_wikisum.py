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


def test_cnndm_training_from_the_encoder_lowers_the_loss_and_loads_in_the_pipeline(tmp_path, tiny_encoder_folder):
    data = tmp_path / "train_large.jsonl.gz"
    write_cnndm_rows(data, 8)
    output = tmp_path / "run"
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / "train_wikisum.py"),
        "--model_name_or_path", str(tiny_encoder_folder), "--decoder_init", "encoder",
        "--train_file", str(data), "--validation_file", str(data), "--ranking_unit", "sentence",
        "--ranker", "textrank", "--max_input_tokens", "40", "--max_summary_tokens", "24",
        "--attention_layers", "local,compressed,local", "--local_block_size", "8", "--hidden_dropout", "0",
        "--per_device_train_batch_size", "4", "--max_steps", "12", "--learning_rate", "1e-2",
        "--lr_scheduler_type", "constant",
        "--logging_steps", "1", "--save_steps", "12", "--num_beams", "2", "--max_new_tokens", "6",
        "--eval_generate_samples", "2", "--max_eval_samples", "4", "--do_train", "--do_eval", "--use_cpu",
        "--report_to", "none", "--output_dir", str(output),
    ]  # fmt: skip
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    final = output / "final"
    state = json.loads((output / "checkpoint-12" / "trainer_state.json").read_text())
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert len(losses) == 12
    # the first step's loss is about ln(30522) = 10.3 or more; twelve steps on eight repeated rows halve it
    assert losses[0] > 9.0 and max(losses[-3:]) < 0.5 * losses[0]
    card = json.loads((final / "sumformers_card.json").read_text())
    assert "started from" in card["training"] and "ranked sentences" in card["training"]
    assert "length penalty alpha 0.6 (((5 + |Y|) / 6) ** alpha, GNMT's), no n-gram blocking" in card["evaluation"]
    readme = (final / "README.md").read_text()
    assert "**Start: from `" in readme and "encoder layer\n   [0, 1, 0][i]" in readme
    generation = json.loads((final / "generation_config.json").read_text())
    assert generation["length_penalty_type"] == "gnmt" and generation.get("no_repeat_ngram_size", 0) == 0

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


def test_an_unknown_decoder_start_is_refused(tiny_encoder_folder, minilm_tokenizer):
    script = training_script("train_wikisum")
    with pytest.raises(ValueError, match="^--decoder_init must be random or encoder, got 'bert'$"):
        script.new_model(
            str(tiny_encoder_folder), minilm_tokenizer, "tiny", script.WikiSumArguments(decoder_init="bert")
        )
