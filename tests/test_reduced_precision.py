"""Reduced precision on CPU: every model converted to bfloat16 or float16 (or loaded with `dtype=`) runs, and its
logits are finite and close to the float32 logits of the same weights; every sparse attention backend on its own,
too; the pipelines choose as in float32 (losses: the shared model tester). torch 2.13 has CPU kernels for every op
these models use in both dtypes, so no case is skipped.

Tiny random models (hidden size 32); their scorers are scaled up so that logits are of order 1 and a comparison at
the tolerances below means something."""

import math
import os

import pytest
import torch
from test_attention import PATTERNS, _inputs, _valid
from transformers import pipeline

from conftest import SENTENCES, tiny_bert_config, tiny_wikisum_config
from sumformers import (
    BertSumConfig,
    BertSumForExtractiveSummarization,
    ETCSumConfig,
    ETCSumForExtractiveSummarization,
    HetFormerConfig,
    HetFormerForExtractiveSummarization,
    HiBertConfig,
    HiBertForExtractiveSummarization,
    StepwiseETCSumConfig,
    StepwiseETCSumForExtractiveSummarization,
    StepwiseHiBertConfig,
    StepwiseHiBertForExtractiveSummarization,
    WikiSumForCausalLM,
)
from sumformers.modeling.attention import sparse_attention
from sumformers.processing.processing_hetformer import collate_hetformer_batch, encode_documents
from sumformers.processing.sentence_layout import collate_sentence_batch, encode_sentences

# FlexAttention's CPU compiles (the slow cases) are cheap on repeated runs with a persistent inductor cache.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")

# Largest |reduced - float32| logit measured over every model, backend and input below (logits up to ~5): bf16 0.027
# (Stepwise ETCSum; 0.009-0.018 for the others), fp16 0.004. Tolerances are about three times that; a dtype mix-up
# or a mask fill in the wrong dtype gives errors of order 1 or non-finite values.
ATOL = {torch.bfloat16: 0.08, torch.float16: 0.015}
# Sparse attention alone (outputs up to ~3): measured bf16 0.019 (eager), fp16 0.003.
ATTENTION_ATOL = {torch.bfloat16: 0.06, torch.float16: 0.01}
EXTRACTIVE = ["bertsum", "hibert", "stepwise_hibert", "etcsum", "stepwise_etcsum", "hetformer"]
DTYPES = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="fp16")]
# FlexAttention compiles for half a minute per pattern on CPU: its cases run with `-m slow`.
BACKENDS = ["eager", "sdpa", "blocked", pytest.param("flex_attention", marks=pytest.mark.slow)]

# Stepwise rows: empty and partial summaries over both documents of the batch.
ROWS = {"summary_indices": torch.tensor([[-1, -1], [3, 1], [2, -1]]), "row_documents": torch.tensor([0, 0, 1])}
# HetFormer input with two documents and two entity clusters (character spans per sentence), so that the token,
# node and entity attentions all run.
DOCUMENTS = [["Anna met Bob.", "Bob left."], ["Anna smiled."]]
MENTIONS = [[[(0, 4, 0), (9, 12, 1)], [(0, 3, 1)]], [[(0, 4, 0)]]]


pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------------------------------------------
# Tiny models and their inputs
# ----------------------------------------------------------------------------------------------------------------


def _scaled_scorer(model):
    with torch.no_grad():  # logits of order 1 (the init's std 0.02 gives ~0.05)
        model.scorer.weight.normal_(0.0, 0.3)
    return model


def bertsum(implementation=None):
    config = BertSumConfig(
        encoder_config=tiny_bert_config().to_dict(),
        encoder_name_or_path="tiny-random-bert",
        inter_sentence_layers=1,
        inter_sentence_heads=4,
        inter_sentence_ff_size=64,
        dropout=0.0,
    )
    return _scaled_scorer(BertSumForExtractiveSummarization._from_config(config, attn_implementation=implementation))


def hibert(stepwise, implementation=None):
    settings = {
        "sentence_encoder_layers": 2,
        "document_layers": 2,
        "max_document_sentences": 16,
        "max_sentence_tokens": 10,
        "encoder_config": tiny_bert_config().to_dict(),
        "encoder_name_or_path": "tiny-random-bert",
    }
    if stepwise:
        model = StepwiseHiBertForExtractiveSummarization(StepwiseHiBertConfig(**settings))
    else:
        model = HiBertForExtractiveSummarization(HiBertConfig(**settings))
    return _scaled_scorer(model)


def etcsum(stepwise, implementation="blocked"):
    settings = {
        "local_radius": 4,
        "relative_pos_max_distance": 3,
        "max_sentence_tokens": 10,
        "encoder_config": tiny_bert_config().to_dict(),
        # a tiny random encoder without absolute positions scores every sentence alike: the tiled position table
        # keeps the pipeline tests' sentences apart
        "long_position_embeddings": "tiled",
    }
    model_class = StepwiseETCSumForExtractiveSummarization if stepwise else ETCSumForExtractiveSummarization
    config = (StepwiseETCSumConfig if stepwise else ETCSumConfig)(**settings)
    model = model_class._from_config(config, attn_implementation=implementation)
    with torch.no_grad():  # non-zero relative biases, so that the bias path runs in the reduced dtype too (random
        # relative keys run in it in `test_sparse_attention_in_reduced_precision`)
        for layer in model.layers:
            layer.attention.relative_bias.weight.normal_(0.0, 0.5)
    return _scaled_scorer(model)


def hetformer_config(use_entities=True):
    return HetFormerConfig(
        encoder_config=tiny_bert_config().to_dict(),
        encoder_name_or_path="tiny-random-bert",
        attention_windows=[8, 8],
        classifier_dropout=0.0,
        use_entities=use_entities,
    )


def hetformer(implementation="blocked", use_entities=True):
    model = HetFormerForExtractiveSummarization._from_config(
        hetformer_config(use_entities), attn_implementation=implementation
    )
    with torch.no_grad():  # node and entity projections that differ from the token ones
        for name, parameter in model.named_parameters():
            if "_node." in name or "_entity." in name:
                parameter.normal_(0.0, 0.2)
    return _scaled_scorer(model)


def wikisum(implementation="sdpa"):
    layers = ["local", "compressed", "full", "local", "compressed"]
    config = tiny_wikisum_config(attention_layers=layers, moe_layers=[1])
    model = WikiSumForCausalLM._from_config(config, attn_implementation=implementation)
    with torch.no_grad():  # peaked logits, as in the WikiSum tests
        model.model.embed_tokens.weight.mul_(30)
    return model


def sentence_batch(tokenizer):
    """The BERTSum layout of two documents of different lengths (the second padded)."""
    documents = (SENTENCES, SENTENCES[:3])
    features = [encode_sentences(tokenizer, sentences, max_sentence_tokens=10) for sentences in documents]
    return collate_sentence_batch(features, tokenizer.pad_token_id)


def hetformer_batch(tokenizer):
    """Two inputs of different lengths (the first of two documents) with entity mentions."""
    config = hetformer_config()
    examples = [
        encode_documents(tokenizer, DOCUMENTS, config, 512, MENTIONS),
        encode_documents(tokenizer, [["Bob met Anna at the station.", "Anna waved."]], config, 512,
                         [[[(0, 3, 0), (8, 12, 1)], [(0, 4, 1)]]]),
    ]
    return collate_hetformer_batch(examples, tokenizer.pad_token_id)


def wikisum_batch():
    ids = torch.randint(4, 64, (2, 37), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # left padding
    return {"input_ids": ids, "attention_mask": mask}


def case(name, implementation=None):
    """(builder of a fresh tiny model with the same seed, inputs builder taking the tokenizer) of a model case."""
    def step_batch(tokenizer):
        return {**sentence_batch(tokenizer), **ROWS}

    builders = {
        "bertsum": (lambda: bertsum(implementation), sentence_batch),
        "hibert": (lambda: hibert(False), sentence_batch),
        "stepwise_hibert": (lambda: hibert(True), step_batch),
        "etcsum": (lambda: etcsum(False, implementation), sentence_batch),
        "stepwise_etcsum": (lambda: etcsum(True, implementation), step_batch),
        "hetformer": (lambda: hetformer(implementation), hetformer_batch),
        "wikisum": (lambda: wikisum(implementation), lambda tokenizer: wikisum_batch()),
    }
    build, inputs = builders[name]

    def seeded():
        torch.manual_seed(0)
        return build().eval()

    return seeded, inputs


def model_cases():
    """Every model class; those with sparse attention once per backend."""
    cases = [pytest.param("bertsum", None, id="bertsum-sdpa"), pytest.param("bertsum", "eager", id="bertsum-eager")]
    cases += [pytest.param(name, None, id=name) for name in ("hibert", "stepwise_hibert")]
    for name in ("etcsum", "stepwise_etcsum", "hetformer", "wikisum"):
        for implementation in ("eager", "sdpa", "blocked", "flex_attention"):
            marks = [pytest.mark.slow] if implementation == "flex_attention" else []
            cases.append(pytest.param(name, implementation, marks=marks, id=f"{name}-{implementation}"))
    return cases


def assert_close_to_float32(logits, reference, dtype, atol):
    assert logits.dtype == dtype
    real = reference > torch.finfo(torch.float32).min  # padded / already chosen slots hold the dtype's minimum
    assert bool(torch.isfinite(logits[real]).all())
    assert bool((logits[~real] == torch.finfo(dtype).min).all())
    assert reference[real].abs().max() > 0.5  # a comparison of near-zero logits would prove nothing
    difference = (logits.float()[real] - reference[real]).abs().max().item()
    assert difference <= atol, f"max |{dtype} - float32| = {difference:.4f}"


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, implementation", model_cases())
def test_reduced_precision_logits_are_close_to_float32(minilm_tokenizer, name, implementation, dtype):
    build, inputs = case(name, implementation)
    batch = inputs(minilm_tokenizer)
    with torch.no_grad():
        reference = build()(**batch).logits
        logits = build().to(dtype)(**batch).logits
    assert_close_to_float32(logits, reference, dtype, ATOL[dtype])


@pytest.mark.parametrize("name", [*EXTRACTIVE, "wikisum"])
def test_from_pretrained_with_bfloat16_dtype(minilm_tokenizer, tmp_path, name):
    build, inputs = case(name)
    model = build()
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    assert {parameter.dtype for parameter in loaded.parameters()} == {torch.bfloat16}
    assert all(not buffer.is_floating_point() or buffer.dtype == torch.bfloat16 for buffer in loaded.buffers())
    batch = inputs(minilm_tokenizer)
    with torch.no_grad():
        assert_close_to_float32(loaded(**batch).logits, model(**batch).logits, torch.bfloat16, ATOL[torch.bfloat16])


@pytest.mark.parametrize("stepwise", [False, True], ids=["hibert", "stepwise_hibert"])
def test_float32_sentence_vectors_feed_a_bfloat16_hibert(minilm_tokenizer, stepwise):
    """Sentence vectors precomputed in float32 (the training script's cache) with the model in bf16."""
    torch.manual_seed(0)
    model = hibert(stepwise).eval()
    batch = sentence_batch(minilm_tokenizer)
    rows = ROWS if stepwise else {}
    with torch.no_grad():
        vectors = model.sentence_vectors(
            batch["input_ids"], batch["attention_mask"], batch["cls_positions"], batch["sentence_mask"]
        )
        reference = model(sentence_vectors=vectors, sentence_mask=batch["sentence_mask"], **rows).logits
        logits = model.to(torch.bfloat16)(sentence_vectors=vectors, sentence_mask=batch["sentence_mask"], **rows).logits
    assert_close_to_float32(logits, reference, torch.bfloat16, ATOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("implementation", BACKENDS)
@pytest.mark.parametrize("name", PATTERNS)
def test_sparse_attention_in_reduced_precision(name, implementation, dtype):
    pattern, tables = PATTERNS[name](_valid())
    q, k, v = _inputs(pattern)
    reference = sparse_attention(q, k, v, pattern, "eager")
    if tables:  # the pattern's tables (bias, and relative keys if any) are model parameters: in the model's dtype
        pattern = pattern.with_relative_tables(*(table.detach().to(dtype) for table in tables))
    with torch.no_grad():  # flex has no CPU backward
        output = sparse_attention(q.to(dtype), k.to(dtype), v.to(dtype), pattern, implementation)
    assert output.dtype == dtype and bool(torch.isfinite(output).all())
    assert (output.float() - reference).abs().max() <= ATTENTION_ATOL[dtype]


# ----------------------------------------------------------------------------------------------------------------
# Pipelines
# ----------------------------------------------------------------------------------------------------------------


PIPELINE_CASES = {
    "bertsum": ("extractive-summarization", bertsum),
    "hibert": ("extractive-summarization", lambda: hibert(False)),
    "etcsum": ("extractive-summarization", lambda: etcsum(False)),
    "hetformer": ("extractive-summarization", lambda: hetformer(use_entities=False)),
    "stepwise_hibert": ("stepwise-summarization", lambda: hibert(True)),
    "stepwise_etcsum": ("stepwise-summarization", lambda: etcsum(True)),
}
# Three sentences whatever END scores, so that three choices are compared.
STEPWISE_OPTIONS = {"beam_size": 2, "num_sentences": 3, "min_sentences": 3, "return_steps": True}
# Least gap between a chosen sentence and the best one left out, in logits (stepwise: log-probabilities) of the
# float32 model: bf16 moves a logit by at most 0.03 here (ATOL), so choices this far apart cannot swap.
SEPARATION = 0.2


def step_margins(result) -> list[float]:
    """Per step, the chosen sentence's log-probability minus that of the best other sentence still open."""
    margins, chosen = [], []
    for step in result["steps"]:
        others = [p for i, p in enumerate(step["distribution"][:-1]) if i not in chosen and i != step["sentence"]]
        margins.append(math.log(step["probability"]) - math.log(max(others)))
        chosen.append(step["sentence"])
    return margins


@pytest.mark.parametrize("name", PIPELINE_CASES)
def test_bfloat16_pipeline_chooses_as_float32(minilm_tokenizer, name):
    task, build = PIPELINE_CASES[name]
    text = " ".join(SENTENCES)

    def summarizer(dtype):
        torch.manual_seed(0)
        model = build().eval()
        if hasattr(model, "sentence_encoder"):
            # a tiny random sentence encoder gives near-identical sentence vectors: distinct position rows tell the
            # sentences apart, so that their scores are well separated
            with torch.no_grad():
                model.sentence_positions.weight.normal_(0.0, 1.0)
        return pipeline(task, model=model.to(dtype), tokenizer=minilm_tokenizer)

    reference, reduced = summarizer(torch.float32), summarizer(torch.bfloat16)
    if task == "stepwise-summarization":
        expected, result = reference(text, **STEPWISE_OPTIONS), reduced(text, **STEPWISE_OPTIONS)
        assert min(step_margins(expected)) >= SEPARATION
        # the beam scores float32 log-probabilities of the bf16 logits
        assert result["selection_order"] == expected["selection_order"]
        assert result["score"] == pytest.approx(expected["score"], abs=0.05)
        for step, expected_step in zip(result["steps"], expected["steps"], strict=True):
            assert step["distribution"] == pytest.approx(expected_step["distribution"], abs=0.02)
    else:
        probabilities = reference.forward(reference.preprocess(text))["probabilities"][0]
        ranked = torch.logit(probabilities.double()).sort(descending=True).values
        assert ranked[1] - ranked[2] >= SEPARATION  # the two chosen sentences against the third
        expected, result = reference(text, num_sentences=2), reduced(text, num_sentences=2)
    assert result["sentences"] == expected["sentences"] and result["summary"] == expected["summary"]
    assert result["scores"] == pytest.approx(expected["scores"], abs=0.02)
