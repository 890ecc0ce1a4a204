"""What a model name given to sumformers means before anything is loaded: a local folder (which must hold a
config.json), or a shipped name or Hub id left to loading. Light (the standard library only) and outside the package,
so that the command line (`sumformers_cli`) checks `--model` without loading the package, and `sumformers.hub`
gives the same one-line answer to `load_pipeline`."""

import os
import re
from pathlib import Path

# A Hub repo id: `name` or `namespace/name` (huggingface_hub's rule, without importing it).
_HUB_ID = re.compile(r"(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*")


def _looks_like_path(name: str) -> bool:
    """Whether a model name can only be a local path: a shipped name or a Hub id (`name`, `org/name`) cannot start
    with `.`, `/` or `~` nor hold more than one `/` or a backslash; and `folder/name` where `folder` is a folder here
    (`runs/model`) means that folder."""
    if _HUB_ID.fullmatch(name) is None or ".." in name or (os.sep != "/" and os.sep in name):
        return True
    return "/" in name and Path(name.split("/")[0]).is_dir()


def model_path_problem(name: str) -> str | None:
    """What is wrong with a model name as a local path (a folder without config.json, a file, a path that is not
    there), or None: shipped names and Hub ids are left to loading (`sumformers.hub.resolve_model`). Light, so that
    the command line answers at once."""
    path = Path(name).expanduser()
    if path.is_dir() and not (path / "config.json").is_file():
        return f"{name}: the folder holds no config.json (not a model folder)"
    if path.is_dir():
        return None
    if path.exists():
        return f"{name}: a file, not a model folder"
    return f"{name}: no such folder" if _looks_like_path(name) else None
