"""The remote code of an exported repo: a model's source files and everything they import relatively, flattened
side by side (a Hub repo has no packages), and the packages beyond transformers and torch that they need."""

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

# Installed with transformers itself (filelock through huggingface_hub): an exported repo needs no more than
# `pip install transformers torch` for them.
PROVIDED_WITH_TRANSFORMERS = {
    "torch", "transformers", "numpy", "huggingface_hub", "safetensors", "tokenizers", "filelock",
}

# What inference may need beyond them: blingfire splits sentences. Any other package at module level (rouge-score, nltk:
# evaluation) means an inference file imports evaluation code, and a bare install of the repo would fail.
INFERENCE_PACKAGES = {"blingfire"}

_RELATIVE_IMPORT = re.compile(r"^(\s*)from (\.+)([\w.]*) import ", re.MULTILINE)


def _module_of(import_dots: str, import_path: str, from_module: str) -> str:
    package = from_module.rsplit(".", 1)[0]
    return importlib.util.resolve_name(import_dots + import_path, package)


def collect_remote_code(*objects) -> dict[str, str]:
    """Source files of `objects` and everything they import relatively, as {flat file name: rewritten source}.

    In the package, `modeling/modeling_x.py` imports `..configuration.configuration_x`; in a Hub repo every file sits
    side by side, so each relative import becomes a sibling import `from .configuration_x import ...`.
    """
    files: dict[str, str] = {}
    pending = [obj.__module__ for obj in objects]
    seen = set()
    while pending:
        module_name = pending.pop()
        if module_name in seen:
            continue
        seen.add(module_name)
        source_path = Path(inspect.getsourcefile(importlib.import_module(module_name)))
        source = source_path.read_text(encoding="utf-8")

        def to_sibling(match, module_name=module_name):
            target = _module_of(match.group(2), match.group(3), module_name)
            pending.append(target)
            return f"{match.group(1)}from .{target.rsplit('.', 1)[-1]} import "

        rewritten = _RELATIVE_IMPORT.sub(to_sibling, source)
        if source_path.name in files:
            raise RuntimeError(f"two remote-code files would share the name {source_path.name}")
        files[source_path.name] = rewritten
    return files


def required_packages(files: dict[str, str]) -> list[str]:
    """The packages beyond transformers and torch that `files` import at module level (imports inside functions are
    optional features, such as spaCy for HetFormer's entities, and are not counted)."""
    names = set()
    for source in files.values():
        for node in ast.parse(source).body:
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return sorted(names - PROVIDED_WITH_TRANSFORMERS - set(sys.stdlib_module_names) - {"__future__"})


def name_required_packages(files: dict[str, str], entry_classes) -> dict[str, str]:
    """`files` with the packages they need imported at the top of each entry file (the config, model and pipeline
    modules that `auto_map` and `custom_pipelines` name). transformers checks only an entry file's own imports before
    it runs a local repo's code, so this is what makes a missing package fail with its "requires the following
    packages ... pip install" message instead of a ModuleNotFoundError from deep inside. Refuses code that needs a
    package beyond `INFERENCE_PACKAGES`."""
    packages = required_packages(files)
    beyond = [name for name in packages if name not in INFERENCE_PACKAGES]
    if beyond:
        raise RuntimeError(
            f"the exported code would need {beyond}, which inference does not use (only {sorted(INFERENCE_PACKAGES)}"
            " beyond transformers and torch): an inference file imports evaluation or training code"
        )
    if not packages:
        return files
    line = "".join(
        f"import {name}  # noqa: F401  (needed by sibling files; named here for transformers)\n" for name in packages
    )
    entries = {Path(inspect.getsourcefile(entry)).name for entry in entry_classes}
    named = dict(files)
    for file_name in entries:
        tree = ast.parse(named[file_name])
        first_import = next(
            node
            for node in tree.body
            if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.module != "__future__")
        )
        lines = named[file_name].splitlines(keepends=True)
        lines.insert(first_import.lineno - 1, line)
        named[file_name] = "".join(lines)
    return named
