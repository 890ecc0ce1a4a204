"""Fine-tuning every model family with `transformers.Trainer` directly, as the README shows a user doing it: the model's
processor featurizes a `datasets.Dataset` through `map`, the processor's `collate` is the data collator (wrapped in
`StepwiseCollator` for the stepwise families), the model computes its own loss; then `save_pretrained` and
`pipeline(task, model=folder)`. Tiny models over a tiny encoder (hidden 32, 2 layers), a few seconds each."""

import json
from dataclasses import dataclass, field
from functools import partial

import pytest
import torch
from datasets import Dataset
from test_rotowire import tiny_game
from test_train_table_to_text import SUMMARY as GAME_SUMMARY
from transformers import Trainer, TrainingArguments, pipeline

from conftest import ARTICLE, tiny_copy_transformer_config
from sumformers import (
    BertSumAbsForConditionalGeneration,
    BertSumForExtractiveSummarization,
    CopyTransformerForConditionalGeneration,
    ETCSumForExtractiveSummarization,
    HetFormerForExtractiveSummarization,
    HiBertForExtractiveSummarization,
    RealizerForConditionalGeneration,
    SentencePlannerForConditionalGeneration,
    StepwiseETCSumForExtractiveSummarization,
    StepwiseHiBertForContentPlanning,
    StepwiseHiBertForExtractiveSummarization,
    WikiSumForCausalLM,
)
from sumformers.registry import architecture_for
from sumformers.text.scoring import greedy_oracle
from sumformers.training import StepwiseCollator

pytestmark = pytest.mark.usefixtures("one_thread")

NEWS = [
    {"document": ARTICLE, "summary": "The council approved the budget. The mayor will sign it next week."},
    {"document": "Heavy rain flooded the valley road on Sunday. Drivers waited for hours. Crews cleared the mud by "
                 "night. The road opens again on Tuesday.",
     "summary": "Rain flooded the valley road. It opens again on Tuesday."},
]
GAMES = [{"game": json.dumps(tiny_game(id=f"g{number}", summary=GAME_SUMMARY))} for number in range(2)]


def sentence_features(example, processor, selection_order=False):
    """A document in the BERTSum layout, labelled by the greedy oracle (in selection order for stepwise models)."""
    oracle = partial(greedy_oracle, reference=example["summary"], num_sentences=2, selection_order=selection_order)
    return processor.training_features(example["document"], oracle)


def abstractive_features(example, processor):
    return processor.training_features(example["document"], example["summary"], max_target_length=32)


def hetformer_features(batch, processor):
    """datasets' batched map: one example per chunk of a document that fits the model."""
    features = []
    for document, summary in zip(batch["document"], batch["summary"]):
        prepared = processor.prepare(document)
        oracle = partial(greedy_oracle, reference=summary, num_sentences=2)
        features += processor.training_examples(prepared["sentence_lists"], prepared["mentions"], oracle)
    return {key: [feature[key] for feature in features] for key in features[0]}


def wikisum_features(example, processor):
    return processor.training_features({**example, "title": "", "documents": [example["document"]]}, 24)


def realizer_features(batch, processor):
    """datasets' batched map: one example per sentence of each game's oracle plan."""
    features = [feature for game in batch["game"] for feature in processor.training_features(game, 128, 24)]
    return {key: [feature[key] for feature in features] for key in features[0]}


def planner_features(example, processor):
    return processor.training_features(example["game"])


@dataclass
class Family:
    build: object  # (encoder folder, tokenizer) -> a new model
    featurize: object  # datasets.map function of (example or batch, processor)
    rows: list[dict]
    pipeline_input: object
    batched: bool = False
    stepwise: bool = False
    pipeline_options: dict = field(default_factory=dict)
    steps: int = 20  # enough to cut the loss on the training batch by a fifth


EXTRACTIVE = dict(featurize=sentence_features, rows=NEWS, pipeline_input=ARTICLE)
STEPWISE = dict(featurize=partial(sentence_features, selection_order=True), rows=NEWS, pipeline_input=ARTICLE,
                stepwise=True)
ABSTRACTIVE = dict(featurize=abstractive_features, rows=NEWS, pipeline_input=ARTICLE)
FAMILIES = {
    "bertsum": Family(lambda encoder, _: BertSumForExtractiveSummarization.from_encoder(
        encoder, inter_sentence_layers=1, inter_sentence_heads=4, inter_sentence_ff_size=64), **EXTRACTIVE),
    "hibert": Family(lambda encoder, _: HiBertForExtractiveSummarization.from_encoder(
        encoder, sentence_encoder_layers=1, document_layers=1), **EXTRACTIVE),
    "stepwise_hibert": Family(lambda encoder, _: StepwiseHiBertForExtractiveSummarization.from_encoder(
        encoder, sentence_encoder_layers=1, document_layers=1, beam_size=2), **STEPWISE),
    # ETCSum's global tokens start alike (from the [CLS] embedding): its scores first need to tell them apart
    "etcsum": Family(lambda encoder, _: ETCSumForExtractiveSummarization.from_encoder(encoder), **EXTRACTIVE,
                     steps=60),
    "stepwise_etcsum": Family(lambda encoder, _: StepwiseETCSumForExtractiveSummarization.from_encoder(
        encoder, beam_size=2), **STEPWISE, steps=60),
    "hetformer": Family(lambda encoder, _: HetFormerForExtractiveSummarization.from_encoder(
        encoder, max_position_embeddings=1024, use_entities=False), hetformer_features, NEWS, ARTICLE,
        batched=True),
    "bertsumabs": Family(lambda encoder, tokenizer: BertSumAbsForConditionalGeneration.from_encoder(
        encoder, tokenizer=tokenizer, decoder_layers=1, max_target_positions=256), **ABSTRACTIVE),
    "sentence_planner": Family(lambda encoder, tokenizer: SentencePlannerForConditionalGeneration.from_encoder(
        encoder, tokenizer=tokenizer, decoder_layers=1, sentence_generator_layers=1, max_target_positions=64),
        **ABSTRACTIVE),
    "copy_transformer": Family(lambda _, tokenizer: CopyTransformerForConditionalGeneration(
        tiny_copy_transformer_config(vocab_size=len(tokenizer))), **ABSTRACTIVE, steps=40),
    "wikisum": Family(lambda encoder, _: WikiSumForCausalLM.from_encoder(
        encoder, decoder_init="encoder", local_block_size=16), wikisum_features, NEWS, ARTICLE),
    "realizer": Family(lambda encoder, tokenizer: RealizerForConditionalGeneration.from_encoder(
        encoder, tokenizer=tokenizer, decoder_layers=1, max_target_positions=48), realizer_features, GAMES,
        GAMES[0]["game"], batched=True, pipeline_options={"plan": "oracle"}),
    "content_planner": Family(lambda encoder, _: StepwiseHiBertForContentPlanning.from_encoder(
        encoder, sentence_encoder_layers=1, document_layers=1), planner_features, GAMES, GAMES[0]["game"],
        stepwise=True),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_a_user_fine_tunes_each_family_with_the_trainer_and_loads_it_by_pipeline(
    name, tiny_encoder_folder, minilm_tokenizer, tmp_path
):
    family = FAMILIES[name]
    torch.manual_seed(0)
    model = family.build(str(tiny_encoder_folder), minilm_tokenizer)
    processor = model.processor_class(minilm_tokenizer, model.config)
    dataset = Dataset.from_list(family.rows)
    features = dataset.map(family.featurize, fn_kwargs={"processor": processor}, batched=family.batched,
                           remove_columns=dataset.column_names)
    collate = StepwiseCollator(processor.collate, stepwise=True) if family.stepwise else processor.collate

    batch = collate(features.to_list())  # every training step sees these examples: the loss on them must fall

    def loss():
        model.eval()
        with torch.no_grad():
            return model(**batch).loss.item()

    before = loss()
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=family.steps, per_device_train_batch_size=len(features),
        learning_rate=3e-3, warmup_steps=0, use_cpu=True, report_to="none", save_strategy="no",
        remove_unused_columns=False,
    )
    trainer = Trainer(model=model, args=args, train_dataset=features, data_collator=collate)
    trainer.train()
    after = loss()
    assert after < 0.8 * before, (before, after)

    folder = tmp_path / name
    model.save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    task = architecture_for(model.config).task
    saved = pipeline(task, model=str(folder))
    in_memory = pipeline(task, model=model.eval(), tokenizer=minilm_tokenizer)
    options = family.pipeline_options
    assert_same(saved(family.pipeline_input, **options), in_memory(family.pipeline_input, **options))


def assert_same(value, expected):
    """The same outputs: equal text, choices and structure, floats equal to float32 precision (the loaded planner's
    step probabilities differ from the in-memory model's in the 8th digit, and its plan score sums them in float64)."""
    if isinstance(expected, float):
        assert value == pytest.approx(expected, rel=1e-5, abs=1e-7)
    elif isinstance(expected, dict):
        assert value.keys() == expected.keys()
        for key in expected:
            assert_same(value[key], expected[key])
    elif isinstance(expected, (list, tuple)):
        assert len(value) == len(expected)
        for item, expected_item in zip(value, expected):
            assert_same(item, expected_item)
    else:
        assert value == expected
