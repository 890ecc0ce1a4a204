import warnings

import pytest
import torch

from conftest import tiny_bertsum_config
from sumformers import BertSumForExtractiveSummarization
from sumformers.processing.sentence_layout import collate_sentence_batch, encode_sentences
from test_modeling_common import ModelTesterMixin

SENTENCES = [
    "The council approved the new budget on Monday.",
    "It includes money for schools and roads.",
    "Critics said the plan raises taxes too quickly.",
    "The mayor will sign it next week.",
]


def batch_for(tokenizer, documents, labels=None):
    features = []
    for index, sentences in enumerate(documents):
        feature = encode_sentences(tokenizer, sentences)
        if labels is not None:
            feature["labels"] = labels[index]
        features.append(feature)
    return collate_sentence_batch(features, tokenizer.pad_token_id)


class TestBertSumModel(ModelTesterMixin):
    model_class = BertSumForExtractiveSummarization

    def get_config(self):
        return tiny_bertsum_config()


def test_encoding_puts_cls_before_every_sentence_with_interval_segments(minilm_tokenizer):
    encoded = encode_sentences(minilm_tokenizer, SENTENCES)
    ids, segments = encoded["input_ids"], encoded["token_type_ids"]
    assert [ids[p] for p in encoded["cls_positions"]] == [minilm_tokenizer.cls_token_id] * 4
    for number, start in enumerate(encoded["cls_positions"]):
        end = encoded["cls_positions"][number + 1] if number + 1 < 4 else len(ids)
        assert ids[end - 1] == minilm_tokenizer.sep_token_id
        assert set(segments[start:end]) == {number % 2}
        words = minilm_tokenizer.decode(ids[start + 1 : end - 1])
        assert words == SENTENCES[number].lower()


def test_encoding_truncates_at_the_limit_and_says_so(minilm_tokenizer):
    long_document = [f"Sentence number {i} talks about the weather in town." for i in range(200)]
    with pytest.warns(UserWarning, match="limit of 128 tokens"):
        encoded = encode_sentences(minilm_tokenizer, long_document, max_length=128)
    assert len(encoded["input_ids"]) <= 128
    assert 0 < encoded["num_document_sentences"] == len(encoded["cls_positions"]) < 200


def test_loss_is_bce_over_real_sentences(minilm_tokenizer, tiny_bertsum):
    model = tiny_bertsum()
    labels = [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0]]
    batch = batch_for(minilm_tokenizer, [SENTENCES, SENTENCES[:2]], labels)
    output = model(**batch)
    real_logits = torch.cat([output.logits[0, :4], output.logits[1, :2]])
    target = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(real_logits, target)
    torch.testing.assert_close(output.loss, expected)
    assert output.logits.shape == (2, 4)
    assert (output.logits[1, 2:] == torch.finfo(output.logits.dtype).min).all()


def test_sentence_vectors_are_the_cls_states(minilm_tokenizer, tiny_bertsum):
    model = tiny_bertsum(inter_sentence_layers=0)
    batch = batch_for(minilm_tokenizer, [SENTENCES])
    tokens = model.encoder(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]
    ).last_hidden_state
    output = model(**batch)
    torch.testing.assert_close(output.sentence_states[0], tokens[0, batch["cls_positions"][0]])
    expected_logits = model.scorer(tokens[0, batch["cls_positions"][0]]).squeeze(-1)
    torch.testing.assert_close(output.logits[0], expected_logits)


def test_from_encoder_accepts_roberta_and_adds_a_second_segment(tmp_path):
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(0)
    roberta = RobertaModel(
        RobertaConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=130, type_vocab_size=1,
        ),
        add_pooling_layer=False,
    )
    roberta.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BertSumForExtractiveSummarization.from_encoder(str(tmp_path), inter_sentence_layers=0)
    assert model.config.encoder_config.type_vocab_size == 2
    assert model.config.max_position_embeddings == 128  # RoBERTa keeps pad_token_id + 1 positions back
    segments = model.encoder.embeddings.token_type_embeddings.weight
    torch.testing.assert_close(segments[0], roberta.embeddings.token_type_embeddings.weight[0])
    torch.testing.assert_close(segments[1], segments[0])
    torch.testing.assert_close(
        model.encoder.embeddings.word_embeddings.weight, roberta.embeddings.word_embeddings.weight
    )


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_bottom_states_then_the_top_layers_equal_the_whole_encoder(minilm_tokenizer, attn_implementation):
    torch.manual_seed(0)
    config = tiny_bertsum_config(encoder_layers=3)
    config._attn_implementation = attn_implementation
    model = BertSumForExtractiveSummarization(config).eval()
    assert model.encoder.config._attn_implementation == attn_implementation
    batch = batch_for(minilm_tokenizer, [SENTENCES, SENTENCES[1:3]], [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0]])
    whole = model(**batch)
    tokens = {key: batch.pop(key) for key in ("input_ids", "token_type_ids")}
    for frozen in range(4):
        bottom = model.bottom_states(tokens["input_ids"], frozen, batch["attention_mask"], tokens["token_type_ids"])
        resumed = model(**batch, bottom_states=bottom, bottom_layers=frozen)
        torch.testing.assert_close(resumed.logits, whole.logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(resumed.loss, whole.loss, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="num_layers must be within 0..3"):
        model.bottom_states(tokens["input_ids"], 4)
    with pytest.raises(ValueError, match="give `input_ids` or precomputed `bottom_states`"):
        model(**batch)


def test_cached_bottom_states_feed_training_batches(tmp_path, minilm_tokenizer, tiny_bertsum):
    from datasets import Dataset

    from sumformers import frozen_layers as script

    model = tiny_bertsum(encoder_layers=3)
    documents = [SENTENCES, SENTENCES[1:3], SENTENCES[::-1]]
    features = Dataset.from_list(
        [dict(encode_sentences(minilm_tokenizer, sentences), labels=[0.0] * len(sentences)) for sentences in documents]
    )
    collate = lambda rows: collate_sentence_batch(rows, minilm_tokenizer.pad_token_id)  # noqa: E731
    cache = tmp_path / "states.u16"
    states = script.cached_bottom_states(model, features, collate, 2, str(cache), batch_size=2)
    assert states.shape == (3, max(len(ids) for ids in features["input_ids"]), model.config.hidden_size)
    # A second run with the same documents reads the file; other documents make it recompute.
    mtime = cache.stat().st_mtime_ns
    assert (script.cached_bottom_states(model, features, collate, 2, str(cache)) == states).all()
    assert cache.stat().st_mtime_ns == mtime
    rows = [dict(features[index], cache_row=index) for index in (2, 0)]
    batch = script.BottomStateCollator(collate, states, 2)(rows)
    assert "input_ids" not in batch and batch["bottom_layers"] == 2
    full = collate(rows)
    with torch.no_grad():
        expected = model(**full).logits
        cached = model(**batch).logits
    # The cache holds bfloat16 states: the top layer's logits agree to bfloat16 rounding.
    torch.testing.assert_close(cached, expected, rtol=0, atol=2e-2)
    assert not torch.equal(cached, model(**collate(rows[::-1])).logits)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_the_inter_sentence_layers_equal_torch_transformer_layers_on_the_same_weights(
    attn_implementation, monkeypatch
):
    """The inter-sentence layers were `nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`, whose
    attention ignored `attn_implementation`; ours take its weights by name (trained checkpoints load) and give its
    outputs on every back end, padding included (the padded sentences are zeros in both)."""
    from torch import nn

    from sumformers.modeling.modeling_bertsum import InterSentenceEncoder, sinusoidal_positions

    torch.manual_seed(0)
    config = tiny_bertsum_config()
    config._attn_implementation = attn_implementation
    ours = InterSentenceEncoder(config).eval()
    layers = nn.ModuleList(
        nn.TransformerEncoderLayer(
            config.hidden_size, config.inter_sentence_heads, config.inter_sentence_ff_size, dropout=config.dropout,
            activation="gelu", batch_first=True, norm_first=True,
        )
        for _ in range(config.inter_sentence_layers)
    ).eval()
    for layer in layers:  # weights of their own, so that a wrong name or a transposed projection shows
        for parameter in layer.parameters():
            nn.init.normal_(parameter, std=0.2)
    assert ours.layers.load_state_dict(layers.state_dict(), strict=True)
    vectors = torch.randn(2, 5, config.hidden_size)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    states = vectors * mask.unsqueeze(-1) + sinusoidal_positions(5, config.hidden_size, vectors.device)
    with torch.no_grad():
        for layer in layers:
            states = layer(states, src_key_padding_mask=~mask)
        expected = ours.norm(states) * mask.unsqueeze(-1)
        torch.testing.assert_close(ours(vectors, mask), expected, rtol=0, atol=1e-5)
    # and the back end asked for is the one that runs: the eager reference once per layer, under "eager" only
    from sumformers.modeling import attention

    calls = []
    eager_attention_forward = attention.eager_attention_forward

    def counted(*args, **kwargs):
        calls.append(1)
        return eager_attention_forward(*args, **kwargs)

    monkeypatch.setattr(attention, "eager_attention_forward", counted)
    with torch.no_grad():
        ours(vectors, mask)
    assert len(calls) == (config.inter_sentence_layers if attn_implementation == "eager" else 0)
