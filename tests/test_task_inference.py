"""`pipeline(model=folder)` without a task, offline: every shipped checkpoint and every folder the training scripts
save finds its task from its config (transformers alone asks the Hub, which HF_HUB_OFFLINE=1 refuses)."""

from types import SimpleNamespace

import pytest
import torch
from transformers import AutoConfig, pipeline

import sumformers
from conftest import ARTICLE, skip_without_installed_base
from sumformers.hub import shipped_checkpoints
from sumformers.registry import architecture_for


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    # transformers reads the variable through huggingface_hub's constants, fixed at import: patch what it reads
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.mark.parametrize("name", sorted(shipped_checkpoints()))
def test_a_shipped_checkpoint_loads_its_task_without_one_named(name):
    folder = str(shipped_checkpoints()[name])
    skip_without_installed_base(folder)
    architecture = architecture_for(AutoConfig.from_pretrained(folder))
    summarizer = pipeline(model=folder)
    assert summarizer.task == architecture.task
    assert type(summarizer) is architecture.pipeline_class and type(summarizer.model) is architecture.model_class


def train_and_save(folder, encoder_folder, minilm_tokenizer, lora: bool):
    """`save_final_model`, the training scripts' save, of a tiny BERTSum over `encoder_folder` (with LoRA: an adapter
    checkpoint; without: a full model)."""
    from peft import LoraConfig, get_peft_model

    from sumformers import BertSumForExtractiveSummarization
    from sumformers.training import save_final_model

    torch.manual_seed(0)
    model = BertSumForExtractiveSummarization.from_encoder(str(encoder_folder), inter_sentence_layers=1,
                                                          inter_sentence_heads=4, inter_sentence_ff_size=64).eval()
    if lora:
        config = LoraConfig(r=4, target_modules=["query", "value"], modules_to_save=["scorer", "inter_sentence"],
                            init_lora_weights=False)
        model = get_peft_model(model, config).eval()
    trainer = SimpleNamespace(model=model)
    return save_final_model(trainer, minilm_tokenizer, SimpleNamespace(output_dir=str(folder)), {"datasets": []})


@pytest.mark.parametrize("lora", [True, False], ids=["adapter", "full"])
def test_a_folder_saved_by_training_loads_its_task_without_one_named(lora, tiny_encoder_folder, minilm_tokenizer,
                                                                     tmp_path):
    final = train_and_save(tmp_path / "run", tiny_encoder_folder, minilm_tokenizer, lora)
    assert (final / ("adapter_config.json" if lora else "model.safetensors")).is_file()
    summarizer = pipeline(model=str(final))
    assert summarizer.task == "extractive-summarization"
    named = pipeline("extractive-summarization", model=str(final))
    assert summarizer(ARTICLE, num_sentences=2) == named(ARTICLE, num_sentences=2)


def test_other_folders_still_go_to_the_hub_lookup(tiny_encoder_folder):
    assert sumformers.registry.task_of_model_folder(str(tiny_encoder_folder)) is None  # a plain BERT
    with pytest.raises(RuntimeError, match="cannot infer task automatically within `pipeline` when using offline"):
        pipeline(model=str(tiny_encoder_folder))
