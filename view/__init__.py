"""See why: one self-contained HTML page per summary (`render_html` of a pipeline's output, `summarize_to_html` of a
pipeline and an input), showing what the model chose, scored, drew from or checked against, offline."""

from .render import TASKS, error_page, render_html, summarize_to_html, view_output

__all__ = ["TASKS", "error_page", "render_html", "summarize_to_html", "view_output"]
