"""The GPU recipe's parts that run here: the compact training features (written where the text is segmented, read
where the model trains), the carry builder's int8 word table and size limit, and the whole recipe at tiny scale on
the CPU (slow)."""

import os
import subprocess
import sys
import tarfile
import warnings

import pytest
import torch

from conftest import REPO_ROOT, tiny_bert_config

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import carry_to_gpu  # noqa: E402

ARTICLES = [
    " ".join(f"sentence {index} of article {article} tells of the council and the bridge." for index in range(9))
    for article in range(3)
]


def test_feature_file_gives_back_the_processor_features(tmp_path, minilm_tokenizer):
    from sumformers.configuration.configuration_stepwise_hibert import StepwiseHiBertConfig
    from sumformers.feature_files import load_features, read_header, save_features
    from sumformers.processing.processing_stepwise_hibert import HiBertProcessor

    config = StepwiseHiBertConfig(encoder_config=tiny_bert_config().to_dict(), max_document_sentences=8,
                                  max_sentence_tokens=12)
    processor = HiBertProcessor(minilm_tokenizer, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        features = [processor.training_features(article, lambda sentences: [2, 0][: len(sentences)], max_length=90)
                    for article in ARTICLES]
    features[1] = processor.training_features(ARTICLES[1], lambda sentences: [], max_length=90)  # no oracle
    path = tmp_path / "features.npz.xz"
    save_features(features, path, minilm_tokenizer, {"max_sentence_tokens": 12, "source": "three articles"})
    assert read_header(path)["source"] == "three articles"
    assert load_features(path, expected={"max_sentence_tokens": 12}) == features
    with pytest.raises(ValueError, match="max_sentence_tokens=12; this run needs 30"):
        load_features(path, expected={"max_sentence_tokens": 30})


def test_int8_word_table_round_trip_and_other_weights_in_fp16(tmp_path):
    from safetensors.torch import load_file, save_file

    generator = torch.Generator().manual_seed(0)
    weights = {"embeddings.word_embeddings.weight": torch.randn(50, 16, generator=generator),
               "encoder.dense.weight": torch.randn(16, 16, generator=generator),
               "position_ids": torch.arange(5)}
    source, carried = tmp_path / "source.safetensors", tmp_path / "carried.safetensors"
    save_file(weights, source)
    carry_to_gpu.cast_weights(source, carried, torch.float16, int8="embeddings.word_embeddings.weight")
    stored = load_file(carried)
    assert stored["embeddings.word_embeddings.weight.int8"].dtype == torch.int8
    assert stored["encoder.dense.weight"].dtype == torch.float16
    carry_to_gpu.cast_weights(carried, carried, torch.float32)
    restored = load_file(carried)
    assert set(restored) == set(weights)
    table, back = weights["embeddings.word_embeddings.weight"], restored["embeddings.word_embeddings.weight"]
    # each entry within half a quantization step of its row (row max / 127 / 2)
    assert torch.all((back - table).abs() <= table.abs().amax(1, keepdim=True) / 254 + 1e-6)
    assert torch.equal(restored["position_ids"], weights["position_ids"])


def test_carry_builder_counts_the_travelling_tree(tmp_path, monkeypatch):
    output = tmp_path / "carry"
    output.mkdir()
    (output / "blob").write_bytes(b"\0" * 2**20)
    with_blob = carry_to_gpu.travelling_mib(output)
    (output / "blob").unlink()
    assert with_blob - carry_to_gpu.travelling_mib(output) == pytest.approx(1.0)


@pytest.mark.slow
def test_recipe_trains_and_packs_the_extractive_models_on_cpu(tmp_path, data_dir):
    """The recipe's extractive part end to end at tiny scale: features written by train_stepwise.py, two steps of
    each model, archives that load in the pipelines."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    features = tmp_path / "features.npz.xz"
    config = (REPO_ROOT / "training_scripts" / "gpu_recipe.json").read_text()
    subprocess.run([sys.executable, "training_scripts/train_stepwise.py", "--model_type", "stepwise_hibert",
                    "--train_file", str(data_dir / "cnn_dailymail" / "train_large.jsonl.gz"), "--max_train_samples",
                    "4", "--config_overrides", config, "--max_length", "768", "--save_features", str(features),
                    "--output_dir", str(tmp_path / "features")], cwd=REPO_ROOT, env=env, check=True)
    out = tmp_path / "out"
    trial = dict(env, DEVICE="cpu", MAX_STEPS="1", BATCH="2", PLANNER_STEPS="0", FEATURES=str(features),
                 OUT=str(out), RESULTS=str(tmp_path / "results"), RUNS=str(tmp_path / "runs"), DEADLINE="1200")
    subprocess.run(["bash", "training_scripts/gpu_recipe.sh"], cwd=REPO_ROOT, env=trial, check=True)
    from transformers import pipeline

    import sumformers  # noqa: F401  (registers the tasks)

    for run, task in (("stepwise-hibert-minilm-cnndm-gpu", "stepwise-summarization"),
                      ("hibert-minilm-cnndm-gpu", "extractive-summarization")):
        with tarfile.open(out / f"{run}.tgz") as archive:
            archive.extractall(tmp_path / run, filter="data")
        folder = tmp_path / run / "final"
        assert (folder / "adapter_model.safetensors").is_file()
        assert "LoRA on the sentence encoder too" in (folder / "README.md").read_text()
        result = pipeline(task, model=str(folder))(ARTICLES[0])
        assert result["sentences"] and set(result["sentences"]) <= set(range(9))
