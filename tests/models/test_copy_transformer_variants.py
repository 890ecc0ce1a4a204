"""The CopyTransformer variants of Aksenov et al. 2020's tables as configs: convolutional self-attention in the lowest
encoder layers (receptive field, eager = blocked, one pattern per forward, a window covering everything = full
attention) and BERT conditioning (stacking, concatenation, the BERT-conditioned decoder: features, shapes,
gradients, cached features, generation, long documents, save/load without the frozen BERT)."""


import pytest
import torch
from test_copy_transformer import EXAMPLES

from conftest import tiny_copy_transformer_config
from sumformers import CopyTransformerForConditionalGeneration
from sumformers.modeling import modeling_copy_transformer
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")

CONVOLUTIONS = ("1d", "2d", "circular_2d")


def model_of(attn_implementation="eager", seed=0, **overrides):
    config = tiny_copy_transformer_config(**overrides)
    config._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    model = CopyTransformerForConditionalGeneration(config).eval()
    with torch.no_grad():  # larger weights, so that every position's influence is far from rounding
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def encode(model, input_ids, attention_mask=None, **kwargs):
    with torch.no_grad():
        return model.encoder(input_ids, attention_mask, output_hidden_states=True, **kwargs)


def tokens(length, seed=0, batch=1):
    return torch.randint(1000, 2000, (batch, length), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------------------------------------------
# Convolutional self-attention
# ----------------------------------------------------------------------------------------------------------------


class TestCopyTransformerCircularConvolution(ModelTesterMixin):
    """The shared checks (round trips, batch = items, padding, back ends = eager, bf16, export) with circular 2D
    convolution in both encoder layers."""

    model_class = CopyTransformerForConditionalGeneration
    examples = EXAMPLES
    pipeline_input = "The council approved the budget. The zorblax✓ fund pays."
    bf16_atol = 0.1  # as the plain CopyTransformer's (log-probabilities near -10 in bf16 steps)

    def get_config(self):
        return tiny_copy_transformer_config(convolution="circular_2d", convolution_layers=2, convolution_window=5)

    def encode(self, processor, example):
        document, summary = example
        return processor.training_features(document, summary, max_target_length=40)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("mode", CONVOLUTIONS)
def test_outputs_ignore_tokens_outside_the_receptive_field(mode, implementation):
    # two convolutional layers of window 5: position 10 sees positions 10 +- 2 * 2 and nothing further
    model = model_of(implementation, convolution=mode, convolution_layers=2, convolution_window=5)
    ids = tokens(24)
    base = encode(model, ids).last_hidden_state
    for changed, inside in ((15, False), (5, False), (23, False), (14, True), (6, True)):
        other = ids.clone()
        other[0, changed] = 1234 if ids[0, changed] != 1234 else 1235
        moved = (encode(model, other).last_hidden_state[0, 10] - base[0, 10]).abs().max().item()
        assert (moved > 1e-4) if inside else (moved == 0.0), (changed, moved)


def test_without_convolution_every_token_reaches_every_position():
    model = model_of(convolution="none")
    ids = tokens(24)
    other = ids.clone()
    other[0, 23] = 1234
    moved = (encode(model, other).last_hidden_state[0, 0] - encode(model, ids).last_hidden_state[0, 0]).abs().max()
    assert moved > 1e-4


def test_only_the_lowest_layers_are_convolutional():
    # one convolutional layer of window 5: the second layer's input at position 10 sees 10 +- 2; its output all
    model = model_of(convolution="2d", convolution_layers=1, convolution_window=5)
    ids = tokens(24)
    other = ids.clone()
    other[0, 13] = 1234
    before, after = encode(model, ids), encode(model, other)
    assert torch.equal(before.hidden_states[1][0, 10], after.hidden_states[1][0, 10])
    assert (before.last_hidden_state[0, 10] - after.last_hidden_state[0, 10]).abs().max() > 1e-4


@pytest.mark.parametrize("mode", CONVOLUTIONS)
def test_blocked_fast_path_equals_eager_with_padding(mode):
    settings = dict(convolution=mode, convolution_layers=2, convolution_window=13, convolution_head_window=3)
    eager, fast = model_of("eager", **settings), model_of("sdpa", **settings)
    ids = tokens(300, batch=2)
    mask = torch.ones_like(ids)
    mask[1, 170:] = 0
    expected, got = encode(eager, ids, mask).last_hidden_state, encode(fast, ids, mask).last_hidden_state
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(got[1, :170], expected[1, :170], rtol=0, atol=1e-5)
    # the padded row equals the same document alone
    alone = encode(fast, ids[1:, :170]).last_hidden_state
    torch.testing.assert_close(got[1, :170], alone[0], rtol=0, atol=1e-5)


def test_a_1d_window_covering_the_document_is_full_attention():
    ids = tokens(20)
    full = encode(model_of(convolution="none"), ids).last_hidden_state
    wide = encode(model_of(convolution="1d", convolution_layers=2, convolution_window=41), ids).last_hidden_state
    torch.testing.assert_close(wide, full, rtol=0, atol=1e-5)


def test_one_pattern_per_forward_shared_by_the_convolutional_layers(monkeypatch):
    built = []
    original = modeling_copy_transformer.ConvolutionalPattern

    def counting(*args, **kwargs):
        built.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(modeling_copy_transformer, "ConvolutionalPattern", counting)
    model = model_of("sdpa", convolution="2d", convolution_layers=2)
    encode(model, tokens(30))
    assert len(built) == 1
