"""The Gradio demo: the page of `sumformers.view` for pasted text, an uploaded file or a Rotowire game.

`build_demo(pipe, ...)` takes any sumformers pipeline (from the package, or an exported model's loaded with
`trust_remote_code=True`): `sumformers demo` runs it, and a Hub Space written by `sumformers export --space` runs a
flat copy of this file and the view code. Its event `view` (the API name) returns the page, framed."""

import html
import json
from pathlib import Path

import gradio as gr

from ..text.jsonl import read_jsonl
from ..text.readable_text import html_main_text
from ..view.render import TABLE_TASKS, error_page, summarize_to_html

NO_INPUT = "Paste a text, upload a file or pick a game."
FRAME_HEIGHT = 900


def read_upload(path: str, reads_games: bool) -> tuple[object, str | None]:
    """An uploaded file as one input and its reference (None without one): HTML as its main text, the first line of
    a JSONL file (a game, or a `document`/`documents` with its `summary`), anything else as text."""
    file = Path(path)
    if file.suffix in (".html", ".htm"):
        return html_main_text(file.read_bytes().decode("utf-8", errors="replace")), None
    if file.suffix != ".jsonl" and not reads_games:
        return file.read_bytes().decode("utf-8", errors="replace"), None
    rows = read_jsonl(file)
    if not rows:
        raise ValueError(f"{file.name}: no JSON line")
    row = rows[0]
    if reads_games or "box_score" in row:
        return row, None
    reference = row.get("summary") if isinstance(row.get("summary"), str) else None
    if isinstance(row.get("documents"), list):
        return {"documents": row["documents"]}, reference
    if isinstance(row.get("document"), str):
        return row["document"], reference
    raise ValueError(f"{file.name}: the first line has no `document` string or `documents` list")


def framed(page: str) -> str:
    """The page in an iframe of its own, so that its style stays out of the app's."""
    return (f'<iframe title="summary view" srcdoc="{html.escape(page, quote=True)}" '
            f'style="width: 100%; height: {FRAME_HEIGHT}px; border: 0;"></iframe>')


def build_demo(pipe, model_name: str, options: dict | None = None, games: dict[str, dict] | None = None):
    """A `gr.Blocks` app over `pipe` (`options`: its call options, as `sumformers summarize` takes them); `games`:
    Rotowire games by name to pick from, for a table-to-text or content-planning model."""
    options = dict(options or {})
    reads_games = pipe.task in TABLE_TASKS
    games = games or {}

    def view(text: str, upload: str | None, game_name: str | None, reference: str) -> str:
        title, given_reference = "Summary", None
        try:
            if upload:
                inputs, given_reference = read_upload(upload, reads_games)
                title = Path(upload).name
            elif reads_games and game_name:
                inputs, title = games[game_name], game_name
            elif text and text.strip():
                inputs = json.loads(text) if reads_games else text
            else:
                return framed(error_page(NO_INPUT, title, pipe.task, model_name))
        except (ValueError, KeyError) as error:  # a pasted game that is not JSON, an unreadable upload
            message = f"not a game as one JSON line ({error})" if isinstance(error, json.JSONDecodeError) else error
            return framed(error_page(str(message), title, pipe.task, model_name))
        chosen_reference = (reference or "").strip() or given_reference
        return framed(summarize_to_html(pipe, inputs, reference=chosen_reference, title=title,
                                        model=model_name, **options))

    what = "a Rotowire game (one JSON line)" if reads_games else "a text"
    with gr.Blocks(title=f"sumformers: {model_name}") as demo:
        gr.Markdown(f"## sumformers · {model_name} ({pipe.task})\nPaste {what}, upload a file or pick a game: the "
                    "page shows what the model chose and why.")
        with gr.Row():
            with gr.Column():
                text = gr.Textbox(lines=10, label=f"Paste {what}")
                upload = gr.File(label="or upload a file (.txt, .html, .jsonl)", type="filepath")
                game = gr.Dropdown(choices=list(games), value=None, label="or pick a Rotowire game",
                                   visible=reads_games and bool(games))
                reference = gr.Textbox(lines=3, label="Reference summary (optional; one sentence per line)")
                button = gr.Button("Summarize", variant="primary")
        page = gr.HTML()
        button.click(view, inputs=[text, upload, game, reference], outputs=page, api_name="view")
    return demo


__all__ = ["build_demo", "framed", "read_upload"]
