"""Fine-tune a BERTSum-style extractive summarizer with the Trainer.

    accelerate launch training_scripts/train_extractive.py \
        --train_file ../shared/data/cnn_dailymail/train.jsonl \
        --validation_file ../shared/data/cnn_dailymail/validation.jsonl \
        --train_split "train+validation[300:]" --eval_split "validation[:300]" --output_dir runs/bertsum

Documents are featurized by the model's own processor, as its pipeline does, and labelled by the greedy oracle
(ROUGE-1 F + ROUGE-2 F) over the sentences that fit, or by Oracle (Full) over the whole document (--oracle full);
evaluation runs the `extractive-summarization` pipeline on the eval split and reports ROUGE. Resumes from the newest
checkpoint in --output_dir.

With --frozen_layers K the encoder's bottom K layers stay as pretrained: their token states are computed once per
document (bfloat16, in a memory-mapped --bottom_state_cache file reused by later runs) and each step runs only the
top layers (LoRA) and the new ones. --attention_dropout 0 lets CPU training use PyTorch's fused attention kernel
(dropout on attention probabilities forces the materialized path, about 3x slower on 2 cores).
"""

import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from torch.nn import Dropout

from sumformers import BertSumForExtractiveSummarization
from sumformers.configuration.summarizer_config import DEFAULT_SUMMARY_SENTENCES
from sumformers.feature_files import load_features, read_header
from sumformers.frozen_layers import train_over_cached_states
from sumformers.text.scoring import greedy_oracle
from sumformers.training import (
    FeatureFileArguments,
    apply_lora,
    dataset_evaluation,
    final_training_loss,
    finish_training,
    load_splits,
    lora_summary,
    map_training_features,
    model_and_tokenizer,
    model_input,
    new_card_info,
    parse_arguments,
    subset_description,
    take_push_to_hub,
    train,
    trained_length,
    training_source,
    training_subset,
)

logger = logging.getLogger("train_extractive")


@dataclass
class ExtractiveArguments(FeatureFileArguments):
    max_length: int = field(default=512, metadata={"help": "Input tokens (at most the encoder's limit)."})
    num_sentences: int = field(
        default=DEFAULT_SUMMARY_SENTENCES["extractive"],
        metadata={"help": "Summary length used for evaluation and saved as default."},
    )
    trigram_blocking: bool = field(default=True)
    inter_sentence_layers: int = field(default=2)
    frozen_layers: int = field(
        default=0, metadata={"help": "Keep the encoder's bottom K layers frozen and cache their token states."}
    )
    bottom_state_cache: str | None = field(
        default=None, metadata={"help": "File of the cached bottom-layer states (with --frozen_layers)."}
    )
    attention_dropout: float | None = field(
        default=None, metadata={"help": "Encoder attention-probability dropout (default: the encoder's own)."}
    )


def build_features(example, processor, multiple_documents, columns, max_length):
    """One document through the model's processor, labelled by the --oracle: the greedy oracle over the sentences it
    kept, or Oracle (Full) over the whole document."""
    metric = "full" if columns.oracle == "full" else "r1+r2"
    return processor.training_features(
        model_input(example[columns.text_column], multiple_documents),
        partial(greedy_oracle, reference=example[columns.summary_column], metric=metric),
        max_length=max_length,
        oracle_over_document=columns.oracle == "full",
    )


def main():
    model_args, data_args, training_args, extractive_args = parse_arguments(ExtractiveArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    has_data = data_args.dataset_name or data_args.train_file or data_args.validation_file
    train_dataset, eval_dataset = load_splits(data_args) if has_data else (None, None)
    # sentences cut as the feature file's were, so that the model reads at inference what it was trained on
    limits = {}
    if extractive_args.features_file:
        header = read_header(extractive_args.features_file)
        limits = {name: header[name] for name in ("max_sentence_tokens", "min_sentence_tokens")}

    source = model_args.model_name_or_path
    model, tokenizer = model_and_tokenizer(
        source,
        lambda encoder, _: BertSumForExtractiveSummarization.from_encoder(
            encoder,
            encoder_name_or_path=source,
            inter_sentence_layers=extractive_args.inter_sentence_layers,
            num_sentences=extractive_args.num_sentences,
            trigram_blocking=extractive_args.trigram_blocking,
            **limits,
        ),
    )
    if extractive_args.attention_dropout is not None:
        model.config.encoder_config.attention_probs_dropout_prob = extractive_args.attention_dropout
        for module in model.encoder.modules():  # BERT-style self-attention keeps its probability dropout here
            if "SelfAttention" in type(module).__name__ and isinstance(getattr(module, "dropout", None), Dropout):
                module.dropout.p = extractive_args.attention_dropout
    frozen = extractive_args.frozen_layers
    if frozen and not model_args.lora_layers:  # adapt only the layers that run in training
        layers = range(frozen, model.config.encoder_config.num_hidden_layers)
        model_args.lora_layers = ",".join(str(index) for index in layers)
    processor = model.processor_class(tokenizer, model.config)
    extractive_args.max_length = min(extractive_args.max_length, model.config.max_position_embeddings)
    multiple_documents = model.reads_multiple_documents
    model = apply_lora(model, model_args)

    data_file = data_args.train_file or data_args.validation_file
    datasets = [data_args.dataset_name or (Path(data_file).parent.name if data_file else "local-jsonl")]
    card_info = new_card_info(training_args, data_args, datasets)
    features, trained_on = None, None
    if training_args.do_train and extractive_args.features_file:
        features = training_subset(load_features(
            extractive_args.features_file, expected={"oracle": data_args.oracle}, max_length=extractive_args.max_length
        ), data_args)
        trained_on = header["source"] + subset_description(data_args)
    elif training_args.do_train and train_dataset is not None:
        features = map_training_features(
            train_dataset, build_features, training_args, data_args, processor, multiple_documents,
            max_length=extractive_args.max_length,
        )
        trained_on = training_source(data_args)
    collate = processor.collate
    if features is not None and frozen:
        features, collate = train_over_cached_states(
            model, features, collate, frozen, extractive_args.bottom_state_cache, training_args
        )
    trainer, result = train(
        model, training_args, features, collate, tokenizer=tokenizer, max_seconds=extractive_args.max_train_seconds
    )
    if result is not None:
        sentence_cut = f" (sentences of at most {limits['max_sentence_tokens']} word pieces)" if limits else ""
        card_info["training"] = (
            f"{len(features)} documents from {trained_on}, "
            f"{trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes, learning rate "
            f"{training_args.learning_rate}, {lora_summary(model_args)}, "
            f"max {extractive_args.max_length} tokens{sentence_cut}, "
            f"{f'bottom {frozen} encoder layers frozen (states cached in bfloat16), ' if frozen else ''}"
            f"attention dropout {model.config.encoder_config.attention_probs_dropout_prob}, "
            f"{'Oracle (Full) labels, whole document' if data_args.oracle == 'full' else 'greedy-oracle labels'}; "
            f"{final_training_loss(trainer, result)}."
        )

    evaluate = dataset_evaluation(
        tokenizer,
        eval_dataset,
        data_args,
        f"top {extractive_args.num_sentences} sentences, trigram blocking {extractive_args.trigram_blocking}",
        batch_size=8,
        num_sentences=extractive_args.num_sentences,
        trigram_blocking=extractive_args.trigram_blocking,
    )
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


if __name__ == "__main__":
    main()
