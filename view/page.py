"""The page every view shares: one self-contained HTML file (inline CSS, no script, no network), the summary on top,
the reference and its ROUGE when one is given, and the pipelines' one-line errors in place of a summary.

Every text that reaches the page goes through `text()` (html.escape), attributes included."""

import html

from ..text.scoring import ROUGE_KEYS, rouge_per_example

# The chosen sentences' highlight; tests and the screenshot check look for exactly this colour.
HIGHLIGHT = "#ffd54f"
HIGHLIGHT_RGB = (0xFF, 0xD5, 0x4F)
# Scores shade the other sentences in this blue, from transparent (0) to this opacity (the highest score).
SHADE_RGB = (66, 133, 244)
MAX_SHADE = 0.45

STYLE = f"""
body {{ font: 16px/1.6 system-ui, sans-serif; max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; }}
h1 {{ font-size: 1.4rem; }} h2 {{ font-size: 1.15rem; margin-top: 2rem; }} h3 {{ font-size: 1rem; }}
.meta, .legend, .score {{ color: #555; font-size: .85rem; }}
.summary {{ background: #fafafa; border-left: 4px solid {HIGHLIGHT}; padding: .5rem 1rem; }}
.sentence {{ padding: .1rem .15rem; border-radius: 3px; }}
.chosen {{ background: {HIGHLIGHT}; }}
.order {{ display: inline-block; min-width: 1.3em; text-align: center; font-weight: bold; font-size: .8rem;
  background: #222; color: #fff; border-radius: .65em; margin-right: .25rem; }}
.unread {{ color: #888; border-left: 4px dashed #bbb; padding-left: .75rem; }}
.error {{ background: #fdecea; border-left: 4px solid #c62828; padding: .5rem 1rem; }}
table {{ border-collapse: collapse; font-size: .85rem; margin: .5rem 0; }}
td, th {{ border: 1px solid #ddd; padding: .15rem .4rem; text-align: left; vertical-align: top; }}
.supported {{ background: #c8e6c9; }} .unsupported {{ background: #ffcdd2; }} .unchecked {{ background: #eee; }}
.records {{ font-size: .75rem; line-height: 1.25; margin: 0; }}
.side {{ display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }}
"""


def text(value) -> str:
    """Any value as escaped HTML text (quotes too, so that it is safe in an attribute)."""
    return html.escape(str(value), quote=True)


def score_text(score: float) -> str:
    return f"{score:.3f}"


def shade(score: float, top: float) -> str:
    """The background of a sentence scored `score` where the best score is `top`: its opacity is proportional."""
    alpha = 0.0 if top <= 0 else MAX_SHADE * max(0.0, min(1.0, score / top))
    red, green, blue = SHADE_RGB
    return f"background: rgba({red}, {green}, {blue}, {alpha:.3f})"


def error_block(message: str) -> str:
    return f'<p class="error" role="alert">{text(message)}</p>'


def reference_section(summary: str, reference: str | None) -> str:
    """The reference beside the summary, with ROUGE-1/2/Lsum F1 (the project's `rouge_per_example`: rouge-score with
    stemming, one sentence per line)."""
    if reference is None:
        return ""
    scores = rouge_per_example([summary], [reference])[0]
    names = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeLsum": "ROUGE-L (summary level)"}
    rows = "".join(
        f'<tr><th>{names[key]}</th><td class="rouge" data-metric="{key}">{scores[key]:.2f}</td></tr>'
        for key in ROUGE_KEYS
    )
    lines = lambda value: "<br>".join(text(line) for line in value.splitlines() if line.strip())  # noqa: E731
    return (
        '<h2>Against the reference</h2><table class="rouge-scores"><tr><th>metric</th><th>F1 x 100</th></tr>'
        f'{rows}</table><div class="side"><div><h3>Summary</h3><p>{lines(summary)}</p></div>'
        f'<div><h3>Reference</h3><p class="reference">{lines(reference)}</p></div></div>'
    )


def page(title: str, body: str, meta: str = "") -> str:
    """The whole HTML document."""
    meta_line = f'<p class="meta">{text(meta)}</p>' if meta else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{text(title)}</h1>{meta_line}{body}</body></html>\n"
    )


__all__ = ["HIGHLIGHT", "HIGHLIGHT_RGB", "error_block", "page", "reference_section", "score_text", "shade", "text"]
