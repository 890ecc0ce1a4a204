"""Sparse attention patterns shared by the sumformers architectures, as mask functions (the back ends that run them
are in `attention.py`; HetFormer's graph patterns in `hetformer_graph.py`).

Each pattern is one definition, a FlexAttention-style mask function ``mask_mod(b, h, q_idx, kv_idx) -> bool``
plus, where the architecture needs it, a score modifier ``score_mod(score, b, h, q_idx, kv_idx) -> score``.
Both are written with element-wise tensor ops and look-ups into the pattern's per-position tensors, so the same
functions are evaluated on scalar indices by FlexAttention and on broadcast index grids by the other backends.
Mask functions never depend on the head; per-head differences live in the score modifier.

Patterns (all but the memory-compressed one are self-attention over one sequence):

- `SlidingWindowPattern`: Longformer's window (two-sided size, even) with key padding and optional global tokens.
- `GlobalLocalPattern`: ETC's global-local attention over ``[global tokens ; long tokens]`` with relative-position
  representations shared by its four parts: a per-head bias table and, optionally, relative keys (Shaw et al. 2018).
- `CausalPattern`: full causal attention with key padding (WikiSum's full layers).
- `BlockLocalCausalPattern`: Tensor2Tensor's local causal attention in blocks (own block so far + previous block).
- `MemoryCompressedCausalPattern`: causal attention over keys/values compressed by a strided convolution, plus
  one leading "null" slot.
- `hetformer_graph.HeterogeneousGraph` (beside HetFormer): HetFormer's token windows, sentence/document nodes and
  entity links, one pattern per projection set.
- `convolutional_attention.ConvolutionalPattern` (its own module): convolutional self-attention's windows over
  positions and, in 2D, over neighbouring heads folded into the sequence.

The module is copied into exported Hub repos: it imports only torch and the standard library.
"""

import copy
import hashlib
from dataclasses import dataclass
from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask

from .block_masks import BLOCK_MASK_CACHE, FLEX_BLOCK, block_mask_from_layout, version_of

# ETC's sentence id of padding (no sentence id a caller gives is this small).
NO_SENTENCE = torch.iinfo(torch.long).min
# Smallest query block of the blocked backend: tiny bands are merged into blocks at least this long so that
# each batched matmul does real work.
MIN_QUERY_BLOCK = 64


# ----------------------------------------------------------------------------------------------------------------
# Helpers on per-position tensors
# ----------------------------------------------------------------------------------------------------------------


def flex_bucket(length: int, buckets_per_doubling: int = 4) -> int:
    """Length that flex compiles for: a multiple of 128 and of a quarter (by default) of the length's power of two.

    At most four buckets per doubling of length, at most 25% padding, so varying batches recompile rarely; a pattern
    whose kernel time matters more than its compile count may ask for 8 (at most 12.5% padding).
    """
    if isinstance(length, torch.SymInt):
        # a traced length (the ONNX export, which never runs flex): rounding it would fix the traced axis
        return length
    shift = int(buckets_per_doubling).bit_length()  # 4 -> 3: a quarter of the power of two
    granularity = max(FLEX_BLOCK, 2 ** max(0, int(length).bit_length() - shift))
    return max(FLEX_BLOCK, -(-length // granularity) * granularity)


def device_scalar(value: int, device) -> torch.Tensor:
    """A 0-d long tensor on `device`, filled there: `torch.tensor(value, device=...)` copies from the host, which
    waits for the device on a GPU."""
    return torch.full((), value, dtype=torch.long, device=device)


def pad_last(tensor: torch.Tensor, length: int, value) -> torch.Tensor:
    """Pad the last dimension of a [batch, n] tensor with `value` up to `length`."""
    return F.pad(tensor, (0, length - tensor.shape[-1]), value=value)


def as_keep_mask(mask: torch.Tensor, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """A [batch, n] padding mask (1/True = real token) as bool, with a clear error for a wrong shape."""
    if tuple(mask.shape) != shape:
        raise ValueError(f"`{name}` must have shape {list(shape)}, got {list(mask.shape)}.")
    return mask != 0


def as_index_tensor(ids: torch.Tensor, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    if ids.dim() != 2 or (shape is not None and tuple(ids.shape) != shape):
        expected = list(shape) if shape is not None else "[batch, length]"
        raise ValueError(f"`{name}` must have shape {expected}, got {list(ids.shape)}.")
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer ids, got dtype {ids.dtype}.")
    return ids.long()


def symmetric_band(q_idx, radius: int):
    """(first, last) keys of a band reaching `radius` positions on each side."""
    return q_idx - radius, q_idx + radius


def _prefix_band(q_idx, last_key: Callable):
    """(first, last) keys of a causal prefix."""
    return torch.zeros_like(q_idx), last_key(q_idx)


def true_positions(flags: torch.Tensor) -> torch.Tensor:
    """[batch, n] bool -> [batch, max count] positions of the True entries, ascending, padded with -1.

    The width is read back from the device: the BlockMask builder never calls this (patterns give it flags instead,
    `AttentionPattern.block_flags`)."""
    counts = flags.sum(-1)
    width = int(counts.max()) if flags.numel() else 0
    order = torch.argsort((~flags).to(torch.int8), dim=-1, stable=True)[:, :width]
    in_use = torch.arange(width, device=flags.device) < counts[:, None]
    return torch.where(in_use, order, -1)


def gather_positions(tensor, positions):
    """[B, H, L, D] gathered at [B, n] positions (-1 entries read position 0 and must be masked) -> [B, H, n, D]."""
    index = positions.clamp(min=0)[:, None, :, None].expand(-1, tensor.shape[1], -1, tensor.shape[3])
    return tensor.gather(2, index)


def scatter_positions(tensor, positions, rows):
    """[B, H, L, D] with the rows at [B, n] `positions` (-1 unused) replaced by `rows` [B, H, n, D]; in place in
    eager CPU code without gradients (no copy of the whole tensor; the boolean selection reads back, free there)."""
    needs_grad = torch.is_grad_enabled() and (tensor.requires_grad or rows.requires_grad)
    if tensor.device.type == "cpu" and not needs_grad and not torch.compiler.is_compiling():
        used = positions >= 0
        batch = torch.arange(positions.shape[0]).view(-1, 1).expand_as(positions)
        tensor.transpose(1, 2)[batch[used], positions[used]] = rows.transpose(1, 2)[used]
        return tensor
    length = tensor.shape[2]
    # unused slots (-1) write into one extra trailing row that is dropped
    target = torch.where(positions >= 0, positions, length)[:, None, :, None].expand_as(rows)
    return F.pad(tensor, (0, 0, 0, 1)).scatter(2, target, rows)[:, :, :length]


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
        # what the mask is made of (see `_remember_mask_inputs`); None: the BlockMask is not shared across patterns
        self._mask_inputs: tuple | None = None

    def _remember_mask_inputs(self, *inputs) -> None:
        """Record the constructor's arguments that decide the mask (tensors and plain values), so that another
        pattern built from the same ones reuses this one's BlockMask (`flex_block_mask`). Each tensor's version
        counter is noted now: one changed in place before the BlockMask is built makes the pattern uncached."""
        versions = tuple(version_of(x) for x in inputs)
        self._mask_inputs = (inputs, versions)

    def mask_mod(self, b, h, q_idx, kv_idx) -> torch.Tensor:
        raise NotImplementedError

    # A method `score_mod(score, b, h, q_idx, kv_idx)` in subclasses that add a bias; None means "scores as is".
    score_mod = None
    # A method `blocked_attention(query, key, value, scaling, dropout_p) -> output` in subclasses with their own
    # implementation of the "blocked" backend (HetFormer's patterns); None means the generic one.
    blocked_attention = None
    # True where the pattern is plain causal attention over unpadded rows, which SDPA runs without a mask.
    causal_without_padding = False
    # True where the layout's `dense_rows` attend to all keys (global tokens, graph nodes) and flex leaves them out
    # (`flex_mask_mod`): `attention.py` computes them by one dense SDPA over those few rows and merges them, so that
    # no query block of the BlockMask visits every key tile.
    dense_rows_outside_flex = False

    def flex_mask_mod(self, b, h, q_idx, kv_idx) -> torch.Tensor:
        """The mask the flex kernel applies: `mask_mod`, without the dense rows where `dense_rows_outside_flex`."""
        return self.mask_mod(b, h, q_idx, kv_idx)

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

    def flex_layout(self) -> SparseLayout:
        """The layout the BlockMask is built from: `layout()`, or one without the positions `block_flags` stands
        for (so that building it reads nothing back from the device)."""
        return self.layout()

    @property
    def flex_query_length(self) -> int:
        return flex_bucket(self.query_length)

    @property
    def flex_key_length(self) -> int:
        return flex_bucket(self.key_length)

    def dense_mask(self) -> torch.Tensor:
        """[batch, 1, query_length, key_length] bool, evaluated in row chunks to bound temporary memory (one chunk
        for a traced length, the ONNX export's: a Python loop over it would fix the traced axis)."""
        if isinstance(self.query_length, torch.SymInt):
            spans = [(0, self.query_length)]
        else:
            rows = max(1, 2**22 // max(1, self.key_length))
            spans = [(start, min(start + rows, self.query_length)) for start in range(0, self.query_length, rows)]
        b = torch.arange(self.batch_size, device=self.device).view(-1, 1, 1, 1)
        h = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=self.device)
        kv = torch.arange(self.key_length, device=self.device).view(1, 1, 1, -1)
        chunks = []
        for start, stop in spans:
            q = torch.arange(start, stop, device=self.device).view(1, 1, -1, 1)
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

    def block_flags(self) -> dict[str, torch.Tensor]:
        """[batch, length] bool flags standing for `layout()`'s `extra_keys`, `dense_rows` and `dense_row_keys` when
        the BlockMask is built (a pattern that has them skips the layout's positions, whose number is read back from
        the device)."""
        return {}

    def mask_key(self) -> tuple | None:
        """A hashable key equal for two patterns with the same mask, without reading anything back from an
        accelerator, or None where none can be given: the pattern's class, lengths, device and its recorded inputs,
        each tensor on the CPU by a digest of its bytes, elsewhere by its identity and version (the cache entry then
        keeps it alive, so the identity is not reused)."""
        if self._mask_inputs is None or torch.compiler.is_compiling():
            return None
        inputs, versions = self._mask_inputs
        if versions != tuple(version_of(x) for x in inputs):
            return None  # changed in place since the pattern was built
        tokens = []
        for x in inputs:
            if not isinstance(x, torch.Tensor):
                tokens.append(x)
            elif x.device.type == "cpu":
                data = x.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
                tokens.append((x.dtype, tuple(x.shape), hashlib.blake2b(data, digest_size=16).digest()))
            elif x.is_inference():
                return None  # no version counter: an in-place change would go unseen
            else:
                tokens.append((x.dtype, tuple(x.shape), id(x), x._version))
        lengths = (self.batch_size, self.query_length, self.key_length, self.flex_query_length, self.flex_key_length)
        return (type(self), lengths, str(self.device), tuple(tokens))

    def flex_block_mask(self) -> BlockMask:
        """BlockMask over the flex bucket lengths, built from `layout()` once per pattern and shared through a small
        cache with later patterns of the same `mask_key` (a model's repeated forward with the same inputs)."""
        if "block_mask" not in self._cache:
            key = self.mask_key()
            block_mask = BLOCK_MASK_CACHE.get(key) if key is not None else None
            if block_mask is None:
                block_mask = block_mask_from_layout(self)
                if key is not None:
                    BLOCK_MASK_CACHE.put(key, block_mask, self._mask_inputs)
            self._cache["block_mask"] = block_mask
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
            is_global = as_keep_mask(global_attention_mask, "global_attention_mask", tuple(attention_mask.shape))
        # one code per position (0 padding, 1 local, 2 global): the mask reads one tensor instead of two, which is
        # measurably faster inside the flex kernel
        self.kind = pad_last(valid.to(torch.int8) * (1 + is_global.to(torch.int8)), self.flex_query_length, 0)
        # a 0-d tensor rather than an int, so that each window size does not compile its own flex kernel
        self.half_window = device_scalar(window // 2, self.device)
        # the global rows (their positions read back once per pattern) run outside flex; none without a global mask
        self.dense_rows_outside_flex = global_attention_mask is not None
        self._remember_mask_inputs(window, attention_mask, global_attention_mask)

    def mask_mod(self, b, h, q_idx, kv_idx):
        q_kind, kv_kind = self.kind[b, q_idx], self.kind[b, kv_idx]
        reach = ((q_idx - kv_idx).abs() <= self.half_window) | (q_kind == 2) | (kv_kind == 2)
        return (q_kind > 0) & (kv_kind > 0) & reach

    def flex_mask_mod(self, b, h, q_idx, kv_idx):  # the real local rows: band and global keys
        kv_kind = self.kind[b, kv_idx]
        reach = ((q_idx - kv_idx).abs() <= self.half_window) | (kv_kind == 2)
        return (self.kind[b, q_idx] == 1) & (kv_kind > 0) & reach

    def _layout(self, with_positions: bool = True):
        global_positions = true_positions(self.kind[:, : self.query_length] == 2) if with_positions else None
        band = partial(symmetric_band, radius=self.window // 2)
        return SparseLayout(
            band=band,
            band_block=self.window // 2,
            extra_keys=global_positions,
            dense_rows=global_positions,
            full_band=band,
            full_queries=self.kind == 1,  # the global rows run outside flex
            full_keys=self.kind > 0,
        )

    def flex_layout(self) -> SparseLayout:
        return self._layout(with_positions=False)

    def block_flags(self):
        is_global = self.kind == 2
        return {"extra_keys": is_global, "dense_rows": is_global}


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
        long_ids = as_index_tensor(long_sentence_ids, "long_sentence_ids")
        global_ids = as_index_tensor(global_sentence_ids, "global_sentence_ids")
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
            else as_keep_mask(long_attention_mask, "long_attention_mask", tuple(long_ids.shape))
        )
        global_valid = (
            torch.ones_like(global_ids, dtype=torch.bool)
            if global_attention_mask is None
            else as_keep_mask(global_attention_mask, "global_attention_mask", tuple(global_ids.shape))
        )
        padded = self.flex_query_length
        real = torch.cat([global_valid, long_valid], dim=1)
        self.valid = pad_last(real, padded, False)
        # the global tokens are the first `num_global` positions: tested by index arithmetic, not a look-up (a 0-d
        # tensor, so that each count does not compile its own flex kernel)
        self.global_count = device_scalar(self.num_global, self.device)
        # padding's sentence id is NO_SENTENCE: under hard masking the mask reads one tensor per side, not two
        sentence = torch.cat([global_ids, long_ids], dim=1).masked_fill(~real, NO_SENTENCE)
        self.sentence = pad_last(sentence, padded, NO_SENTENCE)
        self.radius = device_scalar(local_radius, self.device)
        self.max_distance = device_scalar(relative_pos_max_distance, self.device)
        if relative_bias is not None:
            self._check_bias(relative_bias)
        if relative_keys is not None:
            self._check_keys(relative_keys)
        self.relative_bias = relative_bias
        self.relative_keys = relative_keys
        # q R^T * scaling, [batch, heads, flex query length, vocab]: set by `for_query`
        self.query_relative_scores = None
        self._remember_mask_inputs(
            local_radius, hard_g2l_masking, hard_l2g_masking,
            long_sentence_ids, global_sentence_ids, long_attention_mask, global_attention_mask,
        )  # fmt: skip

    # Stepwise decoding re-encodes long documents several times per summary: eight flex buckets per doubling of
    # length (at most 12.5% padding) instead of four, trading a few more compiles for a shorter kernel.
    @property
    def flex_query_length(self) -> int:
        return flex_bucket(self.query_length, buckets_per_doubling=8)

    @property
    def flex_key_length(self) -> int:
        return flex_bucket(self.key_length, buckets_per_doubling=8)

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

    def is_global(self, idx) -> torch.Tensor:
        return idx < self.global_count

    def relative_ids(self, b, q_idx, kv_idx) -> torch.Tensor:
        q_global, kv_global = self.is_global(q_idx), self.is_global(kv_idx)
        distance = (kv_idx - q_idx).clamp(-self.max_distance, self.max_distance) + self.max_distance
        same_sentence = self.sentence[b, q_idx] == self.sentence[b, kv_idx]
        cross_label = 2 * self.max_distance + 1 + same_sentence.long()
        return torch.where(q_global != kv_global, cross_label, distance)

    def mask_mod(self, b, h, q_idx, kv_idx):
        q_global, kv_global = self.is_global(q_idx), self.is_global(kv_idx)
        l2l = ~q_global & ~kv_global & ((q_idx - kv_idx).abs() <= self.radius)
        if not (self.hard_l2g_masking or self.hard_g2l_masking):  # g2g, l2g and g2l in full
            return self.valid[b, q_idx] & self.valid[b, kv_idx] & (l2l | q_global | kv_global)
        # the only parts that read the sentence ids, whose NO_SENTENCE also marks the padding
        q_sentence, kv_sentence = self.sentence[b, q_idx], self.sentence[b, kv_idx]
        same_sentence = q_sentence == kv_sentence
        g2g = q_global & kv_global
        l2g = ~q_global & kv_global
        g2l = q_global & ~kv_global
        if self.hard_l2g_masking:
            l2g = l2g & same_sentence
        if self.hard_g2l_masking:
            g2l = g2l & same_sentence
        return (q_sentence != NO_SENTENCE) & (kv_sentence != NO_SENTENCE) & (l2l | g2g | l2g | g2l)

    @property
    def dense_rows_outside_flex(self) -> bool:  # the global rows, [0, num_global): no read-back
        return self.num_global > 0

    def flex_mask_mod(self, b, h, q_idx, kv_idx):  # the long rows: the global ones run outside flex
        return self.mask_mod(b, h, q_idx, kv_idx) & ~self.is_global(q_idx)

    def _relative_score_mod(self, score, b, h, q_idx, kv_idx):
        return score + self.relative_bias[self.relative_ids(b, q_idx, kv_idx), h]

    def _relative_keys_score_mod(self, score, b, h, q_idx, kv_idx):
        # the bias table, if any, is already folded into `query_relative_scores` (see `for_query`)
        return score + self.query_relative_scores[b, h, q_idx, self.relative_ids(b, q_idx, kv_idx)]

    def dense_bias(self, num_heads: int, dtype: torch.dtype) -> torch.Tensor | None:
        """The base class's, by `gathered_bias`: one gather along each query's row of relative scores instead of
        `score_mod`'s look-up by four broadcast index tensors (several times slower, on ONNX Runtime too)."""
        if self.score_mod is None:
            return None
        b = torch.arange(self.batch_size, device=self.device).view(-1, 1, 1, 1, 1)
        q = torch.arange(self.query_length, device=self.device).view(1, 1, 1, -1, 1)
        kv = torch.arange(self.key_length, device=self.device).view(1, 1, 1, 1, -1)
        return self.gathered_bias(b, q, kv, num_heads, dtype)[:, 0]

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
        band = partial(symmetric_band, radius=self.local_radius)
        real_long = self.valid & ~self.is_global(torch.arange(self.valid.shape[1], device=self.device))
        return SparseLayout(
            band=band,
            band_block=max(1, self.local_radius),
            extra_keys=global_positions,
            dense_rows=global_positions,
            full_band=band,
            full_queries=real_long,
            full_keys=real_long,
        )


class CausalPattern(AttentionPattern):
    """Full causal attention: query ``i`` sees every real key ``j <= i``; padding queries give zeros.

    Args:
        attention_mask: [batch, length], 1/True for real tokens.
    """

    def __init__(self, attention_mask: torch.Tensor):
        super().__init__()
        if attention_mask.dim() != 2:
            raise ValueError(f"`attention_mask` must have shape [batch, length], got {list(attention_mask.shape)}.")
        self.batch_size, self.query_length = attention_mask.shape
        self.key_length = self.query_length
        self.device = attention_mask.device
        valid = attention_mask != 0
        self.causal_without_padding = bool(valid.all())
        self.valid = pad_last(valid, self.flex_query_length, False)
        self._remember_mask_inputs(attention_mask)

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.valid[b, q_idx] & self.valid[b, kv_idx] & (kv_idx <= q_idx)

    def _layout(self):
        return SparseLayout(
            key_prefix=_identity,
            full_band=partial(_prefix_band, last_key=_identity),
            full_queries=self.valid,
            full_keys=self.valid,
        )


def _identity(q_idx):
    return q_idx


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
        self.valid = pad_last(attention_mask != 0, self.flex_query_length, False)
        self.block = device_scalar(block_size, self.device)
        self._remember_mask_inputs(block_size, attention_mask)

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
        self.query_valid = pad_last(valid, self.flex_query_length, False)
        # F.pad crops as well as pads: `covered` holds exactly the positions the slots summarize
        covered = pad_last(valid, self.num_slots * compression_stride, False)
        slot_valid = covered.view(self.batch_size, self.num_slots, compression_stride).any(-1)
        null_slot = torch.ones(self.batch_size, 1, dtype=torch.bool, device=self.device)
        self.key_valid = pad_last(torch.cat([null_slot, slot_valid], dim=1), self.flex_key_length, False)
        self.stride = device_scalar(compression_stride, self.device)
        self._remember_mask_inputs(self.num_slots, compression_stride, attention_mask)

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

