"""Sparse attention shared by every sumformers architecture: the patterns as mask functions, four backends.

Each pattern is one definition, a FlexAttention-style mask function ``mask_mod(b, h, q_idx, kv_idx) -> bool``
plus, where the architecture needs it, a score modifier ``score_mod(score, b, h, q_idx, kv_idx) -> score``.
Both are written with element-wise tensor ops and look-ups into the pattern's per-position tensors, so the same
functions are evaluated on scalar indices by FlexAttention and on broadcast index grids by the other backends.
Mask functions never depend on the head; per-head differences live in the score modifier.

Patterns (all but the memory-compressed one are self-attention over one sequence):

- `SlidingWindowPattern`: Longformer's window (two-sided size, even) with key padding and optional global tokens.
- `GlobalLocalPattern`: ETC's global-local attention over ``[global tokens ; long tokens]`` with relative-position
  representations shared by its four parts: a per-head bias table and, optionally, relative keys (Shaw et al. 2018).
- `HeterogeneousGraph`: HetFormer's token windows, sentence/document nodes and entity links, one pattern per
  projection set (`token_window`, `nodes`, `entities`); the model sums the three attention outputs.
- `BlockLocalCausalPattern`: Tensor2Tensor's local causal attention in blocks (own block so far + previous block).
- `MemoryCompressedCausalPattern`: causal attention over keys/values compressed by a strided convolution, plus
  one leading "null" slot.
- `convolutional_attention.ConvolutionalPattern` (its own module): convolutional self-attention's windows over
  positions and, in 2D, over neighbouring heads folded into the sequence.

Backends, chosen by name (the names our models accept as ``attn_implementation``):

- ``"eager"``: dense boolean mask and plain softmax; the reference every other backend is tested against.
- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with the dense mask (float mask with bias).
- ``"flex_attention"``: compiled ``flex_attention`` with a `BlockMask` built from the pattern's block layout (no
  quadratic mask evaluation). Lengths are padded to buckets (`_flex_bucket`) so that new lengths rarely recompile.
  torch has no FlexAttention backward on CPU: a CPU call that needs gradients falls back to ``"blocked"`` with a
  warning, so a model configured for flex can still be fine-tuned on CPU.
- ``"blocked"``: queries in blocks, each attending only the key blocks its band needs plus the pattern's extra
  (global) keys, with global query rows computed against all keys; runs on SDPA per block, so it trains with
  autograd on CPU with memory linear in length. A pattern may bring its own implementation (`blocked_attention`:
  HetFormer's, whose masks are built once per forward and shared by every layer).

Rows that may attend to no key at all (padding queries, tokens outside a relation) give zeros in every backend.

The module is copied into exported Hub repos: it imports only torch, transformers, the standard library and
HetFormer's node types.
"""

import copy
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention
from transformers import AttentionInterface

from ..configuration.configuration_hetformer import DOCUMENT, SENTENCE, TOKEN

ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa", "flex_attention", "blocked")

# FlexAttention tile size; sequence lengths given to flex are padded to multiples of it.
_FLEX_BLOCK = 128
# Smallest query block of the blocked backend: tiny bands are merged into blocks at least this long so that
# each batched matmul does real work.
_MIN_QUERY_BLOCK = 64
# Query rows per chunk where a pattern's keys form a growing causal prefix (memory-compressed attention).
_PREFIX_QUERY_CHUNK = 512


# ----------------------------------------------------------------------------------------------------------------
# Helpers on per-position tensors
# ----------------------------------------------------------------------------------------------------------------


def _flex_bucket(length: int, buckets_per_doubling: int = 4) -> int:
    """Length that flex compiles for: a multiple of 128 and of a quarter (by default) of the length's power of two.

    At most four buckets per doubling of length, at most 25% padding, so varying batches recompile rarely; a pattern
    whose kernel time matters more than its compile count may ask for 8 (at most 12.5% padding).
    """
    shift = int(buckets_per_doubling).bit_length()  # 4 -> 3: a quarter of the power of two
    granularity = max(_FLEX_BLOCK, 2 ** max(0, int(length).bit_length() - shift))
    return max(_FLEX_BLOCK, -(-length // granularity) * granularity)


def _pad_last(tensor: torch.Tensor, length: int, value) -> torch.Tensor:
    """Pad the last dimension of a [batch, n] tensor with `value` up to `length`."""
    return F.pad(tensor, (0, length - tensor.shape[-1]), value=value)


def _as_keep_mask(mask: torch.Tensor, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """A [batch, n] padding mask (1/True = real token) as bool, with a clear error for a wrong shape."""
    if tuple(mask.shape) != shape:
        raise ValueError(f"`{name}` must have shape {list(shape)}, got {list(mask.shape)}.")
    return mask != 0


def _as_index_tensor(ids: torch.Tensor, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    if ids.dim() != 2 or (shape is not None and tuple(ids.shape) != shape):
        expected = list(shape) if shape is not None else "[batch, length]"
        raise ValueError(f"`{name}` must have shape {expected}, got {list(ids.shape)}.")
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer ids, got dtype {ids.dtype}.")
    return ids.long()


def _symmetric_band(q_idx, radius: int):
    """(first, last) keys of a band reaching `radius` positions on each side."""
    return q_idx - radius, q_idx + radius


def _prefix_band(q_idx, last_key: Callable):
    """(first, last) keys of a causal prefix."""
    return torch.zeros_like(q_idx), last_key(q_idx)


def _positions(flags: torch.Tensor) -> torch.Tensor:
    """[batch, n] bool -> [batch, max count] positions of the True entries, ascending, padded with -1."""
    counts = flags.sum(-1)
    width = int(counts.max()) if flags.numel() else 0
    order = torch.argsort((~flags).to(torch.int8), dim=-1, stable=True)[:, :width]
    in_use = torch.arange(width, device=flags.device) < counts[:, None]
    return torch.where(in_use, order, -1)


# ----------------------------------------------------------------------------------------------------------------
# Patterns
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparseLayout:
    """Which keys a query can possibly need: a superset of the mask that the blocked and flex backends use to skip
    work. The mask function still decides every (query, key) pair inside it.

    Attributes:
        band: maps query positions to the (first, last) key positions they may need, both non-decreasing in the
            query position; a self-attention band of bounded width (windows, local blocks).
        band_block: the query block length the band suits; the blocked backend uses a multiple of it.
        key_prefix: maps query positions to the last key position they may need, keys starting at 0 (causal
            attention over compressed keys): computed in query chunks instead of a band.
        extra_keys: [batch, E] key positions every query may need (global tokens, graph nodes), -1 = unused.
        dense_rows: [batch, R] query positions (-1 = unused) computed against `dense_row_keys` instead of the band.
        dense_row_keys: [batch, E2] key positions for the dense rows (-1 = unused), None for all keys.
        full_band, full_queries, full_keys: optional promise for flex: a query flagged in `full_queries` and a key
            flagged in `full_keys` ([batch, flex length] bool) are always allowed when the key lies in
            `full_band(query)` (same form as `band`); flex skips the mask in tiles made only of such pairs.
    Query rows covered by none of these give zeros.
    """

    band: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
    band_block: int = 0
    key_prefix: Callable[[torch.Tensor], torch.Tensor] | None = None
    extra_keys: torch.Tensor | None = None
    dense_rows: torch.Tensor | None = None
    dense_row_keys: torch.Tensor | None = None
    full_band: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
    full_queries: torch.Tensor | None = None
    full_keys: torch.Tensor | None = None


class AttentionPattern:
    """Base class: a mask function, an optional score modifier and the block layout of one attention pattern.

    Subclasses store their per-position tensors already padded (with masked positions) to the FlexAttention bucket
    of their length, so that flex can index them at any padded position; `query_length` and `key_length` are the
    true lengths the pattern accepts.
    """

    batch_size: int
    query_length: int
    key_length: int
    device: torch.device

    def __init__(self):
        # layout and BlockMask, computed once; a dict so that `copy.copy` clones (one per layer) share it
        self._cache: dict = {}

    def mask_mod(self, b, h, q_idx, kv_idx) -> torch.Tensor:
        raise NotImplementedError

    # A method `score_mod(score, b, h, q_idx, kv_idx)` in subclasses that add a bias; None means "scores as is".
    score_mod = None
    # A method `blocked_attention(query, key, value, scaling, dropout_p) -> output` in subclasses with their own
    # implementation of the "blocked" backend (HetFormer's patterns); None means the generic one.
    blocked_attention = None

    def for_query(self, query: torch.Tensor, scaling: float) -> "AttentionPattern":
        """The pattern ready for this query ([batch, heads, query_length, head_dim]): a pattern whose score modifier
        reads query-dependent tables (relative keys) returns a clone holding them; the others return themselves."""
        return self

    def _layout(self) -> SparseLayout:
        raise NotImplementedError

    def layout(self) -> SparseLayout:
        if "layout" not in self._cache:
            self._cache["layout"] = self._layout()
        return self._cache["layout"]

    @property
    def flex_query_length(self) -> int:
        return _flex_bucket(self.query_length)

    @property
    def flex_key_length(self) -> int:
        return _flex_bucket(self.key_length)

    def dense_mask(self) -> torch.Tensor:
        """[batch, 1, query_length, key_length] bool, evaluated in row chunks to bound temporary memory."""
        rows = max(1, 2**22 // max(1, self.key_length))
        b = torch.arange(self.batch_size, device=self.device).view(-1, 1, 1, 1)
        h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=self.device)
        kv = torch.arange(self.key_length, device=self.device).view(1, 1, 1, -1)
        chunks = []
        for start in range(0, self.query_length, rows):
            q = torch.arange(start, min(start + rows, self.query_length), device=self.device).view(1, 1, -1, 1)
            chunks.append(self.mask_mod(b, h, q, kv).expand(self.batch_size, 1, q.shape[2], self.key_length))
        return torch.cat(chunks, dim=2)

    def dense_bias(self, num_heads: int, dtype: torch.dtype) -> torch.Tensor | None:
        """[batch, heads, query_length, key_length] additive scores of `score_mod`, or None without one."""
        if self.score_mod is None:
            return None
        b = torch.arange(self.batch_size, device=self.device).view(-1, 1, 1, 1)
        h = torch.arange(num_heads, device=self.device).view(1, -1, 1, 1)
        q = torch.arange(self.query_length, device=self.device).view(1, 1, -1, 1)
        kv = torch.arange(self.key_length, device=self.device).view(1, 1, 1, -1)
        zero = torch.zeros((), dtype=dtype, device=self.device)
        return self.score_mod(zero, b, h, q, kv).to(dtype)

    def gathered_bias(self, b, q_idx, kv_idx, num_heads: int, dtype: torch.dtype) -> torch.Tensor:
        """`score_mod`'s additive scores at index tensors broadcastable to [B, X, 1 (heads), Q, K] (the blocked
        backend's layout) -> [B, X, heads, Q, K]. Patterns whose modifier is a table look-up override it with a
        `gather` (advanced indexing by four broadcast index tensors is several times slower on CPU)."""
        heads = torch.arange(num_heads, device=q_idx.device).view(1, 1, -1, 1, 1)
        zero = torch.zeros((), dtype=dtype, device=q_idx.device)
        return self.score_mod(zero, b, heads, q_idx, kv_idx)

    def flex_block_mask(self) -> BlockMask:
        """BlockMask over the flex bucket lengths, built from `layout()` (computed once per pattern)."""
        if "block_mask" not in self._cache:
            self._cache["block_mask"] = _block_mask_from_layout(self)
        return self._cache["block_mask"]

    def _check_inputs(self, query: torch.Tensor, key: torch.Tensor) -> None:
        if query.shape[0] != self.batch_size:
            raise ValueError(f"{type(self).__name__} was built for batch {self.batch_size}, got {query.shape[0]}.")
        if query.shape[2] != self.query_length or key.shape[2] != self.key_length:
            raise ValueError(
                f"{type(self).__name__} expects {self.query_length} queries and {self.key_length} keys, "
                f"got {query.shape[2]} and {key.shape[2]}."
            )
        if query.device != self.device:
            raise ValueError(f"The pattern's tensors are on {self.device} but the query is on {query.device}.")


class SlidingWindowPattern(AttentionPattern):
    """Longformer sliding window with key padding and optional global tokens (transformers' conventions).

    Query ``i`` sees key ``j`` when both are real tokens and ``|i - j| <= window // 2``; ``window`` is the two-sided
    size and must be even (transformers' `LongformerSelfAttention`; allenai's original `attention_window` is one
    side). A global token attends to every real token and every real token attends to it. Padding queries give
    zeros.

    Args:
        window: two-sided window size (positive, even).
        attention_mask: [batch, length], 1/True for real tokens, 0/False for padding.
        global_attention_mask: optional [batch, length], 1/True for global tokens.
    """

    def __init__(self, window: int, attention_mask: torch.Tensor, global_attention_mask: torch.Tensor | None = None):
        super().__init__()
        if not isinstance(window, int) or window <= 0 or window % 2:
            raise ValueError(f"`window` must be a positive even integer (two-sided size), got {window!r}.")
        if attention_mask.dim() != 2:
            raise ValueError(f"`attention_mask` must have shape [batch, length], got {list(attention_mask.shape)}.")
        self.window = window
        self.batch_size, self.query_length = attention_mask.shape
        self.key_length = self.query_length
        self.device = attention_mask.device
        valid = attention_mask != 0
        if global_attention_mask is None:
            is_global = torch.zeros_like(valid)
        else:
            is_global = _as_keep_mask(global_attention_mask, "global_attention_mask", tuple(attention_mask.shape))
        # one code per position (0 padding, 1 local, 2 global): the mask reads one tensor instead of two, which is
        # measurably faster inside the flex kernel
        self.kind = _pad_last(valid.to(torch.int8) * (1 + is_global.to(torch.int8)), self.flex_query_length, 0)
        # a 0-d tensor rather than an int, so that each window size does not compile its own flex kernel
        self.half_window = torch.tensor(window // 2, device=self.device)

    def mask_mod(self, b, h, q_idx, kv_idx):
        q_kind, kv_kind = self.kind[b, q_idx], self.kind[b, kv_idx]
        reach = ((q_idx - kv_idx).abs() <= self.half_window) | (q_kind == 2) | (kv_kind == 2)
        return (q_kind > 0) & (kv_kind > 0) & reach

    def _layout(self):
        global_positions = _positions(self.kind[:, : self.query_length] == 2)
        band = partial(_symmetric_band, radius=self.window // 2)
        real = self.kind > 0
        return SparseLayout(
            band=band,
            band_block=self.window // 2,
            extra_keys=global_positions,
            dense_rows=global_positions,
            full_band=band,
            full_queries=real,
            full_keys=real,
        )


class GlobalLocalPattern(AttentionPattern):
    """ETC global-local attention over one sequence laid out as ``[global tokens ; long tokens]``.

    Four parts: long-to-long (l2l) within ``local_radius`` long positions; global-to-global (g2g) full;
    long-to-global (l2g) full, or only to the long token's own sentence's global token with ``hard_l2g_masking``;
    global-to-long (g2l) full, or only to its own sentence's long tokens with ``hard_g2l_masking``. Padding on
    either side is masked; padding queries give zeros.

    Relative ids (one vocabulary of size ``2 * relative_pos_max_distance + 3`` serves all four parts):
    l2l and g2g use the clipped distance ``clip(k - q, -M, M) + M`` in ``[0, 2M]``; l2g and g2l use the binary
    "same sentence" label offset past the distance vocabulary: ``2M + 1`` (another sentence) and ``2M + 2``
    (own sentence). The model owns the tables (one per layer), and the score modifier adds, for each pair the mask
    keeps:

    - with a ``relative_bias`` table ``[vocab, heads]``: ``relative_bias[rel_id, head]`` (ETC's relative bias);
    - with a ``relative_keys`` table ``[vocab, heads, head_dim]`` (ETC's relative embeddings, the relative keys of
      Shaw et al. 2018): ``scaling * q_i . a[rel_id]``, so that the score is ``scaling * q_i . (k_j + a[rel_id])``.
      Only ``scaling * q R^T`` plus the bias ([batch, heads, length, vocab], computed once per call by `for_query`)
      is materialized; each kept pair gathers its entry by relative id (a bias tensor for eager/SDPA/blocked, a
      look-up inside the FlexAttention kernel), never a ``[length, length, head_dim]`` tensor.

    Args:
        long_sentence_ids: [batch, long_length] sentence index of each long token.
        global_sentence_ids: [batch, global_length] sentence index of each global token.
        local_radius: l2l radius (a long token sees ``local_radius`` tokens on each side).
        relative_pos_max_distance: M, where relative distances are clipped.
        long_attention_mask / global_attention_mask: optional [batch, n] padding masks (1/True = real).
        hard_g2l_masking / hard_l2g_masking: restrict g2l / l2g to the own sentence.
        relative_bias: optional [vocab, heads] learned bias table.
        relative_keys: optional [vocab, heads, head_dim] learned relative key table.
    """

    def __init__(
        self,
        long_sentence_ids: torch.Tensor,
        global_sentence_ids: torch.Tensor,
        local_radius: int,
        relative_pos_max_distance: int,
        long_attention_mask: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        hard_g2l_masking: bool = False,
        hard_l2g_masking: bool = False,
        relative_bias: torch.Tensor | None = None,
        relative_keys: torch.Tensor | None = None,
    ):
        super().__init__()
        long_ids = _as_index_tensor(long_sentence_ids, "long_sentence_ids")
        global_ids = _as_index_tensor(global_sentence_ids, "global_sentence_ids")
        if long_ids.shape[0] != global_ids.shape[0]:
            raise ValueError("`long_sentence_ids` and `global_sentence_ids` must have the same batch size.")
        if not isinstance(local_radius, int) or local_radius < 0:
            raise ValueError(f"`local_radius` must be a non-negative integer, got {local_radius!r}.")
        if not isinstance(relative_pos_max_distance, int) or relative_pos_max_distance < 0:
            raise ValueError(
                f"`relative_pos_max_distance` must be a non-negative integer, got {relative_pos_max_distance!r}."
            )
        self.batch_size, self.num_long = long_ids.shape
        self.num_global = global_ids.shape[1]
        self.query_length = self.key_length = self.num_global + self.num_long
        self.device = long_ids.device
        self.local_radius = local_radius
        self.relative_pos_max_distance = relative_pos_max_distance
        self.hard_g2l_masking = hard_g2l_masking
        self.hard_l2g_masking = hard_l2g_masking

        long_valid = (
            torch.ones_like(long_ids, dtype=torch.bool)
            if long_attention_mask is None
            else _as_keep_mask(long_attention_mask, "long_attention_mask", tuple(long_ids.shape))
        )
        global_valid = (
            torch.ones_like(global_ids, dtype=torch.bool)
            if global_attention_mask is None
            else _as_keep_mask(global_attention_mask, "global_attention_mask", tuple(global_ids.shape))
        )
        padded = self.flex_query_length
        self.valid = _pad_last(torch.cat([global_valid, long_valid], dim=1), padded, False)
        self.is_global = _pad_last(
            torch.cat([torch.ones_like(global_valid), torch.zeros_like(long_valid)], dim=1), padded, False
        )
        self.sentence = _pad_last(torch.cat([global_ids, long_ids], dim=1), padded, -1)
        self.radius = torch.tensor(local_radius, device=self.device)
        self.max_distance = torch.tensor(relative_pos_max_distance, device=self.device)
        if relative_bias is not None:
            self._check_bias(relative_bias)
        if relative_keys is not None:
            self._check_keys(relative_keys)
        self.relative_bias = relative_bias
        self.relative_keys = relative_keys
        # q R^T * scaling, [batch, heads, flex query length, vocab]: set by `for_query`
        self.query_relative_scores = None

    # Stepwise decoding re-encodes long documents several times per summary: eight flex buckets per doubling of
    # length (at most 12.5% padding) instead of four, trading a few more compiles for a shorter kernel.
    @property
    def flex_query_length(self) -> int:
        return _flex_bucket(self.query_length, buckets_per_doubling=8)

    @property
    def flex_key_length(self) -> int:
        return _flex_bucket(self.key_length, buckets_per_doubling=8)

    @staticmethod
    def relative_vocab_size(relative_pos_max_distance: int) -> int:
        """Rows of the bias table: 2M+1 clipped distances and the two l2g/g2l "same sentence" labels."""
        return 2 * relative_pos_max_distance + 3

    def _check_bias(self, table: torch.Tensor) -> None:
        rows = self.relative_vocab_size(self.relative_pos_max_distance)
        if table.dim() != 2 or table.shape[0] != rows:
            raise ValueError(f"`relative_bias` must have shape [{rows}, num_heads], got {list(table.shape)}.")

    def _check_keys(self, table: torch.Tensor) -> None:
        rows = self.relative_vocab_size(self.relative_pos_max_distance)
        if table.dim() != 3 or table.shape[0] != rows:
            raise ValueError(f"`relative_keys` must have shape [{rows}, num_heads, head_dim], got {list(table.shape)}.")

    def with_relative_tables(
        self, relative_bias: torch.Tensor | None, relative_keys: torch.Tensor | None = None
    ) -> "GlobalLocalPattern":
        """The same pattern with a layer's bias and relative key tables (either may be None), sharing the cached
        layout and BlockMask."""
        if relative_bias is not None:
            self._check_bias(relative_bias)
        if relative_keys is not None:
            self._check_keys(relative_keys)
        clone = copy.copy(self)
        clone.relative_bias, clone.relative_keys, clone.query_relative_scores = relative_bias, relative_keys, None
        return clone

    def for_query(self, query: torch.Tensor, scaling: float) -> "GlobalLocalPattern":
        """With relative keys: a clone holding ``scaling * q R^T`` for this query (padded to the flex length)."""
        if self.relative_keys is None:
            return self
        if self.relative_keys.shape[1:] != query.shape[1:2] + query.shape[3:]:
            raise ValueError(
                f"`relative_keys` has shape {list(self.relative_keys.shape)} but the query has {query.shape[1]} heads "
                f"of size {query.shape[3]}."
            )
        # one contiguous [batch, heads, flex length, vocab] table in a single pass: the (small) key table is scaled and
        # the query padded, not the (large) result
        keys = (self.relative_keys * scaling).to(query.dtype).permute(1, 2, 0)  # [heads, head_dim, vocab]
        scores = torch.matmul(F.pad(query, (0, 0, 0, self.flex_query_length - query.shape[2])), keys)
        if self.relative_bias is not None:  # folded in: one look-up per pair instead of two
            scores = scores.add_(self.relative_bias.to(query.dtype).t()[None, :, None, :])
        clone = copy.copy(self)
        clone.query_relative_scores = scores
        return clone

    def relative_ids(self, b, q_idx, kv_idx) -> torch.Tensor:
        q_global, kv_global = self.is_global[b, q_idx], self.is_global[b, kv_idx]
        distance = (kv_idx - q_idx).clamp(-self.max_distance, self.max_distance) + self.max_distance
        same_sentence = self.sentence[b, q_idx] == self.sentence[b, kv_idx]
        cross_label = 2 * self.max_distance + 1 + same_sentence.long()
        return torch.where(q_global != kv_global, cross_label, distance)

    def mask_mod(self, b, h, q_idx, kv_idx):
        q_global, kv_global = self.is_global[b, q_idx], self.is_global[b, kv_idx]
        same_sentence = self.sentence[b, q_idx] == self.sentence[b, kv_idx]
        l2l = ~q_global & ~kv_global & ((q_idx - kv_idx).abs() <= self.radius)
        g2g = q_global & kv_global
        l2g = ~q_global & kv_global
        g2l = q_global & ~kv_global
        if self.hard_l2g_masking:
            l2g = l2g & same_sentence
        if self.hard_g2l_masking:
            g2l = g2l & same_sentence
        return self.valid[b, q_idx] & self.valid[b, kv_idx] & (l2l | g2g | l2g | g2l)

    def _relative_score_mod(self, score, b, h, q_idx, kv_idx):
        return score + self.relative_bias[self.relative_ids(b, q_idx, kv_idx), h]

    def _relative_keys_score_mod(self, score, b, h, q_idx, kv_idx):
        # the bias table, if any, is already folded into `query_relative_scores` (see `for_query`)
        return score + self.query_relative_scores[b, h, q_idx, self.relative_ids(b, q_idx, kv_idx)]

    def gathered_bias(self, b, q_idx, kv_idx, num_heads, dtype):
        """`score_mod`'s scores by `gather`: each query's row of relative scores ([V] per head: ``q R^T`` plus the
        bias, or the bias alone) is taken once, then every key picks its entry by relative id."""
        ids = self.relative_ids(b, q_idx, kv_idx)  # [B, X, 1, Q, K]
        if self.relative_keys is not None:
            if self.query_relative_scores is None:
                raise ValueError("a pattern with `relative_keys` scores pairs only after `for_query(query, scaling)`")
            # [B, Lq, H, V] rows at each query: [B, X, 1, Q, H, V] -> [B, X, H, Q, V]
            rows = self.query_relative_scores.transpose(1, 2)[b[..., 0], q_idx[..., 0]]
            rows = rows.squeeze(2).transpose(2, 3)
        else:
            table = self.relative_bias.t()  # [H, V], the same row for every query
            rows = table[None, None, :, None, :].expand(ids.shape[0], ids.shape[1], -1, ids.shape[3], -1)
        index = ids.expand(rows.shape[0], rows.shape[1], rows.shape[2], ids.shape[3], ids.shape[4])
        return rows.gather(-1, index).to(dtype)

    @property
    def score_mod(self):
        if self.relative_keys is not None:
            if self.query_relative_scores is None:
                raise ValueError("a pattern with `relative_keys` scores pairs only after `for_query(query, scaling)`")
            return self._relative_keys_score_mod
        return None if self.relative_bias is None else self._relative_score_mod

    def _layout(self):
        global_positions = torch.arange(self.num_global, device=self.device).expand(self.batch_size, -1)
        band = partial(_symmetric_band, radius=self.local_radius)
        real_long = self.valid & ~self.is_global
        return SparseLayout(
            band=band,
            band_block=max(1, self.local_radius),
            extra_keys=global_positions,
            dense_rows=global_positions,
            full_band=band,
            full_queries=real_long,
            full_keys=real_long,
        )


class HeterogeneousGraph:
    """HetFormer's heterogeneous graph over one node sequence: tokens, sentence nodes, document nodes.

    Sentence nodes are ``[CLS]``-style positions (one per sentence) and document nodes one position per document,
    all in the same sequence as the tokens; ``node_types`` tells them apart (`TOKEN`, `SENTENCE`, `DOCUMENT`).
    The graph gives one pattern per HetFormer projection set; the model runs one attention per pattern with its own
    Q/K/V and sums the outputs (a row with no edge in a pattern contributes zeros):

    - `token_window(window)`: token-to-token sliding window (two-sided ``window``, even; grows with depth).
    - `nodes()`: sentence nodes to and from every token (s2t, t2s); document nodes to and from the tokens of their
      own document (d2t, t2d); every node to and from every other node, across documents (s2s, s2d, d2s, d2d), as
      the paper's node attention is unrestricted (the authors' code gives all of them global attention).
    - `entities()`: full attention among mentions of the same entity cluster (``entity_ids``, -1 = no entity),
      across documents.

    With ``keep_documents_apart`` (multi-document input), token windows and the sentence-token edges (s2t, t2s)
    stay inside a document (``document_ids``); sentence nodes still see each other across documents (s2s), which
    is where cross-document redundancy is compared.

    Args:
        node_types: [batch, length] of `TOKEN` / `SENTENCE` / `DOCUMENT`.
        attention_mask: [batch, length], 1/True for real positions.
        entity_ids: optional [batch, length] cluster id per position, -1 for none.
        document_ids: optional [batch, length] document index per position (needed for document nodes and for
            keeping documents apart); defaults to one document.
        keep_documents_apart: see above.
    """

    TOKEN, SENTENCE, DOCUMENT = TOKEN, SENTENCE, DOCUMENT

    def __init__(
        self,
        node_types: torch.Tensor,
        attention_mask: torch.Tensor,
        entity_ids: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
        keep_documents_apart: bool = False,
    ):
        types = _as_index_tensor(node_types, "node_types")
        shape = tuple(types.shape)
        if not bool(((types >= self.TOKEN) & (types <= self.DOCUMENT)).all()):
            raise ValueError("`node_types` must hold TOKEN (0), SENTENCE (1) or DOCUMENT (2).")
        self.batch_size, self.length = shape
        self.device = types.device
        self.keep_documents_apart = keep_documents_apart
        padded = _flex_bucket(self.length)
        self.valid = _pad_last(_as_keep_mask(attention_mask, "attention_mask", shape), padded, False)
        self.node_types = _pad_last(types, padded, self.TOKEN)
        if entity_ids is None:
            entity_ids = torch.full_like(types, -1)
        self.entity_ids = _pad_last(_as_index_tensor(entity_ids, "entity_ids", shape), padded, -1)
        if document_ids is None:
            document_ids = torch.zeros_like(types)
        self.document_ids = _pad_last(_as_index_tensor(document_ids, "document_ids", shape), padded, -1)

    def token_window(self, window: int) -> "TokenWindowPattern":
        return TokenWindowPattern(self, window)

    def nodes(self) -> "NodePattern":
        return NodePattern(self)

    def entities(self) -> "EntityPattern":
        return EntityPattern(self)


class _HeterogeneousPattern(AttentionPattern):
    """Shared plumbing of the three HetFormer patterns: they read the graph's per-position tensors."""

    def __init__(self, graph: HeterogeneousGraph):
        super().__init__()
        self.graph = graph
        self.batch_size = graph.batch_size
        self.query_length = self.key_length = graph.length
        self.device = graph.device

    def _is(self, b, idx, node_type):
        return self.graph.node_types[b, idx] == node_type

    def _same_document(self, b, q_idx, kv_idx):
        return self.graph.document_ids[b, q_idx] == self.graph.document_ids[b, kv_idx]

    def _both_valid(self, b, q_idx, kv_idx):
        return self.graph.valid[b, q_idx] & self.graph.valid[b, kv_idx]

    def _subset_mask(self, name, q_positions, kv_positions):
        """Mask of `q_positions` ([B, R], -1 unused; None = all) against `kv_positions` (None = all), evaluated
        once per pattern (the model builds its patterns once per forward and every layer reuses them).

        Returns ``(attn_mask, has_key)``: the [B, 1, R, K] bool mask where rows without any allowed key are opened
        to every key (so that SDPA's softmax stays finite), or None where everything is allowed, and the [B, 1, R, 1]
        rows that have a key, or None where all do.
        """
        if name not in self._cache:
            length = self.query_length
            b = torch.arange(self.batch_size, device=self.device).view(-1, 1, 1, 1)
            every = torch.arange(length, device=self.device).expand(self.batch_size, -1)
            q_idx = every if q_positions is None else q_positions.clamp(min=0)
            kv_idx = every if kv_positions is None else kv_positions.clamp(min=0)
            mask = self.mask_mod(b, 0, q_idx[:, None, :, None], kv_idx[:, None, None, :])
            if kv_positions is not None:
                mask = mask & (kv_positions >= 0)[:, None, None, :]
            mask = mask.expand(self.batch_size, 1, q_idx.shape[-1], kv_idx.shape[-1])
            has_key = mask.any(dim=-1, keepdim=True)
            all_rows = bool(has_key.all())
            allowed = None if all_rows and bool(mask.all()) else mask | ~has_key
            self._cache[name] = (allowed, None if all_rows else has_key)
        return self._cache[name]


def _sdpa_rows(query, key, value, attn_mask, has_key, scaling, dropout_p):
    """SDPA with an optional bool mask whose rows without a key (`has_key` False) give zeros."""
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, scale=scaling)
    return output if has_key is None else output.masked_fill(~has_key, 0.0)


def _scatter_rows(output, rows, row_output):
    """`output` [B, H, L, D] with the rows at `rows` ([B, R], -1 unused) replaced by `row_output` [B, H, R, D]."""
    length = output.shape[2]
    # unused row slots (-1) write into one extra trailing row that is dropped
    target = torch.where(rows >= 0, rows, length)[:, None, :, None].expand_as(row_output)
    return F.pad(output, (0, 0, 0, 1)).scatter(2, target, row_output)[:, :, :length]


class TokenWindowPattern(_HeterogeneousPattern):
    """HetFormer token-to-token sliding window (see `HeterogeneousGraph`); node rows and keys are excluded.

    Its "blocked" backend cuts the queries into blocks of ``c`` positions (a quarter of the one-sided window, at
    least 64); block ``i`` reads the ``c + window`` keys from ``i * c - window // 2`` on, as overlapping strided
    views of the padded keys (no copy). The masks are built once per pattern from position arithmetic: blocks that
    see the plain band (no padding, border, node or sequence end in reach) share one ``[c, c + window]`` mask, and
    only the few others keep their own.
    """

    def __init__(self, graph: HeterogeneousGraph, window: int):
        if not isinstance(window, int) or window <= 0 or window % 2:
            raise ValueError(f"`window` must be a positive even integer (two-sided size), got {window!r}.")
        super().__init__(graph)
        self.window = window
        self.half_window = torch.tensor(window // 2, device=self.device)

    def mask_mod(self, b, h, q_idx, kv_idx):
        token = HeterogeneousGraph.TOKEN
        allowed = self._is(b, q_idx, token) & self._is(b, kv_idx, token) & ((q_idx - kv_idx).abs() <= self.half_window)
        if self.graph.keep_documents_apart:
            allowed = allowed & self._same_document(b, q_idx, kv_idx)
        return self._both_valid(b, q_idx, kv_idx) & allowed

    def _blocks(self) -> dict:
        """The block layout and masks, built once per pattern.

        Blocks whose mask is the plain band for every batch row (no padding, document border, node or sequence end
        in reach: nearly all of them) share one [1, 1, block, span] mask; only the others keep their own.
        """
        if "blocks" not in self._cache:
            radius = self.window // 2
            # a quarter of the one-sided window: a block computes (block + window) keys per query where its band
            # needs window + 1 (1.25x), and blocks of 128+ rows keep SDPA's matmuls efficient
            block = max(_MIN_QUERY_BLOCK, radius // 4)
            length = self.query_length
            num_blocks = -(-length // block)
            span = block + 2 * radius
            graph = self.graph
            token = graph.valid[:, :length] & (graph.node_types[:, :length] == HeterogeneousGraph.TOKEN)
            tail = num_blocks * block - length
            query_ok = F.pad(token, (0, tail), value=False).view(self.batch_size, num_blocks, block, 1)
            key_ok = F.pad(token, (radius, tail + radius), value=False).unfold(1, span, block)[:, :, None, :]
            # key j of block i is position i * block - radius + j: in the band of row r when 0 <= j - r <= 2 radius
            offset = torch.arange(span, device=self.device) - torch.arange(block, device=self.device)[:, None]
            band = (offset >= 0) & (offset <= 2 * radius)
            mask = band & query_ok & key_ok  # [B, blocks, block, span]
            if graph.keep_documents_apart:
                documents = graph.document_ids[:, :length]
                query_document = F.pad(documents, (0, tail), value=-1).view(self.batch_size, num_blocks, block, 1)
                key_document = F.pad(documents, (radius, tail + radius), value=-1).unfold(1, span, block)
                mask = mask & (query_document == key_document[:, :, None, :])
            plain = (mask == band).flatten(2).all(-1).all(0)  # [blocks]
            others = (~plain).nonzero().flatten()
            plain = plain.nonzero().flatten()
            mask = mask[:, others]
            has_key = mask.any(dim=-1, keepdim=True)
            layout = dict(
                block=block, num_blocks=num_blocks, span=span, band=band.view(1, 1, block, span),
                plain=plain, others=others, others_before=0,
                # block order after concatenating the plain blocks and the others
                order=torch.cat([plain, others]).argsort(),
                allowed=(mask | ~has_key).view(-1, 1, block, span),
                has_key=None if bool(has_key.all()) else has_key.view(-1, 1, block, 1),
            )
            if len(plain) and int(plain[-1] - plain[0]) + 1 == len(plain):
                # one run of plain blocks (the usual case: only the ends differ): read it as a view, no copy
                layout["plain"] = slice(int(plain[0]), int(plain[-1]) + 1)
                layout["others_before"] = int((others < plain[0]).sum())
            self._cache["blocks"] = layout
        return self._cache["blocks"]

    def blocked_attention(self, query, key, value, scaling, dropout_p):
        batch, heads, length, head_dim = query.shape
        radius = self.window // 2
        layout = self._blocks()
        block, num_blocks, span = layout["block"], layout["num_blocks"], layout["span"]
        tail = num_blocks * block - length
        padded_query = F.pad(query, (0, 0, 0, tail))
        padded_key, padded_value = (F.pad(x, (0, 0, radius, tail + radius)) for x in (key, value))
        # block i's queries are rows i * block on of padded_query, its keys i * block on of padded_key (overlapping)
        def attend(blocks, attn_mask, has_key):  # the selected blocks, batched in SDPA
            if isinstance(blocks, slice):  # a run of blocks: strided views of each batch row (SDPA reads strides)
                # taken row first and sliced before unfolding, so that the backward pass builds 1x-sized gradients
                first, stop = blocks.start * block, blocks.stop * block

                def run_of(x, row, rows):  # [B, H, N, D] -> [blocks, H, rows, D] view of one batch row
                    return x[row, :, first : stop - block + rows].unfold(1, rows, block).permute(1, 0, 3, 2)

                return torch.stack([
                    _sdpa_rows(
                        run_of(padded_query, row, block), run_of(padded_key, row, span),
                        run_of(padded_value, row, span), attn_mask, has_key, scaling, dropout_p,
                    )
                    for row in range(batch)
                ])

            def take(x, rows):  # scattered blocks (sequence ends, padding, borders): their rows copied out
                positions = (blocks[:, None] * block + torch.arange(rows, device=x.device)).flatten()
                taken = x.index_select(2, positions).view(batch, heads, len(blocks), rows, x.shape[-1])
                return taken.transpose(1, 2).flatten(0, 1)

            output = _sdpa_rows(
                take(padded_query, block), take(padded_key, span), take(padded_value, span), attn_mask, has_key,
                scaling, dropout_p,
            )
            return output.view(batch, -1, heads, block, output.shape[-1])

        plain, others = layout["plain"], layout["others"]
        plain_output = attend(plain, layout["band"], None) if isinstance(plain, slice) or len(plain) else None
        other_output = attend(others, layout["allowed"], layout["has_key"]) if len(others) else None
        if other_output is None or plain_output is None:
            output = plain_output if other_output is None else other_output
        elif isinstance(plain, slice):  # the other blocks lie before and after the run of plain ones
            before = layout["others_before"]
            output = torch.cat([other_output[:, :before], plain_output, other_output[:, before:]], dim=1)
        else:
            output = torch.cat([plain_output, other_output], dim=1).index_select(1, layout["order"])
        return output.transpose(1, 2).reshape(batch, heads, num_blocks * block, -1)[:, :, :length]

    def _layout(self):
        band = partial(_symmetric_band, radius=self.window // 2)
        if self.graph.keep_documents_apart:  # document borders can cut any tile: no tile is promised full
            return SparseLayout(band=band, band_block=self.window // 2)
        real_token = self.graph.valid & (self.graph.node_types == HeterogeneousGraph.TOKEN)
        return SparseLayout(
            band=band, band_block=self.window // 2, full_band=band, full_queries=real_token, full_keys=real_token
        )


class NodePattern(_HeterogeneousPattern):
    """HetFormer sentence and document node edges (see `HeterogeneousGraph`)."""

    def mask_mod(self, b, h, q_idx, kv_idx):
        token, sentence, document = HeterogeneousGraph.TOKEN, HeterogeneousGraph.SENTENCE, HeterogeneousGraph.DOCUMENT
        q_token, q_sentence, q_document = (self._is(b, q_idx, t) for t in (token, sentence, document))
        kv_token, kv_sentence, kv_document = (self._is(b, kv_idx, t) for t in (token, sentence, document))
        same_document = self._same_document(b, q_idx, kv_idx)
        sentence_token = (q_sentence & kv_token) | (q_token & kv_sentence)
        if self.graph.keep_documents_apart:
            sentence_token = sentence_token & same_document
        document_token = ((q_document & kv_token) | (q_token & kv_document)) & same_document
        node_node = ~q_token & ~kv_token  # s2s, s2d, d2s, d2d
        return self._both_valid(b, q_idx, kv_idx) & (sentence_token | document_token | node_node)

    def _layout(self):
        is_node = (self.graph.node_types != HeterogeneousGraph.TOKEN) & self.graph.valid
        node_positions = _positions(is_node[:, : self.query_length])
        return SparseLayout(extra_keys=node_positions, dense_rows=node_positions)

    def _all_allowed(self) -> bool:
        """Whether every position sees every node and every node every position: sentence nodes only, no padding,
        documents not kept apart or only one (BERTSum-style single-document input); no mask is built then."""
        if "all_allowed" not in self._cache:
            graph, length = self.graph, self.query_length
            documents = graph.document_ids[:, :length]
            self._cache["all_allowed"] = (
                bool(graph.valid[:, :length].all())
                and not bool((graph.node_types[:, :length] == HeterogeneousGraph.DOCUMENT).any())
                and (not graph.keep_documents_apart or bool((documents == documents[:, :1]).all()))
            )
        return self._cache["all_allowed"]

    def blocked_attention(self, query, key, value, scaling, dropout_p):
        """Every query against the node keys, then the node rows against every key; both masks are built once per
        pattern and left out where everything is allowed (one document without padding)."""
        nodes = self.layout().extra_keys
        if not nodes.shape[1]:  # no node: no edge
            return query.new_zeros(query.shape[:3] + (value.shape[-1],))
        if self._all_allowed():
            self._cache.setdefault("to_nodes", (None, None))
            self._cache.setdefault("node_rows", (None, None))
        to_nodes = _sdpa_rows(
            query, _gather_positions(key, nodes), _gather_positions(value, nodes),
            *self._subset_mask("to_nodes", None, nodes), scaling, dropout_p,
        )
        node_rows = _sdpa_rows(
            _gather_positions(query, nodes), key, value, *self._subset_mask("node_rows", nodes, None), scaling,
            dropout_p,
        )
        return _scatter_rows(to_nodes, nodes, node_rows)


class EntityPattern(_HeterogeneousPattern):
    """HetFormer entity-to-entity edges: mentions of the same cluster, across documents (see `HeterogeneousGraph`)."""

    def mask_mod(self, b, h, q_idx, kv_idx):
        q_entity = self.graph.entity_ids[b, q_idx]
        return self._both_valid(b, q_idx, kv_idx) & (q_entity >= 0) & (q_entity == self.graph.entity_ids[b, kv_idx])

    def _layout(self):
        is_mention = (self.graph.entity_ids >= 0) & self.graph.valid
        mentions = _positions(is_mention[:, : self.query_length])
        return SparseLayout(dense_rows=mentions, dense_row_keys=mentions)

    def blocked_attention(self, query, key, value, scaling, dropout_p):
        """The mentions against the mentions (mask built once per pattern); every other row gives zeros."""
        mentions = self.layout().dense_rows
        if not mentions.shape[1]:
            return query.new_zeros(query.shape[:3] + (value.shape[-1],))
        rows = _sdpa_rows(
            _gather_positions(query, mentions), _gather_positions(key, mentions), _gather_positions(value, mentions),
            *self._subset_mask("mentions", mentions, mentions), scaling, dropout_p,
        )
        if mentions.shape[1] == query.shape[2] and bool((mentions >= 0).all()):
            return rows  # every position is a mention (positions ascend): the rows are the output
        return _scatter_rows(query.new_zeros(query.shape[:3] + (value.shape[-1],)), mentions, rows)


class BlockLocalCausalPattern(AttentionPattern):
    """Tensor2Tensor local causal attention (``masked_local_attention_1d``) in blocks of ``block_size``.

    Query ``i`` sees key ``j <= i`` when ``j`` is in the same block as ``i`` or in the previous block, so each
    query sees between ``block_size`` and ``2 * block_size - 1`` positions (fewer at the start). Padding is masked.

    Args:
        attention_mask: [batch, length], 1/True for real tokens.
        block_size: positions per block (256 in WikiSum T-DMCA).
    """

    def __init__(self, attention_mask: torch.Tensor, block_size: int = 256):
        super().__init__()
        if not isinstance(block_size, int) or block_size <= 0:
            raise ValueError(f"`block_size` must be a positive integer, got {block_size!r}.")
        if attention_mask.dim() != 2:
            raise ValueError(f"`attention_mask` must have shape [batch, length], got {list(attention_mask.shape)}.")
        self.block_size = block_size
        self.batch_size, self.query_length = attention_mask.shape
        self.key_length = self.query_length
        self.device = attention_mask.device
        self.valid = _pad_last(attention_mask != 0, self.flex_query_length, False)
        self.block = torch.tensor(block_size, device=self.device)

    def mask_mod(self, b, h, q_idx, kv_idx):
        causal = kv_idx <= q_idx
        own_or_previous_block = kv_idx // self.block >= q_idx // self.block - 1
        return self.valid[b, q_idx] & self.valid[b, kv_idx] & causal & own_or_previous_block

    def _layout(self):
        return SparseLayout(
            band=self._band,
            band_block=self.block_size,
            full_band=self._band,
            full_queries=self.valid,
            full_keys=self.valid,
        )

    def _band(self, q_idx):
        return (q_idx // self.block_size - 1) * self.block_size, q_idx


class MemoryCompressedCausalPattern(AttentionPattern):
    """Tensor2Tensor memory-compressed causal attention over compressed keys/values.

    The model compresses keys and values with a strided convolution (kernel = stride = ``compression_stride``,
    3 in T-DMCA), so compressed slot ``s`` summarizes positions ``[s * stride, s * stride + stride - 1]``, and
    prepends one learned "null" slot. Key index 0 is that null slot; key index ``s + 1`` is slot ``s``. A query at
    position ``i`` may see:

    - the null slot, always (so that the first ``stride`` queries have a key at all);
    - slot ``s`` only when every position it covers is strictly before ``i``
      (``s * stride + stride - 1 < i``), i.e. never a slot that covers its own or a later position.

    A slot made only of padding is masked; padding queries give zeros.

    Args:
        attention_mask: [batch, query_length], 1/True for real tokens.
        num_slots: compressed slots the model produced (default ``query_length // compression_stride``, a
            convolution without padding); the key length is ``num_slots + 1``.
        compression_stride: kernel size and stride of the compression.
    """

    def __init__(self, attention_mask: torch.Tensor, num_slots: int | None = None, compression_stride: int = 3):
        super().__init__()
        if not isinstance(compression_stride, int) or compression_stride <= 0:
            raise ValueError(f"`compression_stride` must be a positive integer, got {compression_stride!r}.")
        if attention_mask.dim() != 2:
            raise ValueError(f"`attention_mask` must have shape [batch, length], got {list(attention_mask.shape)}.")
        self.batch_size, self.query_length = attention_mask.shape
        self.compression_stride = compression_stride
        self.num_slots = self.query_length // compression_stride if num_slots is None else num_slots
        if self.num_slots < 0:
            raise ValueError(f"`num_slots` must be non-negative, got {num_slots!r}.")
        self.key_length = self.num_slots + 1
        self.device = attention_mask.device
        valid = attention_mask != 0
        self.query_valid = _pad_last(valid, self.flex_query_length, False)
        # F.pad crops as well as pads: `covered` holds exactly the positions the slots summarize
        covered = _pad_last(valid, self.num_slots * compression_stride, False)
        slot_valid = covered.view(self.batch_size, self.num_slots, compression_stride).any(-1)
        null_slot = torch.ones(self.batch_size, 1, dtype=torch.bool, device=self.device)
        self.key_valid = _pad_last(torch.cat([null_slot, slot_valid], dim=1), self.flex_key_length, False)
        self.stride = torch.tensor(compression_stride, device=self.device)

    def mask_mod(self, b, h, q_idx, kv_idx):
        # key kv_idx >= 1 is slot kv_idx - 1, whose last position is kv_idx * stride - 1
        slot_in_past = kv_idx * self.stride <= q_idx
        return self.query_valid[b, q_idx] & self.key_valid[b, kv_idx] & ((kv_idx == 0) | slot_in_past)

    def _last_visible_key(self, q_idx):
        return q_idx // self.compression_stride

    def _layout(self):
        visible = partial(_prefix_band, last_key=self._last_visible_key)
        return SparseLayout(
            key_prefix=self._last_visible_key,
            full_band=visible,
            full_queries=self.query_valid,
            full_keys=self.key_valid,
        )


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


def _eager_attention(query, key, value, pattern, scaling, dropout_p):
    """Reference: dense scores, score modifier, dense boolean mask, softmax in fp32. Returns (output, weights)."""
    pattern = pattern.for_query(query, scaling)
    mask = pattern.dense_mask()
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling
    bias = pattern.dense_bias(query.shape[1], scores.dtype)
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.dropout(weights, p=dropout_p, training=dropout_p > 0)
    return torch.matmul(weights, value), weights


def _sdpa_attention(query, key, value, pattern, scaling, dropout_p):
    pattern = pattern.for_query(query, scaling)
    bias = pattern.dense_bias(query.shape[1], query.dtype)
    return _masked_sdpa(query, key, value, pattern.dense_mask(), bias, scaling, dropout_p)


_compiled_flex_attention = None
# Dynamo caches compiled kernels per code object (flex_attention's, shared by every pattern, bucket and even
# transformers' own flex models) and silently falls back to the unfused, quadratic-memory flex after 8 entries.
# Each (pattern kind, bucket) pair needs one entry, so our calls allow more.
_FLEX_RECOMPILE_LIMIT = 64


def _flex_attention(query, key, value, pattern, scaling):
    """Compiled flex_attention at the pattern's bucket lengths; padded keys are masked, padded queries dropped."""
    global _compiled_flex_attention
    pattern = pattern.for_query(query, scaling)
    query_pad = pattern.flex_query_length - pattern.query_length
    key_pad = pattern.flex_key_length - pattern.key_length

    def prepare(x, pad):  # contiguous: the compiled kernel is specialized on strides (projections give views)
        return (F.pad(x, (0, 0, 0, pad)) if pad else x).contiguous()

    arguments = dict(
        query=prepare(query, query_pad),
        key=prepare(key, key_pad),
        value=prepare(value, key_pad),
        score_mod=pattern.score_mod,
        block_mask=pattern.flex_block_mask(),
        scale=scaling,
    )
    if torch.compiler.is_compiling():  # inside the caller's compiled model: its graph fuses flex itself
        output = flex_attention(**arguments)
    else:
        if _compiled_flex_attention is None:
            _compiled_flex_attention = torch.compile(flex_attention, dynamic=False)
        with torch._dynamo.config.patch(recompile_limit=_FLEX_RECOMPILE_LIMIT):
            output = _compiled_flex_attention(**arguments)
    return output[:, :, : pattern.query_length]


def _block_mask_from_layout(pattern: AttentionPattern) -> BlockMask:
    """A BlockMask from the pattern's layout, built from block indices (no quadratic mask evaluation).

    Tiles the layout may need are present; those the layout promises fully allowed skip the mask, the others
    apply `mask_mod`.
    """
    layout = pattern.layout()
    device = pattern.device
    num_q_blocks = pattern.flex_query_length // _FLEX_BLOCK
    num_kv_blocks = pattern.flex_key_length // _FLEX_BLOCK
    q_first = torch.arange(num_q_blocks, device=device) * _FLEX_BLOCK
    q_last = q_first + _FLEX_BLOCK - 1
    kv_start = torch.arange(num_kv_blocks, device=device) * _FLEX_BLOCK
    kv_stop = kv_start + _FLEX_BLOCK

    def overlaps(lo, hi):  # [num_q_blocks] key ranges [lo, hi) -> [num_q_blocks, num_kv_blocks]
        return (kv_stop[None, :] > lo[:, None]) & (kv_start[None, :] < hi[:, None])

    def blocks_holding(positions, num_blocks):  # [B, n] positions (-1 unused) -> [B, num_blocks] bool
        flags = torch.zeros(pattern.batch_size, num_blocks + 1, dtype=torch.bool, device=device)
        slots = torch.where(positions >= 0, positions // _FLEX_BLOCK, num_blocks)
        return flags.scatter(1, slots, True)[:, :num_blocks]

    present = torch.zeros(pattern.batch_size, num_q_blocks, num_kv_blocks, dtype=torch.bool, device=device)
    if layout.band is not None:  # both ends are non-decreasing: a tile needs [first(first row), last(last row)]
        present |= overlaps(layout.band(q_first)[0], layout.band(q_last)[1] + 1)[None]
    if layout.key_prefix is not None:
        present |= overlaps(torch.zeros_like(q_last), layout.key_prefix(q_last) + 1)[None]
    if layout.extra_keys is not None:
        present |= blocks_holding(layout.extra_keys, num_kv_blocks)[:, None, :]
    if layout.dense_rows is not None:
        row_blocks = blocks_holding(layout.dense_rows, num_q_blocks)
        if layout.dense_row_keys is None:
            key_blocks = torch.ones(pattern.batch_size, num_kv_blocks, dtype=torch.bool, device=device)
        else:
            key_blocks = blocks_holding(layout.dense_row_keys, num_kv_blocks)
        present |= row_blocks[:, :, None] & key_blocks[:, None, :]

    full = torch.zeros_like(present)
    if layout.full_band is not None:
        # inside the promised band for every row of the tile (ends are non-decreasing), and only flagged positions
        inside = (kv_start[None, :] >= layout.full_band(q_last)[0][:, None]) & (
            kv_stop[None, :] - 1 <= layout.full_band(q_first)[1][:, None]
        )
        rows_ok = layout.full_queries.view(pattern.batch_size, num_q_blocks, _FLEX_BLOCK).all(-1)
        keys_ok = layout.full_keys.view(pattern.batch_size, num_kv_blocks, _FLEX_BLOCK).all(-1)
        full = present & inside[None] & rows_ok[:, :, None] & keys_ok[:, None, :]
    partial_tiles = present & ~full

    def counts_and_indices(tiles):  # [B, q blocks, kv blocks] -> BlockMask's [B, 1, ...] count and index tensors
        indices = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return tiles.sum(-1).to(torch.int32)[:, None], indices[:, None]

    return BlockMask.from_kv_blocks(
        *counts_and_indices(partial_tiles),
        *counts_and_indices(full),
        BLOCK_SIZE=_FLEX_BLOCK,
        mask_mod=pattern.mask_mod,
        seq_lengths=(pattern.flex_query_length, pattern.flex_key_length),
    )


def _gather_positions(tensor, positions):
    """[B, H, L, D] gathered at [B, n] positions (-1 entries read position 0 and must be masked) -> [B, H, n, D]."""
    index = positions.clamp(min=0)[:, None, :, None].expand(-1, tensor.shape[1], -1, tensor.shape[3])
    return tensor.gather(2, index)


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
    block = layout.band_block * -(-_MIN_QUERY_BLOCK // layout.band_block)
    num_blocks = -(-length // block)
    device = query.device

    block_first = torch.arange(num_blocks, device=device) * block
    band_start = layout.band(block_first)[0]
    band_stop = layout.band(block_first + block - 1)[1] + 1
    span = int((band_stop - band_start).max())  # the same number of keys for every block, so they batch
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
        q_rows = _gather_positions(query, q_positions)
    if kv_positions is None:
        kv_idx = torch.arange(key.shape[2], device=device).expand(batch, -1)
        key_ok = torch.ones_like(kv_idx, dtype=torch.bool)
        keys, values = key, value
    else:
        kv_idx = kv_positions.clamp(min=0)
        key_ok = kv_positions >= 0
        keys, values = _gather_positions(key, kv_positions), _gather_positions(value, kv_positions)
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
    for start in range(0, length, _PREFIX_QUERY_CHUNK):
        stop = min(start + _PREFIX_QUERY_CHUNK, length)
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
        # unused row slots (-1) write into one extra trailing row that is dropped
        length = output.shape[2]
        target = torch.where(rows >= 0, rows, length)[:, None, :, None].expand_as(row_output)
        output = F.pad(output, (0, 0, 0, 1)).scatter(2, target, row_output)[:, :, :length]
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
        return _eager_attention(query, key, value, pattern, scaling, dropout_p)
    if implementation == "sdpa":
        return _sdpa_attention(query, key, value, pattern, scaling, dropout_p), None
    if implementation == "blocked":
        return _blocked_attention(query, key, value, pattern, scaling, dropout_p), None
    if dropout_p > 0:
        raise ValueError("flex_attention does not support attention dropout: set it to 0 or use 'blocked'/'sdpa'.")
    return _flex_attention(query, key, value, pattern, scaling), None


# ----------------------------------------------------------------------------------------------------------------
# transformers attention interface
# ----------------------------------------------------------------------------------------------------------------


def sparse_attention_forward(
    module: torch.nn.Module | None,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    *,
    implementation: str,
    attention_pattern: AttentionPattern | None = None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers attention-function signature around `sparse_attention`.

    Returns ``(output [batch, query_length, heads, head_dim], weights)``; weights are the dense probabilities for
    "eager" and None otherwise. Padding is carried by ``attention_pattern``, so ``attention_mask`` must be None.
    Dropout follows transformers' convention: callers pass ``dropout=0.0`` outside training.
    """
    if attention_pattern is None:
        raise ValueError(
            f"The '{implementation}' sparse attention needs `attention_pattern=` (an AttentionPattern from "
            "sumformers' attention module); transformers' own models cannot use it."
        )
    if attention_mask is not None:
        raise ValueError("Pass padding through the attention pattern; `attention_mask` must be None.")
    training = module.training if module is not None else dropout > 0
    output, weights = _attention_with_weights(
        query, key, value, attention_pattern, implementation, scaling, dropout, training
    )
    return output.transpose(1, 2).contiguous(), weights


def get_sparse_attention_function(attn_implementation: str | None) -> Callable:
    """The attention function for ``config._attn_implementation`` (None means transformers' default, "sdpa").

    Usage in a model's attention layer::

        attention = get_sparse_attention_function(self.config._attn_implementation)
        output, weights = attention(self, q, k, v, None, scaling=self.scaling,
                                    dropout=self.dropout if self.training else 0.0, attention_pattern=pattern)
    """
    implementation = attn_implementation or "sdpa"
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(
            f"sumformers sparse attention supports attn_implementation in {ATTENTION_IMPLEMENTATIONS}, "
            f"got {attn_implementation!r}."
        )
    return partial(sparse_attention_forward, implementation=implementation)


# "eager", "sdpa" and "flex_attention" are already valid names for transformers; "blocked" becomes one here, so that
# `from_pretrained(..., attn_implementation="blocked")` passes transformers' validation.
AttentionInterface.register("blocked", partial(sparse_attention_forward, implementation="blocked"))
