"""A Hub Space folder that runs the Gradio demo over an exported model: `model/` (the self-contained export,
loaded with `trust_remote_code=True`), `sumformers_view/` (the demo and view code, flattened as an exported repo's
remote code is), `app.py`, `requirements.txt` and `README.md` with the Space's YAML metadata."""

import json
from importlib import metadata
from pathlib import Path

from ..hub import export_model
from ..remote_code import collect_remote_code, required_packages
from ..view.render import TABLE_TASKS
from .app import build_demo

GRADIO_VERSION = metadata.version("gradio")
# Python modules the flattened code imports -> their distributions on PyPI.
DISTRIBUTIONS = {"rouge_score": "rouge-score", "nltk": "nltk", "blingfire": "blingfire", "gradio": "gradio"}
# Installed for every Space: the model's libraries, and trafilatura for uploaded HTML (imported when a page comes in).
ALWAYS = ("torch", "transformers", "safetensors", "trafilatura", "lxml_html_clean")

APP = '''"""The sumformers demo over the exported model in ./model (see README.md)."""

import json
from pathlib import Path

from transformers import pipeline

from sumformers_view.app import build_demo

HERE = Path(__file__).resolve().parent
pipe = pipeline(model=str(HERE / "model"), trust_remote_code=True)
games = {}
if (HERE / "games.jsonl").is_file():
    for line in (HERE / "games.jsonl").read_text(encoding="utf-8").splitlines():
        game = json.loads(line)
        games[f"{game['vis_city']} {game['vis_name']} at {game['home_city']} {game['home_name']}"] = game
demo = build_demo(pipe, MODEL_NAME, OPTIONS, games)

if __name__ == "__main__":
    demo.launch()
'''

README = """---
title: {title}
emoji: 📝
colorFrom: yellow
colorTo: blue
sdk: gradio
sdk_version: {gradio}
app_file: app.py
pinned: false
license: apache-2.0
---

# {title}

A sumformers model ({task}) with its view: paste a text, upload a file{games}, and see
what the model chose and why (the chosen sentences and their scores, the sources a generated sentence drew from, or
each number checked against the box score). `model/` is the exported model; `app.py` loads it with
`pipeline(model="model", trust_remote_code=True)`.
"""


def requirement(distribution: str) -> str:
    """`distribution==installed version` (a local build tag such as `+cpu` dropped)."""
    return f"{distribution}=={metadata.version(distribution).split('+')[0]}"


def write_space(name_or_path: str | None, output_dir: str, games_file: str | None = None) -> Path:
    """Write the Space folder for a model (a shipped checkpoint's name, a folder or a Hub id) into `output_dir`,
    which must not exist or be empty. A table-to-text model realizes each game's oracle plan (the Space has no
    planner); for a table-to-text or content-planning model, `games_file` (a JSONL of Rotowire games) is copied in
    as the games to pick from."""
    output = Path(output_dir)
    model_folder = export_model(name_or_path, str(output / "model"))
    config = json.loads((model_folder / "config.json").read_text())
    task = next(iter(config["custom_pipelines"]))
    code = collect_remote_code(build_demo)
    package = output / "sumformers_view"
    package.mkdir()
    (package / "__init__.py").write_text('"""The sumformers demo and view code, flattened."""\n', encoding="utf-8")
    for file_name, source in code.items():
        (package / file_name).write_text(source, encoding="utf-8")
    options = {"plan": "oracle"} if task == "table-to-text" else {}
    model_name = name_or_path or config["model_type"]
    title = f"sumformers {Path(model_name).name}"
    app = APP.replace("MODEL_NAME", repr(Path(model_name).name)).replace("OPTIONS", repr(options))
    (output / "app.py").write_text(app, encoding="utf-8")
    has_games = task in TABLE_TASKS and games_file is not None
    if has_games:
        (output / "games.jsonl").write_text(Path(games_file).read_text(encoding="utf-8"), encoding="utf-8")
    modules = required_packages(code)
    unknown = sorted(set(modules) - set(DISTRIBUTIONS))
    if unknown:
        raise RuntimeError(f"the view code imports {unknown}: name their PyPI distributions in DISTRIBUTIONS")
    distributions = dict.fromkeys([*ALWAYS, *(DISTRIBUTIONS[module] for module in modules)])
    (output / "requirements.txt").write_text("".join(f"{requirement(d)}\n" for d in distributions), encoding="utf-8")
    readme = README.format(title=title, gradio=GRADIO_VERSION, task=task,
                           games=" or pick one of its Rotowire games" if has_games else "")
    (output / "README.md").write_text(readme, encoding="utf-8")
    return output


__all__ = ["write_space"]
