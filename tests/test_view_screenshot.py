"""The page of a bundled article as headless Chromium draws it: the highlight colour is where the DOM puts the chosen
sentences, and nowhere else. Slow (a model and two browser runs); skipped without Debian's `chromium`."""

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sumformers.hub import load_pipeline
from sumformers.view import summarize_to_html
from sumformers.view.page import HIGHLIGHT_RGB

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTICLE = Path(__file__).resolve().parents[1] / "examples" / "cnn_missing_student.txt"
WINDOW = "900,3000"
# Writes where the browser laid out each sentence (its widest line box) into the DOM, for --dump-dom. Appended at
# the end of the body, so it moves nothing above it.
LAYOUT_PROBE = """<script>
const boxes = [...document.querySelectorAll(".sentence")].map(element => {
  const line = [...element.getClientRects()].sort((a, b) => b.width - a.width)[0];
  return {index: element.dataset.index, chosen: element.classList.contains("chosen"),
          x: line.left, y: line.top, width: line.width, height: line.height};
});
const out = document.createElement("pre");
out.id = "layout";
out.textContent = JSON.stringify(boxes);
document.body.appendChild(out);
</script></body>"""


def chromium(*arguments) -> str:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", f"--window-size={WINDOW}", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout


class Layout(HTMLParser):
    def __init__(self, dom: str):
        super().__init__()
        self.inside, self.text = False, ""
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        self.inside = self.inside or dict(attrs).get("id") == "layout"

    def handle_data(self, data):
        if self.inside:
            self.text += data

    def handle_endtag(self, tag):
        if tag == "pre":
            self.inside = False


def highlight_share(image, box) -> float:
    """The share of pixels along the middle of `box` that are the highlight colour (text glyphs are not)."""
    y = int(box["y"] + box["height"] / 2)
    xs = range(int(box["x"]) + 2, int(box["x"] + box["width"]) - 2)
    hits = sum(all(abs(a - b) <= 12 for a, b in zip(image.getpixel((x, y))[:3], HIGHLIGHT_RGB)) for x in xs)
    return hits / max(1, len(xs))


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (Debian's chromium package) is not installed")
def test_the_browser_draws_the_highlight_exactly_on_the_chosen_sentences(tmp_path):
    from PIL import Image

    pipe = load_pipeline()  # the default (stepwise) model
    page = summarize_to_html(pipe, ARTICLE.read_text(), title="cnn_missing_student")
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    (tmp_path / "probe.html").write_text(page.replace("</body>", LAYOUT_PROBE), encoding="utf-8")
    boxes = json.loads(Layout(chromium("--dump-dom", str(tmp_path / "probe.html"))).text)
    chromium(f"--screenshot={tmp_path / 'page.png'}", str(tmp_path / "page.html"))
    image = Image.open(tmp_path / "page.png").convert("RGB")
    chosen = [box for box in boxes if box["chosen"]]
    assert len(chosen) == len(pipe(ARTICLE.read_text())["sentences"]) > 0
    for box in boxes:
        share = highlight_share(image, box)
        if box["chosen"]:
            assert share > 0.4, (box, share)
        else:
            assert share == 0.0, (box, share)
