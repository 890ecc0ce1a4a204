"""The attention every sumformers layer runs, through one function (`attention_forward`) that reads the model's
``attn_implementation`` and takes the layer's pattern as an argument:

- a sparse pattern (`attention_patterns.py`, `hetformer_graph.py`, `convolutional_attention.py`) runs on the back
  end of that name:

  - ``"eager"``: dense boolean mask and plain softmax (`reference_attention`); the reference every other back end
    is tested against.
  - ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the dense mask (float mask with bias).
  - ``"flex_attention"``: compiled ``flex_attention`` with a `BlockMask` built from the pattern's block layout (no
    quadratic mask evaluation). Lengths are padded to buckets (`attention_patterns.flex_bucket`) so that new
    lengths rarely recompile. torch has no FlexAttention backward on CPU: a CPU call that needs gradients falls back
    to ``"blocked"`` with a warning, so a model configured for flex can still be fine-tuned on CPU.
  - ``"blocked"``: queries in blocks, each attending only the key blocks its band needs plus the pattern's extra
    (global) keys, with global query rows computed against all keys; runs on SDPA per block, so it trains with
    autograd on CPU with memory linear in length. A pattern may bring its own implementation (`blocked_attention`:
    HetFormer's, whose masks are built once per forward and shared by every layer).

- a dense layer (no pattern: an additive or boolean ``attention_mask``) runs ``"eager"`` through the reference and
  every other back end through SDPA (transformers' own for an additive mask): a dense mask has no layout for
  ``"blocked"`` or ``"flex_attention"`` to skip, and a model with such layers says so once when it is loaded
  (`summarizer_mixin.SummarizerMixin.dense_attention_layers`).

Rows that may attend to no key at all (padding queries, tokens outside a relation) give zeros in every backend.

"blocked" is a name transformers does not know: only the package's models accept it (`SummarizerMixin`), a
transformers model refuses it as before.

The module is copied into exported Hub repos: it imports only torch, transformers and the standard library.
"""

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

from .attention_patterns import MIN_QUERY_BLOCK, AttentionPattern, gather_positions, scatter_positions
from .block_masks import raise_recompile_limit

ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "blocked")
# A dense layer of a model set to "blocked" runs SDPA, so transformers' mask builders (`create_causal_mask`, ...) give
# it SDPA's mask (without an entry they give none at all). This names no attention function: transformers' models
# still refuse "blocked".
ALL_MASK_ATTENTION_FUNCTIONS.register("blocked", sdpa_mask)
# Query rows per chunk where a pattern's keys form a growing causal prefix (memory-compressed attention).
PREFIX_QUERY_CHUNK = 512

# ----------------------------------------------------------------------------------------------------------------
# Backends
# ----------------------------------------------------------------------------------------------------------------


def _masked_sdpa(query, key, value, mask, bias, scaling, dropout_p):
    """SDPA with a boolean mask (and optional additive bias) where rows without any allowed key give zeros.

    Such rows are opened to all keys before the call (a finite softmax on every device) and zeroed afterwards.
    """
    has_key = mask.any(dim=-1, keepdim=True)
    allowed = mask | ~has_key
    if bias is None:
        attn_mask = allowed
    else:
        # in place: every caller passes a bias built for this call (a gather or a sum), and a 5-D copy costs
        attn_mask = bias.to(query.dtype).masked_fill_(~allowed, float("-inf"))
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, scale=scaling)
    return output.masked_fill(~has_key, 0.0)


def reference_attention(query, key, value, scaling, mask=None, bias=None, dropout_p=0.0):
    """The reference attention of every sumformers layer (the "eager" back end of patterns and dense layers alike):
    dense scores ``q k^T * scaling`` plus the additive `bias`, keys outside the boolean `mask` dropped, softmax in
    fp32; rows without any allowed key give zeros. `mask` and `bias` broadcast to [batch, heads, queries, keys].
    Returns (output, weights)."""
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.dropout(weights, p=dropout_p, training=dropout_p > 0)
    return torch.matmul(weights, value), weights


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """`reference_attention` in transformers' attention-function form (the name transformers' models give theirs):
    `attention_mask` additive (0 / very negative) or boolean (True = may attend), the output
    [batch, queries, heads, head_dim]."""
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        output, weights = reference_attention(query, key, value, scaling, mask=attention_mask, dropout_p=dropout)
    else:
        output, weights = reference_attention(query, key, value, scaling, bias=attention_mask, dropout_p=dropout)
    return output.transpose(1, 2).contiguous(), weights


def _eager_pattern_attention(query, key, value, pattern, scaling, dropout_p):
    """The pattern's dense mask and bias through the reference. Returns (output, weights)."""
    pattern = pattern.for_query(query, scaling)
    bias = pattern.dense_bias(query.shape[1], query.dtype)
    return reference_attention(query, key, value, scaling, pattern.dense_mask(), bias, dropout_p)


def _sdpa_pattern_attention(query, key, value, pattern, scaling, dropout_p):
    if pattern.causal_without_padding:  # the whole causal triangle: SDPA's own causal kernel, no mask to build
        return F.scaled_dot_product_attention(query, key, value, is_causal=True, dropout_p=dropout_p, scale=scaling)
    pattern = pattern.for_query(query, scaling)
    bias = pattern.dense_bias(query.shape[1], query.dtype)
    return _masked_sdpa(query, key, value, pattern.dense_mask(), bias, scaling, dropout_p)


# Compiled once; Dynamo's recompile limit is raised then (`raise_recompile_limit`): flex_attention's code object is
# shared by every pattern kind, bucket and even transformers' own flex models, and past the default 8 entries Dynamo
# would silently run the unfused, quadratic-memory flex.
_compiled_flex_attention = None
# Devices where the whole flex layer (the kernel, the dense rows' SDPA and the merge, `_flex_layer`) is one compiled
# graph, at the bucket lengths: on a GPU each eager op around the kernel is a launch of its own. The CPU runs the
# compiled kernel alone, with the dense rows eager.
COMPILED_LAYER_DEVICES = ("cuda",)
_compiled_flex_layer = None


def dense_row_bucket(count: int) -> int:
    """Dense rows are padded (with unused -1 slots) to a power of two, at least 8, so that each count of global
    rows does not compile its own layer."""
    return max(8, 1 << (count - 1).bit_length())


def _flex_layer(query, key, value, pattern, block_mask, rows, scaling, kernel=flex_attention):
    """`kernel` (flex_attention) over inputs padded to the pattern's bucket lengths, and the dense rows `rows` ([B, R],
    -1 unused; None: none) it leaves out, by one SDPA over every (padded, hence masked) key, merged in."""
    score_mod = pattern.score_mod
    output = kernel(query=query, key=key, value=value, score_mod=score_mod, block_mask=block_mask, scale=scaling)
    if rows is None:
        return output
    return scatter_positions(output, rows, _keys_subset_phase(query, key, value, pattern, rows, None, scaling, 0.0))


def _flex_attention(query, key, value, pattern, scaling):
    """Compiled flex_attention at the pattern's bucket lengths; padded keys are masked, padded queries dropped; the
    dense rows flex leaves out (`AttentionPattern.dense_rows_outside_flex`) by one SDPA, merged in."""
    global _compiled_flex_attention, _compiled_flex_layer
    block_mask = pattern.flex_block_mask()  # before `for_query`: a cached mask must not keep this query's tables
    pattern = pattern.for_query(query, scaling)
    query_pad = pattern.flex_query_length - pattern.query_length
    key_pad = pattern.flex_key_length - pattern.key_length

    def prepare(x, pad):  # contiguous: the compiled kernel is specialized on strides (projections give views)
        return (F.pad(x, (0, 0, 0, pad)) if pad else x).contiguous()

    arguments = [prepare(query, query_pad), prepare(key, key_pad), prepare(value, key_pad), pattern, block_mask]
    rows = pattern.layout().dense_rows if pattern.dense_rows_outside_flex else None
    rows = rows if rows is not None and rows.shape[1] else None
    if torch.compiler.is_compiling():  # inside the caller's compiled model: its graph fuses the layer
        output = _flex_layer(*arguments, rows, scaling)
    elif query.device.type in COMPILED_LAYER_DEVICES:
        if _compiled_flex_layer is None:
            raise_recompile_limit()
            _compiled_flex_layer = torch.compile(_flex_layer, dynamic=False)
        if rows is not None:
            rows = F.pad(rows, (0, dense_row_bucket(rows.shape[1]) - rows.shape[1]), value=-1)
        output = _compiled_flex_layer(*arguments, rows, scaling)
    else:
        if _compiled_flex_attention is None:
            raise_recompile_limit()
            _compiled_flex_attention = torch.compile(flex_attention, dynamic=False)
        output = _flex_layer(*arguments, rows, scaling, kernel=_compiled_flex_attention)
    return output[:, :, : pattern.query_length]


def _mask_and_bias(pattern, num_heads, dtype, b, q_idx, kv_idx, key_ok):
    """Evaluate the pattern at gathered indices.

    Index tensors are laid out as [B, blocks, 1 (heads), queries, keys]-broadcastable; returns the bool mask with a
    singleton head dimension and the score bias with all heads (or None).
    """
    head_zero = torch.zeros((1,) * q_idx.dim(), dtype=torch.long, device=q_idx.device)
    mask = pattern.mask_mod(b, head_zero, q_idx, kv_idx) & key_ok
    if pattern.score_mod is None:
        return mask, None
    return mask, pattern.gathered_bias(b, q_idx, kv_idx, num_heads, dtype)


def _band_phase(query, key, value, pattern, layout, scaling, dropout_p):
    """Every query block against its band's key blocks plus the extra keys, all blocks in one batched SDPA.

    Keys are gathered straight into [batch * blocks, heads, keys, head_dim], the layout SDPA takes with the mask
    broadcast over heads (one index gather and one copy; concatenating shifted views is several times slower).
    """
    batch, heads, length, head_dim = query.shape
    block = layout.band_block * -(-MIN_QUERY_BLOCK // layout.band_block)
    num_blocks = -(-length // block)
    device = query.device

    # the same number of keys for every block, so they batch: the band's ends are functions of the positions alone,
    # evaluated on Python ints, so that nothing is read back from the device
    span = max(layout.band(first + block - 1)[1] + 1 - layout.band(first)[0] for first in range(0, length, block))
    band_start = layout.band(torch.arange(num_blocks, device=device) * block)[0]
    kv_idx = (band_start[:, None] + torch.arange(span, device=device)).expand(batch, num_blocks, span)
    key_ok = (kv_idx >= 0) & (kv_idx < length)
    if layout.extra_keys is not None and layout.extra_keys.shape[1]:
        extra = layout.extra_keys[:, None, :].expand(batch, num_blocks, -1)
        # an extra key inside the block's band is already there: count it once
        in_band = (extra >= band_start[None, :, None]) & (extra < band_start[None, :, None] + span)
        kv_idx = torch.cat([kv_idx, extra], dim=-1)
        key_ok = torch.cat([key_ok, (extra >= 0) & ~in_band], dim=-1)
    kv_idx = kv_idx.clamp(0, length - 1)

    b = torch.arange(batch, device=device).view(-1, 1, 1)

    # whole [H * D] rows by one index_select over the flattened positions (indexing [b, kv_idx] copies element-wise)
    flat_kv_idx = (kv_idx + b * length).flatten()

    def gather_blocks(x):  # [B, H, L, D] -> [B * blocks, H, keys, D]
        rows = x.transpose(1, 2).reshape(batch * length, heads * x.shape[-1]).index_select(0, flat_kv_idx)
        return rows.view(batch * num_blocks, -1, heads, x.shape[-1]).transpose(1, 2)

    q_idx = torch.arange(num_blocks * block, device=device).view(1, num_blocks, 1, block, 1)
    mask, bias = _mask_and_bias(
        pattern,
        heads,
        query.dtype,
        b[..., None, None],
        q_idx.clamp(max=length - 1),
        kv_idx[:, :, None, None, :],
        key_ok[:, :, None, None, :],
    )
    padded_query = F.pad(query, (0, 0, 0, num_blocks * block - length))
    query_blocks = padded_query.view(batch, heads, num_blocks, block, head_dim).transpose(1, 2)
    output = _masked_sdpa(
        query_blocks.reshape(batch * num_blocks, heads, block, head_dim),
        gather_blocks(key),
        gather_blocks(value),
        mask.flatten(0, 1),
        None if bias is None else bias.flatten(0, 1),
        scaling,
        dropout_p,
    )
    output = output.view(batch, num_blocks, heads, block, head_dim).transpose(1, 2)
    return output.reshape(batch, heads, num_blocks * block, head_dim)[:, :, :length]


def _keys_subset_phase(query, key, value, pattern, q_positions, kv_positions, scaling, dropout_p):
    """Queries at `q_positions` ([B, R], -1 unused; None = all) against keys at `kv_positions` (None = all)."""
    batch, heads, _, _ = query.shape
    device = query.device
    b = torch.arange(batch, device=device).view(-1, 1, 1, 1, 1)
    if q_positions is None:
        q_idx = torch.arange(query.shape[2], device=device).expand(batch, -1)
        q_rows = query
    else:
        q_idx = q_positions.clamp(min=0)
        q_rows = gather_positions(query, q_positions)
    if kv_positions is None:
        kv_idx = torch.arange(key.shape[2], device=device).expand(batch, -1)
        key_ok = torch.ones_like(kv_idx, dtype=torch.bool)
        keys, values = key, value
    else:
        kv_idx = kv_positions.clamp(min=0)
        key_ok = kv_positions >= 0
        keys, values = gather_positions(key, kv_positions), gather_positions(value, kv_positions)
    mask, bias = _mask_and_bias(
        pattern,
        heads,
        query.dtype,
        b,
        q_idx[:, None, None, :, None],
        kv_idx[:, None, None, None, :],
        key_ok[:, None, None, None, :],
    )
    return _masked_sdpa(q_rows, keys, values, mask[:, 0], None if bias is None else bias[:, 0], scaling, dropout_p)


def _prefix_phase(query, key, value, pattern, layout, scaling, dropout_p):
    """Query chunks against the key prefix the latest query of the chunk may see (causal compressed keys)."""
    batch, heads, length, _ = query.shape
    device = query.device
    b = torch.arange(batch, device=device).view(-1, 1, 1, 1, 1)
    outputs = []
    for start in range(0, length, PREFIX_QUERY_CHUNK):
        stop = min(start + PREFIX_QUERY_CHUNK, length)
        kv_stop = max(1, min(int(layout.key_prefix(stop - 1)) + 1, key.shape[2]))
        q_idx = torch.arange(start, stop, device=device).view(1, 1, 1, -1, 1)
        kv_idx = torch.arange(kv_stop, device=device).view(1, 1, 1, 1, -1)
        every_key = torch.ones((), dtype=torch.bool, device=device)
        mask, bias = _mask_and_bias(pattern, heads, query.dtype, b, q_idx, kv_idx, every_key)
        outputs.append(
            _masked_sdpa(
                query[:, :, start:stop],
                key[:, :, :kv_stop],
                value[:, :, :kv_stop],
                mask[:, 0],
                None if bias is None else bias[:, 0],
                scaling,
                dropout_p,
            )
        )
    return torch.cat(outputs, dim=2)


def _blocked_attention(query, key, value, pattern, scaling, dropout_p):
    """Attention over the pattern's layout only: band (+ extra keys), or prefix chunks, then dense rows."""
    if pattern.blocked_attention is not None:
        return pattern.blocked_attention(query, key, value, scaling, dropout_p)
    pattern = pattern.for_query(query, scaling)
    layout = pattern.layout()
    if layout.band is not None:
        output = _band_phase(query, key, value, pattern, layout, scaling, dropout_p)
    elif layout.key_prefix is not None:
        output = _prefix_phase(query, key, value, pattern, layout, scaling, dropout_p)
    elif layout.extra_keys is not None:
        output = _keys_subset_phase(query, key, value, pattern, None, layout.extra_keys, scaling, dropout_p)
    else:
        output = query.new_zeros(query.shape[:3] + (value.shape[-1],))
    rows = layout.dense_rows
    if rows is not None and rows.shape[1]:
        row_output = _keys_subset_phase(query, key, value, pattern, rows, layout.dense_row_keys, scaling, dropout_p)
        output = scatter_positions(output, rows, row_output)
    return output


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def sparse_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    pattern: AttentionPattern,
    implementation: str = "sdpa",
    scaling: float | None = None,
    dropout: float = 0.0,
    training: bool = False,
) -> torch.Tensor:
    """Attention restricted to `pattern`, computed by the backend `implementation`.

    Args:
        query: [batch, heads, query_length, head_dim]; key, value: [batch, heads, key_length, head_dim].
        pattern: an `AttentionPattern` built for these lengths (it carries the padding masks).
        implementation: "eager", "sdpa", "flex_attention" or "blocked" (see the module docstring).
        scaling: score scale, default ``head_dim ** -0.5``.
        dropout: attention-probability dropout, applied only when `training` (not supported by flex).
    Returns:
        [batch, heads, query_length, head_dim]; rows without any allowed key are zeros.
    """
    return _attention_with_weights(query, key, value, pattern, implementation, scaling, dropout, training)[0]


def _attention_with_weights(query, key, value, pattern, implementation, scaling, dropout, training):
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(
            f"Unknown attention implementation {implementation!r}; choose one of {ATTENTION_IMPLEMENTATIONS}."
        )
    if not isinstance(pattern, AttentionPattern):
        raise ValueError(f"`pattern` must be an AttentionPattern, got {type(pattern).__name__}.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise ValueError("query, key and value must have shape [batch, heads, length, head_dim].")
    if key.shape[:3] != value.shape[:3] or query.shape[:2] != key.shape[:2] or query.shape[3] != key.shape[3]:
        raise ValueError(
            f"Incompatible shapes: query {list(query.shape)}, key {list(key.shape)}, value {list(value.shape)}."
        )
    pattern._check_inputs(query, key)
    bias_table = getattr(pattern, "relative_bias", None)
    if bias_table is not None and bias_table.shape[1] != query.shape[1]:
        raise ValueError(f"`relative_bias` has {bias_table.shape[1]} heads but the query has {query.shape[1]}.")
    key_table = getattr(pattern, "relative_keys", None)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    dropout_p = dropout if training else 0.0

    if (
        implementation == "flex_attention"
        and query.device.type == "cpu"
        and _needs_grad(query, key, value, bias_table, key_table)
    ):
        warnings.warn(
            "FlexAttention has no backward pass on CPU: using the 'blocked' backend for this call.", stacklevel=3
        )
        implementation = "blocked"
    if implementation == "eager":
        return _eager_pattern_attention(query, key, value, pattern, scaling, dropout_p)
    if implementation == "sdpa":
        return _sdpa_pattern_attention(query, key, value, pattern, scaling, dropout_p), None
    if implementation == "blocked":
        return _blocked_attention(query, key, value, pattern, scaling, dropout_p), None
    if dropout_p > 0:
        raise ValueError("flex_attention does not support attention dropout: set it to 0 or use 'blocked'/'sdpa'.")
    return _flex_attention(query, key, value, pattern, scaling), None


# ----------------------------------------------------------------------------------------------------------------
# The one function every layer calls
# ----------------------------------------------------------------------------------------------------------------


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    scaling: float | None = None,
    dropout: float = 0.0,
    *,
    attention_pattern: AttentionPattern | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The attention of every sumformers layer, on the back end ``module.config._attn_implementation`` names, in
    transformers' attention-function form.

    Args:
        module: the calling layer (its `config` names the back end; transformers' SDPA reads `is_causal` from it).
        query: [batch, heads, query_length, head_dim]; key, value: [batch, heads, key_length, head_dim].
        attention_mask: a dense layer's mask (additive, or boolean with True = may attend), broadcast to
            [batch, heads, queries, keys]; None with a pattern.
        attention_pattern: a sparse layer's `AttentionPattern` (it carries the padding).
        dropout: attention-probability dropout; callers pass 0.0 outside training (transformers' convention).
    Returns:
        ``(output [batch, query_length, heads, head_dim], weights)``: weights are the dense probabilities for
        "eager" and None otherwise; rows without any allowed key are zeros.
    """
    # None: a layer used outside a model, whose config no model resolved (transformers' layers then run eager too)
    implementation = module.config._attn_implementation or "eager"
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(
            f"sumformers attention runs attn_implementation in {ATTENTION_IMPLEMENTATIONS}, got {implementation!r}."
        )
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    if attention_pattern is None:
        if implementation == "eager":
            return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout)
        if attention_mask is not None and attention_mask.dtype == torch.bool:
            output = _masked_sdpa(query, key, value, attention_mask, None, scaling, dropout)
            return output.transpose(1, 2).contiguous(), None
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling)
    if attention_mask is not None:
        raise ValueError("Pass padding through the attention pattern; `attention_mask` must be None with one.")
    output, weights = _attention_with_weights(
        query, key, value, attention_pattern, implementation, scaling, dropout, training=module.training
    )
    return output.transpose(1, 2).contiguous(), weights
