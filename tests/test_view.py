"""`sumformers.view` and `sumformers view`: the page highlights exactly the chosen sentences in the order they were
chosen, shows every score as text, marks the unread part, marks numbers as the relation extractor finds them, gives
rouge-score's ROUGE, escapes all text and shows the pipelines' one-line errors."""

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rouge_score import rouge_scorer

import sumformers_cli
from sumformers.hub import load_pipeline
from sumformers.text.rotowire_records import parse_game
from sumformers.text.table_to_text_metrics import extract_relations, is_supported
from sumformers.view import render_html, summarize_to_html
from sumformers.view.abstractive import copy_attention_sources, overlap_sources

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTICLE = (REPO_ROOT / "examples" / "cnn_missing_student.txt").read_text()
REFERENCE = (REPO_ROOT / "examples" / "cnn_missing_student.reference.txt").read_text()

pytestmark = pytest.mark.usefixtures("one_thread")


class Elements(HTMLParser):
    """Every element of a page as (tag, attributes, text inside it), in document order."""

    VOID = {"meta", "br", "img", "hr", "input", "link"}

    def __init__(self, page: str):
        super().__init__()
        self.elements, self.open = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        element = [tag, dict(attrs), ""]
        self.elements.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        for element in self.open:
            element[2] += data

    def find(self, css_class: str) -> list:
        return [e for e in self.elements if css_class in e[1].get("class", "").split()]


@pytest.fixture(scope="module")
def extractive():
    return load_pipeline("bertsum-minilm-cnndm")


@pytest.fixture(scope="module")
def stepwise():
    return load_pipeline("stepwise-hibert-minilm-cnndm")


def test_extractive_page_highlights_exactly_the_chosen_sentences_in_selection_order(extractive):
    output = extractive(ARTICLE, return_sentences=True)
    scores = output["sentence_scores"]
    assert [scores[i] for i in output["sentences"]] == output["scores"]
    page = Elements(summarize_to_html(extractive, ARTICLE))
    chosen = page.find("chosen")
    by_order = sorted(chosen, key=lambda element: int(element[1]["data-order"]))
    # the pipeline takes the best-scored sentences first
    assert [int(e[1]["data-index"]) for e in by_order] == sorted(output["sentences"], key=lambda i: -scores[i])
    assert sorted(int(e[1]["data-index"]) for e in chosen) == output["sentences"]
    sentences = output["document_sentences"]
    for element in chosen:
        index = int(element[1]["data-index"])
        assert element[2] == f"{element[1]['data-order']}{sentences[index]} ({scores[index]:.3f})"
    # every sentence read: its score as text and on hover, shaded by it
    spans = page.find("sentence")
    assert len(spans) == len(sentences)
    for element in spans:
        score = f"{scores[int(element[1]['data-index'])]:.3f}"
        assert element[2].endswith(f"({score})") and f"probability {score}" in element[1]["title"]
    # the others are shaded in proportion to their score, the best score at opacity 0.45
    for element in spans:
        if "chosen" not in element[1]["class"]:
            alpha = 0.45 * scores[int(element[1]["data-index"])] / max(scores)
            assert element[1]["style"] == f"background: rgba(66, 133, 244, {alpha:.3f})"


def test_stepwise_page_numbers_the_steps_and_lists_each_steps_candidates(stepwise):
    output = stepwise(ARTICLE, return_sentences=True, return_steps=True)
    page = Elements(summarize_to_html(stepwise, ARTICLE))
    chosen = sorted(page.find("chosen"), key=lambda element: int(element[1]["data-order"]))
    assert [int(e[1]["data-index"]) for e in chosen] == output["selection_order"]
    first_step = output["steps"][0]["distribution"]
    for element in page.find("sentence"):
        assert element[2].endswith(f"({first_step[int(element[1]['data-index'])]:.3f})")
    steps = page.find("step")
    assert len(steps) == len(output["steps"])
    for element, step in zip(steps, output["steps"]):
        assert f"{step['probability']:.3f}" in element[2] and f"{step['score']:.2f}" in element[2]


def test_the_part_past_the_models_limit_is_marked_unread(extractive):
    document = " ".join(f"Report number {i} says the river rose by {i} centimetres overnight." for i in range(120))
    output = extractive(document, return_sentences=True)
    read = len(output["document_sentences"])
    assert 0 < read < 120
    page = Elements(summarize_to_html(extractive, document))
    (unread,) = page.find("unread")
    assert f"({120 - read} sentences past its input limit)" in unread[2]
    assert f"Report number {read} says" in unread[2] and f"Report number {read - 1} says" not in unread[2]
    assert "Report number 119 says" in unread[2]


def test_all_text_is_escaped_and_the_page_is_self_contained(extractive):
    document = ('Profits rose as costs < revenue & "growth" held, the firm said. Residents said the plan & its costs '
                "were unclear. Officials will meet again on Friday to vote on the budget.")
    page = summarize_to_html(extractive, document, reference='<img src=x onerror="y">', title="<title>")
    assert "<img" not in page and "<title><" not in page
    assert "costs &lt; revenue &amp; &quot;growth&quot; held" in page and "&lt;img src=x" in page
    assert "http" not in page and "src=" not in page.replace("&lt;img src=x", "")  # nothing to fetch
    # markup in a sentence the renderer is given (say pre-split input) is text too
    output = {"summary": "<script>x()</script>", "sentences": [0], "scores": [0.9], "sentence_scores": [0.9],
              "document_sentences": ["<script>x()</script>"]}
    drawn = render_html(output, "extractive-summarization")
    assert "<script" not in drawn and drawn.count("&lt;script&gt;x()&lt;/script&gt;") == 2


def test_bad_input_gives_the_pipelines_one_line_message(extractive):
    page = Elements(summarize_to_html(extractive, None))
    (error,) = page.find("error")
    assert error[2] == "expected a string, a list of sentence strings or {'sentences': [...]}, got NoneType"
    assert not page.find("sentence")


def test_reference_rouge_is_rouge_scores_number(extractive):
    output = extractive(ARTICLE, return_sentences=True)
    page = Elements(summarize_to_html(extractive, ARTICLE, reference=REFERENCE))
    shown = {e[1]["data-metric"]: e[2] for e in page.find("rouge")}
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], use_stemmer=True)
    expected = scorer.score(REFERENCE.strip(), output["summary"])
    assert shown == {key: f"{100 * value.fmeasure:.2f}" for key, value in expected.items()}
    assert page.find("reference")[0][2].startswith("Cayman Naib, 13, hasn't been heard from since Wednesday .")


def test_numbers_are_marked_as_the_relation_extractor_reads_them(rotowire_game_line):
    game = parse_game(rotowire_game_line)
    sentences = [
        "The Atlanta Hawks ( 41 - 29 ) defeated the Houston Rockets ( 35 - 35 ) 109 - 97 on Saturday.",
        "Al Horford led the way with 22 points, 12 rebounds and two blocks in 30 minutes.",
        "He was the only starter to make it.",
    ]
    plan = ["Hawks|TEAM-WINS", "Hawks|TEAM-LOSSES", "<EOS>", "Al Horford|PTS", "Al Horford|REB", "<EOS>",
            "Al Horford|PLAYER_NAME", "<EOT>"]
    output = {"summary": "\n".join(sentences), "sentences": sentences, "plan": plan}
    page = Elements(render_html(output, "table-to-text", game=game))
    marked = [(e[1]["data-entity"], e[1]["data-key"], e[1]["data-value"], "supported" in e[1]["class"].split())
              for e in page.find("number") if "unchecked" not in e[1]["class"].split()]
    relations = extract_relations(game, sentences)
    assert marked == [(r.entity, r.key, r.value, is_supported(game, r)) for r in relations]
    # by hand: Horford had 22 points and 9 rebounds (the box score), so "22" is supported and "12" is not
    horford = {(key, value): supported for entity, key, value, supported in marked if entity == "Al Horford"}
    assert horford[("PTS", "22")] is True and horford[("REB", "12")] is False
    rows = page.find("realized")
    assert [row[1]["data-sentence"] for row in rows] == ["1", "2", "3"]
    assert "TEAM-WINS" in rows[0][2] and "REB" in rows[1][2] and "PLAYER_NAME" in rows[2][2]
    box = page.find("box-score")
    assert len(box) == 2 and "Al Horford" in box[1][2]


def test_word_overlap_sources_by_hand():
    units = ["The cat sat on the mat.", "Dogs run fast."]
    # stemmed words of the summary sentence: the, cat, sat, down; unit 0 holds three of the four
    assert overlap_sources(units, ["The cats sat down."]) == [[[0, 0.75]]]
    assert overlap_sources(units, ["Nothing here."]) == [[]]


def test_copy_attention_points_at_the_sentence_a_summary_copies():
    pipe = load_pipeline("copytransformer-circular2d-cnndm")
    sentences, sources = copy_attention_sources(pipe, ARTICLE, "the search has drawn hundreds of volunteers on foot "
                                                "and online.")
    assert sentences[1] == "The search has drawn hundreds of volunteers on foot and online."
    ((top, share), *_), = sources
    assert top == 1 and 0 < share <= 1
    page = Elements(summarize_to_html(pipe, ARTICLE, num_beams=1, max_new_tokens=30))
    assert "copy attention" in page.find("attribution")[0][2]
    assert page.find("source")  # links from summary sentences to the source sentences


def test_view_command_writes_one_page_per_input_and_error_pages(tmp_path, capsys):
    rows = [json.loads(line) for line in (REPO_ROOT / "examples" / "cnn_three_articles.jsonl").read_text().splitlines()]
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(rows[0]) + "\n{not json\n")
    status = sumformers_cli.main(["view", str(data), "--model", "bertsum-minilm-cnndm", "--output-dir",
                                  str(tmp_path / "pages")])
    assert status == 2
    pages = sorted(path.name for path in (tmp_path / "pages").iterdir())
    assert pages == sorted([f"{rows[0]['id']}.html", "in_2.html"])
    good = Elements((tmp_path / "pages" / f"{rows[0]['id']}.html").read_text())
    assert len(good.find("chosen")) == 3 and good.find("rouge")  # the line's summary is the reference
    bad = Elements((tmp_path / "pages" / "in_2.html").read_text())
    assert "not valid JSON" in bad.find("error")[0][2]
    assert "Traceback" not in capsys.readouterr().err


def test_the_readme_view_commands_name_their_inputs_and_the_screenshots_ship():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("\n## See why")
    section = readme[start : readme.index("\n## ", start + 1)]
    (block,) = [part.split("```")[0] for part in section.split("```bash\n")[1:]]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    # no Rotowire game is bundled: the command takes two from the project's data copy
    games = "head -n 2 ../shared/data/rotowire/games.jsonl > games.jsonl"
    views = [command for command in commands if command != games]
    assert games in commands and len(views) == 2 and all(view.startswith("sumformers view ") for view in views)
    arguments = [sumformers_cli.build_parser().parse_args(view.split()[1:]) for view in views]
    assert (REPO_ROOT / arguments[0].input).is_file() and arguments[1].input == "games.jsonl"
    for image in ("docs/view_news.png", "docs/view_rotowire.png"):
        assert f"]({image})" in section and (REPO_ROOT / image).stat().st_size < 200_000


def test_a_content_plan_is_shown_as_its_template_sentences_beside_their_records(rotowire_game_line):
    from sumformers.text.rotowire_plans import plan_to_text

    game = parse_game(rotowire_game_line)
    plan = ["Al Horford|PLAYER_NAME", "Al Horford|PTS", "<EOS>", "Hawks|TEAM-PTS", "<EOT>"]
    output = {"plan": plan, "plan_text": plan_to_text(game, plan), "steps": [], "score": -1.0}
    page = Elements(render_html(output, "content-planning", game=game))
    rows = page.find("realized")
    assert len(rows) == 2 and "Al Horford" in rows[0][2] and "TEAM-PTS" in rows[1][2]
    # the templates state the table's own numbers: every number tied to a statistic is supported
    marks = [e for e in page.find("number") if "unchecked" not in e[1]["class"]]
    assert marks and all("supported" in e[1]["class"].split() for e in marks)
