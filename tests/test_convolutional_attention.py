"""Tests of convolutional self-attention (1D, 2D, circular 2D): hand-built (head, position) masks, the paper's
definition written out literally, half precision with large scores, memory linear in length, and the layer's back
ends against eager. Every back end is also run against eager by tests/test_attention.py (its `PATTERNS`)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from conftest import tiny_bert_config
from sumformers.modeling.attention import sparse_attention
from sumformers.modeling.convolutional_attention import (
    CONVOLUTION_MODES,
    ConvolutionalPattern,
    ConvolutionalSelfAttention,
)

TOL = 1e-5
pytestmark = pytest.mark.usefixtures("one_thread")


def pairs(*lines):
    """Hand-written [heads, length, heads, length] mask: one line per query (head-major, then position), one
    space-separated group of 0/1 per key head."""
    grid = torch.tensor([[c == "1" for c in line.replace(" ", "")] for line in lines])
    heads = len(lines[0].split())
    length = len(lines) // heads
    return grid.view(heads, length, heads, length)


# ----------------------------------------------------------------------------------------------------------------
# Hand-built masks: length 6 (position 5 is padding), window 3 (|i - j| <= 1), head window 3
# ----------------------------------------------------------------------------------------------------------------

PADDED = torch.tensor([[1, 1, 1, 1, 1, 0]])


def test_1d_mask_by_hand():
    # each head sees its own head only
    expected = pairs(
        "110000 000000",
        "111000 000000",
        "011100 000000",
        "001110 000000",
        "000110 000000",  # position 5 is padding: never a key
        "000000 000000",  # nor a query
        "000000 110000",
        "000000 111000",
        "000000 011100",
        "000000 001110",
        "000000 000110",
        "000000 000000",
    )
    assert torch.equal(ConvolutionalPattern(PADDED, "1d", window=3).pair_mask(num_heads=2)[0], expected)


def test_2d_mask_by_hand():
    # three heads: head 0 sees heads 0 and 1 (head -1 is absent), head 1 all three, head 2 heads 1 and 2
    expected = pairs(
        "110000 110000 000000",
        "111000 111000 000000",
        "011100 011100 000000",
        "001110 001110 000000",
        "000110 000110 000000",
        "000000 000000 000000",
        "110000 110000 110000",
        "111000 111000 111000",
        "011100 011100 011100",
        "001110 001110 001110",
        "000110 000110 000110",
        "000000 000000 000000",
        "000000 110000 110000",
        "000000 111000 111000",
        "000000 011100 011100",
        "000000 001110 001110",
        "000000 000110 000110",
        "000000 000000 000000",
    )
    pattern = ConvolutionalPattern(PADDED, "2d", window=3, num_heads=3, head_window=3)
    assert torch.equal(pattern.pair_mask(num_heads=3)[0], expected)


def test_circular_2d_mask_by_hand():
    # four heads on a circle: head 0 sees heads 3, 0, 1; head 3 sees heads 2, 3, 0; nobody sees the opposite head
    expected = pairs(
        "110000 110000 000000 110000",
        "111000 111000 000000 111000",
        "011100 011100 000000 011100",
        "001110 001110 000000 001110",
        "000110 000110 000000 000110",
        "000000 000000 000000 000000",
        "110000 110000 110000 000000",
        "111000 111000 111000 000000",
        "011100 011100 011100 000000",
        "001110 001110 001110 000000",
        "000110 000110 000110 000000",
        "000000 000000 000000 000000",
        "000000 110000 110000 110000",
        "000000 111000 111000 111000",
        "000000 011100 011100 011100",
        "000000 001110 001110 001110",
        "000000 000110 000110 000110",
        "000000 000000 000000 000000",
        "110000 000000 110000 110000",
        "111000 000000 111000 111000",
        "011100 000000 011100 011100",
        "001110 000000 001110 001110",
        "000110 000000 000110 000110",
        "000000 000000 000000 000000",
    )
    pattern = ConvolutionalPattern(PADDED, "circular_2d", window=3, num_heads=4, head_window=3)
    assert torch.equal(pattern.pair_mask(num_heads=4)[0], expected)


def test_slot_band_reaches_every_allowed_key():
    # the blocked back end reads only keys within the band: the farthest allowed slot must lie on its edge
    for mode, heads, expected_radius in (("1d", 4, 6), ("2d", 4, 6 * 4 + 1), ("circular_2d", 4, 6 * 4 + 3)):
        pattern = ConvolutionalPattern(torch.ones(1, 40), mode, window=13, num_heads=heads, head_window=3)
        assert pattern.slot_radius == expected_radius
        mask = pattern.dense_mask()[0, 0]
        offsets = torch.arange(mask.shape[1])[None, :] - torch.arange(mask.shape[0])[:, None]
        assert offsets[mask].abs().max() == expected_radius


# ----------------------------------------------------------------------------------------------------------------
# Every back end against the paper's definition written out literally
# ----------------------------------------------------------------------------------------------------------------


def _literal_reference(query, key, value, valid, mode, window, head_window, scaling):
    """Convolutional attention one query at a time: the neighbourhood listed as (head, position) pairs, one softmax
    over all of them. [batch, heads, length, head_dim] -> same; padding queries give zeros."""
    batch, heads, length, _ = query.shape
    output = torch.zeros_like(query)
    for b in range(batch):
        for h in range(heads):
            around = range(h - head_window // 2, h + head_window // 2 + 1)
            if mode == "1d":
                key_heads = [h]
            elif mode == "2d":
                key_heads = [g for g in around if 0 <= g < heads]
            else:
                key_heads = sorted({g % heads for g in around})
            for i in range(length):
                if not valid[b, i]:
                    continue
                neighbours = [(g, j) for g in key_heads for j in range(length) if abs(i - j) <= window // 2]
                neighbours = [(g, j) for g, j in neighbours if valid[b, j]]
                scores = torch.stack([query[b, h, i] @ key[b, g, j] for g, j in neighbours]) * scaling
                weights = torch.softmax(scores, dim=0)
                output[b, h, i] = sum(w * value[b, g, j] for w, (g, j) in zip(weights, neighbours))
    return output


def _heads(states, num_heads):  # [batch, length, hidden] -> [batch, heads, length, head_dim]
    return states.view(*states.shape[:2], num_heads, -1).transpose(1, 2)


@pytest.mark.parametrize("mode", CONVOLUTION_MODES)
def test_backends_equal_the_literal_definition(mode):
    batch, heads, length, head_dim = 2, 4, 9, 4
    valid = torch.ones(batch, length, dtype=torch.bool)
    valid[1, 6:] = False
    generator = torch.Generator().manual_seed(0)
    states = [torch.randn(batch, length, heads * head_dim, generator=generator) for _ in range(3)]
    expected = _literal_reference(*(_heads(s, heads) for s in states), valid, mode, 5, 3, head_dim**-0.5)
    expected = expected.transpose(1, 2).flatten(2)  # [batch, length, hidden]
    pattern = ConvolutionalPattern(valid, mode, window=5, num_heads=heads, head_window=3)
    for implementation in ("eager", "sdpa", "blocked"):
        output = sparse_attention(*(pattern.split_heads(s, heads) for s in states), pattern, implementation)
        torch.testing.assert_close(pattern.merge_heads(output.transpose(1, 2)), expected, rtol=0, atol=TOL)


# ----------------------------------------------------------------------------------------------------------------
# Half precision, long inputs
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", CONVOLUTION_MODES)
def test_large_scores_do_not_overflow_in_half_precision(mode, dtype):
    # integer queries (multiples of 8) and keys in {-1, 0, 1}: scores are multiples of 8 up to 256, exact in fp16 and
    # bf16 and far past where exp overflows (11 in fp16, 88 in bf16), so only a max-subtracted softmax survives
    batch, heads, length, head_dim = 2, 4, 24, 8
    valid = torch.ones(batch, length, dtype=torch.bool)
    valid[1, 20:] = False
    generator = torch.Generator().manual_seed(1)
    query = 8.0 * torch.randint(-4, 5, (batch, length, heads * head_dim), generator=generator)
    key = torch.randint(-1, 2, (batch, length, heads * head_dim), generator=generator).float()
    value = torch.randint(-4, 5, (batch, length, heads * head_dim), generator=generator).float()
    pattern = ConvolutionalPattern(valid, mode, window=5, num_heads=heads, head_window=3)

    scores = torch.einsum("bhid,bgjd->bhigj", _heads(query, heads), _heads(key, heads))
    largest = scores[pattern.pair_mask(heads)].max()
    assert torch.exp(largest.to(dtype)).isinf()  # normalizing exp(scores) directly, as the reference code does, fails

    def attend(implementation, precision):
        q, k, v = (pattern.split_heads(x.to(precision), heads) for x in (query, key, value))
        return sparse_attention(q, k, v, pattern, implementation, scaling=1.0)

    expected = attend("eager", torch.float32)
    for implementation in ("eager", "sdpa", "blocked"):
        output = attend(implementation, dtype)
        assert output.dtype == dtype and torch.isfinite(output).all()
        # the weights are rounded to the half type: a few units of its precision on values of at most 4
        torch.testing.assert_close(output.float(), expected, rtol=0, atol=4 * torch.finfo(dtype).eps)


class LargestBuffer(TorchDispatchMode):
    """The largest storage any operation returns while active (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.nbytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for item in tree_flatten(result)[0]:
            if isinstance(item, torch.Tensor):
                self.nbytes = max(self.nbytes, item.untyped_storage().nbytes())
        return result


@pytest.mark.parametrize("mode", CONVOLUTION_MODES)
def test_blocked_backend_is_linear_in_length_and_local(mode):
    heads, head_dim, window = 4, 8, 13
    largest = {}
    for length in (2048, 8192):
        pattern = ConvolutionalPattern(torch.ones(1, length), mode, window=window, num_heads=heads)
        generator = torch.Generator().manual_seed(length)
        states = [torch.randn(1, length, heads * head_dim, generator=generator) for _ in range(3)]
        q, k, v = (pattern.split_heads(s, heads).requires_grad_() for s in states)
        with LargestBuffer() as tracker:
            output = sparse_attention(q, k, v, pattern, "blocked")
            output.sum().backward()
        largest[length] = tracker.nbytes
    # four times the length: four times the largest buffer (a [slots, slots] mask would be sixteen times)
    assert largest[8192] <= 4.2 * largest[2048]

    # a query sees only keys within window // 2 positions: rows 4000..4099 of the long output equal eager attention
    # over a crop holding them and their neighbours
    radius = window // 2
    crop = slice(4000 - radius, 4100 + radius)
    crop_pattern = ConvolutionalPattern(torch.ones(1, 100 + 2 * radius), mode, window=window, num_heads=heads)
    cropped = sparse_attention(*(crop_pattern.split_heads(s[:, crop], heads) for s in states), crop_pattern, "eager")
    expected = crop_pattern.merge_heads(cropped.transpose(1, 2))[:, radius:-radius]
    actual = pattern.merge_heads(output.detach().transpose(1, 2))[:, 4000:4100]
    torch.testing.assert_close(actual, expected, rtol=0, atol=TOL)


# ----------------------------------------------------------------------------------------------------------------
# The layer
# ----------------------------------------------------------------------------------------------------------------


def _layer(mode, implementation):
    torch.manual_seed(0)
    config = tiny_bert_config(hidden_size=16, num_attention_heads=4)
    config._attn_implementation = implementation
    return ConvolutionalSelfAttention(config, mode=mode, window=5, head_window=3)


@pytest.mark.parametrize("mode", CONVOLUTION_MODES)
def test_layer_backends_match_eager_with_gradients(mode):
    reference = _layer(mode, "eager")
    assert {name for name, _ in reference.named_parameters()} == {
        "query.weight", "query.bias", "key.weight", "key.bias", "value.weight", "value.bias",
        "output.dense.weight", "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias",
    }  # BERT's names, as bert_blocks.BertStyleAttention
    hidden_states = torch.randn(2, 30, 16, generator=torch.Generator().manual_seed(2))
    attention_mask = torch.ones(2, 30, dtype=torch.long)
    attention_mask[1, 22:] = 0
    weights = torch.randn(2, 30, 16, generator=torch.Generator().manual_seed(3))

    def outputs_and_gradients(layer, **inputs):
        states = hidden_states.clone().requires_grad_()
        output = layer(states, **inputs)
        return output, torch.autograd.grad((output * weights).sum(), [states, *layer.parameters()])

    expected, expected_grads = outputs_and_gradients(reference, attention_mask=attention_mask)
    for implementation in ("sdpa", "blocked"):
        layer = _layer(mode, implementation)
        layer.load_state_dict(reference.state_dict())
        for inputs in ({"attention_mask": attention_mask}, {"pattern": layer.pattern(attention_mask)}):
            output, grads = outputs_and_gradients(layer, **inputs)
            torch.testing.assert_close(output, expected, rtol=0, atol=TOL)
            for grad, expected_grad in zip(grads, expected_grads):
                torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=TOL)


def test_bad_settings_raise_clear_errors():
    valid = torch.ones(1, 8)
    with pytest.raises(ValueError, match="mode"):
        ConvolutionalPattern(valid, "3d")
    with pytest.raises(ValueError, match="`window` must be a positive odd"):
        ConvolutionalPattern(valid, "1d", window=12)
    with pytest.raises(ValueError, match="`head_window` must be a positive odd"):
        ConvolutionalPattern(valid, "2d", num_heads=4, head_window=2)
    with pytest.raises(ValueError, match="num_heads"):
        ConvolutionalPattern(valid, "circular_2d", num_heads=0)
    with pytest.raises(ValueError, match="built for 4 heads"):
        ConvolutionalPattern(valid, "2d", num_heads=4).split_heads(torch.randn(1, 8, 16), num_heads=2)
    with pytest.raises(ValueError, match="`window` must be a positive odd"):
        ConvolutionalSelfAttention(tiny_bert_config(hidden_size=16), mode="1d", window=4)


@pytest.mark.parametrize("implementation", ["eager", "blocked"])
@pytest.mark.parametrize("mode", CONVOLUTION_MODES)
def test_the_copy_transformer_runs_this_layers_attention_on_the_same_weights(mode, implementation):
    """The CopyTransformer's convolutional encoder attention (pre-LayerNorm, `q_proj`...`out_proj`) is this layer's
    attention: given the same projections, the layer's output is its post-LayerNorm residual around it."""
    from conftest import tiny_copy_transformer_config
    from sumformers.modeling.modeling_copy_transformer import CopyTransformerAttention

    layer = _layer(mode, implementation).eval()
    config = tiny_copy_transformer_config(d_model=16, attention_heads=4)
    config._attn_implementation = implementation
    copy_attention = CopyTransformerAttention(config, layer_idx=0).eval()
    for ours, theirs in ((copy_attention.q_proj, layer.query), (copy_attention.k_proj, layer.key),
                         (copy_attention.v_proj, layer.value), (copy_attention.out_proj, layer.output.dense)):
        ours.load_state_dict(theirs.state_dict())
    hidden_states = torch.randn(2, 30, 16, generator=torch.Generator().manual_seed(2))
    attention_mask = torch.ones(2, 30, dtype=torch.long)
    attention_mask[1, 22:] = 0
    pattern = layer.pattern(attention_mask)
    with torch.no_grad():
        attended = copy_attention(hidden_states, hidden_states, None, pattern=pattern)
        expected = layer.output.LayerNorm(hidden_states + attended)
        torch.testing.assert_close(layer(hidden_states, pattern=pattern), expected, rtol=0, atol=1e-6)
