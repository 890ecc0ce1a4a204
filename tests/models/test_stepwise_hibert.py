"""HiBERT and Stepwise HiBERT: the model tester's checks (`TestHiBertModel`, `TestStepwiseHiBertModel`), sentence
blocks, the document encoder with summary attention, the step loss, reuse of sentence vectors, loading from a pretrained
encoder, adapter checkpoints, the stepwise pipeline and the exported repo."""

import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import BertModel, pipeline

from conftest import tiny_bert_config, training_script
from stepwise_testing import (
    beam_in_package,
    beam_without_sumformers,
    lora_checkpoint,
    save_tiny_encoder,
    trained_and_reloaded_logits,
)
from sumformers import (
    HiBertConfig,
    HiBertForExtractiveSummarization,
    StepwiseHiBertConfig,
    StepwiseHiBertForExtractiveSummarization,
)
from sumformers.generation.stepwise_decoding import stepwise_beam_search
from sumformers.hub import export_model, load_model
from sumformers.modeling.modeling_stepwise_hibert import sentence_blocks
from test_modeling_common import ARTICLE, SENTENCES, ModelTesterMixin, document_batch

TINY = dict(sentence_encoder_layers=2, document_layers=2, max_document_sentences=16, max_sentence_tokens=10)


def tiny_config(stepwise=True, **overrides):
    settings = dict(TINY, encoder_config=tiny_bert_config().to_dict(), encoder_name_or_path="tiny-random-bert")
    settings.update(overrides)
    return StepwiseHiBertConfig(**settings) if stepwise else HiBertConfig(**settings)


def tiny_models(**overrides):
    """A random Stepwise HiBERT and a HiBERT with the same weights wherever they share parameters."""
    torch.manual_seed(0)
    stepwise = StepwiseHiBertForExtractiveSummarization(tiny_config(**overrides)).eval()
    # the stepwise settings (summary_null_slot) are no settings of the plain model's config
    shared = {name: value for name, value in overrides.items() if name in HiBertConfig.__dataclass_fields__}
    plain = HiBertForExtractiveSummarization(tiny_config(stepwise=False, **shared)).eval()
    missing, unexpected = plain.load_state_dict(stepwise.state_dict(), strict=False)
    assert not missing and all(k.startswith(("summary_", "end_")) or ".summary_attention." in k for k in unexpected)
    return stepwise, plain


class TestHiBertModel(ModelTesterMixin):
    model_class = HiBertForExtractiveSummarization

    def get_config(self):
        return tiny_config(stepwise=False)


class TestStepwiseHiBertModel(ModelTesterMixin):
    model_class = StepwiseHiBertForExtractiveSummarization

    def get_config(self):
        return tiny_config()


class TestStepwiseHiBertNullSlotModel(ModelTesterMixin):
    model_class = StepwiseHiBertForExtractiveSummarization

    def get_config(self):
        return tiny_config(summary_null_slot=True)


def test_the_null_slot_is_one_more_key_and_value_of_the_summary_attention_only(minilm_tokenizer):
    from sumformers.modeling.bert_blocks import BertStyleAttention
    from sumformers.modeling.modeling_stepwise_hibert import SummaryAttention

    config = tiny_config(summary_null_slot=True)
    torch.manual_seed(0)
    attention = SummaryAttention(config.encoder_config, config, null_slot=True).eval()
    torch.nn.init.normal_(attention.null_state)
    reference = BertStyleAttention(config.encoder_config, config).eval()
    reference.load_state_dict({k: v for k, v in attention.state_dict().items() if k != "null_state"})
    queries, context = torch.randn(2, 5, config.hidden_size), torch.randn(2, 3, config.hidden_size)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    with torch.no_grad():
        got = attention(queries, context, mask)
        # the reference attends to the null state as a fourth summary state, always open
        extended = torch.cat([context, attention.null_state.expand(2, 1, -1)], dim=1)
        expected = reference(queries, extended, torch.cat([mask, torch.ones(2, 1, dtype=torch.bool)], dim=1))
    torch.testing.assert_close(got, expected)
    # a summary of one sentence: without the null slot every query reads the same mixture (its one value), with it
    # the mixture depends on the query (how much of the sentence against the null state)
    one = torch.tensor([[True, False, False], [True, False, False]])
    mixtures = {}
    for name, module in (("null", attention), ("plain", reference)):
        hook = module.output.register_forward_hook(lambda _, inputs, __, name=name: mixtures.update({name: inputs[0]}))
        with torch.no_grad():
            module(queries, context, one)
        hook.remove()
    assert mixtures["plain"].std(dim=1).max() < 1e-5
    assert mixtures["null"].std(dim=1).min() > 1e-3
    # an empty summary is still a no-op, and the model starts from a zero null state
    stepwise, plain = tiny_models(summary_null_slot=True)
    assert all(layer.summary_attention.null_state.abs().max() == 0 for layer in stepwise.document_layers)
    batch = document_batch(minilm_tokenizer, [SENTENCES])
    with torch.no_grad():
        torch.testing.assert_close(
            stepwise(**batch).logits[0, :5], plain(**batch).logits[0], atol=1e-5, rtol=1e-5
        )


def test_sentence_blocks_cut_the_bertsum_layout_by_hand():
    # [CLS] a b [SEP] [CLS] c [SEP] + padding; then a document with one sentence
    input_ids = torch.tensor([[101, 1, 2, 102, 101, 3, 102, 0], [101, 4, 102, 0, 0, 0, 0, 0]])
    attention_mask = (input_ids != 0).long()
    cls_positions = torch.tensor([[0, 4], [0, 0]])
    sentence_mask = torch.tensor([[True, True], [True, False]])
    blocks, mask = sentence_blocks(
        input_ids, attention_mask, cls_positions, sentence_mask, block_size=4, pad_token_id=0
    )
    assert blocks.tolist() == [[[101, 1, 2, 102], [101, 3, 102, 0]], [[101, 4, 102, 0], [0, 0, 0, 0]]]
    assert mask.tolist() == [
        [[True, True, True, True], [True, True, True, False]],
        [[True, True, True, False], [False, False, False, False]],
    ]
    cut, _ = sentence_blocks(input_ids, attention_mask, cls_positions, sentence_mask, block_size=2, pad_token_id=0)
    assert cut[0].tolist() == [[101, 1], [101, 3]]


def test_empty_summary_gives_the_non_stepwise_encoder_states(minilm_tokenizer):
    stepwise, plain = tiny_models()
    batch = document_batch(minilm_tokenizer, [SENTENCES, SENTENCES[:3]])
    with torch.no_grad():
        expected = plain(**batch)
        # Rows with an empty summary next to rows with a summary: the no-op must hold row by row.
        output = stepwise(
            **batch,
            summary_indices=torch.tensor([[-1, -1], [2, 0], [-1, -1], [1, -1]]),
            row_documents=torch.tensor([0, 0, 1, 1]),
        )
    torch.testing.assert_close(output.document_states[0], expected.document_states[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(output.document_states[2], expected.document_states[1], atol=1e-5, rtol=1e-5)
    # The shared scorer then gives the same sentence scores.
    torch.testing.assert_close(output.logits[0, :5], expected.logits[0], atol=1e-5, rtol=1e-5)
    # With a summary the document states do change.
    assert (output.document_states[1] - expected.document_states[0]).abs().max() > 1e-3


def test_step_logits_close_chosen_and_padded_sentences_and_end_is_last(minilm_tokenizer):
    stepwise, _ = tiny_models()
    batch = document_batch(minilm_tokenizer, [SENTENCES, SENTENCES[:3]])
    with torch.no_grad():
        logits = stepwise(
            **batch, summary_indices=torch.tensor([[3, 0], [1, -1]]), row_documents=torch.tensor([0, 1])
        ).logits
    closed = torch.finfo(logits.dtype).min
    assert logits.shape == (2, 6)  # 5 sentence slots + END
    assert logits[0, 0] == closed and logits[0, 3] == closed
    assert (logits[0, [1, 2, 4, 5]] > closed).all()
    assert logits[1, 1] == closed and (logits[1, 3:5] == closed).all() and logits[1, 5] > closed


def test_step_loss_is_cross_entropy_over_sentences_and_end(minilm_tokenizer):
    stepwise, _ = tiny_models()
    batch = document_batch(minilm_tokenizer, [SENTENCES, SENTENCES[:3]])
    summary = torch.tensor([[-1], [2], [-1]])
    rows = torch.tensor([0, 0, 1])
    labels = torch.tensor([2, 5, 0])  # sentence 2; END (= 5, the width of the sentence axis); sentence 0
    output = stepwise(**batch, summary_indices=summary, row_documents=rows, labels=labels)
    log_probs = torch.log_softmax(output.logits, -1)
    expected = -(log_probs[0, 2] + log_probs[1, 5] + log_probs[2, 0]) / 3
    torch.testing.assert_close(output.loss, expected)
    output.loss.backward()
    assert stepwise.end_embedding.weight.grad.abs().sum() > 0
    assert stepwise.document_layers[0].summary_attention.query.weight.grad.abs().sum() > 0


def test_sentence_vectors_are_computed_once_and_reused(minilm_tokenizer):
    stepwise, _ = tiny_models()
    batch = document_batch(minilm_tokenizer, [SENTENCES, SENTENCES[:3]])
    summary = torch.tensor([[-1, -1], [4, 1], [0, -1]])
    rows = torch.tensor([0, 0, 1])
    with torch.no_grad():
        document = stepwise.prepare_document(**batch)
        reused = stepwise(**document, summary_indices=summary, row_documents=rows).logits
        for row in range(3):
            d = rows[row].item()
            single = {key: value[d : d + 1] for key, value in batch.items()}
            alone = stepwise(**single, summary_indices=summary[row : row + 1]).logits
            width = int(batch["sentence_mask"][d].sum())
            torch.testing.assert_close(reused[row, :width], alone[0, :width], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(reused[row, -1], alone[0, -1], atol=1e-5, rtol=1e-5)


def test_mean_and_first_token_pooling(minilm_tokenizer):
    batch = document_batch(minilm_tokenizer, [SENTENCES[:2]])
    for pooling in ("mean", "first"):
        model, _ = tiny_models(sentence_pooling=pooling)
        with torch.no_grad():
            vectors = model.sentence_vectors(
                batch["input_ids"], batch["attention_mask"], batch["cls_positions"], batch["sentence_mask"]
            )
            ids = minilm_tokenizer(SENTENCES[1], return_tensors="pt")
            states = model.sentence_encoder(**ids).last_hidden_state[0]
        expected = states.mean(0) if pooling == "mean" else states[0]
        torch.testing.assert_close(vectors[0, 1], expected, atol=1e-5, rtol=1e-5)


def test_from_encoder_pools_as_the_encoder_was_trained(encoder_folder, tmp_path):
    """Mean pooling for an encoder whose sentence-transformers pooling config says so (all-MiniLM-L6-v2), the first
    token for a plain BERT without one; a given `sentence_pooling` wins."""
    import shutil

    from sumformers.modeling.pretrained_encoder import bundled_encoder_path, encoder_pooling

    assert encoder_pooling(str(bundled_encoder_path())) == "mean"
    assert encoder_pooling(str(encoder_folder)) == "first"
    sentence_transformers = tmp_path / "sentence-transformers-encoder"
    shutil.copytree(encoder_folder, sentence_transformers)
    (sentence_transformers / "1_Pooling").mkdir()
    (sentence_transformers / "1_Pooling" / "config.json").write_text(
        '{"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}'
    )
    for folder, given, expected in ((encoder_folder, None, "first"), (sentence_transformers, None, "mean"),
                                    (sentence_transformers, "first", "first")):
        settings = dict(TINY, **({"sentence_pooling": given} if given else {}))
        model = StepwiseHiBertForExtractiveSummarization.from_encoder(str(folder), **settings)
        assert model.config.sentence_pooling == expected


def test_config_rejects_bad_settings():
    with pytest.raises(ValueError, match="sentence_pooling"):
        HiBertConfig(sentence_pooling="max")
    with pytest.raises(ValueError, match="num_sentences=6"):
        StepwiseHiBertConfig(num_sentences=6, max_summary_sentences=4)
    with pytest.raises(ValueError, match="max_document_sentences"):
        HiBertConfig(max_document_sentences=0)


def test_non_stepwise_model_scores_only_max_sentences_with_a_warning(minilm_tokenizer):
    _, plain = tiny_models(max_document_sentences=3)
    batch = document_batch(minilm_tokenizer, [SENTENCES])
    with pytest.warns(UserWarning, match="first 3 sentences"):
        logits = plain(**batch).logits
    assert logits.shape == (1, 5)
    assert (logits[0, 3:] == torch.finfo(logits.dtype).min).all() and (logits[0, :3] > -1e30).all()


@pytest.fixture
def encoder_folder(tmp_path, minilm_tokenizer):
    """A tiny random 3-layer BERT saved like a pretrained encoder (with MiniLM's tokenizer)."""
    return save_tiny_encoder(tmp_path / "encoder", minilm_tokenizer, num_hidden_layers=3)


def test_from_encoder_splits_the_pretrained_layers(encoder_folder):
    encoder = BertModel.from_pretrained(encoder_folder, add_pooling_layer=False)
    model = StepwiseHiBertForExtractiveSummarization.from_encoder(
        str(encoder_folder),
        sentence_encoder_layers=2,
        document_layers=2,
        max_document_sentences=16,
        max_sentence_tokens=10,
    )
    assert len(model.sentence_encoder.encoder.layer) == 2
    torch.testing.assert_close(
        model.sentence_encoder.encoder.layer[1].output.dense.weight, encoder.encoder.layer[1].output.dense.weight
    )
    # Document layers copy the top two layers (1 and 2); the summary attention starts as the self-attention.
    top = model.document_layers[1]
    torch.testing.assert_close(top.attention.query.weight, encoder.encoder.layer[2].attention.self.query.weight)
    torch.testing.assert_close(top.feed_forward.intermediate.weight, encoder.encoder.layer[2].intermediate.dense.weight)
    torch.testing.assert_close(top.summary_attention.value.weight, encoder.encoder.layer[2].attention.self.value.weight)
    torch.testing.assert_close(
        top.summary_attention.output.LayerNorm.weight, encoder.encoder.layer[2].attention.output.LayerNorm.weight
    )
    with pytest.raises(ValueError, match="sentence_encoder_layers=4"):
        StepwiseHiBertForExtractiveSummarization.from_encoder(str(encoder_folder), sentence_encoder_layers=4)


def test_from_encoder_takes_an_mpnet_encoder(tmp_path, minilm_tokenizer):
    """all-mpnet-base-v2's architecture: its layers' q/k/v/o names map onto the document layers, and its sentence
    encoder runs eager attention (transformers' MPNet has no SDPA path) while the document layers keep SDPA."""
    from transformers import MPNetConfig, MPNetModel

    config = MPNetConfig(
        vocab_size=minilm_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=130,
    )
    MPNetModel(config, add_pooling_layer=False).save_pretrained(tmp_path / "mpnet")
    minilm_tokenizer.save_pretrained(tmp_path / "mpnet")
    encoder = MPNetModel.from_pretrained(tmp_path / "mpnet", add_pooling_layer=False)
    model = HiBertForExtractiveSummarization.from_encoder(
        str(tmp_path / "mpnet"), sentence_encoder_layers=2, document_layers=1, max_document_sentences=16,
        max_sentence_tokens=10, attn_implementation="sdpa",
    )
    assert model.sentence_encoder.config._attn_implementation == "eager"
    assert model.config._attn_implementation == "sdpa"
    top, pretrained = model.document_layers[0], encoder.encoder.layer[2]
    torch.testing.assert_close(top.attention.key.weight, pretrained.attention.attn.k.weight)
    torch.testing.assert_close(top.attention.output.dense.weight, pretrained.attention.attn.o.weight)
    torch.testing.assert_close(top.attention.output.LayerNorm.weight, pretrained.attention.LayerNorm.weight)
    batch = document_batch(minilm_tokenizer, [SENTENCES])
    assert model(**batch).logits.shape == (1, len(SENTENCES))


def trained_like_checkpoint(encoder_folder, tmp_path):
    """A Stepwise HiBERT with LoRA as the training script sets it up (random LoRA so it matters), saved."""
    torch.manual_seed(2)
    base = StepwiseHiBertForExtractiveSummarization.from_encoder(str(encoder_folder), **TINY)
    return lora_checkpoint(base, noise=0.01, folder=tmp_path / "checkpoint")


def test_adapter_checkpoint_reloads_the_same_model(encoder_folder, tmp_path, minilm_tokenizer):
    peft_model, checkpoint = trained_like_checkpoint(encoder_folder, tmp_path)
    assert (checkpoint / "README.md").read_text().count("Stepwise HiBERT") >= 1
    expected, loaded = trained_and_reloaded_logits(peft_model, checkpoint, minilm_tokenizer)
    torch.testing.assert_close(loaded, expected, atol=3e-3, rtol=3e-3)  # the adapter ships in fp16


def model_scorer(model, batch):
    """Step logits computed directly by the model, one full forward per row (no reuse), for the search."""

    def score_rows(document_indices, prefixes):
        rows = []
        for d, prefix in zip(document_indices, prefixes):
            single = {key: value[d : d + 1] for key, value in batch.items()}
            summary = torch.tensor([list(prefix)], dtype=torch.long).view(1, -1)
            rows.append(model(**single, summary_indices=summary).logits[0])
        width = max(row.shape[0] for row in rows)
        return torch.stack(
            [torch.cat([row[:-1], row.new_full((width - row.shape[0],), -1e30), row[-1:]]) for row in rows]
        )

    return score_rows


def test_pipeline_gives_the_beam_of_the_model(minilm_tokenizer):
    stepwise, _ = tiny_models()
    summarizer = pipeline("stepwise-summarization", model=stepwise, tokenizer=minilm_tokenizer)
    result = summarizer(ARTICLE, beam_size=2, num_sentences=3, return_steps=True)
    batch = document_batch(minilm_tokenizer, [SENTENCES])
    with torch.no_grad():
        best = stepwise_beam_search(model_scorer(stepwise, batch), [SENTENCES], beam_size=2, num_sentences=3)[0]
    assert result["selection_order"] == list(best.sentences)
    assert result["sentences"] == sorted(best.sentences)
    assert result["summary"] == "\n".join(SENTENCES[i] for i in sorted(best.sentences))
    assert [step["sentence"] for step in result["steps"]] == [step.sentence for step in best.steps]
    assert [step["score"] for step in result["steps"]] == pytest.approx([s.score for s in best.steps], abs=1e-5)
    assert result["score"] == pytest.approx(best.score, abs=1e-5)
    by_sentence = {step["sentence"]: step["probability"] for step in result["steps"]}
    assert result["scores"] == [by_sentence[i] for i in result["sentences"]]
    for step in result["steps"]:
        assert len(step["distribution"]) == len(SENTENCES) + 1
        assert sum(step["distribution"]) == pytest.approx(1.0, abs=1e-5)


def test_pipeline_batches_and_input_forms_agree(minilm_tokenizer):
    stepwise, _ = tiny_models()
    summarizer = pipeline("stepwise-summarization", model=stepwise, tokenizer=minilm_tokenizer)
    documents = [ARTICLE, {"sentences": SENTENCES[:2]}, " ".join(SENTENCES[1:4]), ""]
    one_by_one = [summarizer(document) for document in documents]
    batched = summarizer(documents, batch_size=3)
    for got, expected in zip(batched, one_by_one):
        assert got["selection_order"] == expected["selection_order"]
        assert got["score"] == pytest.approx(expected["score"], abs=1e-5)
    assert one_by_one[3] == {
        "summary": "", "sentences": [], "scores": [], "selection_order": [], "steps": [], "score": 0.0
    }
    assert summarizer({"sentences": SENTENCES}) == one_by_one[0]


def test_pipeline_budgets_and_bad_options(minilm_tokenizer):
    stepwise, plain = tiny_models()
    with pytest.raises(ValueError, match="not a stepwise model"):
        pipeline("stepwise-summarization", model=plain, tokenizer=minilm_tokenizer)
    summarizer = pipeline("stepwise-summarization", model=stepwise, tokenizer=minilm_tokenizer)
    assert len(summarizer(ARTICLE, num_sentences=1)["sentences"]) == 1
    assert sum(len(s.split()) for s in summarizer(ARTICLE, max_words=16)["summary"].split("\n")) <= 16
    with pytest.raises(ValueError, match="beam_size must be a positive integer"):
        summarizer(ARTICLE, beam_size=0)
    with pytest.raises(ValueError, match="max_summary_sentences"):
        summarizer(ARTICLE, num_sentences=20)


def test_pipeline_cuts_long_documents_with_a_warning(minilm_tokenizer):
    stepwise, _ = tiny_models(max_document_sentences=3)
    summarizer = pipeline("stepwise-summarization", model=stepwise, tokenizer=minilm_tokenizer)
    with pytest.warns(UserWarning, match="limit of 3 sentences"):
        result = summarizer(ARTICLE)
    assert all(index < 3 for index in result["sentences"])


NEWS = [
    "The storm hit the northern coast on Friday night.",
    "Thousands of homes lost power across the region.",
    "A local bakery celebrated its fiftieth anniversary.",
    "Officials said power would be back by Monday.",
]
HIGHLIGHTS = "Storm hit the northern coast on Friday .\nThousands of homes lost power ."


def test_training_rows_follow_the_oracle_in_selection_order():
    from sumformers.text.scoring import greedy_oracle

    script = training_script("train_stepwise")
    order = script.oracle_in_selection_order(NEWS, HIGHLIGHTS, num_sentences=4)
    assert sorted(order) == greedy_oracle(NEWS, HIGHLIGHTS, num_sentences=4)
    assert order == [0, 1]  # sentence 0 covers more of the highlights, so the greedy search takes it first
    features = [{"oracle": [2, 0], "labels": [1.0, 0.0, 1.0]}, {"oracle": [1], "labels": [0.0, 1.0]}]
    for feature in features:
        feature["sentence_vectors"] = torch.zeros(len(feature["labels"]), 4)
    batch = script.StepwiseCollator(collate=None, stepwise=True)(features)  # vectors: no token padding
    # One row per step: prefixes [], [2], [2, 0] then [], [1]; END is the sentence axis' width (3).
    assert batch["summary_indices"].tolist() == [[-1, -1], [2, -1], [2, 0], [-1, -1], [1, -1]]
    assert batch["row_documents"].tolist() == [0, 0, 0, 1, 1]
    assert batch["labels"].tolist() == [2, 0, 3, 1, 3]
    assert batch["sentence_mask"].tolist() == [[True, True, True], [True, True, False]]


def mapped_from(tensor, path) -> bool:
    """Whether `tensor`'s data lies in a memory mapping of the file `path` (Linux's /proc/self/maps)."""
    address, path = tensor.data_ptr(), os.path.realpath(path)
    for line in open("/proc/self/maps", encoding="utf-8"):
        fields = line.split(maxsplit=5)
        low, high = (int(bound, 16) for bound in fields[0].split("-"))
        # a mapped file that was replaced since is listed as "<path> (deleted)"
        if len(fields) == 6 and fields[5].rstrip("\n").removesuffix(" (deleted)") == path and low <= address < high:
            return True
    return False


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads Linux's list of memory mappings")
def test_the_sentence_vector_cache_reads_back_memory_mapped_what_was_saved(minilm_tokenizer, tmp_path):
    script = training_script("train_stepwise")
    model, _ = tiny_models()
    processor = model.processor_class(minilm_tokenizer, model.config)
    documents = [" ".join(NEWS), " ".join(NEWS[1:]), " ".join(NEWS[:3])]

    def features(count):
        return [processor.training_features(document, lambda sentences: [0]) for document in documents[:count]]

    cache = tmp_path / "vectors.pt"
    first = features(2)
    script.add_sentence_vectors(model, first, processor.collate, str(cache))
    encoded = [feature["sentence_vectors"].clone() for feature in first]
    assert [len(vectors) for vectors in encoded] == [4, 3]
    # the next run reads the two cached documents from the file, mapped, and encodes and adds the third
    again = features(3)
    script.add_sentence_vectors(model, again, processor.collate, str(cache))
    for feature, vectors in zip(again[:2], encoded):
        assert feature["sentence_vectors"].dtype == torch.float32
        assert torch.equal(feature["sentence_vectors"], vectors)
        assert mapped_from(feature["sentence_vectors"], cache)
    assert not mapped_from(again[2]["sentence_vectors"], cache)
    uncached = features(3)
    script.add_sentence_vectors(model, uncached, processor.collate, None)
    assert torch.equal(again[2]["sentence_vectors"], uncached[2]["sentence_vectors"])
    # the rewritten file holds all three as they were computed (the mapped vectors survived its replacement)
    saved = torch.load(cache, weights_only=True)
    keys = [script._vector_key(model, feature, False) for feature in again]
    assert sorted(saved) == sorted(keys)
    assert all(torch.equal(saved[key], feature["sentence_vectors"]) for key, feature in zip(keys, again))
    assert not cache.with_name("vectors.pt.tmp").exists()


def test_a_sentence_vector_encoding_cut_off_resumes_from_its_last_save(minilm_tokenizer, tmp_path):
    script = training_script("train_stepwise")
    model, _ = tiny_models()
    processor = model.processor_class(minilm_tokenizer, model.config)
    documents = [" ".join(NEWS), " ".join(NEWS[1:]), " ".join(NEWS[:3])]
    features = [processor.training_features(document, lambda sentences: [0]) for document in documents]
    batches = []

    def cut_off_after_two_batches(batch_features):
        if len(batches) == 2:
            raise KeyboardInterrupt
        batches.append(len(batch_features))
        return processor.collate(batch_features)

    cache = tmp_path / "vectors.pt"
    with pytest.raises(KeyboardInterrupt):  # save_seconds=0: the file is rewritten after every batch
        script.add_sentence_vectors(
            model, features, cut_off_after_two_batches, str(cache), batch_size=1, save_seconds=0
        )
    keys = [script._vector_key(model, feature, False) for feature in features]
    assert sorted(torch.load(cache, weights_only=True)) == sorted(keys[:2])
    encoded = []
    script.add_sentence_vectors(
        model, features, lambda batch: encoded.append(len(batch)) or processor.collate(batch), str(cache)
    )
    assert encoded == [1]  # only the third document is encoded again
    assert sorted(torch.load(cache, weights_only=True)) == sorted(keys)
    # a long interval saves only at the end: a run cut off before it leaves no file
    batches.clear()
    other = tmp_path / "other.pt"
    with pytest.raises(KeyboardInterrupt):
        script.add_sentence_vectors(model, features, cut_off_after_two_batches, str(other), batch_size=1)
    assert not other.exists()


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["stepwise_hibert", "hibert", "stepwise_etcsum"])
def test_training_script_saves_a_small_loadable_checkpoint(model_type, encoder_folder, tmp_path):
    from conftest import REPO_ROOT

    data = tmp_path / "train.jsonl"
    with data.open("w") as handle:
        for number in range(6):
            handle.write(json.dumps({"document": " ".join(NEWS[number % 2 :] + NEWS), "summary": HIGHLIGHTS}) + "\n")
    output = tmp_path / "run"
    overrides = {"max_document_sentences": 16, "max_sentence_tokens": 10}
    if "hibert" in model_type:
        overrides.update(sentence_encoder_layers=2, document_layers=2)
    else:
        overrides.update(local_radius=4, relative_pos_max_distance=3)
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / "train_stepwise.py"), "--model_type", model_type,
        "--model_name_or_path", str(encoder_folder), "--train_file", str(data), "--validation_file", str(data),
        "--eval_split", "train[:2]", "--output_dir", str(output), "--per_device_train_batch_size", "2",
        "--max_steps", "2", "--do_train", "--do_eval", "--use_cpu", "--config_overrides", json.dumps(overrides),
        "--sentence_vector_cache", str(tmp_path / "vectors.pt"),
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    final = output / "final"
    assert (final / "adapter_model.safetensors").stat().st_size < 20 * 2**20
    model = load_model(str(final))
    assert model.config.model_type == model_type
    assert set(json.loads((output / "eval_results.json").read_text())) == {"rouge1", "rouge2", "rougeLsum"}
    if "hibert" in model_type:
        assert (tmp_path / "vectors.pt").is_file()  # the frozen sentence encoder's vectors, kept for the next run


def test_cli_summarizes_with_a_stepwise_model(minilm_tokenizer, tmp_path):
    import sumformers_cli

    stepwise, _ = tiny_models()
    folder = tmp_path / "model"
    stepwise.save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": str(i), "document": ARTICLE}) + "\n" for i in range(3)))
    output = tmp_path / "out.jsonl"
    arguments = ["summarize", str(source), "--model", str(folder), "--output", str(output), "--num-sentences", "2"]
    assert sumformers_cli.main(arguments) == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    expected = pipeline("stepwise-summarization", model=stepwise, tokenizer=minilm_tokenizer)(ARTICLE, num_sentences=2)
    assert [row["id"] for row in rows] == ["0", "1", "2"]
    assert all(row["selection_order"] == expected["selection_order"] for row in rows)
    assert 1 <= len(rows[0]["sentences"]) <= 2


@pytest.mark.slow  # a fresh interpreter loads the remote code (20-60 s on the shared machine)
def test_exported_repo_gives_the_in_package_beam_without_sumformers(encoder_folder, tmp_path):
    _, checkpoint = trained_like_checkpoint(encoder_folder, tmp_path)
    repo = export_model(str(checkpoint), str(tmp_path / "repo"))
    config = json.loads((repo / "config.json").read_text())
    assert config["custom_pipelines"]["stepwise-summarization"]["impl"] == (
        "stepwise_summarization.StepwiseSummarizationPipeline"
    )
    assert {"stepwise_decoding.py", "modeling_stepwise_hibert.py", "sentences.py", "sentence_layout.py"} <= {
        path.name for path in repo.glob("*.py")
    }
    remote = beam_without_sumformers(repo)
    assert remote["task"] == "stepwise-summarization"
    assert remote["model"] == "StepwiseHiBertForExtractiveSummarization"
    expected = beam_in_package(checkpoint)
    assert remote["result"]["selection_order"] == expected["selection_order"]
    assert remote["result"]["score"] == pytest.approx(expected["score"], abs=1e-4)
