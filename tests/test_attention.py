"""Tests of the shared sparse attention: hand-built masks, every backend against eager, Longformer equivalence,
and the transformers `attn_implementation` plumbing."""

import os

# A persistent inductor cache makes FlexAttention's CPU compiles (about 25 s cold) cheap on repeated runs.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from transformers import LongformerConfig, PretrainedConfig, PreTrainedModel  # noqa: E402
from transformers.models.longformer.modeling_longformer import LongformerSelfAttention  # noqa: E402

from sumformers.modeling import attention  # noqa: E402
from sumformers.modeling.attention import attention_forward, sparse_attention  # noqa: E402
from sumformers.modeling.attention_patterns import (  # noqa: E402
    BlockLocalCausalPattern,
    CausalPattern,
    GlobalLocalPattern,
    MemoryCompressedCausalPattern,
    SlidingWindowPattern,
)
from sumformers.modeling.convolutional_attention import ConvolutionalPattern  # noqa: E402
from sumformers.modeling.hetformer_graph import HeterogeneousGraph  # noqa: E402
from sumformers.modeling.summarizer_mixin import SummarizerMixin  # noqa: E402

TOL = 1e-5
# One batch/head/length bucket for every FlexAttention call below, so each pattern compiles once.
BATCH, HEADS, HEAD_DIM, LENGTH = 2, 2, 8, 200
FAST_BACKENDS = ("sdpa", "blocked", "flex_attention")


def rows(*strings):
    """Hand-written boolean matrix: one string of 0/1 per query row."""
    return torch.tensor([[c == "1" for c in s] for s in strings])


# ----------------------------------------------------------------------------------------------------------------
# Hand-built masks on tiny inputs
# ----------------------------------------------------------------------------------------------------------------


def test_sliding_window_mask_by_hand():
    # window 4 (two-sided): |i - j| <= 2; position 7 is padding
    pattern = SlidingWindowPattern(4, torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0]]))
    expected = rows(
        "11100000",
        "11110000",
        "11111000",
        "01111100",
        "00111110",
        "00011110",
        "00001110",
        "00000000",
    )
    assert torch.equal(pattern.dense_mask()[0, 0], expected)


def test_window_with_global_tokens_mask_by_hand():
    # window 2: |i - j| <= 1; position 1 is global (sees and is seen by every real token); 7 is padding
    pattern = SlidingWindowPattern(
        2, torch.tensor([[1, 1, 1, 1, 1, 1, 1, 0]]), global_attention_mask=torch.tensor([[0, 1, 0, 0, 0, 0, 0, 0]])
    )
    expected = rows(
        "11000000",
        "11111110",
        "01110000",
        "01111000",
        "01011100",
        "01001110",
        "01000110",
        "00000000",
    )
    assert torch.equal(pattern.dense_mask()[0, 0], expected)


def _etc_tiny(**kwargs):
    # [g0 g1 ; six long tokens], sentences 0 0 0 1 1 1, local radius 1, relative distances clipped at 1
    return GlobalLocalPattern(
        long_sentence_ids=torch.tensor([[0, 0, 0, 1, 1, 1]]),
        global_sentence_ids=torch.tensor([[0, 1]]),
        local_radius=1,
        relative_pos_max_distance=1,
        **kwargs,
    )


def test_etc_mask_with_hard_g2l_by_hand():
    expected = rows(
        "11111000",  # g0: both globals, long tokens of sentence 0 only
        "11000111",  # g1: both globals, long tokens of sentence 1 only
        "11110000",  # long tokens: every global (l2g full) and long neighbours within radius 1
        "11111000",
        "11011100",
        "11001110",
        "11000111",
        "11000011",
    )
    assert torch.equal(_etc_tiny(hard_g2l_masking=True).dense_mask()[0, 0], expected)


def test_etc_mask_with_hard_l2g_by_hand():
    expected = rows(
        "11111111",  # g2l full
        "11111111",
        "10110000",  # long tokens see only their own sentence's global token
        "10111000",
        "10011100",
        "01001110",
        "01000111",
        "01000011",
    )
    assert torch.equal(_etc_tiny(hard_l2g_masking=True).dense_mask()[0, 0], expected)


def test_etc_relative_ids_by_hand():
    pattern = _etc_tiny()
    ids = pattern.relative_ids(0, torch.arange(8)[:, None], torch.arange(8)[None, :])
    # M = 1: distances k - q clipped to [-1, 1] give ids 0..2; l2g/g2l give 3 (other sentence) / 4 (own sentence)
    assert ids[0].tolist() == [1, 2, 4, 4, 4, 3, 3, 3]
    assert ids[1].tolist() == [0, 1, 3, 3, 3, 4, 4, 4]
    assert ids[2].tolist() == [4, 3, 1, 2, 2, 2, 2, 2]
    assert ids[5].tolist() == [3, 4, 0, 0, 0, 1, 2, 2]
    assert GlobalLocalPattern.relative_vocab_size(1) == 5


def test_etc_score_mod_adds_the_per_head_bias():
    table = torch.arange(10.0).view(5, 2)  # row = relative id, column = head
    pattern = _etc_tiny(relative_bias=table)
    bias = pattern.dense_bias(num_heads=2, dtype=torch.float32)[0]
    ids = pattern.relative_ids(0, torch.arange(8)[:, None], torch.arange(8)[None, :])
    assert torch.equal(bias[0], table[ids, 0]) and torch.equal(bias[1], table[ids, 1])


def _shaw_reference(q, k, v, pattern, bias_table, key_table):
    """Relative-key attention written out literally (Shaw et al. 2018, ETC): every pair's key is k_j + a[rel_id],
    score = (q_i . (k_j + a[rel_id]) ) / sqrt(d) + bias[rel_id], softmax over the allowed keys, zeros for empty rows."""
    length = q.shape[2]
    positions = torch.arange(length)
    ids = pattern.relative_ids(torch.arange(q.shape[0])[:, None, None], positions[:, None], positions[None, :])
    heads = torch.arange(q.shape[1])[None, :, None, None]
    relative_keys = key_table[ids[:, None], heads]  # [batch, heads, queries, keys, head_dim]
    scores = torch.einsum("bhqd,bhqkd->bhqk", q, k[:, :, None] + relative_keys) / q.shape[-1] ** 0.5
    scores = scores + bias_table[ids[:, None], heads]
    mask = pattern.dense_mask()
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
    return weights @ v


def test_etc_relative_keys_are_shaw_keys_by_hand():
    generator = torch.Generator().manual_seed(5)
    bias_table = torch.randn(5, 2, generator=generator)
    key_table = torch.randn(5, 2, 4, generator=generator)
    pattern = _etc_tiny(hard_g2l_masking=True, relative_bias=bias_table, relative_keys=key_table)
    q, k, v = (torch.randn(1, 2, 8, 4, generator=generator) for _ in range(3))
    expected = _shaw_reference(q, k, v, pattern, bias_table, key_table)
    for implementation in ("eager", "sdpa", "blocked"):
        torch.testing.assert_close(sparse_attention(q, k, v, pattern, implementation), expected, rtol=0, atol=TOL)
    # q R^T holds one score per (query, relative id); the pattern needs the query before it can score pairs
    with pytest.raises(ValueError, match="for_query"):
        pattern.dense_bias(2, torch.float32)
    table = pattern.for_query(q, 0.5).query_relative_scores
    assert table.shape == (1, 2, pattern.flex_query_length, 5)
    expected_table = torch.einsum("bhld,rhd->bhlr", q, key_table) * 0.5 + bias_table.t()[None, :, None, :]
    torch.testing.assert_close(table[:, :, :8], expected_table)  # the bias folded in


def _hetformer_tiny(keep_documents_apart=True):
    # 0 doc(d0) 1 sent(d0) 2 tok 3 tok 4 sent(d0) 5 tok | 6 doc(d1) 7 sent(d1) 8 tok 9 tok
    D, S, T = HeterogeneousGraph.DOCUMENT, HeterogeneousGraph.SENTENCE, HeterogeneousGraph.TOKEN
    return HeterogeneousGraph(
        node_types=torch.tensor([[D, S, T, T, S, T, D, S, T, T]]),
        attention_mask=torch.ones(1, 10),
        entity_ids=torch.tensor([[-1, -1, 0, -1, -1, 1, -1, -1, 0, 1]]),
        document_ids=torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1, 1, 1]]),
        keep_documents_apart=keep_documents_apart,
    )


def test_hetformer_token_window_mask_by_hand():
    # window 4: tokens within 2 positions, tokens only, same document
    expected = rows(
        "0000000000",
        "0000000000",
        "0011000000",
        "0011010000",
        "0000000000",
        "0001010000",
        "0000000000",
        "0000000000",
        "0000000011",
        "0000000011",
    )
    assert torch.equal(_hetformer_tiny().token_window(4).dense_mask()[0, 0], expected)


def test_hetformer_node_mask_by_hand():
    expected_apart = rows(
        "1111111100",  # d0: its tokens, and every sentence and document node
        "1111111100",  # s0: tokens of its document, and every sentence and document node
        "1100100000",  # token: sentences and document node of its document
        "1100100000",
        "1111111100",
        "1100100000",
        "1100101111",  # d1
        "1100101111",  # s (d1)
        "0000001100",
        "0000001100",
    )
    assert torch.equal(_hetformer_tiny().nodes().dense_mask()[0, 0], expected_apart)
    together = _hetformer_tiny(keep_documents_apart=False).nodes().dense_mask()[0, 0]
    assert together[1].tolist() == [c == "1" for c in "1111111111"]  # a sentence node sees every position
    assert together[0].tolist() == [c == "1" for c in "1111111100"]  # a document node: its own document's tokens
    assert together[8].tolist() == [c == "1" for c in "0100101100"]  # a token sees every sentence node


def test_hetformer_entity_mask_by_hand():
    expected = rows(
        "0000000000",
        "0000000000",
        "0010000010",  # cluster 0 = positions 2 and 8, across documents
        "0000000000",
        "0000000000",
        "0000010001",  # cluster 1 = positions 5 and 9
        "0000000000",
        "0000000000",
        "0010000010",
        "0000010001",
    )
    assert torch.equal(_hetformer_tiny().entities().dense_mask()[0, 0], expected)


def _grid(pattern):
    b = torch.arange(pattern.batch_size).view(-1, 1, 1, 1)
    q = torch.arange(pattern.flex_query_length).view(1, 1, -1, 1)
    return b, q, q.view(1, 1, 1, -1)


@pytest.mark.parametrize("seed", range(3))
def test_one_lookup_masks_equal_the_masks_by_separate_lookups(seed):
    """The token window's and ETC's hard-masking mask functions read one code per position and side (a real token's
    document, a real token's sentence) instead of separate validity, type and id tensors: over random graphs and
    ETC inputs with scattered padding, they equal the masks written with those separate look-ups."""
    generator = torch.Generator().manual_seed(seed)
    length = 150
    valid = torch.rand(BATCH, length, generator=generator) > 0.15
    nodes = torch.rand(BATCH, length, generator=generator) < 0.2
    node_types = torch.randint(0, 3, (BATCH, length), generator=generator) * nodes
    documents = torch.randint(0, 3, (BATCH, length), generator=generator).sort(-1).values
    for apart in (False, True):
        graph = HeterogeneousGraph(node_types, valid, None, documents, keep_documents_apart=apart)
        pattern = graph.token_window(10)
        b, q, kv = _grid(pattern)
        token = graph.valid & (graph.node_types == HeterogeneousGraph.TOKEN)
        expected = token[b, q] & token[b, kv] & ((q - kv).abs() <= 5)
        if apart:
            expected &= graph.document_ids[b, q] == graph.document_ids[b, kv]
        assert expected.any() and torch.equal(pattern.mask_mod(b, 0, q, kv), expected), apart
    num_global = 12
    long_ids = torch.randint(0, num_global, (BATCH, length - num_global), generator=generator).sort(-1).values
    global_ids = torch.randint(0, num_global, (BATCH, num_global), generator=generator)
    both = {"hard_g2l_masking": True, "hard_l2g_masking": True}
    for hard in ({"hard_g2l_masking": True}, {"hard_l2g_masking": True}, both):
        pattern = GlobalLocalPattern(long_ids, global_ids, 6, 4, valid[:, num_global:], valid[:, :num_global], **hard)
        b, q, kv = _grid(pattern)
        padded = pattern.flex_query_length
        real = F.pad(valid, (0, padded - length), value=False)
        sentence = F.pad(torch.cat([global_ids, long_ids], 1), (0, padded - length), value=-1)
        q_global, kv_global = q < num_global, kv < num_global
        same = sentence[b, q] == sentence[b, kv]
        l2g = ~q_global & kv_global & (same if hard.get("hard_l2g_masking") else True)
        g2l = q_global & ~kv_global & (same if hard.get("hard_g2l_masking") else True)
        l2l = ~q_global & ~kv_global & ((q - kv).abs() <= 6)
        expected = real[b, q] & real[b, kv] & (l2l | (q_global & kv_global) | l2g | g2l)
        assert torch.equal(pattern.mask_mod(b, 0, q, kv), expected), hard


def test_block_local_causal_mask_by_hand():
    # blocks {0,1,2} {3,4,5} {6,7}: own block up to the query, plus the whole previous block
    expected = rows(
        "10000000",
        "11000000",
        "11100000",
        "11110000",
        "11111000",
        "11111100",
        "00011110",
        "00011111",
    )
    assert torch.equal(BlockLocalCausalPattern(torch.ones(1, 8), block_size=3).dense_mask()[0, 0], expected)


def test_memory_compressed_mask_by_hand():
    # 9 positions, stride 3: key 0 = null slot, keys 1..3 = slots covering [0,2], [3,5], [6,8]
    expected = rows("1000", "1000", "1000", "1100", "1100", "1100", "1110", "1110", "1110")
    assert torch.equal(MemoryCompressedCausalPattern(torch.ones(1, 9)).dense_mask()[0, 0], expected)
    # left padding: slot [0,2] is all padding and never visible; padding queries see nothing
    left_padded = MemoryCompressedCausalPattern(torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]]))
    expected = rows("0000", "0000", "0000", "1000", "1000", "1000", "1010", "1010", "1010")
    assert torch.equal(left_padded.dense_mask()[0, 0], expected)


@pytest.mark.parametrize("length", [1, 7, 50])
def test_causal_patterns_never_see_the_future(length):
    q = torch.arange(length)[:, None]
    assert torch.equal(CausalPattern(torch.ones(1, length)).dense_mask()[0, 0], torch.ones(length, length).tril() > 0)
    local = BlockLocalCausalPattern(torch.ones(1, length), block_size=4).dense_mask()[0, 0]
    assert not local[torch.arange(length)[None, :] > q].any()
    compressed = MemoryCompressedCausalPattern(torch.ones(1, length)).dense_mask()[0, 0]
    last_covered = torch.arange(compressed.shape[1]) * 3 - 1  # slot k >= 1 covers up to 3k - 1
    slot_visible = compressed[:, 1:]
    assert not slot_visible[last_covered[None, 1:] >= q].any()
    assert compressed[:, 0].all()  # the null slot keeps every query's row non-empty


# ----------------------------------------------------------------------------------------------------------------
# Every backend against eager
# ----------------------------------------------------------------------------------------------------------------


def _valid(all_padding_row=False):
    valid = torch.ones(BATCH, LENGTH, dtype=torch.bool)
    valid[1, 170:] = False
    if all_padding_row:
        valid[1] = False
    return valid


def _window(valid):
    return SlidingWindowPattern(16, valid), ()


def _window_global(valid):
    is_global = torch.zeros(BATCH, LENGTH, dtype=torch.bool)
    is_global[0, [0, 5, 99, 199]] = True
    is_global[1, [3, 150]] = True
    return SlidingWindowPattern(16, valid.long(), global_attention_mask=is_global), ()


def _etc(valid, with_bias, with_keys=False, **masking):
    num_global = 12
    long_sentences = (torch.arange(LENGTH - num_global) // 16).expand(BATCH, -1)
    global_sentences = torch.arange(num_global).expand(BATCH, -1)
    global_valid = valid[:, :num_global].clone()
    global_valid[1, 10:] = False  # batch row 1 has fewer sentences
    table = keys = None
    rows = GlobalLocalPattern.relative_vocab_size(4)
    if with_bias:
        table = torch.randn(rows, HEADS, generator=torch.Generator().manual_seed(3), device="cpu")
        table = table.to(valid.device).requires_grad_()
    if with_keys:  # relative keys on the scale of the keys
        keys = torch.randn(rows, HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(4), device="cpu")
        keys = keys.to(valid.device).requires_grad_()
    pattern = GlobalLocalPattern(
        long_sentences,
        global_sentences,
        6,
        4,
        valid[:, num_global:],
        global_valid,
        relative_bias=table,
        relative_keys=keys,
        **masking,
    )
    return pattern, tuple(t for t in (table, keys) if t is not None)


def _graph(valid):
    node_types = torch.zeros(BATCH, LENGTH, dtype=torch.long)
    node_types[:, ::17] = HeterogeneousGraph.SENTENCE
    node_types[:, [0, 100]] = HeterogeneousGraph.DOCUMENT
    entity_ids = torch.full((BATCH, LENGTH), -1)
    entity_ids[:, [4, 40, 120, 180]] = torch.tensor([0, 1, 0, 1])
    entity_ids[1, [7, 9]] = 2
    document_ids = (torch.arange(LENGTH) >= 100).long().expand(BATCH, -1)
    return HeterogeneousGraph(node_types, valid, entity_ids, document_ids, keep_documents_apart=True)


PATTERNS = {
    "sliding_window": _window,
    "window_global": _window_global,
    "etc_hard_g2l_bias": lambda valid: _etc(valid, with_bias=True, hard_g2l_masking=True),
    "etc_hard_l2g": lambda valid: _etc(valid, with_bias=False, hard_l2g_masking=True),
    "etc_relative_keys": lambda valid: _etc(valid, with_bias=True, with_keys=True, hard_g2l_masking=True),
    "het_token_window": lambda valid: (_graph(valid).token_window(20), ()),
    "het_nodes": lambda valid: (_graph(valid).nodes(), ()),
    "het_entities": lambda valid: (_graph(valid).entities(), ()),
    "causal": lambda valid: (CausalPattern(valid), ()),
    "block_local_causal": lambda valid: (BlockLocalCausalPattern(valid, block_size=32), ()),
    "memory_compressed": lambda valid: (MemoryCompressedCausalPattern(valid), ()),
    # 2D: the heads folded into the sequence (LENGTH * num_heads slots)
    "conv_1d": lambda valid: (ConvolutionalPattern(valid, "1d", window=13), ()),
    "conv_2d": lambda valid: (ConvolutionalPattern(valid, "2d", window=5, num_heads=3, head_window=3), ()),
    "conv_circular_2d": lambda valid: (ConvolutionalPattern(valid, "circular_2d", window=5, num_heads=4), ()),
}


def _inputs(pattern, requires_grad=False, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shapes = [pattern.query_length, pattern.key_length, pattern.key_length]
    return [
        torch.randn(BATCH, HEADS, n, HEAD_DIM, generator=generator).requires_grad_(requires_grad) for n in shapes
    ]


def _run(implementation, q, k, v, pattern):
    if implementation == "flex_attention":  # no FlexAttention backward on CPU: inference only
        with torch.no_grad():
            return sparse_attention(q, k, v, pattern, implementation)
    return sparse_attention(q, k, v, pattern, implementation)


@pytest.fixture(autouse=True)
def small_prefix_chunks(monkeypatch):
    # several query chunks even at test lengths, so the chunk boundaries of the causal-prefix path are exercised
    monkeypatch.setattr(attention, "PREFIX_QUERY_CHUNK", 48)


# Each pattern kind compiles its own FlexAttention kernel (about 5-10 s each on a cold inductor cache, 30 s for
# the first): the fast run checks flex on these kinds, `-m slow` on the others.
FLEX_IN_FAST_RUN = {"sliding_window", "window_global", "etc_hard_g2l_bias", "etc_relative_keys", "memory_compressed"}


def backend_cases(implementations):
    cases = []
    for name in PATTERNS:
        for implementation in implementations:
            slow = implementation == "flex_attention" and name not in FLEX_IN_FAST_RUN
            marks = [pytest.mark.slow] if slow else []
            cases.append(pytest.param(name, implementation, marks=marks, id=f"{name}-{implementation}"))
    return cases


@pytest.mark.parametrize("name, implementation", backend_cases(FAST_BACKENDS))
def test_backends_match_eager(name, implementation):
    pattern, _ = PATTERNS[name](_valid())
    q, k, v = _inputs(pattern)
    reference = sparse_attention(q, k, v, pattern, "eager")
    assert reference.abs().sum() > 0
    assert (_run(implementation, q, k, v, pattern) - reference).abs().max() <= TOL


@pytest.mark.parametrize("name", PATTERNS)
def test_gradients_match_eager(name):
    pattern, parameters = PATTERNS[name](_valid())
    q, k, v = _inputs(pattern, requires_grad=True)
    weights = torch.randn(BATCH, HEADS, pattern.query_length, HEAD_DIM, generator=torch.Generator().manual_seed(1))
    wrt = [q, k, v, *parameters]
    reference = torch.autograd.grad((sparse_attention(q, k, v, pattern, "eager") * weights).sum(), wrt)
    for implementation in ("sdpa", "blocked"):
        grads = torch.autograd.grad((sparse_attention(q, k, v, pattern, implementation) * weights).sum(), wrt)
        for grad, expected in zip(grads, reference):
            # relative too: a bias parameter's gradient sums over every query/key pair, so float32 summation order
            # (thread count) moves it by more than TOL in absolute terms
            torch.testing.assert_close(grad, expected, rtol=1e-4, atol=TOL, msg=implementation)


@pytest.mark.parametrize("name", PATTERNS)
def test_eager_weights_are_zero_outside_the_mask(name):
    pattern, _ = PATTERNS[name](_valid())
    q, k, v = _inputs(pattern)
    _, weights = attention._eager_pattern_attention(q, k, v, pattern, HEAD_DIM**-0.5, 0.0)
    assert torch.all(weights.masked_select(~pattern.dense_mask()) == 0)


@pytest.mark.parametrize("name, implementation", backend_cases(("eager", *FAST_BACKENDS)))
def test_masked_keys_do_not_change_the_output(name, implementation):
    pattern, _ = PATTERNS[name](_valid())
    q, k, v = _inputs(pattern)
    # keys masked for every query (batch row 1's padding) can hold anything without changing any output
    unseen = ~pattern.dense_mask().any(dim=2)[:, 0]  # [batch, keys]
    assert unseen[1].any()
    k2, v2 = k.clone(), v.clone()
    k2[unseen[:, None, :, None].expand_as(k2)] = 1e4
    v2[unseen[:, None, :, None].expand_as(v2)] = -1e4
    assert torch.equal(_run(implementation, q, k, v, pattern), _run(implementation, q, k2, v2, pattern))


@pytest.mark.parametrize("name, implementation", backend_cases(("eager", *FAST_BACKENDS)))
def test_all_padding_rows_give_zeros(name, implementation):
    pattern, _ = PATTERNS[name](_valid(all_padding_row=True))
    q, k, v = _inputs(pattern, requires_grad=True)
    output = _run(implementation, q, k, v, pattern)
    assert not torch.isnan(output).any()
    assert torch.equal(output[1], torch.zeros_like(output[1]))
    if implementation != "flex_attention":
        assert all(torch.isfinite(g).all() for g in torch.autograd.grad(output.sum(), [q, k, v]))


def _tiles(counts, indices):
    """BlockMask count/index tensors -> [batch, query tiles, key tiles] bool."""
    tiles = torch.zeros(indices.shape[0], indices.shape[2], indices.shape[3], dtype=torch.bool)
    for b in range(indices.shape[0]):
        for row in range(indices.shape[2]):
            tiles[b, row, indices[b, 0, row, : counts[b, 0, row]].long()] = True
    return tiles


COVERAGE_PATTERNS = {  # lengths and widths that give full tiles of 128 x 128
    "window": lambda valid: SlidingWindowPattern(256, valid),
    "window_global": lambda valid: SlidingWindowPattern(256, valid, (torch.arange(500) % 97 == 3).expand(BATCH, -1)),
    "etc": lambda valid: GlobalLocalPattern(
        (torch.arange(480) // 40).expand(BATCH, -1), torch.arange(12).expand(BATCH, -1), 200, 8,
        long_attention_mask=valid[:, 20:], global_attention_mask=valid[:, :12],
    ),
    "het_window": lambda valid: _graph_of_length(valid, keep_documents_apart=False).token_window(300),
    "het_window_apart": lambda valid: _graph_of_length(valid, keep_documents_apart=True).token_window(300),
    "het_nodes": lambda valid: _graph_of_length(valid, keep_documents_apart=True).nodes(),
    "het_entities": lambda valid: _graph_of_length(valid, keep_documents_apart=True).entities(),
    "block_local": lambda valid: BlockLocalCausalPattern(valid, block_size=128),
    "memory_compressed": lambda valid: MemoryCompressedCausalPattern(torch.cat([valid, valid], dim=1)),
}


def _graph_of_length(valid, keep_documents_apart):
    length = valid.shape[1]
    node_types = torch.zeros(BATCH, length, dtype=torch.long)
    node_types[:, 150::60] = HeterogeneousGraph.SENTENCE
    entity_ids = torch.full((BATCH, length), -1)
    entity_ids[:, [4, 140, 320]] = torch.tensor([0, 1, 0])
    document_ids = (torch.arange(length) >= 300).long().expand(BATCH, -1)
    return HeterogeneousGraph(node_types, valid, entity_ids, document_ids, keep_documents_apart)


@pytest.mark.parametrize("name", COVERAGE_PATTERNS)
def test_flex_block_mask_covers_the_mask_exactly(name):
    valid = torch.ones(BATCH, 500, dtype=torch.bool)
    valid[1, 410:] = False
    pattern = COVERAGE_PATTERNS[name](valid)
    block_mask = pattern.flex_block_mask()
    partial_tiles = _tiles(block_mask.kv_num_blocks, block_mask.kv_indices)
    full_tiles = _tiles(block_mask.full_kv_num_blocks, block_mask.full_kv_indices)
    assert not (partial_tiles & full_tiles).any()
    q = torch.arange(pattern.flex_query_length).view(1, 1, -1, 1)
    kv = torch.arange(pattern.flex_key_length).view(1, 1, 1, -1)
    b = torch.arange(BATCH).view(-1, 1, 1, 1)
    mask = block_mask.mask_mod(b, 0, q, kv)[:, 0]  # the mask flex applies, at every padded position
    full_mask = pattern.mask_mod(b, 0, q, kv)[:, 0]
    if pattern.dense_rows_outside_flex:  # flex has every row but the dense ones, which it leaves out entirely
        dense = torch.zeros(BATCH, q.shape[2] + 1, dtype=torch.bool)
        rows = pattern.layout().dense_rows
        dense.scatter_(1, torch.where(rows >= 0, rows, q.shape[2]), True)
        assert dense.any() and not mask[dense[:, :-1]].any()
        assert torch.equal(mask, full_mask & ~dense[:, :-1, None])
    else:
        assert torch.equal(mask, full_mask)
    per_tile = mask.view(BATCH, q.shape[2] // 128, 128, kv.shape[3] // 128, 128)
    assert not per_tile.any(dim=(2, 4))[~(partial_tiles | full_tiles)].any()  # nothing allowed outside the tiles
    assert per_tile.all(dim=(2, 4))[full_tiles].all()  # tiles that skip the mask are entirely allowed
    if name in ("window", "etc", "block_local", "memory_compressed", "het_window"):
        assert full_tiles.any()


def _flex_by_definition(query, key, value, score_mod, block_mask, scale):
    """What the flex kernel computes, written out densely with autograd (torch has no flex backward on the CPU):
    the scaled scores, `score_mod`, the softmax over the keys the BlockMask's mask function allows; rows without
    any give zeros."""
    b, h = torch.arange(query.shape[0]).view(-1, 1, 1, 1), torch.arange(query.shape[1]).view(1, -1, 1, 1)
    q, kv = torch.arange(query.shape[2]).view(1, 1, -1, 1), torch.arange(key.shape[2]).view(1, 1, 1, -1)
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if score_mod is not None:
        scores = score_mod(scores, b, h, q, kv)
    mask = block_mask.mask_mod(b, h, q, kv).expand_as(scores)
    weights = torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=-1)
    return torch.matmul(weights.masked_fill(~mask.any(-1, keepdim=True), 0.0), value)


GLOBAL_ROW_PATTERNS = ["window_global", "etc_hard_g2l_bias", "etc_hard_l2g", "etc_relative_keys", "het_nodes"]


@pytest.mark.parametrize("name", GLOBAL_ROW_PATTERNS)
def test_flex_global_rows_by_dense_sdpa_match_eager_with_gradients(name, monkeypatch):
    """Through flex, the rows that attend to every key (global tokens, HetFormer's nodes) are left out of the
    BlockMask and computed by one dense SDPA: the merged output equals the eager reference, and so do its gradients
    (the kernel replaced by its dense definition, since flex has no backward on the CPU; the real kernel's
    gradients are checked on a GPU by `test_flex_gradients_match_eager_on_gpu`)."""
    pattern, parameters = PATTERNS[name](_valid())
    assert pattern.dense_rows_outside_flex
    q, k, v = _inputs(pattern, requires_grad=True)
    weights = torch.randn(BATCH, HEADS, pattern.query_length, HEAD_DIM, generator=torch.Generator().manual_seed(1))
    wrt = [q, k, v, *parameters]
    expected = sparse_attention(q, k, v, pattern, "eager")
    reference = torch.autograd.grad((expected * weights).sum(), wrt)
    if name in FLEX_IN_FAST_RUN:  # the real kernel, forward (the others' in the slow run of the backend test)
        assert (_run("flex_attention", q, k, v, pattern) - expected).abs().max() <= TOL
    monkeypatch.setattr(attention, "_compiled_flex_attention", _flex_by_definition)
    output = attention._flex_attention(q, k, v, pattern, HEAD_DIM**-0.5)
    assert (output - expected).abs().max() <= TOL
    for grad, wanted in zip(torch.autograd.grad((output * weights).sum(), wrt), reference):
        torch.testing.assert_close(grad, wanted, rtol=1e-4, atol=TOL)


def test_global_rows_no_longer_make_the_first_query_block_visit_every_key_tile():
    """ETC with 12 global tokens (positions 0-11) and l2l radius 64 at 1,024 positions: query block 0 (rows 0-127)
    needs key tile 0 (the global keys and its own band) and tile 1 (the band reaches 191), not all 8 tiles."""
    pattern = GlobalLocalPattern(
        (torch.arange(1012) // 40).expand(BATCH, -1), torch.arange(12).expand(BATCH, -1), 64, 8
    )
    block_mask = pattern.flex_block_mask()
    tiles = _tiles(block_mask.kv_num_blocks, block_mask.kv_indices) | _tiles(
        block_mask.full_kv_num_blocks, block_mask.full_kv_indices
    )
    assert tiles.shape == (BATCH, 8, 8)
    assert tiles[:, 0].nonzero()[:, 1].tolist() == [0, 1] * BATCH
    assert tiles[:, 1:, 0].all()  # every long row still reads the global keys


def test_flex_with_full_tiles_matches_eager():
    # window 256 at 256 positions: the diagonal tiles of batch row 0 are full (no mask evaluated)
    valid = torch.ones(BATCH, 256, dtype=torch.bool)
    valid[1, 230:] = False
    pattern = SlidingWindowPattern(256, valid)
    assert pattern.flex_block_mask().full_kv_num_blocks.sum() > 0
    q, k, v = _inputs(pattern)
    assert (_run("flex_attention", q, k, v, pattern) - sparse_attention(q, k, v, pattern, "eager")).abs().max() <= TOL


def test_blocked_backend_with_many_small_blocks_matches_eager(monkeypatch):
    # unmerged band blocks (8 positions each, 25 of them) exercise the look-around at every block boundary
    monkeypatch.setattr(attention, "MIN_QUERY_BLOCK", 1)
    pattern, _ = _window_global(_valid())
    q, k, v = _inputs(pattern)
    expected = sparse_attention(q, k, v, pattern, "eager")
    assert (sparse_attention(q, k, v, pattern, "blocked") - expected).abs().max() <= TOL


def _hetformer_graph(case, length):
    """Graphs that take every branch of the HetFormer patterns' own blocked paths."""
    batch = 1 if case == "batch_of_one" else 2
    valid = torch.ones(batch, length, dtype=torch.bool)
    node_types = torch.zeros(batch, length, dtype=torch.long)
    node_types[:, ::13] = HeterogeneousGraph.SENTENCE
    entity_ids = torch.full((batch, length), -1)
    entity_ids[:, 5::29] = torch.arange(len(range(5, length, 29))) % 3
    document_ids = torch.zeros(batch, length, dtype=torch.long)
    apart = False
    if case == "one_document":  # no padding, no document node: node masks all allowed (left out)
        pass
    elif case == "documents_padding":
        valid[1, length - 37 :] = False
        document_ids[:, length // 2 :] = 1
        node_types[:, [0, length // 2]] = HeterogeneousGraph.DOCUMENT
        apart = True
    elif case == "all_padding_row":
        valid[1] = False
        document_ids[:, length // 3 :] = 1
        apart = True
    elif case in ("all_mentions", "batch_of_one"):  # like the model's mention graph and token windows
        node_types.zero_()
        entity_ids = (torch.arange(length) % 4).expand(batch, -1).clone()
    return HeterogeneousGraph(node_types, valid, entity_ids, document_ids, keep_documents_apart=apart)


@pytest.mark.parametrize(
    "case", ["one_document", "documents_padding", "all_padding_row", "all_mentions", "batch_of_one"]
)
@pytest.mark.parametrize("window, length", [(4, 150), (20, 200), (130, 300), (256, 257), (600, 700)])
def test_hetformer_blocked_paths_match_eager_with_gradients(case, window, length):
    graph = _hetformer_graph(case, length)
    patterns = {"window": graph.token_window(window), "nodes": graph.nodes(), "entities": graph.entities()}
    for name, pattern in patterns.items():
        assert pattern.blocked_attention is not None
        generator = torch.Generator().manual_seed(window)
        q, k, v = (torch.randn(graph.batch_size, HEADS, length, HEAD_DIM, generator=generator).requires_grad_()
                   for _ in range(3))
        weights = torch.randn(q.shape, generator=generator)
        expected = sparse_attention(q, k, v, pattern, "eager")
        expected_grads = torch.autograd.grad((expected * weights).sum(), [q, k, v])
        for _ in range(2):  # the second call reuses the masks built by the first (as every later layer does)
            output = sparse_attention(q, k, v, pattern, "blocked")
            assert (output - expected).abs().max() <= TOL, name
            if not output.requires_grad:  # a pattern without any edge: zeros, no gradient
                assert not output.any() and not any(grad.any() for grad in expected_grads)
                continue
            grads = torch.autograd.grad((output * weights).sum(), [q, k, v])
            for grad, expected_grad in zip(grads, expected_grads):
                torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=TOL, msg=name)
    nodes = patterns["nodes"]
    assert nodes._all_allowed() == (case in ("one_document", "all_mentions", "batch_of_one"))
    if case in ("all_mentions", "batch_of_one") and length > 2 * window:  # the middle blocks: one run of plain band
        assert isinstance(patterns["window"]._blocks()["plain"], slice)
    if case == "one_document":  # no node mask was built: the dense mask agrees that every node edge is allowed
        mask = nodes.dense_mask()[:, 0]
        is_node = graph.node_types[:, :length] != HeterogeneousGraph.TOKEN
        assert mask[is_node].all() and mask.transpose(1, 2)[is_node].all()


def test_dropout_is_applied_only_in_training():
    pattern, _ = _window(_valid())
    q, k, v = _inputs(pattern)
    expected = sparse_attention(q, k, v, pattern, "eager")
    for implementation in ("eager", "sdpa", "blocked"):
        evaluation = sparse_attention(q, k, v, pattern, implementation, dropout=0.5, training=False)
        assert (evaluation - expected).abs().max() <= TOL, implementation
        dropped = sparse_attention(q, k, v, pattern, implementation, dropout=0.5, training=True)
        assert (dropped - expected).abs().max() > 0.1, implementation
    with pytest.raises(ValueError, match="dropout"):
        with torch.no_grad():
            sparse_attention(q, k, v, pattern, "flex_attention", dropout=0.1, training=True)


def test_flex_with_gradients_on_cpu_falls_back_to_blocked():
    pattern, _ = _window_global(_valid())
    q, k, v = _inputs(pattern, requires_grad=True)
    with pytest.warns(UserWarning, match="no backward pass on CPU"):
        output = sparse_attention(q, k, v, pattern, "flex_attention")
    assert torch.equal(output, sparse_attention(q, k, v, pattern, "blocked"))
    output.sum().backward()
    assert q.grad is not None


def test_etc_layers_share_structure_with_their_own_bias_tables():
    pattern, (table,) = PATTERNS["etc_hard_g2l_bias"](_valid())
    other_table = torch.randn(table.shape, generator=torch.Generator().manual_seed(2))
    other_layer = pattern.with_relative_tables(other_table)
    assert other_layer.flex_block_mask() is pattern.flex_block_mask()
    positions = torch.arange(LENGTH)
    ids = pattern.relative_ids(torch.arange(BATCH)[:, None, None], positions[:, None], positions[None, :])
    bias = other_layer.dense_bias(HEADS, torch.float32)
    assert torch.equal(bias, other_table[ids[:, None], torch.arange(HEADS)[None, :, None, None]])
    q, k, v = _inputs(pattern)
    for layer in (pattern, other_layer):  # the compiled kernel must read each layer's own table
        expected = sparse_attention(q, k, v, layer, "eager")
        assert (_run("flex_attention", q, k, v, layer) - expected).abs().max() <= TOL


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlexAttention has a backward pass on GPU only")
@pytest.mark.parametrize("name", ["etc_hard_g2l_bias", "etc_relative_keys"])
def test_flex_gradients_match_eager_on_gpu(name):
    pattern, parameters = PATTERNS[name](_valid().cuda())
    parameters = [table.detach().cuda().requires_grad_() for table in parameters]
    pattern = pattern.with_relative_tables(parameters[0], parameters[1] if len(parameters) > 1 else None)
    q, k, v = (t.cuda().requires_grad_() for t in _inputs(pattern))
    weights = torch.randn(BATCH, HEADS, pattern.query_length, HEAD_DIM, device="cuda")
    wrt = [q, k, v, *parameters]
    expected = sparse_attention(q, k, v, pattern, "eager")
    reference = torch.autograd.grad((expected * weights).sum(), wrt)
    output = sparse_attention(q, k, v, pattern, "flex_attention")
    grads = torch.autograd.grad((output * weights).sum(), wrt)
    torch.testing.assert_close(output, expected, rtol=0, atol=TOL)
    for grad, reference_grad in zip(grads, reference):
        torch.testing.assert_close(grad, reference_grad, rtol=1e-4, atol=TOL)


def test_bad_inputs_raise_clear_errors():
    valid = torch.ones(1, 8)
    with pytest.raises(ValueError, match="even"):
        SlidingWindowPattern(3, valid)
    with pytest.raises(ValueError, match="global_attention_mask"):
        SlidingWindowPattern(2, valid, global_attention_mask=torch.ones(1, 9))
    with pytest.raises(ValueError, match="relative_bias"):
        _etc_tiny(relative_bias=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="relative_keys"):
        _etc_tiny(relative_keys=torch.zeros(5, 2))
    with pytest.raises(ValueError, match="relative_keys"):
        sparse_attention(torch.randn(1, 2, 8, 4), *[torch.randn(1, 2, 8, 4)] * 2,
                         _etc_tiny(relative_keys=torch.zeros(5, 2, 3)), "eager")
    with pytest.raises(ValueError, match="node_types"):
        HeterogeneousGraph(torch.full((1, 8), 3), valid)
    pattern = SlidingWindowPattern(2, valid)
    q = torch.randn(1, 2, 8, 4)
    with pytest.raises(ValueError, match="expects 8 queries"):
        sparse_attention(q[:, :, :5], q, q, pattern)
    with pytest.raises(ValueError, match="Unknown attention implementation"):
        sparse_attention(q, q, q, pattern, "flash")
    with pytest.raises(ValueError, match="heads"):
        sparse_attention(q, q, q, _etc_tiny(relative_bias=torch.zeros(5, 3)), "eager")


# ----------------------------------------------------------------------------------------------------------------
# Longformer equivalence
# ----------------------------------------------------------------------------------------------------------------


class LongformerLayoutSelfAttention(nn.Module):
    """Longformer's projection layout on top of our window+global pattern.

    Every row attends with the local projections (window + global keys); rows of global tokens are replaced by
    attention with the global projections over all keys, exactly the split LongformerSelfAttention makes.
    """

    def __init__(self, hidden_size, num_heads, window, implementation):
        super().__init__()
        self.num_heads, self.window, self.implementation = num_heads, window, implementation
        for name in ("query", "key", "value", "query_global", "key_global", "value_global"):
            setattr(self, name, nn.Linear(hidden_size, hidden_size))

    def _heads(self, x):
        batch, length, hidden = x.shape
        return x.view(batch, length, self.num_heads, hidden // self.num_heads).transpose(1, 2)

    def forward(self, hidden_states, attention_mask, global_attention_mask):
        pattern = SlidingWindowPattern(self.window, attention_mask, global_attention_mask)

        def attend(q, k, v):
            projected = [self._heads(layer(hidden_states)) for layer in (q, k, v)]
            return sparse_attention(*projected, pattern, self.implementation)

        local = attend(self.query, self.key, self.value)
        global_ = attend(self.query_global, self.key_global, self.value_global)
        output = torch.where(global_attention_mask[:, None, :, None].bool(), global_, local)
        return output.transpose(1, 2).flatten(2)


@pytest.mark.parametrize("implementation", ["eager", *FAST_BACKENDS])
def test_window_global_pattern_equals_longformer_self_attention(implementation):
    torch.manual_seed(0)
    window, length = 16, 256  # Longformer needs the length to be a multiple of the window
    config = LongformerConfig(
        hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS, attention_window=[window],
        attention_probs_dropout_prob=0.0,
    )
    reference = LongformerSelfAttention(config, layer_id=0).eval()
    ours = LongformerLayoutSelfAttention(config.hidden_size, HEADS, window, implementation).eval()
    ours.load_state_dict(reference.state_dict())

    hidden_states = torch.randn(BATCH, length, config.hidden_size)
    attention_mask = torch.ones(BATCH, length, dtype=torch.long)
    attention_mask[1, 201:] = 0
    global_attention_mask = torch.zeros(BATCH, length, dtype=torch.long)
    global_attention_mask[0, [0, 17, 100]] = 1  # a different number of global tokens per row
    global_attention_mask[1, [5]] = 1
    # Longformer's convention: -10000 padding, 0 local, +10000 global
    longformer_mask = (attention_mask - 1) * 10000.0 + global_attention_mask * 10000.0
    with torch.no_grad():
        expected = reference(
            hidden_states,
            attention_mask=longformer_mask,
            is_index_masked=longformer_mask < 0,
            is_index_global_attn=longformer_mask > 0,
            is_global_attn=True,
        )[0]
        output = ours(hidden_states, attention_mask, global_attention_mask)
    assert (output - expected).abs().max() <= TOL


# ----------------------------------------------------------------------------------------------------------------
# transformers attn_implementation plumbing
# ----------------------------------------------------------------------------------------------------------------


class TinyWindowConfig(PretrainedConfig):
    model_type = "sumformers-attention-test"

    def __init__(self, hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS, window=16, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.num_attention_heads, self.window = hidden_size, num_attention_heads, window


class TinyWindowModel(SummarizerMixin, PreTrainedModel):
    """One sliding-window self-attention layer that runs its attention like our architectures do."""

    config_class = TinyWindowConfig
    _supports_sdpa = True
    _supports_flex_attn = True
    attention_backends = ("eager", "sdpa", "flex_attention", "blocked")

    def __init__(self, config):
        super().__init__(config)
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.post_init()

    def forward(self, hidden_states, attention_mask):
        batch, length, _ = hidden_states.shape
        heads = self.config.num_attention_heads
        q, k, v = self.qkv(hidden_states).view(batch, length, 3, heads, -1).permute(2, 0, 3, 1, 4)
        output, _ = attention_forward(
            self, q, k, v, dropout=0.0, attention_pattern=SlidingWindowPattern(self.config.window, attention_mask)
        )
        return output.flatten(2)


@pytest.mark.parametrize("implementation", ["eager", "sdpa", "flex_attention", "blocked"])
def test_attn_implementation_selects_our_backend(implementation):
    torch.manual_seed(0)
    # `_from_config` (what `AutoModel.from_config` calls) writes the choice into the config: one config each
    reference = TinyWindowModel._from_config(TinyWindowConfig(), attn_implementation="eager").eval()
    model = TinyWindowModel._from_config(TinyWindowConfig(), attn_implementation=implementation).eval()
    assert model.config._attn_implementation == implementation
    assert reference.config._attn_implementation == "eager"
    model.load_state_dict(reference.state_dict())
    hidden_states, attention_mask = torch.randn(BATCH, LENGTH, HEADS * HEAD_DIM), _valid()
    with torch.no_grad():
        assert (model(hidden_states, attention_mask) - reference(hidden_states, attention_mask)).abs().max() <= TOL


def test_from_pretrained_accepts_the_registered_blocked_backend(tmp_path):
    torch.manual_seed(0)
    reference = TinyWindowModel._from_config(TinyWindowConfig(), attn_implementation="eager").eval()
    reference.save_pretrained(tmp_path)
    model = TinyWindowModel.from_pretrained(tmp_path, attn_implementation="blocked").eval()
    assert model.config._attn_implementation == "blocked"
    hidden_states, attention_mask = torch.randn(BATCH, LENGTH, HEADS * HEAD_DIM), _valid()
    with torch.no_grad():
        assert (model(hidden_states, attention_mask) - reference(hidden_states, attention_mask)).abs().max() <= TOL


def test_unknown_attn_implementations_are_rejected():
    with pytest.raises(ValueError):
        TinyWindowModel._from_config(TinyWindowConfig(), attn_implementation="no_such_backend")
    model = TinyWindowModel._from_config(TinyWindowConfig(), attn_implementation="sdpa")
    with pytest.raises(ValueError, match="does not run attn_implementation='flash_attention_2'"):
        model.set_attn_implementation("flash_attention_2")
    model.config._attn_implementation_internal = "flash_attention_2"  # written past the checks
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="runs attn_implementation in"):
        attention_forward(model, q, q, q, attention_pattern=SlidingWindowPattern(4, torch.ones(1, 4)))


def test_set_attn_implementation_switches_the_backend():
    torch.manual_seed(0)
    model = TinyWindowModel._from_config(TinyWindowConfig(), attn_implementation="eager").eval()
    hidden_states, attention_mask = torch.randn(BATCH, LENGTH, HEADS * HEAD_DIM), _valid()
    with torch.no_grad():
        expected = model(hidden_states, attention_mask)
        model.set_attn_implementation("blocked")
        assert model.config._attn_implementation == "blocked"
        assert (model(hidden_states, attention_mask) - expected).abs().max() <= TOL


@pytest.mark.parametrize("implementation", ["blocked", "no_such_backend"])
def test_transformers_models_refuse_blocked(implementation):
    """Only the package's models run "blocked": importing sumformers must not make transformers' own models accept a
    name they would then fail on in `forward`."""
    from transformers import AttentionInterface, BertConfig, BertModel

    import sumformers  # noqa: F401  (everything the package registers)

    assert "blocked" not in AttentionInterface().valid_keys()
    config = BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    with pytest.raises(ValueError, match="is not supported"):
        BertModel._from_config(config, attn_implementation=implementation)
    with pytest.raises(ValueError, match="is not supported"):
        BertModel(BertConfig(**config.to_dict(), attn_implementation=implementation))
    with pytest.raises(ValueError, match="is not supported"):
        BertModel(config).set_attn_implementation(implementation)


def _same_tiles(got, expected):
    """Two BlockMasks with equal tile tensors (counts and indices, partial and full, both directions)."""
    return all(torch.equal(a, b) for a, b in zip(got.as_tuple()[2:10], expected.as_tuple()[2:10]))


@pytest.mark.parametrize("name", PATTERNS)
def test_block_masks_are_built_without_reading_anything_back(name, monkeypatch):
    """Building a BlockMask reads no tensor back to the host (`.item()`, `int(tensor)`, `bool(tensor)`, ...: each a
    device sync on a GPU); patterns with positions give flags instead, and the mask equals the one built from the
    positions."""
    from sumformers.modeling import block_masks

    pattern, _ = PATTERNS[name](_valid())  # constructors may check their arguments on the host
    from_positions = block_masks.block_mask_from_layout(_PositionsOnly(pattern))
    block_masks.clear_block_mask_cache()

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was read back to the host while building the BlockMask")

    with monkeypatch.context() as patch:
        for method in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
            patch.setattr(torch.Tensor, method, refuse)
        built = pattern.flex_block_mask()
    assert _same_tiles(built, from_positions)


def test_block_mask_cache_reuses_the_mask_of_equal_inputs_only():
    """A pattern built again from equal inputs gets the very same BlockMask (no rebuild); other padding, length or
    window, or an input changed in place, gets its own, equal to an uncached build; outputs equal the uncached
    path's."""
    from sumformers.modeling import block_masks

    block_masks.clear_block_mask_cache()
    first, _ = _window_global(_valid())
    mask = first.flex_block_mask()
    again, _ = _window_global(_valid())  # new tensors, equal values: on the CPU the key is their bytes
    assert again.flex_block_mask() is mask
    q, k, v = _inputs(again)
    cached_output = _run("flex_attention", q, k, v, again)
    block_masks.clear_block_mask_cache()
    uncached, _ = _window_global(_valid())
    assert uncached.flex_block_mask() is not mask
    assert torch.equal(cached_output, _run("flex_attention", q, k, v, uncached))
    assert (cached_output - sparse_attention(q, k, v, again, "eager")).abs().max() <= TOL

    other_padding = _valid()
    other_padding[0, 190:] = False
    changed = _valid().long()
    changed_in_place = SlidingWindowPattern(16, changed)
    changed[0, :3] = 0  # after the pattern was built: its key is refused, not computed from the new values
    assert changed_in_place.mask_key() is None
    others = [
        _window_global(other_padding)[0],
        SlidingWindowPattern(16, torch.ones(BATCH, 300, dtype=torch.bool)),
        SlidingWindowPattern(32, _valid()),
        SlidingWindowPattern(16, _valid()),
        changed_in_place,
    ]
    masks = [pattern.flex_block_mask() for pattern in others]
    assert len({id(m) for m in [mask, *masks]}) == len(others) + 1
    for pattern, got in zip(others, masks):
        assert _same_tiles(got, block_masks.block_mask_from_layout(pattern))


def test_block_mask_key_off_the_cpu_is_the_inputs_identity_and_version():
    """Off the CPU the key reads no values (that would be a device sync): the same input tensors, unchanged, give
    the same key; another tensor or an in-place change another one; tensors without a version counter none."""
    valid = torch.ones(BATCH, LENGTH, dtype=torch.bool, device="meta")
    key = SlidingWindowPattern(16, valid).mask_key()
    assert key is not None and SlidingWindowPattern(16, valid).mask_key() == key
    assert SlidingWindowPattern(16, valid.clone()).mask_key() != key
    assert SlidingWindowPattern(8, valid).mask_key() != key
    valid.logical_not_()
    assert SlidingWindowPattern(16, valid).mask_key() not in (key, None)
    with torch.inference_mode():
        assert SlidingWindowPattern(16, torch.ones(BATCH, LENGTH, device="meta")).mask_key() is None


def test_compiled_block_mask_builder_traces_once_per_shape(monkeypatch):
    """The compiled part of the builder takes tensors and sizes only: a second pattern of the same kind and shape
    (other padding) reuses the first one's graph instead of recompiling (Dynamo's counting backend, no inductor)."""
    from torch._dynamo.testing import CompileCounter

    from sumformers.modeling import block_masks

    counter = CompileCounter()
    compiled = torch.compile(block_masks.tile_tensors, backend=counter, dynamic=False)
    monkeypatch.setattr(block_masks, "COMPILED_BUILDER_DEVICES", ("cpu",))
    monkeypatch.setattr(block_masks, "_compiled_tile_tensors", compiled)
    other_padding = _valid()
    other_padding[0, 150:] = False
    for name in ("window_global", "etc_hard_g2l_bias", "block_local_causal", "memory_compressed", "het_nodes"):
        first, second = PATTERNS[name](_valid())[0], PATTERNS[name](other_padding)[0]
        built = block_masks.block_mask_from_layout(first)
        frames = counter.frame_count
        built_again = block_masks.block_mask_from_layout(second)
        assert counter.frame_count == frames, name
        with monkeypatch.context() as patch:
            patch.setattr(block_masks, "COMPILED_BUILDER_DEVICES", ())
            assert _same_tiles(built, block_masks.block_mask_from_layout(first)), name
            assert _same_tiles(built_again, block_masks.block_mask_from_layout(second)), name
    assert counter.frame_count >= 1


@pytest.mark.slow
def test_compiled_block_mask_builder_equals_the_eager_one(monkeypatch):
    """The builder compiled (as on a GPU), forced on the CPU, gives the eager builder's tiles."""
    from sumformers.modeling import block_masks

    monkeypatch.setattr(block_masks, "_compiled_tile_tensors", None)
    for name in ("window_global", "etc_hard_g2l_bias", "het_nodes", "het_entities", "memory_compressed"):
        pattern, _ = PATTERNS[name](_valid())
        eager = block_masks.block_mask_from_layout(pattern)
        with monkeypatch.context() as patch:
            patch.setattr(block_masks, "COMPILED_BUILDER_DEVICES", ("cpu",))
            compiled = block_masks.block_mask_from_layout(pattern)
        assert block_masks._compiled_tile_tensors is not None
        assert _same_tiles(compiled, eager), name


def test_flex_layer_compiled_as_a_whole_traces_once_per_bucket(monkeypatch):
    """Where the whole flex layer (kernel, dense rows, merge) is one compiled graph (on a GPU; forced here on the CPU
    with Dynamo's counting backend, no inductor): one graph per pattern kind, reused by a pattern of the same bucket
    with other padding and another number of global rows (the same row bucket) and by one whose BlockMask comes from
    the cache; outputs equal eager."""
    from torch._dynamo.testing import CompileCounter

    from sumformers.modeling.block_masks import RECOMPILE_LIMIT

    counter, torch_compile = CompileCounter(), torch.compile
    monkeypatch.setattr(torch, "compile", lambda function, **kw: torch_compile(function, backend=counter, **kw))
    monkeypatch.setattr(attention, "COMPILED_LAYER_DEVICES", ("cpu",))
    monkeypatch.setattr(attention, "_compiled_flex_layer", None)
    other_padding = _valid()
    other_padding[0, 150:] = False  # drops batch row 0's global token at 199 (4 global rows -> 3)
    with torch._dynamo.config.patch(recompile_limit=8):  # Dynamo's default, restored afterwards
        for name in ("window_global", "etc_hard_g2l_bias", "etc_relative_keys", "het_nodes", "het_token_window"):
            frames = None
            for valid in (_valid(), other_padding, _valid()):  # the third: its BlockMask from the cache
                pattern, _ = PATTERNS[name](valid)
                q, k, v = _inputs(pattern)
                with torch.no_grad():
                    got = sparse_attention(q, k, v, pattern, "flex_attention")
                assert (got - sparse_attention(q, k, v, pattern, "eager")).abs().max() <= TOL, name
                frames = counter.frame_count if frames is None else frames
                assert counter.frame_count == frames, name
        assert counter.frame_count == 5 and attention._compiled_flex_layer is not None  # one graph a kind: no break
        assert torch._dynamo.config.recompile_limit == RECOMPILE_LIMIT  # raised once, by the layer's first compile


@pytest.mark.slow
def test_flex_layer_compiled_by_inductor_matches_eager(monkeypatch):
    """The whole flex layer compiled by inductor (as on a GPU; forced here on the CPU) equals the eager reference."""
    monkeypatch.setattr(attention, "COMPILED_LAYER_DEVICES", ("cpu",))
    monkeypatch.setattr(attention, "_compiled_flex_layer", None)
    for name in ("window_global", "etc_relative_keys"):
        pattern, _ = PATTERNS[name](_valid())
        q, k, v = _inputs(pattern)
        with torch.no_grad():
            got = sparse_attention(q, k, v, pattern, "flex_attention")
        assert (got - sparse_attention(q, k, v, pattern, "eager")).abs().max() <= TOL, name


class _PositionsOnly:
    """A pattern seen without its flags: the BlockMask builder reads the layout's positions."""

    def __init__(self, pattern):
        self._pattern = pattern

    def __getattr__(self, name):
        if name == "_pattern":  # a copy being made: not set yet
            raise AttributeError(name)
        return getattr(self._pattern, name)

    def block_flags(self):
        return {}

    def flex_layout(self):
        return self._pattern.layout()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlexAttention's CUDA kernel needs a CUDA GPU")
@pytest.mark.parametrize("name", PATTERNS)
def test_flex_on_cuda_matches_eager(name):
    """Every pattern through flex on the GPU against the eager reference on the CPU (float32)."""
    pattern, _ = PATTERNS[name](_valid())
    q, k, v = _inputs(pattern)
    expected = sparse_attention(q, k, v, pattern, "eager")
    with torch.device("cuda"):  # every tensor the pattern's builder makes, on the GPU
        on_gpu, _ = PATTERNS[name](_valid())
    with torch.no_grad():
        got = sparse_attention(q.cuda(), k.cuda(), v.cuda(), on_gpu, "flex_attention").cpu()
    assert (got - expected).abs().max() <= 1e-4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA's sync debug mode needs a CUDA GPU")
@pytest.mark.parametrize("name", ["window_global", "etc_hard_g2l_bias", "het_nodes", "het_entities", "causal"])
def test_block_mask_build_does_not_sync_on_cuda(name):
    """On the GPU, building a BlockMask (the compiled builder, once compiled for the kind and shape) and its cache
    key make no device-to-host synchronization, and the mask equals the first one's."""
    from sumformers.modeling import block_masks

    with torch.device("cuda"):
        warm, _ = PATTERNS[name](_valid())
        fresh, _ = PATTERNS[name](_valid())  # other tensors: by identity a cache miss, so a real build
    first = warm.flex_block_mask()  # compiles the builder
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        built = fresh.flex_block_mask()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert built is not first and _same_tiles(built, first)
    assert block_masks._compiled_tile_tensors is not None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA's sync debug mode needs a CUDA GPU")
def test_window_and_etc_patterns_are_made_and_built_without_a_sync_on_cuda():
    """A model's per-forward work for these patterns, making the pattern and building its BlockMask, makes no
    device-to-host synchronization on the GPU (once the builder is compiled for the shape)."""
    with torch.device("cuda"):
        valid = _valid()
        is_global = (torch.arange(LENGTH) % 50 == 3).expand(BATCH, -1)
        long_sentences = (torch.arange(LENGTH - 12) // 16).expand(BATCH, -1)
        global_sentences = torch.arange(12).expand(BATCH, -1)
    makers = {
        "window": lambda valid, is_global, long_ids, global_ids: SlidingWindowPattern(16, valid, is_global),
        "etc": lambda valid, is_global, long_ids, global_ids: GlobalLocalPattern(
            long_ids, global_ids, 6, 4, valid[:, 12:], valid[:, :12], hard_g2l_masking=True
        ),
    }
    inputs = (valid, is_global, long_sentences, global_sentences)
    for name, make in makers.items():
        first = make(*inputs).flex_block_mask()  # compiles the builder for this kind and shape
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            built = make(*(x.clone() for x in inputs)).flex_block_mask()  # new tensors: a cache miss, a real build
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert built is not first and _same_tiles(built, first), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA's sync debug mode needs a CUDA GPU")
@pytest.mark.parametrize("implementation", ["blocked", "flex_attention"])
def test_stepwise_etcsum_step_does_not_sync_on_cuda(implementation):
    """A Stepwise ETCSum training step on the GPU (its rows, the ETC pattern, the attention, the set-label loss and
    the backward pass) makes no device-to-host synchronization once warmed up."""
    from conftest import tiny_bert_config
    from sumformers import StepwiseETCSumConfig, StepwiseETCSumForExtractiveSummarization

    config = StepwiseETCSumConfig(
        encoder_config=tiny_bert_config().to_dict(), local_radius=4, relative_pos_max_distance=3,
        max_sentence_tokens=10,
    )  # fmt: skip
    model = StepwiseETCSumForExtractiveSummarization(config).cuda().train()
    model.set_attn_implementation(implementation)
    with torch.device("cuda"):
        sentence_mask = torch.tensor([[True] * 4, [True, True, False, False]])
        cls_positions = torch.tensor([[0, 9, 20, 31], [0, 12, 20, 20]])
        attention_mask = (torch.arange(40) < torch.tensor([[40], [20]])).long()
        batch = dict(
            input_ids=torch.randint(1000, 2000, (2, 40)) * attention_mask, attention_mask=attention_mask,
            cls_positions=cls_positions, sentence_mask=sentence_mask,
            summary_indices=torch.tensor([[2, 0], [1, -1], [-1, -1]]), row_documents=torch.tensor([0, 1, 1]),
            labels=torch.tensor([[0.0, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]]),
        )  # fmt: skip
    model(**batch).loss.backward()  # warm-up: compiles, allocates
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        model(**batch).loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
