"""The configurations: the pretrained encoder as a transformers sub-config (`encoder_config`), read directly and
saved as a nested dict, and every shipped checkpoint's config.json (written when it was a plain dict) loading into it
with the same values; the stepwise and planner defaults coming from the mixins' fields."""

import json

import pytest
from transformers import AutoConfig, BertConfig

from conftest import tiny_bert_config
from sumformers import (
    ARCHITECTURES,
    BertSumConfig,
    CopyTransformerConfig,
    StepwiseETCSumConfig,
    StepwiseETCSumPlannerConfig,
    StepwiseHiBertConfig,
    StepwiseHiBertPlannerConfig,
)
from sumformers.configuration.configuration_wikisum import WikiSumConfig
from sumformers.configuration.summarizer_config import (
    DEFAULT_SUMMARY_SENTENCES,
    ContentPlannerConfigMixin,
    StepwiseConfigMixin,
)
from sumformers.hub import shipped_checkpoints

ENCODER_CHECKPOINTS = sorted(
    name for name, folder in shipped_checkpoints().items()
    if "encoder_config" in json.loads((folder / "config.json").read_text())
)


def json_values(config) -> dict:
    """A config's values as config.json holds them (dtypes as strings, label ids as string keys)."""
    return json.loads(config.to_json_string(use_diff=False))


def test_every_shipped_checkpoint_over_an_encoder_is_checked():
    assert len(ENCODER_CHECKPOINTS) == 8


@pytest.mark.parametrize("name", ENCODER_CHECKPOINTS)
def test_a_shipped_config_loads_its_encoder_dict_as_the_encoders_sub_config(name, tmp_path):
    """config.json keeps the encoder as the dict of its settings (written before it was a sub-config): it loads into
    the encoder's own config class with every value the dict holds, and saving and loading again keeps them."""
    folder = shipped_checkpoints()[name]
    saved = json.loads((folder / "config.json").read_text())["encoder_config"]
    config = AutoConfig.from_pretrained(folder)
    assert type(config.encoder_config) is BertConfig  # the shipped encoders are MiniLM, a BERT
    loaded = json_values(config.encoder_config)
    for key, value in saved.items():
        if key != "transformers_version":
            assert loaded[key] == value, key
    assert config.hidden_size == saved["hidden_size"] == 384

    config.save_pretrained(tmp_path)
    rewritten = json.loads((tmp_path / "config.json").read_text())["encoder_config"]
    assert rewritten["model_type"] == "bert" and rewritten["hidden_size"] == 384
    assert json_values(AutoConfig.from_pretrained(tmp_path).encoder_config) == loaded


def test_the_encoder_sub_config_is_read_directly_and_copied_from_the_encoders_config():
    encoder = tiny_bert_config()
    encoder._name_or_path = "/home/someone/local/minilm"
    config = BertSumConfig(encoder_config=encoder)
    assert config.encoder_config is not encoder and config.encoder_config.hidden_size == encoder.hidden_size
    assert "/home/someone" not in config.to_json_string()  # the portable name is encoder_name_or_path
    config.encoder_config.hidden_size = 48  # reads go to the one sub-config, nothing is rebuilt from a dict
    assert config.hidden_size == 48 and encoder.hidden_size != 48
    assert type(BertSumConfig().encoder_config) is BertConfig and BertSumConfig().hidden_size == 768


@pytest.mark.parametrize(
    "config_class, defaults",
    [
        (StepwiseHiBertConfig, dict(num_sentences=4, trigram_blocking=False, beam_size=3, max_summary_sentences=8,
                                    max_document_sentences=128)),
        (StepwiseETCSumConfig, dict(num_sentences=4, trigram_blocking=False, beam_size=3, max_document_tokens=4096)),
        (StepwiseHiBertPlannerConfig, dict(num_sentences=120, beam_size=1, max_summary_sentences=128,
                                           max_document_sentences=512, document_positions=False)),
        (StepwiseETCSumPlannerConfig, dict(num_sentences=120, beam_size=1, max_document_tokens=8192,
                                           max_sentence_tokens=30)),
    ],
)
def test_stepwise_and_planner_defaults_are_the_mixins_fields(config_class, defaults):
    """Fields only, no `__init__` of their own: transformers' generated one takes them, as for any config class."""
    assert "__init__" not in vars(StepwiseConfigMixin) and "__init__" not in vars(ContentPlannerConfigMixin)
    config = config_class()
    assert {name: getattr(config, name) for name in defaults} == defaults
    assert config_class(num_sentences=2).num_sentences == 2
    with pytest.raises(ValueError, match="more than max_summary_sentences"):
        config_class(num_sentences=200, max_summary_sentences=8)


def test_every_default_summary_length_comes_from_the_one_table():
    """`num_sentences` (and HetFormer's multi-document length) default to the table's entry for the model's kind, and
    the table holds the papers' settings."""
    assert DEFAULT_SUMMARY_SENTENCES == {"extractive": 3, "multi_document": 9, "stepwise": 4, "content_plan": 120}
    kinds = {"extractive-summarization": "extractive", "stepwise-summarization": "stepwise",
             "content-planning": "content_plan"}
    lengths = {}
    for name, architecture in ARCHITECTURES.items():
        config = architecture.config_class()
        if architecture.task in kinds:
            lengths[name] = config.num_sentences
            assert config.num_sentences == DEFAULT_SUMMARY_SENTENCES[kinds[architecture.task]], name
        else:
            assert not hasattr(config, "num_sentences"), name
    assert len(lengths) == 8
    assert ARCHITECTURES["hetformer"].config_class().multi_document_num_sentences == 9


def test_the_copy_transformers_bert_is_an_optional_sub_config():
    assert CopyTransformerConfig().bert_config is None
    config = CopyTransformerConfig(encoder_input="bert_windowed", bert_config=tiny_bert_config().to_dict())
    assert type(config.bert_config) is BertConfig and config.bert_config.hidden_size == tiny_bert_config().hidden_size
    again = CopyTransformerConfig.from_dict(json.loads(config.to_json_string()))
    assert json_values(again.bert_config) == json_values(config.bert_config)


@pytest.mark.parametrize("config_class", [StepwiseHiBertConfig, BertSumConfig, CopyTransformerConfig, WikiSumConfig])
def test_a_config_made_in_code_refuses_a_key_that_is_no_setting(config_class, tmp_path):
    """A typo or a setting since renamed is an error in code (`max_sentences` once ran silently with the default),
    in the constructor and in `update`; a saved config.json holding such a key still loads."""
    with pytest.raises(ValueError, match=f"^{config_class.__name__} has no setting max_sentences"):
        config_class(max_sentences=16)
    config = config_class(attn_implementation="eager")  # transformers' own keywords are not settings but allowed
    with pytest.raises(ValueError, match="has no setting nm_beams"):
        config.update({"nm_beams": 2})
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, "setting_of_an_older_version": 7}))
    assert config_class.from_pretrained(tmp_path).setting_of_an_older_version == 7
    assert config_class.from_dict({**saved, "max_sentences": 16}).max_sentences == 16
