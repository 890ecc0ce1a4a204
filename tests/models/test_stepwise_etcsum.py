"""ETCSum and Stepwise ETCSum: the model tester's checks (backends, batching, loading: `TestETCSumModel`,
`TestStepwiseETCSumModel`), the row layout (document ⁀ partial summary, one global token per sentence), hard g2l
masking, the step loss, 4,096-token documents, loading from a pretrained encoder, adapter checkpoints, the stepwise
pipeline and the exported repo."""

import pytest
import torch
from transformers import BertModel, pipeline

from conftest import tiny_bert_config
from stepwise_testing import (
    beam_in_package,
    beam_without_sumformers,
    lora_checkpoint,
    save_tiny_encoder,
    trained_and_reloaded_logits,
)
from sumformers import (
    ETCSumConfig,
    ETCSumForExtractiveSummarization,
    StepwiseETCSumConfig,
    StepwiseETCSumForExtractiveSummarization,
)
from sumformers.hub import export_model
from sumformers.modeling.modeling_stepwise_etcsum import DOCUMENT_SENTENCE, END_OF_SUMMARY, SUMMARY_SENTENCE
from sumformers.processing.sentence_layout import collate_sentence_batch, encode_sentences
from test_modeling_common import ARTICLE, SENTENCES, ModelTesterMixin, document_batch

TINY = dict(local_radius=4, relative_pos_max_distance=3, max_sentence_tokens=10, max_document_tokens=4096)


def tiny_config(stepwise=True, layers=2, **overrides):
    settings = dict(TINY, encoder_config=tiny_bert_config(num_hidden_layers=layers).to_dict())
    settings.update(overrides)
    return StepwiseETCSumConfig(**settings) if stepwise else ETCSumConfig(**settings)


def tiny_model(stepwise=True, layers=2, **overrides):
    torch.manual_seed(0)
    model_class = StepwiseETCSumForExtractiveSummarization if stepwise else ETCSumForExtractiveSummarization
    model = model_class(tiny_config(stepwise, layers, **overrides)).eval()
    with torch.no_grad():  # non-zero relative biases and keys, so that the tests see them
        for layer in model.layers:
            layer.attention.relative_bias.weight.normal_(0.0, 0.5)
            if hasattr(layer.attention, "relative_keys"):
                layer.attention.relative_keys.weight.normal_(0.0, 0.5)
    return model


class TestETCSumModel(ModelTesterMixin):
    model_class = ETCSumForExtractiveSummarization

    def get_config(self):
        return tiny_config(stepwise=False)


class TestStepwiseETCSumModel(ModelTesterMixin):
    model_class = StepwiseETCSumForExtractiveSummarization

    def get_config(self):
        return tiny_config()


def test_rows_lay_out_document_then_summary_by_hand():
    model = tiny_model()
    # [CLS] a b [SEP] [CLS] c [SEP] [CLS] d e f [SEP] ; two documents, the second with one sentence
    input_ids = torch.tensor([[101, 1, 2, 102, 101, 3, 102, 101, 4, 5, 6, 102], [101, 7, 102] + [0] * 9])
    attention_mask = (input_ids != 0).long()
    cls_positions = torch.tensor([[0, 4, 7], [0, 0, 0]])
    sentence_mask = torch.tensor([[True, True, True], [True, False, False]])
    summary = torch.tensor([[2, 0], [-1, -1]])
    rows = model._layout(
        input_ids, attention_mask, cls_positions, sentence_mask, summary, torch.tensor([0, 1]), end=True
    )
    # Row 0: the document, then sentence 2's tokens, then sentence 0's (token type 1).
    assert rows.input_ids[0].tolist() == [
        101, 1, 2, 102, 101, 3, 102, 101, 4, 5, 6, 102, 101, 4, 5, 6, 102, 101, 1, 2, 102
    ]
    assert rows.token_type_ids[0].tolist() == [0] * 12 + [1] * 9
    assert rows.long_sentence_ids[0].tolist() == [0] * 4 + [1] * 3 + [2] * 5 + [3] * 5 + [4] * 4
    assert rows.position_ids[0].tolist() == list(range(21))
    # Globals: three document sentences, two summary sentences (ids 3, 4 = after the sentence axis), the end token.
    assert rows.global_sentence_ids[0].tolist() == [0, 1, 2, 3, 4, 5]
    assert rows.global_types[0].tolist() == [DOCUMENT_SENTENCE] * 3 + [SUMMARY_SENTENCE] * 2 + [END_OF_SUMMARY]
    assert rows.global_positions[0].tolist() == [0, 1, 2, 0, 1, 0]
    assert rows.global_mask.tolist() == [[True] * 6, [True, True] + [False] * 4]
    # Row 1 packs its globals too: its one sentence, then the end token (so distances ignore batch padding).
    assert rows.global_types[1, :2].tolist() == [DOCUMENT_SENTENCE, END_OF_SUMMARY]
    assert rows.global_sentence_ids[1].tolist() == [0, 1, -1, -1, -1, -1]
    assert rows.end_index.tolist() == [5, 1]
    # Row 1: its three tokens, then padding.
    assert rows.input_ids[1].tolist() == [101, 7, 102] + [0] * 18
    assert rows.long_mask[1].tolist() == [True] * 3 + [False] * 18
    assert rows.long_sentence_ids[1, :4].tolist() == [0, 0, 0, -1]


def global_states_after_one_layer(model, input_ids, batch):
    rows = model._layout(
        input_ids,
        batch["attention_mask"],
        batch["cls_positions"],
        batch["sentence_mask"],
        torch.full((1, 0), -1),
        torch.tensor([0]),
        end=True,
    )
    with torch.no_grad():
        return model._encode(rows)[0, : rows.global_types.shape[1]]


@pytest.mark.parametrize("hard", [True, False])
def test_a_global_token_with_hard_masking_sees_only_its_sentence(minilm_tokenizer, hard):
    model = tiny_model(layers=1, hard_g2l_masking=hard)
    batch = document_batch(minilm_tokenizer, [SENTENCES[:3]])
    before = global_states_after_one_layer(model, batch["input_ids"], batch)
    changed = batch["input_ids"].clone()
    second = slice(batch["cls_positions"][0, 1] + 1, batch["cls_positions"][0, 2] - 1)
    changed[0, second] = 2000  # new words in sentence 1 only
    after = global_states_after_one_layer(model, changed, batch)
    moved = (after - before).abs().amax(-1)
    assert moved[1] > 1e-3  # sentence 1's own global token reads its words
    if hard:
        # After one layer the other sentences' global tokens and the end token have not seen sentence 1's words.
        assert moved[0] == 0 and moved[2] == 0 and moved[3] == 0
    else:
        assert moved[0] > 1e-3 and moved[3] > 1e-3


def test_step_logits_close_chosen_and_padded_sentences_and_the_loss_is_cross_entropy(minilm_tokenizer):
    model = tiny_model()
    batch = document_batch(minilm_tokenizer, [SENTENCES, SENTENCES[:3]])
    summary = torch.tensor([[3, 0], [1, -1], [-1, -1]])
    labels = torch.tensor([5, 0, 2])  # END (the sentence axis' width), sentence 0, sentence 2
    output = model(**batch, summary_indices=summary, row_documents=torch.tensor([0, 1, 1]), labels=labels)
    closed = torch.finfo(output.logits.dtype).min
    assert output.logits.shape == (3, 6)
    assert (
        output.logits[0, 0] == closed
        and output.logits[0, 3] == closed
        and (output.logits[0, [1, 2, 4, 5]] > closed).all()
    )
    assert output.logits[1, 1] == closed and (output.logits[1, 3:5] == closed).all()
    log_probs = torch.log_softmax(output.logits, -1)
    torch.testing.assert_close(output.loss, -(log_probs[0, 5] + log_probs[1, 0] + log_probs[2, 2]) / 3)
    output.loss.backward()
    assert model.layers[0].attention.relative_bias.weight.grad.abs().sum() > 0
    assert model.layers[0].attention.relative_keys.weight.grad.abs().sum() > 0
    assert model.summary_positions.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="real sentences"):
        model(**batch, summary_indices=torch.tensor([[4], [4]]), row_documents=torch.tensor([0, 1]))


def test_non_stepwise_model_reads_4096_tokens(minilm_tokenizer):
    model = tiny_model(stepwise=False, max_document_sentences=512)
    sentences = [f"Sentence number {i} reports on the weather in the town today." for i in range(400)]
    encoded = encode_sentences(
        minilm_tokenizer, sentences, max_length=4096, max_sentence_tokens=10, warn_on_truncation=False
    )
    assert len(encoded["input_ids"]) > 4000
    batch = collate_sentence_batch([encoded], minilm_tokenizer.pad_token_id)
    changed = dict(batch, input_ids=batch["input_ids"].clone())
    last = encoded["cls_positions"][-1]
    changed["input_ids"][0, last + 1 : len(encoded["input_ids"]) - 1] = 2000  # new words in the last sentence only
    with torch.no_grad():
        logits, logits_changed = model(**batch).logits, model(**changed).logits
    assert logits.shape == (1, encoded["num_document_sentences"])
    # The last sentence, past token 4000, is read: its own score follows its words (float32 noise is ~1e-8), and moves
    # more than any other sentence's.
    moved = (logits_changed[0] - logits[0]).abs()
    assert moved[-1] > 1e-6 and int(moved.argmax()) == len(moved) - 1
    with pytest.raises(ValueError, match="max_document_tokens=4096"):
        model(input_ids=torch.ones(1, 4097, dtype=torch.long), cls_positions=torch.zeros(1, 1, dtype=torch.long),
              sentence_mask=torch.ones(1, 1, dtype=torch.bool))


def test_processor_keeps_whole_articles_past_2048_tokens_and_the_oracle_reads_them(minilm_tokenizer):
    """The default limit (max_document_tokens = 4,096) covers most CNN/DM articles; training features keep every
    sentence that fits and the full oracle reads the whole article."""
    config = StepwiseETCSumConfig(encoder_config=tiny_bert_config().to_dict())
    processor = StepwiseETCSumForExtractiveSummarization.processor_class(minilm_tokenizer, config)
    sentences = [f"Sentence number {i} reports on the weather in the town of Springfield today." for i in range(150)]
    inputs = processor({"sentences": sentences})
    assert inputs["input_ids"].shape[1] > 2048 and len(inputs["sentences"]) == 150
    features = processor.training_features(
        {"sentences": sentences}, lambda document: [149, 3, 100], oracle_over_document=True
    )
    assert len(features["input_ids"]) > 2048 and features["oracle"] == [149, 3, 100]


@pytest.fixture
def encoder_folder(tmp_path, minilm_tokenizer):
    """A tiny random 2-layer BERT saved like a pretrained encoder (with MiniLM's tokenizer)."""
    return save_tiny_encoder(tmp_path / "encoder", minilm_tokenizer, num_hidden_layers=2, max_position_embeddings=64)


def test_from_encoder_gives_relative_keys_over_the_tiled_positions(encoder_folder):
    model = StepwiseETCSumForExtractiveSummarization.from_encoder(str(encoder_folder), **TINY)
    assert model.config.relative_attention == "keys" and model.config.long_position_embeddings == "tiled"
    assert model.embeddings.position_embeddings.num_embeddings == model.config.long_length
    assert all((layer.attention.relative_keys.weight == 0).all() for layer in model.layers)


def test_from_encoder_gives_the_etc_design_without_absolute_positions(encoder_folder):
    encoder = BertModel.from_pretrained(encoder_folder, add_pooling_layer=False)
    model = StepwiseETCSumForExtractiveSummarization.from_encoder(
        str(encoder_folder), **TINY, long_position_embeddings="none"
    )
    assert model.config.relative_attention == "keys"
    assert model.embeddings.position_embeddings is None  # nothing tiled past the pretrained positions
    for layer in model.layers:
        assert layer.attention.relative_keys.weight.shape == (2 * 3 + 3, 4, 8)  # [ids, heads, head_dim]
        assert (layer.attention.relative_keys.weight == 0).all() and (layer.attention.relative_bias.weight == 0).all()
    torch.testing.assert_close(model.layers[1].attention.key.weight, encoder.encoder.layer[1].attention.self.key.weight)
    torch.testing.assert_close(model.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)


def test_word_order_comes_from_the_relative_keys(minilm_tokenizer):
    """Without absolute positions, two sentences whose words are swapped inside the band read the same to a model
    whose relative keys and biases are zero (no position signal at all), and differently once the keys are set."""
    model = tiny_model(stepwise=False, layers=1, long_position_embeddings="none")
    batch = document_batch(minilm_tokenizer, [SENTENCES[:2]])
    swapped = dict(batch, input_ids=batch["input_ids"].clone())
    swapped["input_ids"][0, [1, 2]] = batch["input_ids"][0, [2, 1]]
    layer = model.layers[0].attention

    def first_sentence_state(inputs):  # the state the first sentence is scored from
        return model(**inputs).sentence_states[0, 0]

    with torch.no_grad():
        layer.relative_bias.weight.zero_()
        layer.relative_keys.weight.zero_()
        torch.testing.assert_close(first_sentence_state(batch), first_sentence_state(swapped), rtol=0, atol=1e-5)
        layer.relative_keys.weight.normal_(0.0, 0.5)
        assert (first_sentence_state(batch) - first_sentence_state(swapped)).abs().max() > 1e-4  # small random queries


def test_a_new_model_knows_where_a_sentence_stands_before_training(encoder_folder, minilm_tokenizer):
    """The collapse of the GPU run without absolute positions: sentences with the same words inside one band get
    the same first-token state at initialisation (relative tables at zero), so nothing tells the lead sentence from
    the others; with the default tiled positions each gets its own."""
    same = ["the council voted on the new budget ."] * 4
    batch = document_batch(minilm_tokenizer, [same])
    states = {}
    for positions in ("tiled", "none"):
        torch.manual_seed(0)
        model = ETCSumForExtractiveSummarization.from_encoder(
            str(encoder_folder), **dict(TINY, local_radius=84), long_position_embeddings=positions
        ).eval()
        with torch.no_grad():
            states[positions] = model(**batch).sentence_states[0]
    spread = {name: (value - value.mean(0)).abs().max().item() for name, value in states.items()}
    assert spread["none"] < 1e-5 < 1e-2 < spread["tiled"], spread


def test_from_encoder_with_tiled_positions_copies_the_layers_and_repeats_the_positions(encoder_folder):
    encoder = BertModel.from_pretrained(encoder_folder, add_pooling_layer=False)
    model = StepwiseETCSumForExtractiveSummarization.from_encoder(
        str(encoder_folder), **TINY, relative_attention="bias", long_position_embeddings="tiled"
    )
    assert not hasattr(model.layers[0].attention, "relative_keys")
    table = model.embeddings.position_embeddings.weight
    assert table.shape[0] == 4096 + 8 * 12  # the document and the longest partial summary
    pretrained = encoder.embeddings.position_embeddings.weight
    torch.testing.assert_close(table[64:128], pretrained)
    torch.testing.assert_close(table[4096:4096 + 64], pretrained)
    torch.testing.assert_close(model.layers[1].attention.key.weight, encoder.encoder.layer[1].attention.self.key.weight)
    torch.testing.assert_close(
        model.layers[1].feed_forward.output.dense.weight, encoder.encoder.layer[1].output.dense.weight
    )
    assert (model.layers[0].attention.relative_bias.weight == 0).all()
    words = encoder.embeddings.word_embeddings.weight
    torch.testing.assert_close(
        model.global_embeddings.weight[END_OF_SUMMARY], words[102] + encoder.embeddings.token_type_embeddings.weight[0]
    )


def test_configs_saved_before_relative_keys_load_the_old_design(tmp_path):
    new = tiny_config(long_position_embeddings="none")
    assert (tiny_config().relative_attention, tiny_config().long_position_embeddings) == ("keys", "tiled")
    new.save_pretrained(tmp_path / "new")
    reloaded = StepwiseETCSumConfig.from_pretrained(tmp_path / "new")
    assert (reloaded.relative_attention, reloaded.long_position_embeddings) == ("keys", "none")
    old = new.to_dict()
    del old["relative_attention"], old["long_position_embeddings"]
    legacy = StepwiseETCSumConfig.from_dict(old)
    assert (legacy.relative_attention, legacy.long_position_embeddings) == ("bias", "tiled")
    model = StepwiseETCSumForExtractiveSummarization(legacy)
    assert model.embeddings.position_embeddings.num_embeddings == legacy.long_length
    assert not any("relative_keys" in name for name, _ in model.named_parameters())
    with pytest.raises(ValueError, match="relative_attention"):
        tiny_config(relative_attention="values")
    with pytest.raises(ValueError, match="long_position_embeddings"):
        tiny_config(long_position_embeddings="sinusoid")


def trained_like_checkpoint(encoder_folder, tmp_path):
    """A Stepwise ETCSum with LoRA as the training script sets it up (random LoRA so it matters), saved."""
    torch.manual_seed(2)
    base = StepwiseETCSumForExtractiveSummarization.from_encoder(str(encoder_folder), **TINY)
    return lora_checkpoint(base, noise=0.05, folder=tmp_path / "checkpoint")


def test_adapter_checkpoint_reloads_the_same_model(encoder_folder, tmp_path, minilm_tokenizer):
    peft_model, checkpoint = trained_like_checkpoint(encoder_folder, tmp_path)
    assert "Stepwise ETCSum" in (checkpoint / "README.md").read_text()
    expected, loaded = trained_and_reloaded_logits(peft_model, checkpoint, minilm_tokenizer)
    torch.testing.assert_close(loaded, expected, atol=3e-3, rtol=3e-3)  # the adapter ships in fp16


def test_stepwise_pipeline_batches_give_the_single_results(minilm_tokenizer):
    stepwise = tiny_model()
    summarizer = pipeline("stepwise-summarization", model=stepwise, tokenizer=minilm_tokenizer)
    documents = [ARTICLE, {"sentences": SENTENCES[:2]}, ""]
    one_by_one = [summarizer(document, beam_size=2, num_sentences=3) for document in documents]
    batched = summarizer(documents, beam_size=2, num_sentences=3, batch_size=3)
    for got, expected in zip(batched, one_by_one):
        assert got["selection_order"] == expected["selection_order"]
        assert got["score"] == pytest.approx(expected["score"], abs=1e-5)
    assert 1 <= len(one_by_one[0]["sentences"]) <= 3 and one_by_one[2]["summary"] == ""


@pytest.mark.slow  # a fresh interpreter loads the remote code (20-60 s on the shared machine)
def test_exported_repo_gives_the_in_package_beam_without_sumformers(encoder_folder, tmp_path):
    _, checkpoint = trained_like_checkpoint(encoder_folder, tmp_path)
    repo = export_model(str(checkpoint), str(tmp_path / "repo"))
    assert {"attention.py", "bert_blocks.py", "stepwise_decoding.py", "modeling_stepwise_etcsum.py"} <= {
        path.name for path in repo.glob("*.py")
    }
    remote = beam_without_sumformers(repo)
    assert remote["task"] == "stepwise-summarization"
    assert remote["model"] == "StepwiseETCSumForExtractiveSummarization"
    expected = beam_in_package(checkpoint)
    assert remote["result"]["selection_order"] == expected["selection_order"]
    assert remote["result"]["score"] == pytest.approx(expected["score"], abs=1e-4)


def literal_layout(input_ids, attention_mask, cls_positions, sentence_mask, summary_indices, row_documents, end, span):
    """The step rows written out row by row with Python lists (how `_layout` built them before it worked on tensors):
    each row's document tokens, then each chosen sentence's first `span` tokens; one global token per document
    sentence, per summary sentence and (with `end`) the end."""
    lengths, starts = attention_mask.sum(-1).tolist(), cls_positions.tolist()
    counts = sentence_mask.long().sum(-1).tolist()
    rows = []
    for row, document in enumerate(row_documents.tolist()):
        count, length = counts[document], lengths[document]
        bounds = starts[document][:count] + [length]
        index, sentence_ids, types = list(range(length)), [], [0] * length
        for s in range(count):
            sentence_ids += [s] * (bounds[s + 1] - bounds[s])
        summary = [chosen for chosen in summary_indices[row].tolist() if chosen >= 0]
        for k, chosen in enumerate(summary):
            stop = min(bounds[chosen + 1], bounds[chosen] + span)
            index += range(bounds[chosen], stop)
            sentence_ids += [count + k] * (stop - bounds[chosen])
            types += [1] * (stop - bounds[chosen])
        global_types = [DOCUMENT_SENTENCE] * count + [SUMMARY_SENTENCE] * len(summary) + [END_OF_SUMMARY] * end
        global_positions = list(range(count)) + list(range(len(summary))) + [0] * end
        rows.append((document, index, sentence_ids, types, global_types, global_positions))
    long_width, global_width = max(len(r[1]) for r in rows), max(len(r[4]) for r in rows)

    def padded(position, width, fill):
        return torch.tensor([r[position] + [fill] * (width - len(r[position])) for r in rows])

    index = padded(1, long_width, 0)
    long_mask = torch.tensor([[i < len(r[1]) for i in range(long_width)] for r in rows])
    global_mask = torch.tensor([[i < len(r[4]) for i in range(global_width)] for r in rows])
    return {
        "input_ids": input_ids[torch.tensor([r[0] for r in rows])[:, None], index] * long_mask,
        "long_mask": long_mask,
        "long_sentence_ids": padded(2, long_width, -1),
        "token_type_ids": padded(3, long_width, 0),
        "global_types": padded(4, global_width, DOCUMENT_SENTENCE),
        "global_positions": padded(5, global_width, 0),
        "global_mask": global_mask,
        "global_sentence_ids": torch.where(global_mask, torch.arange(global_width), -1),
        "end_index": global_mask.long().sum(-1) - 1 if end else None,
    }


@pytest.mark.parametrize("end", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_step_rows_built_on_tensors_equal_the_rows_written_out(seed, end):
    """The step rows (`_layout`, built by index arithmetic without reading the inputs back to Python) equal the rows
    written out with lists, over random documents, padding, sentence counts and partial summaries (with -1 slots
    between chosen sentences too, and rows without a summary)."""
    model = tiny_model()
    generator = torch.Generator().manual_seed(seed)
    documents, slots, steps = 3, 8, 4
    sentence_lengths = torch.randint(1, 15, (documents, slots), generator=generator)
    counts = torch.randint(1, slots + 1, (documents,), generator=generator)
    sentence_mask = torch.arange(slots) < counts[:, None]
    sentence_lengths = sentence_lengths * sentence_mask
    cls_positions = torch.cumsum(sentence_lengths, -1) - sentence_lengths  # padding slots repeat the length
    lengths = sentence_lengths.sum(-1)
    width = int(lengths.max()) + int(torch.randint(0, 5, (), generator=generator))
    attention_mask = (torch.arange(width) < lengths[:, None]).long()
    input_ids = torch.randint(1000, 2000, (documents, width), generator=generator) * attention_mask
    row_documents = torch.randint(0, documents, (7,), generator=generator)
    summary_indices = torch.full((7, steps), -1)
    for row, document in enumerate(row_documents.tolist()):
        size = int(torch.randint(0, steps, (), generator=generator))
        taken = torch.randperm(int(counts[document]), generator=generator)[:size]
        summary_indices[row, : len(taken)] = taken
    summary_indices[0] = -1  # a row without a summary
    summary_indices[1, 0], summary_indices[1, 2] = -1, 0  # a padding slot before a chosen sentence
    arguments = (input_ids, attention_mask, cls_positions, sentence_mask, summary_indices, row_documents, end)
    rows = model._layout(*arguments)
    expected = literal_layout(*arguments, span=model.config.max_sentence_tokens + 2)
    for name, tensor in expected.items():
        got = getattr(rows, name)
        assert (got is None and tensor is None) or torch.equal(got, tensor), name
    assert torch.equal(rows.position_ids, torch.arange(rows.input_ids.shape[1]).expand(7, -1))


def test_a_step_off_the_cpu_reads_nothing_back_and_keeps_the_rows(minilm_tokenizer, monkeypatch):
    """A training step as on a GPU (`HOST_READ_DEVICES` emptied: the rows' widths bound by the inputs' shapes, the
    checks asserted on the device) reads no tensor back to the host (`.item()`, `.tolist()`, `bool()`, `int()`,
    ...), over real tokenized documents: its rows are the exact ones followed by masked padding, and its logits and
    set-label loss (with an unlikelihood negative) equal the exact rows'."""
    from sumformers.modeling import sentence_scoring

    model = tiny_model()
    batch = document_batch(minilm_tokenizer, [SENTENCES, SENTENCES[:3]])
    summary = torch.tensor([[3, 0], [1, -1], [-1, -1], [-1, 2]])
    row_documents = torch.tensor([0, 1, 1, 0])
    labels = torch.zeros(4, 6)
    labels[0, 5] = labels[1, 0] = labels[1, 2] = labels[2, 1] = labels[3, 4] = 1.0
    labels[0, 1] = -0.5
    layout_inputs = (
        batch["input_ids"], batch["attention_mask"], batch["cls_positions"], batch["sentence_mask"].bool(), summary,
        row_documents, True,
    )  # fmt: skip
    exact_rows = model._layout(*layout_inputs)
    exact = model(**batch, summary_indices=summary, row_documents=row_documents, labels=labels)

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was read back to the host during the step")

    with monkeypatch.context() as patch:
        patch.setattr(sentence_scoring, "HOST_READ_DEVICES", ())
        for method in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
            patch.setattr(torch.Tensor, method, refuse)
        bound_rows = model._layout(*layout_inputs)
        bound = model(**batch, summary_indices=summary, row_documents=row_documents, labels=labels)

    span = model.config.max_sentence_tokens + 2
    assert bound_rows.input_ids.shape[1] == batch["input_ids"].shape[1] + 2 * span
    assert bound_rows.global_mask.shape[1] == batch["sentence_mask"].shape[1] + 2 + 1
    for name in ("input_ids", "token_type_ids", "long_mask", "long_sentence_ids", "global_types", "global_positions",
                 "global_mask", "global_sentence_ids", "end_index", "position_ids"):  # fmt: skip
        got, want = getattr(bound_rows, name), getattr(exact_rows, name)
        if got.dim() == 2:
            got, extra = got[:, : want.shape[1]], got[:, want.shape[1] :]
            padding = {"long_sentence_ids": -1, "global_sentence_ids": -1, "global_positions": 0}.get(name, 0)
            if name != "position_ids":
                assert (extra == padding).all(), name
        assert torch.equal(got, want), name
    torch.testing.assert_close(bound.logits, exact.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bound.loss, exact.loss, rtol=1e-5, atol=1e-6)
    log_probs = torch.log_softmax(exact.logits.float(), -1)
    by_hand = -(
        log_probs[0, 5] + torch.log1p(-log_probs[0, 1].exp()) * 0.5
        + torch.logsumexp(log_probs[1, [0, 2]], 0) + log_probs[2, 1] + log_probs[3, 4]
    ) / 4  # fmt: skip
    torch.testing.assert_close(exact.loss, by_hand)
    with pytest.raises(ValueError, match="positive entry"):
        model(**batch, summary_indices=summary, row_documents=row_documents, labels=labels.clamp(max=0))
    with monkeypatch.context() as patch:  # as on a GPU: asserted on the device, the message kept
        patch.setattr(sentence_scoring, "HOST_READ_DEVICES", ())
        with pytest.raises(RuntimeError, match="real sentences"):
            model(**batch, summary_indices=torch.tensor([[4], [4]]), row_documents=torch.tensor([0, 1]))
