"""The Gradio demo through Gradio's own client against a locally launched app (offline), and the Hub Space folder
that `sumformers export --space` writes, run without sumformers installed. Skipped without the `demo` extra."""

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
pytest.importorskip("gradio")
gradio_client = pytest.importorskip("gradio_client")

from sumformers.demo.app import NO_INPUT, build_demo  # noqa: E402
from sumformers.demo.space import write_space  # noqa: E402
from sumformers.hub import load_pipeline  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTICLE = (REPO_ROOT / "examples" / "cnn_missing_student.txt").read_text()
THREE_ARTICLES = REPO_ROOT / "examples" / "cnn_three_articles.jsonl"


def page_of(framed: str) -> str:
    """The view page inside the demo's iframe."""
    return html.unescape(re.fullmatch(r'<iframe title="summary view" srcdoc="(.*?)" style=.*', framed, re.S)[1])


@pytest.fixture
def client_of():
    """`client_of(demo)`: a Gradio client of `demo` launched on localhost (closed after the test)."""
    launched = []

    def launch(demo):
        demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
        launched.append(demo)
        return gradio_client.Client(demo.local_url, verbose=False)

    yield launch
    for demo in launched:
        demo.close()


def test_the_demo_shows_the_view_of_pasted_text_and_of_an_uploaded_file(client_of, tmp_path):
    pipe = load_pipeline("bertsum-minilm-cnndm")
    expected = pipe(ARTICLE)
    client = client_of(build_demo(pipe, "bertsum-minilm-cnndm"))
    pasted = page_of(client.predict(ARTICLE, None, None, "", api_name="/view"))
    chosen = [int(index) for index in re.findall(r'class="sentence chosen" id="s\d+" data-index="(\d+)"', pasted)]
    assert chosen == expected["sentences"]
    assert "Against the reference" not in pasted
    # a JSONL upload: its first line, with that line's summary as the reference
    uploaded = page_of(client.predict("", gradio_client.handle_file(str(THREE_ARTICLES)), None, "", api_name="/view"))
    first = json.loads(THREE_ARTICLES.read_text().splitlines()[0])
    assert "Against the reference" in uploaded
    assert html.escape(first["summary"].splitlines()[0]) in uploaded
    assert f"<title>{THREE_ARTICLES.name}</title>" in uploaded
    # nothing given, and input the pipeline refuses: one-line messages in the page
    assert NO_INPUT in page_of(client.predict("", None, None, "", api_name="/view"))
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    refused = page_of(client.predict("", gradio_client.handle_file(str(broken)), None, "", api_name="/view"))
    assert "broken.jsonl, line 1: invalid JSON" in refused and "Traceback" not in refused
    assert "got NoneType" not in refused


@pytest.mark.slow
def test_the_demo_realizes_a_picked_rotowire_game(client_of, rotowire_game_line):
    game = json.loads(rotowire_game_line)
    pipe = load_pipeline("realizer-minilm-rotowire")
    options = {"plan": "oracle", "num_beams": 1, "max_new_tokens": 12}
    client = client_of(build_demo(pipe, "realizer-minilm-rotowire", options, {"Rockets at Hawks": game}))
    page = page_of(client.predict("", None, "Rockets at Hawks", "", api_name="/view"))
    assert page.count('class="realized"') == len(pipe(game, **options)["sentences"])
    assert 'class="box-score"' in page and "Al Horford" in page
    assert "Against the reference" in page  # the game's own summary
    pasted_bad = page_of(client.predict("{not a game", None, None, "", api_name="/view"))
    assert "not a game as one JSON line" in pasted_bad


SPACE_CHECK = """
import html, importlib.abc, re, sys


class NoSumformers(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("sumformers", "sumformers_cli"):
            raise ImportError(f"{name} is not installed in a Space")


sys.meta_path.insert(0, NoSumformers())
sys.path.insert(0, ".")
from gradio_client import Client

import app

app.demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
framed = Client(app.demo.local_url, verbose=False).predict(sys.argv[1], None, None, "", api_name="/view")
print("RESULT", len(re.findall('class="sentence chosen"', html.unescape(framed))), type(app.pipe).__module__)
app.demo.close()
"""


@pytest.mark.slow
def test_the_space_folder_runs_the_exported_model_without_sumformers(tmp_path):
    space = write_space("bertsum-minilm-cnndm", str(tmp_path / "space"))
    names = {path.name for path in space.iterdir()}
    assert {"app.py", "requirements.txt", "README.md", "model", "sumformers_view"} <= names
    readme = (space / "README.md").read_text()
    assert readme.startswith("---\n") and "\nsdk: gradio\n" in readme and "\napp_file: app.py\n" in readme
    requirements = (space / "requirements.txt").read_text().split()
    assert "torch==2.13.0" in requirements and any(line.startswith("rouge-score==") for line in requirements)
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    completed = subprocess.run([sys.executable, "-c", SPACE_CHECK, ARTICLE], cwd=space, env=environment,
                               capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    (result,) = [line.split()[1:] for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    chosen, module = result
    assert chosen == "3" and module.startswith("transformers_modules.")
