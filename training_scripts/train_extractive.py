"""Fine-tune a BERTSum-style extractive summarizer with the Trainer.

    accelerate launch training_scripts/train_extractive.py \
        --train_file ../shared/data/cnn_dailymail/train.jsonl --validation_file ../shared/data/cnn_dailymail/validation.jsonl \
        --train_split "train+validation[300:]" --eval_split "validation[:300]" --output_dir runs/bertsum

Labels come from the greedy oracle (ROUGE-1 F + ROUGE-2 F); evaluation runs the `extractive-summarization` pipeline
on the eval split and reports ROUGE. Resumes from the newest checkpoint in --output_dir.
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoTokenizer, Trainer, pipeline

from sumformers import BertSumForExtractiveSummarization
from sumformers.modeling.pretrained_encoder import resolve_encoder
from sumformers.processing.sentence_layout import collate_sentence_batch, encode_sentences
from sumformers.hub import is_sumformers_model, load_model, load_tokenizer
from sumformers.text.scoring import greedy_oracle, rouge_scores
from sumformers.text.sentences import split_sentences
from sumformers.training import (
    apply_lora,
    document_text,
    load_splits,
    new_card_info,
    parse_arguments,
    record_evaluation,
    save_final_model,
    take_push_to_hub,
    train_resuming,
    trained_length,
)

logger = logging.getLogger("train_extractive")


@dataclass
class ExtractiveArguments:
    max_length: int = field(default=512, metadata={"help": "Input tokens (at most the encoder's limit)."})
    num_sentences: int = field(default=3, metadata={"help": "Summary length used for evaluation and saved as default."})
    trigram_blocking: bool = field(default=True)
    inter_sentence_layers: int = field(default=2)


def build_features(example, tokenizer, data_args, extractive_args):
    sentences = split_sentences(document_text(example[data_args.text_column]))
    encoded = encode_sentences(tokenizer, sentences, max_length=extractive_args.max_length, warn_on_truncation=False)
    chosen = set(greedy_oracle(sentences, example[data_args.summary_column]))
    encoded["labels"] = [float(index in chosen) for index in range(encoded["num_sentences"])]
    return encoded


def evaluate_rouge(model, tokenizer, dataset, data_args, extractive_args) -> dict:
    summarizer = pipeline("extractive-summarization", model=model, tokenizer=tokenizer, batch_size=8)
    documents = [document_text(value) for value in dataset[data_args.text_column]]
    outputs = summarizer(
        documents, num_sentences=extractive_args.num_sentences, trigram_blocking=extractive_args.trigram_blocking
    )
    return rouge_scores([output["summary"] for output in outputs], list(dataset[data_args.summary_column]))


def main():
    model_args, data_args, training_args, extractive_args = parse_arguments(ExtractiveArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    train_dataset, eval_dataset = load_splits(data_args)

    source = model_args.model_name_or_path
    if is_sumformers_model(source):
        model, tokenizer = load_model(source), load_tokenizer(source)  # continue from a sumformers model
    else:
        encoder = resolve_encoder(source)
        model = BertSumForExtractiveSummarization.from_encoder(
            encoder,
            encoder_name_or_path=source,
            inter_sentence_layers=extractive_args.inter_sentence_layers,
            num_sentences=extractive_args.num_sentences,
            trigram_blocking=extractive_args.trigram_blocking,
        )
        tokenizer = AutoTokenizer.from_pretrained(encoder)
    extractive_args.max_length = min(extractive_args.max_length, model.config.max_position_embeddings)
    model = apply_lora(model, model_args)

    datasets = [data_args.dataset_name or Path(data_args.train_file or data_args.validation_file).parent.name]
    card_info = new_card_info(training_args, data_args, datasets)
    if training_args.do_train and train_dataset is not None:
        with training_args.main_process_first(desc="oracle labels"):
            features = train_dataset.map(
                build_features,
                fn_kwargs=dict(tokenizer=tokenizer, data_args=data_args, extractive_args=extractive_args),
                remove_columns=train_dataset.column_names,
                desc="oracle labels",
            )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=features,
            data_collator=lambda batch: collate_sentence_batch(batch, tokenizer.pad_token_id),
        )
        result = train_resuming(trainer, training_args)
        card_info["training"] = (
            f"{len(features)} documents from `{data_args.train_split}` of "
            f"{data_args.dataset_name or data_args.train_file}, {trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes, learning rate "
            f"{training_args.learning_rate}, LoRA r={model_args.lora_r} on {model_args.lora_target_modules} "
            f"(use_lora={model_args.use_lora}), max {extractive_args.max_length} tokens, greedy-oracle labels; "
            f"final training loss {result.training_loss:.4f}, {result.metrics.get('train_runtime', 0):.0f} s."
        )
    else:
        trainer = Trainer(model=model, args=training_args)

    if not trainer.is_world_process_zero():
        return
    if training_args.do_eval and eval_dataset is not None:
        model.eval()
        scores = evaluate_rouge(trainer.model, tokenizer, eval_dataset, data_args, extractive_args)
        logger.info("eval ROUGE on %d documents: %s", len(eval_dataset), scores)
        setting = (
            f"{len(eval_dataset)} documents of `{data_args.eval_split}`, top {extractive_args.num_sentences} "
            f"sentences, trigram blocking {extractive_args.trigram_blocking}"
        )
        record_evaluation(card_info, training_args, scores, setting)
    if training_args.do_train:
        save_final_model(trainer, tokenizer, training_args, card_info, push=push)


if __name__ == "__main__":
    main()
