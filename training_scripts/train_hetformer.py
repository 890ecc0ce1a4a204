"""Fine-tune HetFormer (heterogeneous sparse attention, Liu et al. 2021) for long or multi-document extractive
summarization with the Trainer.

    accelerate launch training_scripts/train_hetformer.py \
        --train_file ../shared/data/qmsum/train.jsonl --validation_file ../shared/data/qmsum/validation.jsonl \
        --strip_markup --max_length 4096 --output_dir runs/hetformer-qmsum --do_train --do_eval

    # multi-document: a list-of-strings column is one input of several documents (document nodes, ROUGE-2 oracle)
    accelerate launch training_scripts/train_hetformer.py --text_column documents \
        --train_file ../shared/data/fewsum/train.jsonl --validation_file ../shared/data/fewsum/validation.jsonl ...

Inputs are split into sentences (pysbd), named entities are found with spaCy (when installed and
`--use_entities`), and documents longer than `--max_length` tokens are cut into consecutive chunks of whole
sentences, each a training example labelled by the greedy oracle over its own sentences (ROUGE-1 F + ROUGE-2 F for
one document, ROUGE-2 F for several, as in the paper). Evaluation runs the `extractive-summarization` pipeline on
whole inputs (up to `--eval_max_length` tokens) and reports ROUGE. Resumes from the newest checkpoint in
--output_dir.
"""

import logging
from dataclasses import dataclass, field

from datasets import Features, List, Value
from transformers import AutoTokenizer, Trainer, pipeline

from sumformers import HetFormerForExtractiveSummarization
from sumformers.modeling.pretrained_encoder import resolve_encoder
from sumformers.text.entities import entity_clusters, ner_available
from sumformers.hub import is_sumformers_model, load_model, load_tokenizer
from sumformers.processing.processing_hetformer import collate_hetformer_batch, encode_documents
from sumformers.text.scoring import greedy_oracle, rouge_scores
from sumformers.text.sentences import document_texts, split_sentences
from sumformers.training import (
    apply_lora,
    load_splits,
    new_card_info,
    parse_arguments,
    record_evaluation,
    save_final_model,
    take_push_to_hub,
    train_resuming,
    trained_length,
)

logger = logging.getLogger("train_hetformer")

# QMSum transcripts mark non-speech events inline ("{vocalsound}", "{disfmarker}", "{gap}").


@dataclass
class HetFormerArguments:
    max_length: int = field(default=4096, metadata={"help": "Tokens per training example (longer inputs are chunked)."})
    eval_max_length: int | None = field(default=None, metadata={"help": "Tokens at evaluation (default: the model's)."})
    max_position_embeddings: int = field(default=16384, metadata={"help": "Positions after tiling the encoder's."})
    num_sentences: int | None = field(
        default=None, metadata={"help": "Summary length for evaluation, saved as the model's default (3 / 9 multi-doc)."}
    )
    trigram_blocking: bool = field(default=True)
    attention_windows: str | None = field(
        default=None, metadata={"help": "Comma-separated two-sided window per layer (default: 32 growing to 512)."}
    )
    use_sentence_nodes: bool = field(default=True)
    use_entities: bool = field(default=True, metadata={"help": "Entity-to-entity attention (needs spaCy)."})
    use_document_nodes: bool = field(default=True)
    attention_dropout: float = field(
        default=0.0, metadata={"help": "Attention-probability dropout (0: CPU SDPA has no fused kernel with dropout)."}
    )
    strip_markup: bool = field(default=False, metadata={"help": "Remove {vocalsound}-style transcript markup."})
    chunk_long_documents: bool = field(
        default=True, metadata={"help": "Train on every max_length chunk of a long document, not only the first."}
    )


PREPARED_FEATURES = Features(
    {
        "sentence_lists": List(List(Value("string"))),
        # per document, per sentence: (start_char, end_char, cluster) of each clustered mention
        "mentions": List(List(List(List(Value("int32"))))),
    }
)


def split_and_find_entities(example, text_column, strip_markup, use_entities):
    """Sentences of every document and, with spaCy, their entity mentions (the slow step, cached by datasets)."""
    documents = [split_sentences(text) for text in document_texts(example[text_column], strip_markup)]
    mentions = entity_clusters(documents) if use_entities else [[[] for _ in sentences] for sentences in documents]
    return {"sentence_lists": documents, "mentions": mentions}


def oracle_labels(sentences: list[str], summary: str, multi_document: bool) -> list[float]:
    chosen = set(greedy_oracle(sentences, summary, metric="r2" if multi_document else "r1+r2"))
    return [float(index in chosen) for index in range(len(sentences))]


def build_features(batch, tokenizer, config, max_length, summary_column, chunk_long_documents):
    """Encoded examples with oracle labels; a long single document gives one example per chunk."""
    features = []
    for documents, mentions, summary in zip(batch["sentence_lists"], batch["mentions"], batch[summary_column]):
        mentions = mentions if config.use_entities else None
        if len(documents) > 1 or not chunk_long_documents:
            encoded = encode_documents(tokenizer, documents, config, max_length, mentions, warn_on_truncation=False)
            kept = [documents[d][s] for d, s in encoded["sentence_ids"]]
            features.append(dict(encoded, labels=oracle_labels(kept, summary, len(documents) > 1)))
            continue
        sentences, start = documents[0], 0
        while start < len(sentences):
            chunk_mentions = [mentions[0][start:]] if mentions is not None else None
            encoded = encode_documents(
                tokenizer, [sentences[start:]], config, max_length, chunk_mentions, warn_on_truncation=False
            )
            count = len(encoded["sentence_ids"])
            if count == 0:
                break
            features.append(dict(encoded, labels=oracle_labels(sentences[start : start + count], summary, False)))
            start += count
    return {key: [feature[key] for feature in features] for key in features[0]} if features else {}


def evaluate_rouge(model, tokenizer, dataset, text_column, summary_column, args) -> dict:
    summarizer = pipeline("extractive-summarization", model=model, tokenizer=tokenizer)
    inputs = []
    for value in dataset[text_column]:
        texts = document_texts(value, args.strip_markup)
        inputs.append({"documents": texts} if len(texts) > 1 else texts[0])
    outputs = summarizer(
        inputs, num_sentences=args.num_sentences, trigram_blocking=args.trigram_blocking,
        max_length=args.eval_max_length,
    )
    return rouge_scores([output["summary"] for output in outputs], list(dataset[summary_column]))


def main():
    model_args, data_args, training_args, het_args = parse_arguments(HetFormerArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    train_dataset, eval_dataset = load_splits(data_args)
    if het_args.use_entities and not ner_available():
        raise ValueError('--use_entities needs spaCy: pip install "sumformers[ner]" (or pass --use_entities false)')

    source = model_args.model_name_or_path
    if is_sumformers_model(source):
        model, tokenizer = load_model(source), load_tokenizer(source)  # continue from a sumformers model
    else:
        encoder = resolve_encoder(source)
        multi_document = train_dataset is not None and isinstance(train_dataset[0][data_args.text_column], list)
        settings = dict(
            encoder_name_or_path=source,
            use_sentence_nodes=het_args.use_sentence_nodes,
            use_entities=het_args.use_entities,
            use_document_nodes=het_args.use_document_nodes,
            trigram_blocking=het_args.trigram_blocking,
        )
        if het_args.attention_windows:
            settings["attention_windows"] = [int(window) for window in het_args.attention_windows.split(",")]
        if het_args.num_sentences:
            settings["multi_document_num_sentences" if multi_document else "num_sentences"] = het_args.num_sentences
        model = HetFormerForExtractiveSummarization.from_encoder(
            encoder, max_position_embeddings=het_args.max_position_embeddings, **settings
        )
        tokenizer = AutoTokenizer.from_pretrained(encoder)
    model.config.encoder_config["attention_probs_dropout_prob"] = het_args.attention_dropout
    for layer in model.hetformer.layer:
        layer.attention.self.dropout = het_args.attention_dropout
    max_length = min(het_args.max_length, model.config.max_position_embeddings)
    model = apply_lora(model, model_args)

    card_info = new_card_info(training_args, data_args, datasets=[data_args.dataset_name or "local-jsonl"])
    if training_args.do_train and train_dataset is not None:
        prepare = dict(text_column=data_args.text_column, strip_markup=het_args.strip_markup, use_entities=het_args.use_entities)
        with training_args.main_process_first(desc="sentences and entities"):
            prepared = train_dataset.map(
                split_and_find_entities,
                fn_kwargs=prepare,
                features=Features({**train_dataset.features, **PREPARED_FEATURES}),
                desc="sentences and entities",
            )
            features = prepared.map(
                build_features,
                batched=True,
                batch_size=8,
                fn_kwargs=dict(
                    tokenizer=tokenizer,
                    config=model.config,
                    max_length=max_length,
                    summary_column=data_args.summary_column,
                    chunk_long_documents=het_args.chunk_long_documents,
                ),
                remove_columns=prepared.column_names,
                desc="oracle labels",
            )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=features,
            data_collator=lambda batch: collate_hetformer_batch(batch, tokenizer.pad_token_id),
        )
        result = train_resuming(trainer, training_args)
        card_info["training"] = (
            f"{len(features)} training examples ({len(train_dataset)} inputs of `{data_args.train_split}` of "
            f"{data_args.dataset_name or data_args.train_file}, cut into chunks of at most {max_length} tokens), "
            f"{trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation, learning rate {training_args.learning_rate}, "
            f"LoRA r={model_args.lora_r} on {model_args.lora_target_modules} of layers {model_args.lora_layers or 'all'} "
            f"(use_lora={model_args.use_lora}), windows {model.config.attention_windows}, sentence nodes "
            f"{model.config.use_sentence_nodes}, entities {model.config.use_entities}, greedy-oracle labels; final "
            f"training loss {result.training_loss:.4f}, {result.metrics.get('train_runtime', 0):.0f} s."
        )
    else:
        trainer = Trainer(model=model, args=training_args)

    if not trainer.is_world_process_zero():
        return
    if training_args.do_eval and eval_dataset is not None:
        model.eval()
        scores = evaluate_rouge(
            trainer.model, tokenizer, eval_dataset, data_args.text_column, data_args.summary_column, het_args
        )
        logger.info("eval ROUGE on %d inputs: %s", len(eval_dataset), scores)
        setting = (
            f"{len(eval_dataset)} inputs of `{data_args.eval_split}`, top {het_args.num_sentences or 'default'} "
            f"sentences, trigram blocking {het_args.trigram_blocking}, at most "
            f"{het_args.eval_max_length or model.config.max_position_embeddings} tokens"
        )
        record_evaluation(card_info, training_args, scores, setting)
    if training_args.do_train:
        save_final_model(trainer, tokenizer, training_args, card_info, push=push)


if __name__ == "__main__":
    main()
