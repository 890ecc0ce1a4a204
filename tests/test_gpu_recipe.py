"""The GPU recipe's parts that run here: the compact training features (written where the text is segmented, read
where the model trains), the carry builder's int8 word table and size limit, and the whole recipe at tiny scale on
the CPU (slow)."""

import json
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


def test_feature_file_cut_shorter_equals_the_processor_cut(tmp_path, minilm_tokenizer):
    """Read at a shorter length (BERTSum's 512 from a file cut at 768), the layout is the one the processor gives at
    that length; oracle sentences past the cut are dropped."""
    from sumformers.configuration.configuration_stepwise_hibert import StepwiseHiBertConfig
    from sumformers.feature_files import load_features, save_features
    from sumformers.processing.processing_stepwise_hibert import HiBertProcessor

    config = StepwiseHiBertConfig(encoder_config=tiny_bert_config().to_dict(), max_document_sentences=16,
                                  max_sentence_tokens=12)
    processor = HiBertProcessor(minilm_tokenizer, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        long = [processor.training_features(article, lambda sentences: [7, 1], max_length=200) for article in ARTICLES]
        for max_length in (60, 47):  # 47: the last kept sentence is shortened to the room left
            short = [processor.training_features(article, lambda sentences: [7, 1][: len(sentences)],
                                                 max_length=max_length) for article in ARTICLES]
            path = tmp_path / "features.npz.xz"
            save_features(long, path, minilm_tokenizer, {"max_length": 200, "min_sentence_tokens": 5})
            for cut, expected in zip(load_features(path, max_length=max_length), short):
                assert cut["input_ids"] == expected["input_ids"] and len(cut["input_ids"]) <= max_length
                assert cut["token_type_ids"] == expected["token_type_ids"]
                assert cut["cls_positions"] == expected["cls_positions"]
                kept = cut["num_document_sentences"]
                assert cut["oracle"] == [index for index in (7, 1) if index < kept]
                assert cut["labels"] == [float(index in cut["oracle"]) for index in range(kept)]
    with pytest.raises(ValueError, match="cut at 200 tokens; it cannot give 300"):
        load_features(path, max_length=300)


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


def test_end_bias_rule_takes_the_best_rouge_within_the_length_range():
    import choose_end_bias

    candidates = [{"end_bias": 0.0, "rouge1": 31.0, "mean_sentences": 2.0},
                  {"end_bias": -1.0, "rouge1": 30.0, "mean_sentences": 2.6},
                  {"end_bias": -2.0, "rouge1": 30.5, "mean_sentences": 3.1},
                  {"end_bias": -3.0, "rouge1": 29.0, "mean_sentences": 4.6}]
    assert choose_end_bias.choose(candidates, 2.5, 4.5)["end_bias"] == -2.0  # 31.0 is too short
    # none in range: the nearest to it (4.6 is 0.1 above 4.5; 2.0 is 0.5 below)
    assert choose_end_bias.choose([candidates[0], candidates[3]], 2.5, 4.5)["end_bias"] == -3.0


def write_recipe_features(tmp_path, data_dir, env):
    """The recipe's CNN/DM features (train_stepwise.py --save_features) of 4 train_large articles; their path."""
    features = tmp_path / "features.npz.xz"
    config = (REPO_ROOT / "training_scripts" / "gpu_recipe.json").read_text()
    subprocess.run([sys.executable, "training_scripts/train_stepwise.py", "--model_type", "stepwise_hibert",
                    "--train_file", str(data_dir / "cnn_dailymail" / "train_large.jsonl.gz"), "--max_train_samples",
                    "4", "--config_overrides", config, "--max_length", "768", "--save_features", str(features),
                    "--output_dir", str(tmp_path / "features")], cwd=REPO_ROOT, env=env, check=True)
    return features


@pytest.mark.slow
def test_recipe_trains_decodes_and_packs_the_extractive_models_on_cpu(tmp_path, data_dir):
    """The recipe end to end at tiny scale: features written by train_stepwise.py, one step of each model, the
    stepwise model's end bias chosen on development documents, held-out summaries decoded into quality_cnndm.py's
    cache, archives that load in the pipelines."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", SUMFORMERS_DATA_DIR=str(data_dir))
    features = write_recipe_features(tmp_path, data_dir, env)
    out, results = tmp_path / "out", tmp_path / "results"
    trial = dict(env, DEVICE="cpu", MAX_STEPS="1", BATCH_SCALE="16", EVAL_DOCUMENTS="2", FEATURES=str(features),
                 MODELS="stepwise_etcsum bertsum hibert stepwise_hibert", READ_SECONDS="120", OUT=str(out),
                 RESULTS=str(results),
                 RUNS=str(tmp_path / "runs"), DEADLINE="2400", EVAL_SECONDS="900")
    subprocess.run(["bash", "training_scripts/gpu_recipe.sh"], cwd=REPO_ROOT, env=trial, check=True)
    from transformers import pipeline

    import sumformers  # noqa: F401  (registers the tasks)

    for run, task in (("stepwise-etcsum-minilm-cnndm-gpu", "stepwise-summarization"),
                      ("bertsum-minilm-cnndm-gpu", "extractive-summarization"),
                      ("hibert-minilm-cnndm-gpu", "extractive-summarization")):
        with tarfile.open(out / f"{run}.tgz") as archive:
            archive.extractall(tmp_path / run, filter="data")
        folder = tmp_path / run / "final"
        assert (folder / "adapter_model.safetensors").is_file()
        result = pipeline(task, model=str(folder))(ARTICLES[0])
        assert result["sentences"] and set(result["sentences"]) <= set(range(9))
    def card(run):
        return (tmp_path / run / "final" / "README.md").read_text()

    # Stepwise HiBERT continued over its own vectors with the signals that need the summary (issue 57), the
    # oracle-order model kept beside it
    with tarfile.open(out / "stepwise-hibert-minilm-cnndm-gpu.tgz") as archive:
        archive.extractall(tmp_path / "stepwise-hibert", filter="data")
    reads = tmp_path / "stepwise-hibert" / "final"
    assert (tmp_path / "stepwise-hibert" / "final-oracle-order" / "adapter_model.safetensors").is_file()
    assert json.loads((reads / "config.json").read_text())["summary_null_slot"] is True
    assert "unlikelihood weight 4" in (reads / "README.md").read_text()
    result = pipeline("stepwise-summarization", model=str(reads))(ARTICLES[0])
    assert result["sentences"] and set(result["sentences"]) <= set(range(9))

    assert "LoRA on the sentence encoder too" in card("hibert-minilm-cnndm-gpu")
    assert "sentences of at most 36 word pieces" in card("bertsum-minilm-cnndm-gpu")
    with tarfile.open(out / "results.tgz") as archive:
        archive.extractall(tmp_path / "results-back", filter="data")
    chosen = json.loads((tmp_path / "results-back" / "end_bias_stepwise-etcsum-minilm-cnndm-gpu.json").read_text())
    stepwise = json.loads((tmp_path / "stepwise-etcsum-minilm-cnndm-gpu" / "final" / "config.json").read_text())
    assert stepwise["end_bias"] == chosen["chosen"]["end_bias"]  # written before the archive
    # three settings (blocking; none; none under 60 words) of one chunk for each model, and the development decodes
    cached = sorted(path.name.split("-")[0] for path in (tmp_path / "results-back" / "quality_cnndm").iterdir())
    assert cached.count("bertsum") == 3 and cached.count("hibert") == 3
    assert cached.count("stepwise_etcsum") == 3 + len(chosen["candidates"])


@pytest.mark.slow
def test_recipe_trains_and_decodes_wikisum_over_a_llama_base_on_cpu(tmp_path, data_dir, minilm_tokenizer):
    """The WikiSum-on-SmolLM2 job at tiny scale: a tiny random Llama (MiniLM's vocabulary) as the base, one step of
    T-DMCA with LoRA, the archive an adapter that loads over the base, the development table with its row."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from sumformers.modeling.modeling_wikisum_llama import load_wikisum_llama

    torch.manual_seed(0)
    base = tmp_path / "base"
    LlamaForCausalLM(LlamaConfig(vocab_size=30522, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1, pad_token_id=0)).save_pretrained(base)
    minilm_tokenizer.save_pretrained(base)
    out, results = tmp_path / "out", tmp_path / "results"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", SUMFORMERS_DATA_DIR=str(data_dir),
               DEVICE="cpu", MAX_STEPS="1", BATCH_SCALE="8", EVAL_DOCUMENTS="2", MODELS="", WIKISUM_SECONDS="120",
               WIKISUM_EXAMPLES="4", WIKISUM_INPUT_TOKENS="64", SMOLLM2=str(base), OUT=str(out),
               RESULTS=str(results), RUNS=str(tmp_path / "runs"), DEADLINE="900")
    subprocess.run(["bash", "training_scripts/gpu_recipe.sh"], cwd=REPO_ROOT, env=env, check=True)
    run = "wikisum-t-dmca-smollm2-cnndm-gpu"
    with tarfile.open(out / f"{run}.tgz") as archive:
        archive.extractall(tmp_path / run, filter="data")
    folder = tmp_path / run / "final"
    log = json.loads((folder / "training_log.json").read_text())
    assert len(log["log"]) == 1 and log["arguments"]["variant"] == "T-DMCA" and log["train_examples"] == 4
    model = load_wikisum_llama(str(folder), base_model=str(base))
    assert model.config.attention_layers == ["local", "compressed"] and model.config.max_input_tokens == 64
    # the trained convolutions came back (no longer the group average they start as)
    assert not torch.allclose(model.model.layers[1].self_attn.compression.key.weight[0, 0],
                              torch.tensor([1 / 3] * 3))
    with tarfile.open(out / "results.tgz") as archive:
        archive.extractall(tmp_path / "results-back", filter="data")
    table = (tmp_path / "results-back" / f"quality_abstractive_{run}.md").read_text()
    assert "| WikiSum over SmolLM2 (LoRA) | greedy" in table and "validation.jsonl[300:302]: 2 documents" in table


def write_xz_jsonl(rows, path):
    import lzma

    path.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(path, "wt") as file:
        file.writelines(json.dumps(row) + "\n" for row in rows)


@pytest.mark.slow
def test_recipe_trains_hetformer_on_cnndm_features_then_continues_its_adapter_on_meetings_and_reviews(
    tmp_path, data_dir
):
    """The HetFormer job at tiny scale on the CPU: one step on the extractive families' CNN/DM features, then one step
    each of its adapter on two short QMSum meetings (meeting units) and two FewSum products; three small archives
    whose models load in the pipeline with the fine-tuning's summary length."""
    from sumformers.text.evaluation import read_jsonl

    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    features = write_recipe_features(tmp_path, data_dir, env)
    carried = tmp_path / "data"
    meetings = read_jsonl(data_dir / "qmsum" / "train.jsonl")[:2]
    for meeting in meetings:  # the first 40 turns: a short meeting
        meeting["document"] = "\n".join(meeting["document"].split("\n")[:40])
    write_xz_jsonl(meetings, carried / "qmsum" / "train.jsonl.xz")
    write_xz_jsonl(read_jsonl(data_dir / "fewsum" / "train.jsonl")[:2], carried / "fewsum" / "train.jsonl.xz")
    out, results = tmp_path / "out", tmp_path / "results"
    trial = dict(env, DEVICE="cpu", MAX_STEPS="1", BATCH_SCALE="16", FEATURES=str(features), MODELS="hetformer",
                 OUT=str(out), RESULTS=str(results), RUNS=str(tmp_path / "runs"), SUMFORMERS_DATA_DIR=str(carried),
                 HETFORMER_LENGTH="1024", DEADLINE="2400", HETFORMER_FINETUNE_SECONDS="1200")
    subprocess.run(["bash", "training_scripts/gpu_recipe.sh"], cwd=REPO_ROOT, env=trial, check=True)
    from sumformers.hub import load_pipeline

    for dataset, k in (("cnndm", 3), ("qmsum", 11), ("fewsum", 4)):
        archive_path = out / f"hetformer-minilm-{dataset}-gpu.tgz"
        assert archive_path.stat().st_size < 16 * 2**20
        with tarfile.open(archive_path) as archive:
            archive.extractall(tmp_path / dataset, filter="data")
        folder = tmp_path / dataset / "final"
        assert (folder / "adapter_model.safetensors").is_file()
        saved = json.loads((folder / "config.json").read_text())
        assert saved["multi_document_num_sentences" if dataset == "fewsum" else "num_sentences"] == k
        assert "1 optimizer steps" in (folder / "README.md").read_text()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = load_pipeline(str(folder))(ARTICLES[0], num_sentences=2, trigram_blocking=False)
        assert len(result["sentences"]) == 2
        if dataset != "cnndm":  # the fine-tunings trained the CNN/DM model's adapter further
            assert "continuing the LoRA adapter of hetformer-minilm-cnndm-gpu" in (folder / "README.md").read_text()
