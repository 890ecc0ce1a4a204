"""The shipped checkpoints' cards: each is what its template builds from its card info, and the checkpoints that do not
beat their simple baseline on held-out data say so, with the benchmark's numbers, in their first line."""

import json
import re

import pytest
from transformers import AutoConfig

from conftest import REPO_ROOT
from sumformers.cards import build_model_card
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
    # what the exported code imports: pysbd where a processor segments text (the realizer's reads records only)
    needs = "torch`" if name == "realizer-minilm-rotowire" else "torch pysbd`"
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
