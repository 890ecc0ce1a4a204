"""Tests of the BERT-windowing encoder: window placement, one window = the plain single pass, count-averaged overlaps
built by hand from separate window runs, batch = items, frozen features, and a 100,000-token document in bounded
passes."""

import pytest
import torch
from transformers import BertModel

from conftest import ARTICLE, tiny_bert_config
from sumformers.modeling.pretrained_encoder import load_pretrained_encoder
from sumformers.modeling.windowed_encoder import WindowedEncoder, window_starts

pytestmark = pytest.mark.usefixtures("one_thread")
CLS, SEP = 101, 102


def tiny_encoder(**overrides):
    torch.manual_seed(0)
    return BertModel(tiny_bert_config(num_hidden_layers=4, **overrides), add_pooling_layer=False).eval()


def windowed(encoder=None, **settings):
    torch.manual_seed(1)
    return WindowedEncoder(8, encoder or tiny_encoder(), cls_token_id=CLS, sep_token_id=SEP, **settings)


def single_pass(encoder, token_ids):
    """The plain pass over [CLS] tokens [SEP]: the last four hidden layers concatenated, at the tokens' rows."""
    ids = torch.tensor([[CLS, *token_ids, SEP]])
    with torch.no_grad():
        states = encoder(input_ids=ids, output_hidden_states=True).hidden_states
    return torch.cat(states[-4:], dim=-1)[0, 1:-1]


def test_window_starts_by_hand():
    assert window_starts(0, 4, 2) == []
    assert window_starts(3, 4, 2) == [0]
    assert window_starts(4, 4, 2) == [0]
    assert window_starts(6, 4, 2) == [0, 2]
    assert window_starts(7, 4, 2) == [0, 2, 3]  # the last window moved back: token 3 lies in three windows
    assert window_starts(8, 4, 2) == [0, 2, 4]
    assert window_starts(1000, 510, 256) == [0, 256, 490]  # the defaults: 512 positions minus [CLS] and [SEP]


def test_one_window_is_the_single_pass_of_the_default_encoder(minilm_tokenizer):
    model = WindowedEncoder(8)  # the bundled MiniLM, its tokenizer's [CLS] and [SEP]
    assert (model.cls_token_id, model.sep_token_id) == (minilm_tokenizer.cls_token_id, minilm_tokenizer.sep_token_id)
    tokens = minilm_tokenizer(ARTICLE, add_special_tokens=False, return_tensors="pt")["input_ids"]
    plain = load_pretrained_encoder(None, add_pooling_layer=False).eval()
    with torch.no_grad():  # what a user runs: the tokenizer's own [CLS] ... [SEP]
        states = plain(**minilm_tokenizer(ARTICLE, return_tensors="pt"), output_hidden_states=True).hidden_states
    expected = torch.cat(states[-4:], dim=-1)[:, 1:-1]
    features = model.frozen_features(tokens)
    assert features.shape == (1, tokens.shape[1], 4 * 384)
    torch.testing.assert_close(features, expected, rtol=0, atol=1e-6)


def test_document_of_one_full_window_is_the_single_pass():
    encoder = tiny_encoder()
    tokens = torch.randint(1000, 2000, (1, 510), generator=torch.Generator().manual_seed(0))
    features = windowed(encoder).frozen_features(tokens)  # 510 tokens + [CLS] + [SEP] = 512 positions
    torch.testing.assert_close(features[0], single_pass(encoder, tokens[0].tolist()), rtol=0, atol=1e-6)


def test_overlaps_are_averaged_by_their_count_by_hand():
    # windows of 6 positions = 4 tokens, stride 2, 7 tokens: windows start at tokens 0, 2 and 3 (moved back)
    encoder = tiny_encoder()
    tokens = [1010, 1020, 1030, 1040, 1050, 1060, 1070]
    w0 = single_pass(encoder, tokens[0:4])
    w1 = single_pass(encoder, tokens[2:6])
    w2 = single_pass(encoder, tokens[3:7])
    expected = torch.stack([
        w0[0],
        w0[1],
        (w0[2] + w1[0]) / 2,
        (w0[3] + w1[1] + w2[0]) / 3,  # three windows
        (w1[2] + w2[1]) / 2,
        (w1[3] + w2[2]) / 2,
        w2[3],
    ])
    features = windowed(encoder, window=6, stride=2).frozen_features(torch.tensor([tokens]))
    torch.testing.assert_close(features[0], expected, rtol=0, atol=1e-6)


def test_batch_with_padding_equals_each_document_alone():
    # two passes of at most 3 windows mix the documents' windows; padding rows give zeros
    model = windowed(window=6, stride=2, max_windows_per_pass=3)
    generator = torch.Generator().manual_seed(2)
    documents = [torch.randint(1000, 2000, (n,), generator=generator) for n in (11, 3, 7)]
    input_ids = torch.zeros(3, 11, dtype=torch.long)
    attention_mask = torch.zeros(3, 11, dtype=torch.long)
    for row, document in enumerate(documents):
        input_ids[row, : len(document)] = document
        attention_mask[row, : len(document)] = 1
    batch = model.frozen_features(input_ids, attention_mask)
    for row, document in enumerate(documents):
        alone = model.frozen_features(document[None])[0]
        torch.testing.assert_close(batch[row, : len(document)], alone, rtol=0, atol=1e-5)
        assert not batch[row, len(document) :].any()
    with pytest.raises(ValueError, match="right-padded"):
        model.frozen_features(input_ids, attention_mask.flip(1))


def test_only_the_projection_trains_and_cached_features_give_the_same_output():
    model = windowed(tiny_encoder(hidden_dropout_prob=0.5), window=6, stride=2).train()
    assert not model.encoder.training  # frozen: no dropout even when the model trains
    assert [name for name, p in model.named_parameters() if p.requires_grad] == ["projection.weight", "projection.bias"]
    tokens = torch.randint(1000, 2000, (2, 9), generator=torch.Generator().manual_seed(3))
    features = model.frozen_features(tokens)
    assert not features.requires_grad
    torch.testing.assert_close(model.frozen_features(tokens), features, rtol=0, atol=0)  # cacheable
    output = model(tokens)
    torch.testing.assert_close(output, model.projection(features), rtol=0, atol=0)
    torch.testing.assert_close(model(features=features), output, rtol=0, atol=0)
    output.sum().backward()
    assert model.projection.weight.grad is not None


def test_100k_tokens_run_in_bounded_passes():
    model = windowed(max_windows_per_pass=4)
    passes = []
    model.encoder.register_forward_pre_hook(
        lambda module, args, kwargs: passes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    length = 100_000
    tokens = torch.randint(1000, 30000, (1, length), generator=torch.Generator().manual_seed(4))
    features = model.frozen_features(tokens)
    assert features.shape == (1, length, 4 * 32) and torch.isfinite(features).all()
    windows = len(window_starts(length, 510, 256))
    assert windows == 390  # every 256 tokens, the last one moved back to end at the tail
    assert sum(n for n, _ in passes) == windows and max(passes) == (4, 512)
    # a token far from both ends lies in two windows: its feature is their mean
    start = 256 * 200
    first, second = (single_pass(model.encoder, tokens[0, s : s + 510].tolist()) for s in (start - 256, start))
    torch.testing.assert_close(features[0, start + 100], (first[356] + second[100]) / 2, rtol=0, atol=1e-5)


def test_bad_settings_raise_clear_errors():
    encoder = tiny_encoder()
    with pytest.raises(ValueError, match="cls_token_id"):
        WindowedEncoder(8, encoder)
    with pytest.raises(ValueError, match="window"):
        windowed(encoder, window=513)
    with pytest.raises(ValueError, match="stride"):
        windowed(encoder, window=6, stride=5)
    with pytest.raises(ValueError, match="4 hidden layers"):
        WindowedEncoder(8, BertModel(tiny_bert_config(num_hidden_layers=2)), cls_token_id=CLS, sep_token_id=SEP)
    with pytest.raises(ValueError, match="either"):
        windowed(encoder)()
