"""Train a WikiSum decoder (Liu et al. 2018: T-D / T-DMCA) with the Trainer.

    OMP_NUM_THREADS=1 accelerate launch training_scripts/train_wikisum.py \
        --train_file ../shared/data/qmsum/train.jsonl,../shared/data/fewsum/train.jsonl \
        --validation_file ../shared/data/qmsum/validation.jsonl,../shared/data/fewsum/validation.jsonl \
        --output_dir runs/wikisum --max_steps 240 --do_train --do_eval

The first stage of the paper's two-stage setup on CNN/DM (one document: the article's sentences ranked, the highlights
as the summary), the decoder started from MiniLM:

    OMP_NUM_THREADS=1 python training_scripts/train_wikisum.py \
        --train_file ../shared/data/cnn_dailymail/train_large.jsonl.gz --ranking_unit sentence --ranker textrank \
        --decoder_init encoder --output_dir runs/wikisum-cnndm --max_steps 2000 --do_train

Each example is ``[title ; paragraphs ranked by --ranker and cut at --max_input_tokens (L) ; separator ; summary]``,
built by the model's own processor (as the `wikisum` pipeline builds its input), and the loss is on every token (the
paper's T-D objective). The title is the dataset's topic or product name: QMSum's topic list, FewSum's product
category; CNN/DM has none (tf-idf against no title keeps the article's order, the lead; TextRank and SumBasic need
no title). With `--ranking_unit sentence` the rankers rank sentences instead of paragraphs (CNN/DM articles have no
paragraph breaks). With `--qmsum_specific_queries`, every QMSum query/answer pair is one more example with the query
as its title.

The decoder trains in full (the LoRA options of the shared arguments do not apply). `--decoder_init random` (the
paper's): from scratch, its word embeddings from a PCA of the encoder's given by --model_name_or_path (MiniLM by
default); `--decoder_init encoder`: the whole decoder starts from that encoder (`WikiSumForCausalLM.from_encoder`:
its vocabulary, embeddings and layers, so --hidden_size, --embedding_size, --intermediate_size and
--num_attention_heads are the encoder's). Or training continues from a saved WikiSum model. Evaluation:
log-perplexity of the summary tokens and ROUGE of the `wikisum` pipeline's summaries on the validation files.
`--ship_to DIR` also writes the final model with fp16 weights (a small shippable checkpoint). Resumes from the newest
checkpoint in --output_dir.
"""

import logging
import math
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import GenerationConfig

from sumformers import WikiSumConfig, WikiSumForCausalLM
from sumformers.generation.length_penalty import resolve_length_penalty_type
from sumformers.modeling.pretrained_encoder import portable_encoder_name
from sumformers.processing.processing_wikisum import read_wikisum_examples
from sumformers.training import (
    finish_training,
    model_and_tokenizer,
    parse_arguments,
    pipeline_rouge,
    take_push_to_hub,
    train,
)

logger = logging.getLogger("train_wikisum")


@dataclass
class WikiSumArguments:
    max_input_tokens: int = field(default=1024, metadata={"help": "L: tokens of title and ranked paragraphs."})
    max_summary_tokens: int = field(default=192, metadata={"help": "Summary tokens kept for training."})
    ranker: str = field(default="tfidf", metadata={"help": "Stage-1 ranker: identity, tfidf, textrank, sumbasic."})
    ranking_unit: str = field(
        default="paragraph", metadata={"help": "What the ranker ranks: paragraph or sentence (CNN/DM: sentence)."}
    )
    decoder_init: str = field(
        default="random",
        metadata={"help": "random: from scratch (PCA word embeddings); encoder: the whole decoder from the encoder."},
    )
    attention_layers: str = field(
        default="local,compressed,local,compressed,local",
        metadata={"help": "Comma-separated layer types: full, local, compressed (T-D: all full)."},
    )
    hidden_size: int = field(default=256)
    embedding_size: int = field(default=128)
    intermediate_size: int = field(default=1024)
    num_attention_heads: int = field(default=4)
    local_block_size: int = field(default=256)
    moe_layers: str = field(default="", metadata={"help": "Comma-separated layer indices with a mixture of experts."})
    num_experts: int = field(default=8)
    num_experts_per_token: int = field(default=2)
    hidden_dropout: float = field(default=0.1)
    qmsum_specific_queries: bool = field(default=True, metadata={"help": "Add QMSum's query/answer pairs."})
    num_beams: int = field(default=4, metadata={"help": "Beam size saved in the generation config (paper: 4)."})
    length_penalty: float = field(
        default=0.6, metadata={"help": "Length penalty (GNMT's alpha under gnmt) saved in the generation config."}
    )
    length_penalty_type: str = field(
        default="gnmt",
        metadata={"help": "gnmt: ((5 + |Y|) / 6) ** alpha (the paper's); transformers: |Y| ** length_penalty."},
    )
    max_new_tokens: int = field(default=160)
    no_repeat_ngram_size: int = field(
        default=0, metadata={"help": "Saved in the generation config and named on the card; 0 = off (the paper's)."}
    )
    eval_generate_samples: int = field(default=20, metadata={"help": "Validation examples summarized for ROUGE."})
    ship_to: str | None = field(default=None, metadata={"help": "Also write the final model with fp16 weights here."})


def read_files(paths: str | None, specific_queries: bool = False, ranking_unit: str = "paragraph") -> list[list[dict]]:
    """The examples of each comma-separated file."""
    return [read_wikisum_examples(path, specific_queries, ranking_unit) for path in (paths or "").split(",") if path]


def dataset_names(paths: str | None) -> list[str]:
    """The shared-data folder of each comma-separated file (`qmsum`, `fewsum`, `cnn_dailymail`)."""
    return sorted({Path(path).parent.name for path in (paths or "").split(",") if path})


def take_evenly(groups: list[list[dict]], count: int) -> list[dict]:
    """The first examples of each group, `count` in all, as evenly as the groups allow."""
    taken, position = [], 0
    while len(taken) < count and any(position < len(group) for group in groups):
        taken += [group[position] for group in groups if position < len(group)][: count - len(taken)]
        position += 1
    return taken


@torch.no_grad()
def summary_log_perplexity(model, encoded: list[dict]) -> float:
    """Mean negative log-likelihood (nats) per summary token (the separator predicts the first one, the last
    summary token predicts the end token)."""
    model.eval()
    total, count = 0.0, 0
    for item in encoded:
        ids = torch.tensor([item["input_ids"] + item["summary_ids"]], device=model.device)
        logits = model(ids).logits[0, item["summary_start"] - 1 : -1].float()
        targets = ids[0, item["summary_start"] :]
        total += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
        count += targets.numel()
    return total / max(count, 1)


def write_fp16_copy(source: Path, target: Path) -> Path:
    """The saved model with its weights stored in fp16 (loaded back as fp32: the config keeps dtype float32)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("training_args.bin"))
    weights = target / "model.safetensors"
    tensors = load_file(weights)
    save_file(
        {k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}, weights, metadata={"format": "pt"}
    )
    return target


def new_model(encoder: str, tokenizer, source: str, args: WikiSumArguments) -> WikiSumForCausalLM:
    """A new decoder: with --decoder_init encoder, the encoder's (its vocabulary, sizes and layers), else one with
    `args`' shape, its word embeddings from `encoder`'s (PCA), `tokenizer`'s special tokens."""
    if tokenizer.mask_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError("the tokenizer needs a mask token (the input/summary separator) and a sep token")
    layout = dict(
        attention_layers=[name.strip() for name in args.attention_layers.split(",")],
        local_block_size=args.local_block_size,
        moe_layers=[int(index) for index in args.moe_layers.split(",") if index.strip()],
        num_experts=args.num_experts,
        num_experts_per_token=args.num_experts_per_token,
        hidden_dropout=args.hidden_dropout,
        max_input_tokens=args.max_input_tokens,
        ranker=args.ranker,
        encoder_name_or_path=portable_encoder_name(source),
        # blocked attention trains on CPU with memory linear in length
        attn_implementation="blocked",
    )
    if args.decoder_init == "encoder":
        return WikiSumForCausalLM.from_encoder(encoder, decoder_init="encoder", **layout)
    if args.decoder_init != "random":
        raise ValueError(f"--decoder_init must be random or encoder, got {args.decoder_init!r}")
    config = WikiSumConfig(
        vocab_size=len(tokenizer),
        embedding_size=args.embedding_size,
        hidden_size=args.hidden_size,
        num_attention_heads=args.num_attention_heads,
        intermediate_size=args.intermediate_size,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id,
        eos_token_id=tokenizer.sep_token_id,
        separator_token_id=tokenizer.mask_token_id,
        paragraph_separator_token_id=tokenizer.sep_token_id,
        **layout,
    )
    return WikiSumForCausalLM.from_encoder(encoder, config=config)


def decoding_settings(generation_config: GenerationConfig) -> str:
    """The beam search the generation config holds, as the card names it."""
    penalty = getattr(generation_config, "length_penalty_type", None) or "transformers"
    formula = "((5 + |Y|) / 6) ** alpha, GNMT's" if penalty == "gnmt" else "|Y| ** alpha, transformers'"
    blocking = generation_config.no_repeat_ngram_size
    return (
        f"beam {generation_config.num_beams}, length penalty alpha {generation_config.length_penalty} ({formula}), "
        + (f"repeated {blocking}-grams of WordPieces blocked" if blocking else "no n-gram blocking")
    )


def describe_start(config: WikiSumConfig) -> str:
    """How the decoder started, for the card."""
    if config.decoder_init == "encoder":
        return (
            f"started from {config.encoder_name_or_path} (vocabulary, word embeddings and every layer copied, decoder "
            f"layer i from encoder layer {config.encoder_layer_map}[i]; post-norm as BERT; compressed layers' "
            "convolutions started as stride averages; positions from the scaled timing signal)"
        )
    return "trained from scratch (word embeddings from a PCA of MiniLM's)"


def main():
    model_args, data_args, training_args, args = parse_arguments(WikiSumArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    resolve_length_penalty_type(args.length_penalty_type)  # a wrong name fails now, not at evaluation
    source = model_args.model_name_or_path
    model, tokenizer = model_and_tokenizer(
        source, lambda encoder, tokenizer: new_model(encoder, tokenizer, source, args)
    )
    model.generation_config = GenerationConfig(
        num_beams=args.num_beams,
        length_penalty=args.length_penalty,
        length_penalty_type=args.length_penalty_type,
        max_new_tokens=args.max_new_tokens,
        no_repeat_ngram_size=args.no_repeat_ngram_size,
        bos_token_id=model.config.bos_token_id,
        eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id,
    )
    logger.info("%s: %.2fM parameters", model.config.variant, sum(p.numel() for p in model.parameters()) / 1e6)
    processor = model.processor_class(tokenizer, model.config)

    def features(example: dict) -> dict:
        return processor.training_features(example, args.max_summary_tokens, args.ranker, args.max_input_tokens)

    train_examples = [
        example
        for group in read_files(data_args.train_file, args.qmsum_specific_queries, args.ranking_unit)
        for example in group
    ]
    eval_groups = read_files(data_args.validation_file, ranking_unit=args.ranking_unit)
    eval_examples = take_evenly(eval_groups, data_args.max_eval_samples or sum(map(len, eval_groups)))
    if data_args.max_train_samples:
        train_examples = random.Random(training_args.seed).sample(
            train_examples, min(data_args.max_train_samples, len(train_examples))
        )
    card_info = {
        "model_name": Path(args.ship_to or training_args.output_dir).name,
        "datasets": dataset_names(data_args.train_file) or ["qmsum", "fewsum"],
        "dataset_name": " + ".join(dataset_names(data_args.validation_file or data_args.train_file)) + " (validation)",
        "split": "validation",
    }

    encoded = None
    if training_args.do_train:
        if not train_examples:
            raise ValueError("give --train_file (comma-separated JSONL files)")
        with training_args.main_process_first(desc="ranking and tokenizing"):
            encoded = [features(example) for example in train_examples]
    trainer, result = train(model, training_args, encoded, processor.collate)
    if result is not None:
        tokens = sum(len(item["input_ids"]) + len(item["summary_ids"]) for item in encoded)
        card_info["training"] = (
            f"{model.config.variant} ({', '.join(model.config.attention_layers)}; hidden {model.config.hidden_size}, "
            f"embeddings {model.config.embedding_size} tied, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
            f"parameters) {describe_start(model.config)} on {len(encoded)} examples ({tokens} tokens) of "
            f"{data_args.train_file}; input = title + {args.ranker}-ranked {args.ranking_unit}s cut at "
            f"L={args.max_input_tokens} tokens; loss on every token; {trainer.state.global_step} steps of batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation, learning rate {training_args.learning_rate}; "
            f"{trainer.state.epoch:.2f} epochs, mean training loss {result.training_loss:.4f}, "
            f"{result.metrics.get('train_runtime', 0):.0f} s on {'GPU' if torch.cuda.is_available() else 'CPU'}."
        )

    def evaluate(trained):
        """Log-perplexity of the reference summaries, and ROUGE of the `wikisum` pipeline on a sample."""
        log_perplexity = summary_log_perplexity(trained, [features(example) for example in eval_examples])
        sample = take_evenly(eval_groups, args.eval_generate_samples)
        scores = pipeline_rouge(
            trained,
            tokenizer,
            [{"title": example["title"], "documents": example["documents"]} for example in sample],
            [example["summary"] for example in sample],
            ranker=args.ranker,
            max_input_tokens=args.max_input_tokens,
        )
        results = {
            **scores,
            "summary_log_perplexity": log_perplexity,
            "perplexity_examples": len(eval_examples),
            "rouge_examples": len(sample),
        }
        setting = (
            f"Log-perplexity of the reference summary tokens (nats per WordPiece) on {len(eval_examples)} untouched "
            f"validation examples: {log_perplexity:.3f} (perplexity {math.exp(log_perplexity):.1f}). ROUGE of the "
            f"`wikisum` pipeline's summaries ({args.ranker} ranking of {args.ranking_unit}s, "
            f"L={args.max_input_tokens}, the shipped generation config: "
            f"{decoding_settings(trained.generation_config)}) on {len(sample)} "
            "validation examples (the first of each file in turn)"
        )
        return scores, setting, results

    final = finish_training(trainer, tokenizer, training_args, card_info, push, evaluate if eval_examples else None)
    if final is not None and args.ship_to:
        logger.info("fp16 checkpoint: %s", write_fp16_copy(final, Path(args.ship_to)))


if __name__ == "__main__":
    main()
