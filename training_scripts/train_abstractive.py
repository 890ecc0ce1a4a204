"""Fine-tune an encoder-decoder summarizer (BertSumExtAbs, the sentence planner or the CopyTransformer) with the
Trainer.

    accelerate launch training_scripts/train_abstractive.py --model_type sentence_planner \
        --train_file ../shared/data/cnn_dailymail/train_large.jsonl.gz \
        --validation_file ../shared/data/cnn_dailymail/validation_large.jsonl.gz \
        --train_split train --eval_split "validation[1000:1200]" --output_dir runs/planner

Documents are read in the BERTSum layout by the model's processor (as its pipeline reads them); summaries become
`sentence [unused2] sentence ... [unused1]` (at most --max_target_length tokens). The loss is label-smoothed
cross-entropy (plus the planner's guidance loss); the pretrained encoder and the new decoder get separate learning
rates (--encoder_learning_rate, --learning_rate), as in BertSumExtAbs. Evaluation runs the
`abstractive-summarization` pipeline on the eval split and reports ROUGE. Resumes from the newest checkpoint in
--output_dir.

--decoder_init encoder (the default here) starts the decoder's self-attention and feed-forward from the encoder's
layers (BERT2BERT; LoRA adapts them, the cross-attention is new); --decoder_init random is the paper's baseline (the
decoder trains in full). With --frozen_layers K the encoder's bottom K layers stay as pretrained and their states are
cached once per document (see `sumformers.frozen_layers`; the cache file of the extractive script is reused when the
documents match).

--model_type copy_transformer trains the CopyTransformer (Aksenov et al. 2020) in full from scratch (no LoRA, one
learning rate; the decoder flags above do not apply): its settings come from --config_overrides, a JSON object of
`CopyTransformerConfig` fields, so that each variant of the paper's tables is one command, e.g.
`--config_overrides '{"convolution": "1d", "convolution_layers": 1}'` or
`'{"encoder_input": "bert_concat", "decoder_embeddings": "bert", "max_source_positions": 2048}'`. Its vocabulary is
the tokenizer of --model_name_or_path, which is also the frozen BERT of the "bert_*" inputs (unless the overrides name
`bert_name_or_path`); that BERT is not saved with the checkpoints (`from_pretrained` reloads it). With
--bert_feature_cache FILE the BERT-conditioned variants do not run the frozen BERT in every step: its windowed features
of every training document are computed once (bfloat16, one ragged memory-mapped FILE keyed on the BERT, the windows
and the documents' tokens; see `sumformers.frozen_layers`) and reused by later runs, of any BERT-conditioned variant,
over the same documents and BERT.
"""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sumformers import (
    BertSumAbsForConditionalGeneration,
    CopyTransformerConfig,
    CopyTransformerForConditionalGeneration,
    SentencePlannerForConditionalGeneration,
)
from sumformers.frozen_layers import check_bert_feature_cache, train_over_cached_bert_features, train_over_cached_states
from sumformers.training import (
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
    take_push_to_hub,
    train,
    trained_length,
    training_source,
)

logger = logging.getLogger("train_abstractive")
MODEL_CLASSES = {
    "bertsumabs": BertSumAbsForConditionalGeneration,
    "sentence_planner": SentencePlannerForConditionalGeneration,
    "copy_transformer": CopyTransformerForConditionalGeneration,
}


@dataclass
class AbstractiveArguments:
    model_type: str = field(default="bertsumabs", metadata={"choices": list(MODEL_CLASSES)})
    decoder_init: str = field(
        default="encoder",
        metadata={"help": "encoder: decoder layers start from the encoder's (BERT2BERT); random: the paper's baseline",
                  "choices": ["encoder", "random"]},
    )
    decoder_layers: int = field(default=6)
    decoder_ffn_dim: int | None = field(default=None, metadata={"help": "default: the encoder's intermediate size"})
    guidance_weight: float = field(default=1.0, metadata={"help": "sentence planner: weight of the guidance loss"})
    encoder_learning_rate: float | None = field(
        default=None, metadata={"help": "learning rate of the encoder's parameters (default: --learning_rate / 10)"}
    )
    max_length: int = field(default=512, metadata={"help": "document tokens"})
    max_target_length: int = field(default=140, metadata={"help": "summary tokens in training (PreSumm: 140)"})
    frozen_layers: int = field(default=0, metadata={"help": "bottom encoder layers kept frozen and cached"})
    bottom_state_cache: str | None = field(default=None, metadata={"help": "file of the cached bottom-layer states"})
    bert_feature_cache: str | None = field(
        default=None,
        metadata={"help": "copy_transformer with a frozen BERT: file of its cached windowed features (reused when the "
                          "BERT, windows and documents match)"},
    )
    num_beams: int = field(default=5, metadata={"help": "evaluation: beam size"})
    preprocessing_only: bool = field(
        default=False,
        metadata={"help": "map the training features into datasets' cache, then stop: runs in parallel on the same "
                          "documents read them instead of each mapping them"},
    )
    config_overrides: str | None = field(
        default=None, metadata={"help": "copy_transformer: a JSON object of CopyTransformerConfig fields"}
    )


def build_features(example, processor, multiple_documents, columns, max_length, max_target_length):
    return processor.training_features(
        model_input(example[columns.text_column], multiple_documents),
        example[columns.summary_column],
        max_length=max_length,
        max_target_length=max_target_length,
    )


def optimizer_with_two_rates(model, decoder_rate: float, encoder_rate: float, weight_decay: float):
    """AdamW with the encoder's trainable parameters at `encoder_rate` and every other one at `decoder_rate`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    encoder_ids = {id(parameter) for parameter in base.encoder.parameters()}
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    groups = [
        {"params": [p for p in trainable if id(p) in encoder_ids], "lr": encoder_rate},
        {"params": [p for p in trainable if id(p) not in encoder_ids], "lr": decoder_rate},
    ]
    groups = [group for group in groups if group["params"]]
    return torch.optim.AdamW(groups, weight_decay=weight_decay)


def copy_transformer_settings(abstractive_args: AbstractiveArguments) -> dict:
    """--config_overrides as a dict of CopyTransformerConfig fields (checked by building the config once)."""
    try:
        settings = json.loads(abstractive_args.config_overrides or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"--config_overrides is not valid JSON: {error}") from None
    if not isinstance(settings, dict):
        raise ValueError(f"--config_overrides must be a JSON object of CopyTransformerConfig fields, got {settings!r}")
    if abstractive_args.frozen_layers:
        raise ValueError("--frozen_layers caches a pretrained encoder's layers; the CopyTransformer trains in full")
    CopyTransformerConfig(**settings)  # a wrong field or value fails here, before any data is read
    return settings


def new_copy_transformer(encoder: str, tokenizer, settings: dict) -> CopyTransformerForConditionalGeneration:
    """A new CopyTransformer over the vocabulary of `tokenizer` (the encoder's); its BERT-conditioned variants read
    the frozen encoder `encoder` (or the settings' `bert_name_or_path`)."""
    from sumformers.modeling.pretrained_encoder import portable_encoder_name

    settings = dict(settings, vocab_size=tokenizer.vocab_size, encoder_name_or_path=portable_encoder_name(encoder))
    if CopyTransformerConfig(**settings).uses_bert:
        return CopyTransformerForConditionalGeneration.from_encoder(settings.pop("bert_name_or_path", encoder),
                                                                    **settings)
    return CopyTransformerForConditionalGeneration(CopyTransformerConfig(**settings))


def main():
    model_args, data_args, training_args, abstractive_args = parse_arguments(AbstractiveArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    if abstractive_args.bert_feature_cache and abstractive_args.model_type != "copy_transformer":
        raise ValueError("--bert_feature_cache caches the frozen BERT of --model_type copy_transformer")
    push = take_push_to_hub(training_args)
    train_dataset, eval_dataset = load_splits(data_args)

    source = model_args.model_name_or_path
    if abstractive_args.model_type == "copy_transformer":
        return train_copy_transformer(source, (train_dataset, eval_dataset), abstractive_args, data_args,
                                      training_args, push)
    model_class = MODEL_CLASSES[abstractive_args.model_type]
    settings = dict(
        encoder_name_or_path=source,
        decoder_init=abstractive_args.decoder_init,
        decoder_layers=abstractive_args.decoder_layers,
        decoder_ffn_dim=abstractive_args.decoder_ffn_dim,
    )
    if abstractive_args.model_type == "sentence_planner":
        settings["guidance_weight"] = abstractive_args.guidance_weight
    model, tokenizer = model_and_tokenizer(
        source, lambda encoder, tokenizer: model_class.from_encoder(encoder, tokenizer=tokenizer, **settings)
    )
    frozen = abstractive_args.frozen_layers
    if frozen and not model_args.lora_layers:  # adapt only the encoder layers that run in training
        layers = range(frozen, model.config.encoder_config.num_hidden_layers)
        model_args.lora_layers = ",".join(str(index) for index in layers)
    processor = model.processor_class(tokenizer, model.config)
    abstractive_args.max_length = min(abstractive_args.max_length, model.config.max_position_embeddings)
    full_modules = ("decoder",) if model.config.decoder_init == "random" else ()
    model = apply_lora(model, model_args, full_modules=full_modules)

    card_info, features = card_info_and_features(
        train_dataset, processor, data_args, training_args, abstractive_args.max_length,
        abstractive_args.max_target_length,
    )
    if abstractive_args.preprocessing_only:
        return
    collate = processor.collate
    if features is not None and frozen:
        features, collate = train_over_cached_states(
            model, features, collate, frozen, abstractive_args.bottom_state_cache, training_args
        )
    encoder_rate = abstractive_args.encoder_learning_rate or training_args.learning_rate / 10
    optimizer = optimizer_with_two_rates(model, training_args.learning_rate, encoder_rate, training_args.weight_decay)
    trainer, result = train(model, training_args, features, collate, optimizer=optimizer, tokenizer=tokenizer)
    if result is not None:
        card_info["training"] = (
            f"{len(features)} documents from {training_source(data_args)} (lowercased text), "
            f"{trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation, learning rates {training_args.learning_rate} "
            f"(decoder and new modules) / {encoder_rate} (encoder), {lora_summary(model_args)}, "
            f"decoder_init="
            f"{abstractive_args.decoder_init}, {abstractive_args.decoder_layers} decoder layers, max "
            f"{abstractive_args.max_length} document / {abstractive_args.max_target_length} summary tokens, "
            f"{f'bottom {frozen} encoder layers frozen (states cached in bfloat16), ' if frozen else ''}"
            f"label smoothing {model.config.label_smoothing}"
            f"{f', guidance weight {model.config.guidance_weight}' if hasattr(model.config, 'guidance_weight') else ''}"
            f"; {final_training_loss(trainer, result)}."
        )

    evaluate = evaluation(tokenizer, eval_dataset, data_args, abstractive_args)
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


def card_info_and_features(train_dataset, processor, data_args, training_args, max_length, max_target_length):
    """The run's new card info, and the training features when training (None otherwise)."""
    datasets = [data_args.dataset_name or Path(data_args.train_file or data_args.validation_file).parent.name]
    card_info = new_card_info(training_args, data_args, datasets)
    if not training_args.do_train or train_dataset is None:
        return card_info, None
    features = map_training_features(
        train_dataset, build_features, training_args, data_args, processor, False,
        max_length=max_length, max_target_length=max_target_length,
    )
    return card_info, features


def evaluation(tokenizer, eval_dataset, data_args, abstractive_args):
    return dataset_evaluation(
        tokenizer,
        eval_dataset,
        data_args,
        f"beam {abstractive_args.num_beams}, the model's length settings, word trigram blocking",
        batch_size=8,
        num_beams=abstractive_args.num_beams,
    )


def train_copy_transformer(source, splits, abstractive_args, data_args, training_args, push):
    """The CopyTransformer trained in full (no LoRA, one learning rate), its settings from --config_overrides."""
    settings = copy_transformer_settings(abstractive_args)
    train_dataset, eval_dataset = splits
    model, tokenizer = model_and_tokenizer(source, lambda encoder, tok: new_copy_transformer(encoder, tok, settings))
    cache = abstractive_args.bert_feature_cache
    if cache:
        check_bert_feature_cache(model.config)
    processor = model.processor_class(tokenizer, model.config)
    max_length = min(abstractive_args.max_length, model.config.max_source_positions)
    card_info, features = card_info_and_features(
        train_dataset, processor.features_processor(), data_args, training_args, max_length,
        abstractive_args.max_target_length,
    )
    if abstractive_args.preprocessing_only:
        return
    collate = processor.collate
    if features is not None and cache:
        features, collate = train_over_cached_bert_features(model, features, collate, cache, training_args)
    trainer, result = train(model, training_args, features, collate, tokenizer=tokenizer)
    if result is not None:
        config = model.config
        variant = (f"encoder_input={config.encoder_input}, decoder_embeddings={config.decoder_embeddings}, "
                   f"convolution={config.convolution}")
        if config.convolution != "none":
            variant += (f" ({config.convolution_layers} layers, window {config.convolution_window}, head window "
                        f"{config.convolution_head_window})")
        card_info["training"] = (
            f"{len(features)} documents from {training_source(data_args)} (lowercased text), "
            f"{trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation, learning rate {training_args.learning_rate}, "
            f"trained in full from scratch ({variant}; d_model {config.d_model}, {config.encoder_layers} + "
            f"{config.decoder_layers} layers), max {max_length} document / {abstractive_args.max_target_length} "
            f"summary tokens, {'frozen BERT features cached in bfloat16, ' if cache else ''}label smoothing "
            f"{config.label_smoothing}; "
            f"{final_training_loss(trainer, result)}."
        )
    evaluate = evaluation(tokenizer, eval_dataset, data_args, abstractive_args)
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


if __name__ == "__main__":
    main()
