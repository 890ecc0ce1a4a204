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
paper's T-D objective), or with `--loss_on summary` on the summary tokens alone (all of a small budget's signal on the
summary). The title is the dataset's topic or product name: QMSum's topic list, FewSum's product
category; CNN/DM has none (tf-idf against no title keeps the article's order, the lead; TextRank and SumBasic need
no title). With `--ranking_unit sentence` the rankers rank sentences instead of paragraphs (CNN/DM articles have no
paragraph breaks). With `--qmsum_specific_queries`, every QMSum query/answer pair is one more example with the query
as its title.

`--decoder_init random` (the paper's): from scratch, its word embeddings from a PCA of the encoder's given by
--model_name_or_path (MiniLM by default), trained in full. `--decoder_init encoder`: the whole decoder starts from that
encoder (`WikiSumForCausalLM.from_encoder`: its vocabulary, embeddings and layers, so --hidden_size,
--embedding_size, --intermediate_size and --num_attention_heads are the encoder's); trained in full by default, or with
`--use_lora` as a small adapter checkpoint: LoRA (--lora_r 16, --lora_alpha 32 on
--lora_target_modules q_proj,k_proj,v_proj,o_proj,up,down by default, --lora_layers to restrict the layers) on the
copied layers, the parts without a counterpart in the encoder (`WikiSumForCausalLM.new_modules`: the projections to
and from the embedding width, the compressed layers' convolutions and null slots, the experts' routers) trained in
full; `<output_dir>/final` then holds only those in fp16, and loading rebuilds the decoder from the encoder. Or
training continues (in full) from a saved WikiSum model.

`--start_from` a trained WikiSum model continues from it under this run's layout (`--attention_layers`,
`--moe_layers`, ...), so that T-D, T-DMCA and T-DMCA with experts start from one trained decoder (the perplexity part
of benchmarks/wikisum.py; trained in full):

    OMP_NUM_THREADS=1 python training_scripts/train_wikisum.py --start_from runs/wikisum-cnndm-copy-s16/final \
        --attention_layers full,full,full,full,full --train_file ../shared/data/qmsum/train.jsonl \
        --max_input_tokens 2048 --loss_on summary --output_dir runs/wikisum-qmsum-td --max_steps 500 --do_train

Decoding settings are saved in the generation config and named on the model card: --num_beams and --length_penalty
under --length_penalty_type (gnmt, the paper's: ((5 + |Y|) / 6) ** alpha), and n-gram blocking only when
--no_repeat_ngram_size is given, with --no_repeat_ngram_reason (the card says why the model needs it).

Evaluation: log-perplexity of the summary tokens and ROUGE of the `wikisum` pipeline's summaries on the validation
files. `--ship_to DIR` also writes the final model with fp16 weights (a small shippable checkpoint). Resumes from the
newest checkpoint in --output_dir.
"""

import logging
import math
import random
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from transformers import GenerationConfig

from sumformers import WikiSumConfig, WikiSumForCausalLM
from sumformers.cards import decoding_settings
from sumformers.generation.length_penalty import resolve_length_penalty_type
from sumformers.hub import is_sumformers_model, load_model, load_tokenizer, save_fp16_copy
from sumformers.modeling.pretrained_encoder import portable_encoder_name
from sumformers.processing.processing_wikisum import read_wikisum_examples, sentence_lines
from sumformers.training import (
    ModelArguments,
    apply_lora,
    final_training_loss,
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
    position_embeddings: str = field(
        default="timing",
        metadata={
            "help": "timing: the sinusoidal signal (the paper's, any length); learned: a learned table, with "
            "--decoder_init encoder the encoder's own (at most its 512 positions, input and summary together)."
        },
    )
    start_from: str | None = field(
        default=None,
        metadata={
            "help": "A trained WikiSum model (folder) to continue from under this run's layout (--attention_layers, "
            "--moe_layers, --local_block_size, --max_input_tokens; its other settings kept): T-D, T-DMCA and MoE "
            "variants compared from one start (`WikiSumForCausalLM.from_trained_decoder`). Replaces "
            "--model_name_or_path."
        },
    )
    copy_mechanism: bool = field(
        default=False,
        metadata={
            "help": "Add a pointer-generator head (not in the paper): summary tokens mix copying from the input with "
            "the vocabulary; trained in full (a new module) beside LoRA."
        },
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
    loss_on: str = field(
        default="all",
        metadata={"help": "all: every token, input and summary (the paper's); summary: the summary tokens alone."},
    )
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
    no_repeat_ngram_size: int | None = field(
        default=None,
        metadata={
            "help": "Block repeated n-grams of WordPieces: saved in the generation config only when given (not the "
            "paper's), and named on the card with --no_repeat_ngram_reason."
        },
    )
    no_repeat_ngram_reason: str | None = field(
        default=None, metadata={"help": "Why the model needs --no_repeat_ngram_size (required with it; on the card)."}
    )
    eval_generate_samples: int = field(default=20, metadata={"help": "Validation examples summarized for ROUGE."})
    ship_to: str | None = field(default=None, metadata={"help": "Also write the final model with fp16 weights here."})


def read_files(paths: str | None, specific_queries: bool = False, ranking_unit: str = "paragraph") -> list[list[dict]]:
    """The examples of each comma-separated file."""
    return [read_wikisum_examples(path, specific_queries, ranking_unit) for path in (paths or "").split(",") if path]


def one_sentence_a_line(examples: list[dict]) -> None:
    """Rewrite the examples' documents one sentence a line (`sentence_lines`), each distinct documents list once:
    QMSum's query examples share their meeting's."""
    split = {}
    for example in examples:
        documents = example["documents"]
        if id(documents) not in split:
            split[id(documents)] = (documents, sentence_lines(documents))  # the original kept: its id stays unique
        example["documents"] = split[id(documents)][1]


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


def layout_settings(args: WikiSumArguments) -> dict:
    """The config settings of this run's layout: a new decoder's, or a --start_from model's new ones."""
    return dict(
        attention_layers=[name.strip() for name in args.attention_layers.split(",")],
        local_block_size=args.local_block_size,
        moe_layers=[int(index) for index in args.moe_layers.split(",") if index.strip()],
        num_experts=args.num_experts,
        num_experts_per_token=args.num_experts_per_token,
        hidden_dropout=args.hidden_dropout,
        max_input_tokens=args.max_input_tokens,
        # the pipeline's default, so that a plain article is ranked as the training documents were
        ranking_unit=args.ranking_unit,
    )


def new_model(encoder: str, tokenizer, source: str, args: WikiSumArguments) -> WikiSumForCausalLM:
    """A new decoder: with --decoder_init encoder, the encoder's (its vocabulary, sizes and layers), else one with
    `args`' shape, its word embeddings from `encoder`'s (PCA), `tokenizer`'s special tokens."""
    if tokenizer.mask_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError("the tokenizer needs a mask token (the input/summary separator) and a sep token")
    layout = dict(
        **layout_settings(args),
        position_embeddings=args.position_embeddings,
        copy_mechanism=args.copy_mechanism,
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


def relayout(path: str, args: WikiSumArguments) -> WikiSumForCausalLM:
    """The trained model at `path` under `args`' layout (--start_from)."""
    if not is_sumformers_model(path):
        raise ValueError(f"--start_from needs a trained WikiSum model folder, got {path!r}")
    trained = load_model(path)
    if not isinstance(trained, WikiSumForCausalLM):
        raise ValueError(f"--start_from needs a WikiSum model, {path!r} holds a {type(trained).__name__}")
    model = WikiSumForCausalLM.from_trained_decoder(trained, **layout_settings(args))
    model.set_attn_implementation("blocked")  # memory linear in length on CPU, as new_model's
    return model


def generation_config(model_config: WikiSumConfig, args: WikiSumArguments) -> GenerationConfig:
    """The decoding settings saved with the model: beam, length penalty and its formula, summary length, and
    n-gram blocking only when --no_repeat_ngram_size is given (with its --no_repeat_ngram_reason)."""
    resolve_length_penalty_type(args.length_penalty_type)  # a wrong name fails now, not at evaluation
    blocking = {}
    if args.no_repeat_ngram_size:
        if not (args.no_repeat_ngram_reason or "").strip():
            raise ValueError(
                "--no_repeat_ngram_size needs --no_repeat_ngram_reason: the model card says why the model blocks "
                "repeated n-grams (the paper does not)"
            )
        blocking["no_repeat_ngram_size"] = args.no_repeat_ngram_size
    return GenerationConfig(
        num_beams=args.num_beams,
        length_penalty=args.length_penalty,
        length_penalty_type=args.length_penalty_type,
        max_new_tokens=args.max_new_tokens,
        bos_token_id=model_config.bos_token_id,
        eos_token_id=model_config.eos_token_id,
        pad_token_id=model_config.pad_token_id,
        **blocking,
    )


def adapt_with_lora(model: WikiSumForCausalLM, model_args: ModelArguments):
    """With --use_lora, `model` wrapped with LoRA on its copied layers and its new modules trained in full
    (`apply_lora`, which refuses a saved model), else `model` itself (trained in full)."""
    if not model_args.use_lora:
        return model
    if model.config.decoder_init != "encoder":
        raise ValueError("--use_lora needs --decoder_init encoder: a decoder started from scratch trains in full")
    return apply_lora(model, model_args)


def describe_training_scope(model, model_args: ModelArguments) -> str:
    """What trained, for the card: everything, or LoRA and the new modules (an adapter checkpoint)."""
    if not model_args.use_lora:
        return "all weights trained"
    new = ", ".join(model.peft_config["default"].modules_to_save)
    trainable, _ = model.get_nb_trainable_parameters()
    layers = f"layers {model_args.lora_layers}" if model_args.lora_layers else "every layer"
    return (
        f"LoRA r={model_args.lora_r} (alpha {model_args.lora_alpha}) on {model_args.lora_target_modules} of "
        f"{layers} and the parts without a counterpart in the encoder trained in full ({new}): "
        f"{trainable / 1e6:.2f}M trainable parameters (the training's checkpoint holds only these, in fp16, and "
        "loading rebuilds the rest from the encoder; `sumformers export` merges them)"
    )


def describe_start(config: WikiSumConfig, start_from: str | None = None) -> str:
    """How the decoder started, for the card."""
    start = describe_initialisation(config)
    if start_from:
        start = (
            f"continued from the trained model {start_from} under this layout (weights copied by name, experts "
            f"upcycled from its feed-forward blocks, compressed layers new to it started as stride averages), which "
            + start
        )
    if config.copy_mechanism:
        start += "; with a pointer-generator copy head over the input (not in the paper), trained from scratch"
    return start


def describe_initialisation(config: WikiSumConfig) -> str:
    if config.decoder_init == "encoder":
        positions = (
            f"the encoder's learned positions ({config.max_position_embeddings})"
            if config.position_embeddings == "learned"
            else "positions from the scaled timing signal"
        )
        return (
            f"started from {config.encoder_name_or_path} (vocabulary, word embeddings and every layer copied, decoder "
            f"layer i from encoder layer {config.encoder_layer_map}[i]; post-norm as BERT; compressed layers' "
            f"convolutions started as stride averages; {positions})"
        )
    return "trained from scratch (word embeddings from a PCA of MiniLM's)"


def main():
    # LoRA only on request here (--use_lora, with --decoder_init encoder), over all six projections of every layer
    model_args, data_args, training_args, args = parse_arguments(
        WikiSumArguments,
        use_lora=False,
        lora_r=16,
        lora_alpha=32,
        lora_target_modules="q_proj,k_proj,v_proj,o_proj,up,down",
    )
    if args.loss_on not in ("all", "summary"):  # before minutes of reading and tokenizing
        raise ValueError(f"--loss_on must be all or summary, got {args.loss_on!r}")
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    source = model_args.model_name_or_path
    if args.start_from:
        model, tokenizer = relayout(args.start_from, args), load_tokenizer(args.start_from)
    else:
        model, tokenizer = model_and_tokenizer(
            source, lambda encoder, tokenizer: new_model(encoder, tokenizer, source, args)
        )
    model.generation_config = generation_config(model.config, args)
    config, parameters = model.config, sum(p.numel() for p in model.parameters())
    logger.info("%s: %.2fM parameters", config.variant, parameters / 1e6)
    processor = model.processor_class(tokenizer, config)
    model = adapt_with_lora(model, model_args)

    def features(example: dict) -> dict:
        return processor.training_features(example, args.max_summary_tokens, args.ranker, args.max_input_tokens)

    # read as paragraphs and split into sentences after sampling: splitting all of CNN/DM takes about ten minutes
    train_examples = [
        example for group in read_files(data_args.train_file, args.qmsum_specific_queries) for example in group
    ]
    eval_groups = read_files(data_args.validation_file, ranking_unit=args.ranking_unit)
    eval_examples = take_evenly(eval_groups, data_args.max_eval_samples or sum(map(len, eval_groups)))
    if data_args.max_train_samples:
        train_examples = random.Random(training_args.seed).sample(
            train_examples, min(data_args.max_train_samples, len(train_examples))
        )
    if args.ranking_unit == "sentence":
        one_sentence_a_line(train_examples)
    card_info = {
        "model_name": Path(args.ship_to or training_args.output_dir).name,
        "datasets": dataset_names(data_args.train_file) or ["qmsum", "fewsum"],
        "dataset_name": " + ".join(dataset_names(data_args.validation_file or data_args.train_file)) + " (validation)",
        "split": "validation",
        "decoding": decoding_settings(model.generation_config, args.no_repeat_ngram_reason),
    }

    encoded = None
    if training_args.do_train:
        if not train_examples:
            raise ValueError("give --train_file (comma-separated JSONL files)")
        with training_args.main_process_first(desc="ranking and tokenizing"):
            encoded = [features(example) for example in train_examples]
    collate = partial(processor.collate, summary_loss_only=args.loss_on == "summary")
    trainer, result = train(model, training_args, encoded, collate, tokenizer=tokenizer)
    if result is not None:
        tokens = sum(len(item["input_ids"]) + len(item["summary_ids"]) for item in encoded)
        card_info["training"] = (
            f"{config.variant} ({', '.join(config.attention_layers)}; hidden {config.hidden_size}, "
            f"embeddings {config.embedding_size} tied, {parameters / 1e6:.1f}M parameters) "
            f"{describe_start(config, args.start_from)}; "
            f"{describe_training_scope(model, model_args)}; trained on {len(encoded)} examples ({tokens} tokens) of "
            f"{data_args.train_file}; input = title + {args.ranker}-ranked {args.ranking_unit}s cut at "
            f"L={args.max_input_tokens} tokens; "
            f"{'loss on every token' if args.loss_on == 'all' else 'loss on the summary tokens alone'}; "
            f"{trainer.state.global_step} steps of batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation, learning rate {training_args.learning_rate}; "
            f"{trainer.state.epoch:.2f} epochs, {final_training_loss(trainer, result)} on "
            f"{'GPU' if torch.cuda.is_available() else 'CPU'}."
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
            ranking_unit="paragraph",  # the documents were laid out in --ranking_unit when read: rank them as given
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
            f"L={args.max_input_tokens}, the shipped generation config: {card_info['decoding']}) on {len(sample)} "
            "validation examples (the first of each file in turn)"
        )
        return scores, setting, results

    final = finish_training(trainer, tokenizer, training_args, card_info, push, evaluate if eval_examples else None)
    if final is not None and args.ship_to:
        logger.info("fp16 checkpoint: %s", save_fp16_copy(final, Path(args.ship_to)))


if __name__ == "__main__":
    main()
