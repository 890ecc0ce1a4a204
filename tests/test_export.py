"""Exported repos load with only transformers, torch and blingfire: remote code, safetensors, custom pipeline, Hub
cache."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoConfig

from conftest import REPO_ROOT, tiny_bert_config
from sumformers.hub import export_model, load_model, save_adapter_checkpoint

ARTICLE = (
    "The city council met on Monday night. Members voted to approve a new budget for schools. "
    "The budget adds money for teachers and books. A local group said the vote came too late. "
    "The mayor is expected to sign the plan this week."
)

EXTRACTIVE_OPTIONS = {"num_sentences": 2, "trigram_blocking": False}

# Runs in a fresh interpreter as in a bare `pip install transformers torch blingfire`: importing sumformers or the
# evaluation packages that come with it (rouge-score, nltk) fails, so only the repo's own code can be used, and it must
# not need them. The repo's Auto class (its `auto_map` entry) and pipeline are called with argv's input and options.
REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    for name in ("sumformers", "rouge_score", "nltk"):
        sys.modules[name] = None  # `import name` now raises ImportError
    try:
        import rouge_score  # noqa: F401
        raise SystemExit("rouge_score should not be importable here")
    except ImportError:
        pass
    import transformers
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer, pipeline
    repo, inputs, options = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    auto_map = AutoConfig.from_pretrained(repo, trust_remote_code=True).auto_map
    (auto_class,) = set(auto_map) - {"AutoConfig", "AutoProcessor"}
    model = getattr(transformers, auto_class).from_pretrained(repo, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
    summarizer = pipeline(model=repo, trust_remote_code=True)
    result = summarizer(inputs, **options)
    processor = AutoProcessor.from_pretrained(repo, trust_remote_code=True)
    print(json.dumps({"task": summarizer.task, "result": result, "model_class": type(model).__name__,
                      "processor_class": type(processor).__name__}))
    """
)


def run_without_sumformers(repo: str, env_extra: dict | None = None, inputs=ARTICLE, options=None) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", **(env_extra or {}))
    arguments = [repo, json.dumps(inputs), json.dumps(EXTRACTIVE_OPTIONS if options is None else options)]
    completed = subprocess.run(
        [sys.executable, "-c", REMOTE_SCRIPT, *arguments], capture_output=True, text=True, env=env, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture
def saved_model(tiny_bertsum, minilm_tokenizer, tmp_path):
    folder = tmp_path / "source"
    tiny_bertsum().save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return folder


def in_package_result(folder, inputs=ARTICLE, options=None):
    import sumformers

    return sumformers.load_pipeline(str(folder))(inputs, **(EXTRACTIVE_OPTIONS if options is None else options))


def test_export_writes_a_self_contained_repo(saved_model, tmp_path):
    repo = export_model(str(saved_model), str(tmp_path / "repo"), card_info={"datasets": ["cnn_dailymail"]})
    config = json.loads((repo / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_bertsum.BertSumConfig",
        "AutoModel": "modeling_bertsum.BertSumForExtractiveSummarization",
        "AutoProcessor": "processing_bertsum.BertSumProcessor",  # the processor is saved with the model
    }
    assert config["custom_pipelines"]["extractive-summarization"]["impl"] == (
        "extractive_summarization.ExtractiveSummarizationPipeline"
    )
    assert (repo / "model.safetensors").is_file() and not list(repo.glob("*.bin"))
    # readable by everyone (transformers writes model.safetensors 0600 through a temporary file)
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in repo.iterdir()} == {
        path.name: "0o644" for path in repo.iterdir()
    }
    for code_file in repo.glob("*.py"):
        assert "from .." not in code_file.read_text(), code_file.name
        assert "sumformers." not in code_file.read_text().replace("`sumformers.", ""), code_file.name
    card = ModelCard.load(repo / "README.md")
    assert card.data.base_model == "tiny-random-bert" and card.data.datasets == ["cnn_dailymail"]
    assert "extractive-summarization" in card.data.tags and "abstractive-summarization" not in card.data.tags


def test_cards_tag_writers_abstractive_and_extractors_extractive():
    from sumformers import ARCHITECTURES
    from sumformers.cards import build_model_card

    writers = {"wikisum", "wikisum_llama", "bertsumabs", "sentence_planner", "copy_transformer", "realizer"}
    for model_type, architecture in ARCHITECTURES.items():
        tags = build_model_card(architecture.config_class(), {}).data.tags
        style = "abstractive-summarization" if model_type in writers else "extractive-summarization"
        assert style in tags and model_type in tags, (model_type, tags)


def test_remote_code_gives_the_in_package_scores(saved_model, tmp_path):
    repo = export_model(str(saved_model), str(tmp_path / "repo"))
    remote = run_without_sumformers(str(repo))
    assert remote["task"] == "extractive-summarization"
    assert remote["model_class"] == "BertSumForExtractiveSummarization"
    assert remote["processor_class"] == "BertSumProcessor"  # AutoProcessor finds the processor saved with the model
    expected = in_package_result(saved_model)
    assert remote["result"]["sentences"] == expected["sentences"]
    assert remote["result"]["scores"] == pytest.approx(expected["scores"], abs=1e-6)


def test_every_architecture_exports_code_that_needs_only_blingfire_beyond_transformers_and_torch():
    """The card's `pip install` line: inference splits sentences with blingfire and needs nothing else (before: 8 of
    the 13 architectures also needed nltk and rouge_score, imported through the evaluation code)."""
    from sumformers import ARCHITECTURES
    from sumformers.cards import exported_repo_requirements

    needs = {model_type: exported_repo_requirements(arch.config_class()) for model_type, arch in ARCHITECTURES.items()}
    # the realizer reads games, not sentences: once models stopped importing their processors, its code no longer
    # came with the BertSumAbs processor's sentence splitter
    expected = {model_type: ["transformers", "torch", "blingfire"] for model_type in ARCHITECTURES}
    assert needs == expected | {"realizer": ["transformers", "torch"]}


def test_export_refuses_code_that_would_need_an_evaluation_package():
    from sumformers.remote_code import name_required_packages

    files = {"modeling_x.py": "import torch\nimport blingfire\nfrom rouge_score import rouge_scorer\n"}
    with pytest.raises(RuntimeError, match=r"^the exported code would need \[.rouge_score.\], which inference"):
        name_required_packages(files, ())


def save_tiny_model(model_type: str, tokenizer, folder):
    """A tiny random Stepwise HiBERT or WikiSum (MiniLM's vocabulary) saved with the MiniLM tokenizer."""
    from sumformers import (
        StepwiseHiBertConfig,
        StepwiseHiBertForExtractiveSummarization,
        WikiSumConfig,
        WikiSumForCausalLM,
    )

    torch.manual_seed(0)
    if model_type == "stepwise_hibert":
        model = StepwiseHiBertForExtractiveSummarization(StepwiseHiBertConfig(
            sentence_encoder_layers=2, document_layers=2, max_document_sentences=16, max_sentence_tokens=10,
            encoder_config=tiny_bert_config().to_dict(), encoder_name_or_path="tiny-random-bert",
        ))
    else:
        model = WikiSumForCausalLM(WikiSumConfig(
            embedding_size=16, hidden_size=32, num_attention_heads=4, intermediate_size=64, local_block_size=8,
            max_input_tokens=48,
        ))
        model.generation_config.max_new_tokens = 6
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# The architectures whose exports imported rouge_score and nltk before, with an input and options of their pipelines.
BARE_INSTALL_CASES = {
    "stepwise_hibert": (ARTICLE, {"beam_size": 2, "num_sentences": 3}),
    "wikisum": ({"title": "School budget", "documents": [ARTICLE]}, {"num_beams": 2}),
}


@pytest.mark.parametrize("model_type", sorted(BARE_INSTALL_CASES))
def test_an_exported_repo_runs_where_rouge_score_and_nltk_cannot_be_imported(model_type, minilm_tokenizer, tmp_path):
    folder = save_tiny_model(model_type, minilm_tokenizer, tmp_path / "source")
    repo = export_model(str(folder), str(tmp_path / f"sumformers_{model_type}_bare"))
    inputs, options = BARE_INSTALL_CASES[model_type]
    # any import of rouge_score or nltk in the repo's code would have failed the run
    remote = run_without_sumformers(str(repo), inputs=inputs, options=options)
    expected = in_package_result(folder, inputs, options)
    assert remote["result"]["summary"] == expected["summary"] and remote["result"]["summary"]
    if model_type == "stepwise_hibert":
        assert remote["result"]["sentences"] == expected["sentences"]


def test_repo_id_loads_offline_from_a_hub_cache(saved_model, tmp_path):
    repo = export_model(str(saved_model), str(tmp_path / "repo"))
    cache = tmp_path / "hub"
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--sumformers-test--tiny-bertsum" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for path in repo.iterdir():
        (snapshot / path.name).write_bytes(path.read_bytes())
    (cache / "models--sumformers-test--tiny-bertsum" / "refs").mkdir()
    (cache / "models--sumformers-test--tiny-bertsum" / "refs" / "main").write_text(revision)
    remote = run_without_sumformers(
        "sumformers-test/tiny-bertsum", {"HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")}
    )
    assert remote["result"]["sentences"] == in_package_result(saved_model)["sentences"]


def test_adapter_checkpoint_merges_lora_on_load_and_export(tiny_bertsum, minilm_tokenizer, tmp_path):
    from peft import LoraConfig, get_peft_model

    encoder_dir = tmp_path / "encoder"
    base = tiny_bertsum()
    base.encoder.save_pretrained(encoder_dir)
    minilm_tokenizer.save_pretrained(encoder_dir)
    base.config.encoder_name_or_path = str(encoder_dir)
    # init_lora_weights=False: random B, so the adapter really changes the outputs.
    lora = LoraConfig(r=4, target_modules=["query", "value"], modules_to_save=["scorer"], init_lora_weights=False)
    with pytest.raises(ValueError, match=r"modules_to_save must include \['inter_sentence'\]"):
        save_adapter_checkpoint(get_peft_model(tiny_bertsum(), lora), str(tmp_path / "incomplete"), minilm_tokenizer)
    lora.modules_to_save = ["scorer", "inter_sentence"]
    peft_model = get_peft_model(base, lora).eval()
    checkpoint = save_adapter_checkpoint(
        peft_model, str(tmp_path / "checkpoint"), minilm_tokenizer, {"results": {"rouge1": 1.0}}
    )
    assert (checkpoint / "adapter_model.safetensors").is_file() and not (checkpoint / "model.safetensors").exists()
    batch = {
        "input_ids": torch.tensor([[101, 2023, 2003, 102, 101, 2178, 102]]),
        "token_type_ids": torch.tensor([[0, 0, 0, 0, 1, 1, 1]]),
        "attention_mask": torch.ones(1, 7, dtype=torch.long),
        "cls_positions": torch.tensor([[0, 4]]),
        "sentence_mask": torch.ones(1, 2, dtype=torch.bool),
    }
    with torch.no_grad():
        expected = peft_model(**batch).logits
        loaded = load_model(str(checkpoint))(**batch).logits
    # The adapter ships in fp16, so loading is exact up to fp16 rounding of the LoRA and head weights.
    torch.testing.assert_close(loaded, expected, atol=2e-3, rtol=2e-3)
    repo = export_model(str(checkpoint), str(tmp_path / "repo"))
    with torch.no_grad():
        exported = load_model(str(repo))(**batch).logits
    torch.testing.assert_close(exported, loaded)


def test_required_packages_counts_module_level_imports_beyond_transformers():
    from sumformers.remote_code import required_packages

    files = {
        "a.py": (
            "from __future__ import annotations\nimport os\nimport pysbd\nfrom torch import nn\nimport numpy as np\n"
        ),
        "b.py": "from .a import x\nfrom rouge_score import rouge_scorer\n\ndef entities():\n    import spacy\n",
    }
    # spaCy is imported inside a function (an optional feature), numpy and torch come with transformers.
    assert required_packages(files) == ["pysbd", "rouge_score"]


# Hides blingfire the way an uninstalled package is missing (transformers only names a package whose import fails with
# "No module named").
HIDDEN_PACKAGE_SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys
    class Missing(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "blingfire":
                raise ModuleNotFoundError("No module named 'blingfire'", name="blingfire")
    sys.meta_path.insert(0, Missing())
    sys.modules["sumformers"] = None
    from transformers import pipeline
    pipeline(model=sys.argv[1], trust_remote_code=True)
    """
)


def test_an_exported_repo_names_its_missing_package_through_transformers(saved_model, tmp_path):
    repo = export_model(str(saved_model), str(tmp_path / "repo"))
    assert "pip install transformers torch blingfire" in (repo / "README.md").read_text()
    completed = subprocess.run(
        [sys.executable, "-c", HIDDEN_PACKAGE_SCRIPT, str(repo)],
        capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300,
    )
    assert completed.returncode != 0
    assert completed.stderr.strip().splitlines()[-1] == (
        "ImportError: This modeling file requires the following packages that were not found in your environment: "
        "blingfire. Run `pip install blingfire`"
    )


@pytest.mark.slow
def test_an_exported_repo_runs_in_a_venv_with_only_its_card_requirements(saved_model, tmp_path):
    """A throwaway venv with only transformers and torch: loading names blingfire; with the card's requirements
    installed, the exported pipeline gives the in-package result."""
    from sumformers.cards import exported_repo_requirements

    repo = export_model(str(saved_model), str(tmp_path / "repo"))
    venv, constraints = tmp_path / "venv", REPO_ROOT / "constraints.txt"
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)

    def install(*packages):
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), *packages], check=True,
                       capture_output=True, timeout=600)

    def run():
        arguments = [str(repo), json.dumps(ARTICLE), json.dumps(EXTRACTIVE_OPTIONS)]
        return subprocess.run([str(python), "-c", REMOTE_SCRIPT, *arguments], capture_output=True, text=True,
                              env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300, cwd=tmp_path)

    install("torch", "transformers")
    missing = run()
    assert "requires the following packages that were not found in your environment: blingfire" in missing.stderr
    install(*exported_repo_requirements(AutoConfig.from_pretrained(repo)))
    completed = run()
    assert completed.returncode == 0, completed.stderr[-3000:]
    remote = json.loads(completed.stdout.strip().splitlines()[-1])
    assert remote["result"]["sentences"] == in_package_result(saved_model)["sentences"]
