"""sumformers: structured and long-document summarization models for the transformers ecosystem.

Importing the package is light (no torch, no model code): its names (`sumformers.BertSumConfig`,
`sumformers.load_pipeline`, ...) are the registry's (`registry.EXPORTS`), each imported when first used. The
architectures are registered with the Auto classes and every task with `pipeline()` as soon as transformers' Auto or
pipeline modules load (or a sumformers name is first used), so `import sumformers` before `pipeline(...)` is enough.
"""

import importlib

from .registry import ARCHITECTURES, EXPORTS, register_all, register_when_transformers_loads

__version__ = "0.1.0"

__all__ = ["ARCHITECTURES", *sorted(EXPORTS)]

register_when_transformers_loads()


def __getattr__(name: str):
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    register_all()
    value = getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))
