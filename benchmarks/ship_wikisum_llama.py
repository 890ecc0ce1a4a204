"""Ship a WikiSum-over-Llama adapter (`train_wikisum_llama.py`) as a checkpoint of the package: the adapter's LoRA
weights, its config naming the base by its Hub id (which `modeling/pretrained_decoder.py` resolves to the folder
`install_smollm2.py` writes), the shipped decoding (greedy, at most --max_new_tokens, CTRL's repetition penalty and
word trigram blocking over the generated tokens only), the base's tokenizer and chat template, the card info (a JSON
file) and the card built from it.

    python benchmarks/ship_wikisum_llama.py --adapter runs/wikisum-smollm2-td/final \
        --base runs/smollm2-135m-instruct --card_info runs/wikisum_smollm2_card.json \
        --output checkpoints/wikisum-smollm2-td-cnndm
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapter", required=True, help="the adapter folder train_wikisum_llama.py wrote")
    parser.add_argument("--base", required=True, help="the base folder it was trained over (its tokenizer is copied)")
    parser.add_argument("--card_info", required=True, help="a JSON file: the card info (sumformers_card.json)")
    parser.add_argument("--output", required=True)
    parser.add_argument("--max_new_tokens", type=int, default=120)
    parser.add_argument("--repetition_penalty", type=float, default=1.1)
    parser.add_argument("--no_repeat_word_ngram_size", type=int, default=3)
    return parser.parse_args()


def main():
    args = parse_args()
    from transformers import GenerationConfig

    from sumformers.cards import build_model_card
    from sumformers.configuration.configuration_wikisum_llama import WikiSumLlamaConfig
    from sumformers.hub import CARD_INFO_FILE
    from sumformers.modeling.pretrained_decoder import SMOLLM2_HUB_ID

    adapter, base, output = Path(args.adapter), Path(args.base), Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(adapter / "adapter_model.safetensors", output / "adapter_model.safetensors")
    adapter_config = json.loads((adapter / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = SMOLLM2_HUB_ID
    (output / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    config = WikiSumLlamaConfig.from_pretrained(adapter)
    config.base_model_name_or_path = SMOLLM2_HUB_ID
    config.generated_repetition_penalty = args.repetition_penalty
    config.no_repeat_word_ngram_size = args.no_repeat_word_ngram_size
    config.save_pretrained(output)
    generation = GenerationConfig.from_pretrained(base)
    generation.update(max_new_tokens=args.max_new_tokens, do_sample=False)
    generation.save_pretrained(output)
    for name in TOKENIZER_FILES:
        shutil.copyfile(base / name, output / name)
    card_info = json.loads(Path(args.card_info).read_text())
    (output / CARD_INFO_FILE).write_text(json.dumps(card_info, indent=2) + "\n")
    (output / "README.md").write_text(str(build_model_card(config, card_info)))
    print(f"shipped {adapter} to {output}")


if __name__ == "__main__":
    main()
