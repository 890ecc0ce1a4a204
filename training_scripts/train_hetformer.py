"""Fine-tune HetFormer (heterogeneous sparse attention, Liu et al. 2021) for long or multi-document extractive
summarization with the Trainer.

    accelerate launch training_scripts/train_hetformer.py \
        --train_file ../shared/data/qmsum/train.jsonl --validation_file ../shared/data/qmsum/validation.jsonl \
        --strip_markup --max_length 4096 --output_dir runs/hetformer-qmsum --do_train --do_eval

    # multi-document: a list-of-strings column is one input of several documents (document nodes, ROUGE-2 oracle)
    accelerate launch training_scripts/train_hetformer.py --text_column documents \
        --train_file ../shared/data/fewsum/train.jsonl --validation_file ../shared/data/fewsum/validation.jsonl ...

Inputs go through the model's own processor, as in its pipeline: transcript markup is removed with `--strip_markup`
(saved as the model's `strip_markup`, so that it strips at inference too), inputs are split into sentences (pysbd)
and named entities are found with spaCy (when installed and `--use_entities`; both cached by `datasets`), and
documents longer than `--max_length` tokens are cut into consecutive chunks of whole sentences, each a training
example labelled by the greedy oracle over its own sentences (ROUGE-1 F + ROUGE-2 F for one document, ROUGE-2 F for
several, as in the paper). With `--features_file` (written by `train_stepwise.py --save_features`: the BERTSum
layout the other extractive families train on, e.g. all 39,563 CNN/DM train_large articles cut at 768 tokens) it trains
on those features instead, each sentence a sentence node, without entity links (the file holds no mentions): the GPU
recipe's CNN/DM stage (training_scripts/gpu_recipe.sh). Evaluation runs the `extractive-summarization` pipeline on
whole inputs (up to `--eval_max_length` tokens) and reports ROUGE. Resumes from the newest checkpoint in
--output_dir.
"""

import logging
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from datasets import Features, List, Value

from sumformers import HetFormerForExtractiveSummarization
from sumformers.feature_files import load_features, read_header
from sumformers.processing.processing_hetformer import from_sentence_layout
from sumformers.text.entities import ner_available
from sumformers.text.scoring import greedy_oracle
from sumformers.training import (
    FeatureFileArguments,
    apply_lora,
    dataset_evaluation,
    final_training_loss,
    finish_training,
    load_splits,
    lora_summary,
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

logger = logging.getLogger("train_hetformer")


@dataclass
class HetFormerArguments(FeatureFileArguments):
    max_length: int = field(default=4096, metadata={"help": "Tokens per training example (longer inputs are chunked)."})
    eval_max_length: int | None = field(default=None, metadata={"help": "Tokens at evaluation (default: the model's)."})
    max_position_embeddings: int = field(default=16384, metadata={"help": "Positions after tiling the encoder's."})
    num_sentences: int | None = field(
        default=None,
        metadata={"help": "Summary length for evaluation, saved as the model's default (3 / 9 multi-doc)."},
    )
    trigram_blocking: bool = field(default=True)
    attention_windows: str | None = field(
        default=None,
        metadata={"help": "Comma-separated two-sided window per layer (default: 64 growing to 1024, i.e. the paper's "
                  "32 to 512 on each side)."},
    )
    use_sentence_nodes: bool = field(default=True)
    use_entities: bool = field(default=True, metadata={"help": "Entity-to-entity attention (needs spaCy)."})
    use_document_nodes: bool = field(default=True)
    attention_dropout: float = field(
        default=0.0, metadata={"help": "Attention-probability dropout (0: CPU SDPA has no fused kernel with dropout)."}
    )
    strip_markup: bool = field(
        default=False,
        metadata={"help": "Remove {vocalsound}-style transcript markup (saved in the model's config for inference)."},
    )
    continue_adapter: bool = field(
        default=False,
        metadata={"help": "--model_name_or_path is a LoRA adapter checkpoint (say the CNN/DM model): train its adapter "
                  "further (a small checkpoint again) instead of starting new LoRA layers over the encoder."},
    )
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


def prepare(example, processor, text_column, multiple_documents):
    """Sentences of every document and, with spaCy, their entity mentions, from the model's processor (the slow
    step, cached by datasets)."""
    return processor.prepare(model_input(example[text_column], multiple_documents))


def build_features(batch, processor, max_length, summary_column, chunk_long_documents):
    """Encoded examples with oracle labels; a long single document gives one example per chunk."""
    features = []
    for documents, mentions, summary in zip(batch["sentence_lists"], batch["mentions"], batch[summary_column]):
        oracle = partial(greedy_oracle, reference=summary, metric="r2" if len(documents) > 1 else "r1+r2")
        features += processor.training_examples(documents, mentions, oracle, max_length, chunk_long_documents)
    return {key: [feature[key] for feature in features] for key in features[0]} if features else {}


def new_model(encoder: str, source: str, het_args: HetFormerArguments, multi_document: bool, limits: dict):
    settings = {
        **limits,
        "encoder_name_or_path": source,
        "use_sentence_nodes": het_args.use_sentence_nodes,
        "use_entities": het_args.use_entities,
        "use_document_nodes": het_args.use_document_nodes,
        "trigram_blocking": het_args.trigram_blocking,
    }
    if het_args.attention_windows:
        settings["attention_windows"] = [int(window) for window in het_args.attention_windows.split(",")]
    if het_args.num_sentences:
        settings["multi_document_num_sentences" if multi_document else "num_sentences"] = het_args.num_sentences
    return HetFormerForExtractiveSummarization.from_encoder(
        encoder, max_position_embeddings=het_args.max_position_embeddings, **settings
    )


def continued_adapter(source: str, config):
    """The adapter checkpoint at `source` over a fresh encoder, its LoRA layers trainable (`config`: the saved one, with
    this run's changes)."""
    from peft import PeftModel

    base = HetFormerForExtractiveSummarization.from_encoder(config.encoder_name_or_path, config=config)
    return PeftModel.from_pretrained(base, source, is_trainable=True)


def adapter_name(source: str) -> str:
    """The model a continued adapter came from: its folder (a shipped checkpoint), or the run of a run's `final` or
    `checkpoint-N` folder."""
    path = Path(source)
    return path.parent.name if path.name == "final" or path.name.startswith("checkpoint-") else path.name


def main():
    model_args, data_args, training_args, het_args = parse_arguments(HetFormerArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    has_data = data_args.dataset_name or data_args.train_file or data_args.validation_file
    train_dataset, eval_dataset = load_splits(data_args) if has_data else (None, None)
    limits = {}  # sentences cut as the feature file's were, so that inference reads what training read
    if het_args.features_file:
        if het_args.use_entities:
            raise ValueError("--features_file holds no entity mentions: pass --use_entities false")
        header = read_header(het_args.features_file)
        limits = {name: header[name] for name in ("max_sentence_tokens", "min_sentence_tokens")}
    if het_args.use_entities and not ner_available():
        raise ValueError('--use_entities needs spaCy: pip install "sumformers[ner]" (or pass --use_entities false)')

    source = model_args.model_name_or_path
    multi_document = train_dataset is not None and isinstance(train_dataset[0][data_args.text_column], list)
    model, tokenizer = model_and_tokenizer(
        source, lambda encoder, _: new_model(encoder, source, het_args, multi_document, limits)
    )
    if het_args.strip_markup:  # the processor strips, in training and, saved in the config, at inference
        model.config.strip_markup = True
    if het_args.num_sentences:  # also when training continues from a saved model (another dataset's length)
        setattr(model.config, "multi_document_num_sentences" if multi_document else "num_sentences",
                het_args.num_sentences)
    model.config.encoder_config.attention_probs_dropout_prob = het_args.attention_dropout
    for layer in model.hetformer.layer:
        layer.attention.self.dropout = het_args.attention_dropout
    processor = model.processor_class(tokenizer, model.config)
    multiple_documents = model.reads_multiple_documents
    max_length = min(het_args.max_length, model.config.max_position_embeddings)
    model = continued_adapter(source, model.config) if het_args.continue_adapter else apply_lora(model, model_args)

    card_info = new_card_info(training_args, data_args, datasets=[data_args.dataset_name or "local-jsonl"])
    features, trained_on = None, None
    if training_args.do_train and het_args.features_file:
        max_length = min(max_length, read_header(het_args.features_file)["max_length"])
        features = [from_sentence_layout(feature, model.config) for feature in training_subset(
            load_features(het_args.features_file, max_length=max_length), data_args)]
        trained_on = (f"{len(features)} inputs of {read_header(het_args.features_file)['source']}"
                      f"{subset_description(data_args)}")
    elif training_args.do_train and train_dataset is not None:
        trained_on = f"{len(train_dataset)} inputs of {training_source(data_args)}"
        with training_args.main_process_first(desc="sentences and entities"):
            prepared = train_dataset.map(
                prepare,
                fn_kwargs={
                    "processor": processor,
                    "text_column": data_args.text_column,
                    "multiple_documents": multiple_documents,
                },
                features=Features({**train_dataset.features, **PREPARED_FEATURES}),
                num_proc=data_args.preprocessing_num_workers,
                desc="sentences and entities",
            )
            features = prepared.map(
                build_features,
                batched=True,
                batch_size=8,
                fn_kwargs={
                    "processor": processor,
                    "max_length": max_length,
                    "summary_column": data_args.summary_column,
                    "chunk_long_documents": het_args.chunk_long_documents,
                },
                remove_columns=prepared.column_names,
                desc="oracle labels",
            )
    trainer, result = train(
        model, training_args, features, processor.collate, tokenizer=tokenizer, max_seconds=het_args.max_train_seconds
    )
    if result is not None:
        continued = f", continuing the LoRA adapter of {adapter_name(source)}" if het_args.continue_adapter else ""
        card_info["training"] = (
            f"{len(features)} training examples ({trained_on}, "
            f"cut into chunks of at most {max_length} tokens), "
            f"{trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} x {training_args.world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation, learning rate {training_args.learning_rate}, "
            f"{lora_summary(model_args)}{continued}, windows {model.config.attention_windows}, sentence nodes "
            f"{model.config.use_sentence_nodes}, entities {model.config.use_entities}, greedy-oracle labels; "
            f"{final_training_loss(trainer, result)}."
        )

    evaluate = dataset_evaluation(
        tokenizer,
        eval_dataset,
        data_args,
        f"top {het_args.num_sentences or 'default'} sentences, trigram blocking {het_args.trigram_blocking}, at most "
        f"{het_args.eval_max_length or model.config.max_position_embeddings} tokens",
        unit="inputs",
        num_sentences=het_args.num_sentences,
        trigram_blocking=het_args.trigram_blocking,
        max_length=het_args.eval_max_length,
    )
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


if __name__ == "__main__":
    main()
