"""The shipped checkpoints' cards: each is what its template builds from its card info, and the checkpoints that do not
beat their simple baseline on held-out data say so, with the benchmark's numbers, in their first line."""

import json
import re

import pytest
from transformers import AutoConfig

from conftest import REPO_ROOT
from sumformers import ARCHITECTURES
from sumformers.cards import build_model_card
from sumformers.configuration.configuration_copy_transformer import ENCODER_INPUTS
from sumformers.hub import CARD_INFO_FILE, shipped_checkpoints

# Held-out scores below Lead-3 (CNN/DM) or the template baseline (Rotowire plans and their realization).
DEMO_QUALITY = (
    "copytransformer-circular2d-cnndm",
    "wikisum-tdmca-copy-minilm-cnndm",
    "stepwise-hibert-planner-minilm-rotowire",
    "realizer-minilm-rotowire",
)


def card_text(folder) -> str:
    return (folder / "README.md").read_text(encoding="utf-8")


def first_line(card: str) -> str:
    """The first line after the YAML front matter that is not blank."""
    body = card.split("\n---\n", 1)[1]
    return next(line for line in body.splitlines() if line.strip())


@pytest.mark.parametrize("name", sorted(shipped_checkpoints()))
def test_a_shipped_card_is_what_its_template_builds(name):
    folder = shipped_checkpoints()[name]
    card_info = json.loads((folder / CARD_INFO_FILE).read_text(encoding="utf-8"))
    assert card_text(folder) == str(build_model_card(AutoConfig.from_pretrained(folder), card_info))
    # what the exported code imports: blingfire where a processor segments text (the realizer's reads records only)
    needs = "torch`" if name == "realizer-minilm-rotowire" else "torch blingfire`"
    assert f"pip install transformers {needs}" in card_text(folder)


@pytest.mark.parametrize("name", DEMO_QUALITY)
def test_a_demo_quality_checkpoint_says_so_first_with_its_benchmarks_numbers(name):
    folder = shipped_checkpoints()[name]
    line = first_line(card_text(folder))
    assert line.startswith("**Demo quality, not a usable ") and line.endswith("**")
    # every figure in the line is the benchmark's: the card's own evaluation or the results file the line names
    sources = card_text(folder).split("## Evaluation", 1)[1]
    for results_file in re.findall(r"benchmarks/results/[\w.]+\.md", line):
        sources += (REPO_ROOT / results_file).read_text(encoding="utf-8")
    figures = re.findall(r"\d+\.\d+", line)
    assert len(figures) >= 2 and all(figure in sources for figure in figures), (figures, name)


def test_the_other_checkpoints_make_no_such_claim():
    for name, folder in shipped_checkpoints().items():
        if name not in DEMO_QUALITY:
            assert not first_line(card_text(folder)).startswith("**Demo quality"), name


# The deviations from the papers issue #40 asked the cards to state, one line each, as the card-building function
# renders them from the templates (whitespace normalized): a line that stops rendering fails here. The planners'
# line on the realized text's macro averages follows a realized-text table, so their card info carries one.
REALIZED_TEXT = "| system | BLEU | RG P% | RG # | CS P% | CS R% | CS F1% | CO% |\n|---|---|---|---|---|---|---|---|"
MACRO_TEXT_METRICS = ("Not the paper's: the realized-text RG, CS and CO figures are means over the games (macro "
                      "averages), and they come from this package's rule-based relation extractor, not the published "
                      "neural one.")
DECODING_RULES = ("Not the paper's: two decoding rules of this package, a repeatable unit (team name or city) comes "
                  "back only in a later plan sentence, and `<EOS>` only closes a plan sentence that names a unit.")
# the planning CS and CO as the paper defines them (#40's bug 1), both over the same records
PLAN_METRICS = ("Content selection (precision, recall, F1 of distinct records, micro-averaged over the games) and "
                "content ordering (normalized Damerau-Levenshtein similarity of the record sequences, the mean over "
                "the games) of the plans, both over the records without the players' and teams' names and cities and "
                "the date as in the paper")
ISSUE_40_DEVIATIONS = {
    "sentence_planner": lambda config: [
        "Not the paper's: one AdamW optimizer with one linear schedule (the paper: Noam schedules with separate "
        "warm-ups, learning rate 1e-3 for the encoder and 2e-2 for the decoder).",
        f"Not the paper's: the word generator has {config.decoder_attention_heads} heads, feed-forward "
        f"{config.decoder_ffn_dim} and dropout {config.dropout} (the paper: 8, 2048 and 0.2).",
        "Not the paper's: the sentence generator adds sinusoidal sentence positions to its inputs, and dropout in its "
        "layers.",
    ],
    "copy_transformer": lambda config: [
        "Not the paper's: the minimum length of 55 tokens applies to every variant here (the paper set it for its "
        "BERT model); ROUGE below is computed on words, the paper's on WordPiece tokens.",
    ],
    "realizer": lambda config: [MACRO_TEXT_METRICS],
    "stepwise_hibert_planner": lambda config: [
        DECODING_RULES,
        "Not the paper's: a record's vector is the mean pooling of the sentence encoder's states over its template "
        "sentence (the paper's HiBERT takes one token's state, not a mean).",
        MACRO_TEXT_METRICS,
        PLAN_METRICS,
    ],
    "stepwise_etcsum_planner": lambda config: [DECODING_RULES, MACRO_TEXT_METRICS, PLAN_METRICS],
}


def deviation_cards():
    """(model type, config, card info) for each card that states issue #40's deviations: the default config (every
    CopyTransformer encoder input), then each shipped checkpoint of those types with its own card info."""
    cards = []
    for model_type in ISSUE_40_DEVIATIONS:
        variants = [{"encoder_input": name} for name in ENCODER_INPUTS] if model_type == "copy_transformer" else [{}]
        for settings in variants:
            config = ARCHITECTURES[model_type].config_class(**settings)
            name = "-".join([model_type, *settings.values()])
            cards.append(pytest.param(model_type, config, {"evaluation": REALIZED_TEXT}, id=name))
    for name, folder in shipped_checkpoints().items():
        config = AutoConfig.from_pretrained(folder)
        if config.model_type in ISSUE_40_DEVIATIONS:
            card_info = json.loads((folder / CARD_INFO_FILE).read_text(encoding="utf-8"))
            cards.append(pytest.param(config.model_type, config, card_info, id=name))
    return cards


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("model_type, config, card_info", deviation_cards())
def test_each_issue_40_deviation_line_renders_on_its_card(model_type, config, card_info):
    card = flat(str(build_model_card(config, card_info)))
    for line in ISSUE_40_DEVIATIONS[model_type](config):
        assert flat(line) in card, (model_type, line)


@pytest.mark.parametrize("model_type", ["stepwise_hibert_planner", "stepwise_etcsum_planner"])
def test_a_planner_card_states_the_text_metrics_averages_only_under_a_realized_text_table(model_type):
    config = ARCHITECTURES[model_type].config_class()
    assert flat(MACRO_TEXT_METRICS) not in flat(str(build_model_card(config, {"evaluation": "CS F1 30.00."})))
    assert flat(MACRO_TEXT_METRICS) not in flat(str(build_model_card(config, {})))
    assert DECODING_RULES in flat(str(build_model_card(config, {})))
