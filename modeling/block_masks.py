"""How a flex_attention pattern's BlockMask is built from its layout (`block_mask_from_layout`, which
`attention_patterns.AttentionPattern.flex_block_mask` calls) and what every BlockMask shares: the tile size, the cache
of built masks, Dynamo's recompile limit and the count and index tensors a BlockMask is made of.

The module is copied into exported Hub repos: it imports only torch and the standard library.
"""

import copy
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask

# FlexAttention tile size; sequence lengths given to flex are padded to multiples of it.
FLEX_BLOCK = 128


def version_of(value):
    """A tensor's version counter (bumped by every in-place change), None for anything else or a tensor made
    under `torch.inference_mode` (which keeps none)."""
    if not isinstance(value, torch.Tensor) or value.is_inference():
        return None
    return value._version


class BlockMaskCache:
    """The last `size` BlockMasks by `AttentionPattern.mask_key`, the least recently used dropped first. Each entry
    also keeps the pattern inputs its key names by identity alive, so that their identities are not reused."""

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict = OrderedDict()

    def get(self, key) -> BlockMask | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key, block_mask: BlockMask, keep_alive) -> None:
        self._entries[key] = (block_mask, keep_alive)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


# A model builds its patterns once per forward: a few entries cover the shapes of a training or decoding loop.
BLOCK_MASK_CACHE = BlockMaskCache(size=8)


def clear_block_mask_cache() -> None:
    """Forget the cached BlockMasks (and the pattern inputs they keep alive)."""
    BLOCK_MASK_CACHE.clear()


# Dynamo keeps one compiled entry per code object and input kind (pattern kind, bucket) and silently runs the plain
# function after 8 of them: the compiled flex kernel and mask builder allow more.
RECOMPILE_LIMIT = 64


def raise_recompile_limit() -> None:
    """Raise Dynamo's recompile limit to `RECOMPILE_LIMIT`, set once by whichever compile comes first (a
    `torch._dynamo.config.patch` context would be entered and left on every call), never lowered, so that a caller's
    higher limit stands."""
    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, RECOMPILE_LIMIT)


def tile_tensors(
    key_ranges, full, extra_keys, dense_rows, dense_row_keys, batch_size, num_q_blocks, num_kv_blocks, device
):
    """BlockMask's count and index tensors ([batch, 1, ...]) of the partial and the full tiles.

    `key_ranges`: ([num_q_blocks] lo, hi) pairs of keys [lo, hi) each query block may need; `full`: None or (lo, hi,
    full_queries, full_keys), keys [lo, hi) allowed to every flagged query of the block when flagged themselves;
    `extra_keys`, `dense_rows` and `dense_row_keys`: positions ([batch, n], -1 unused) or flags ([batch, <= length]
    bool), or None."""
    kv_start = torch.arange(num_kv_blocks, device=device) * FLEX_BLOCK
    kv_stop = kv_start + FLEX_BLOCK

    def blocks_holding(positions, num_blocks):  # positions or flags -> [B, blocks] bool
        if positions.dtype == torch.bool:  # flags: no positions to count, so no read-back of their number
            flags = F.pad(positions, (0, num_blocks * FLEX_BLOCK - positions.shape[-1]), value=False)
            return flags.view(positions.shape[0], num_blocks, FLEX_BLOCK).any(-1)
        flags = torch.zeros(batch_size, num_blocks + 1, dtype=torch.bool, device=device)
        slots = torch.where(positions >= 0, positions // FLEX_BLOCK, num_blocks)
        return flags.scatter(1, slots, True)[:, :num_blocks]

    present = torch.zeros(batch_size, num_q_blocks, num_kv_blocks, dtype=torch.bool, device=device)
    for lo, hi in key_ranges:
        present |= ((kv_stop[None, :] > lo[:, None]) & (kv_start[None, :] < hi[:, None]))[None]
    if extra_keys is not None:
        present |= blocks_holding(extra_keys, num_kv_blocks)[:, None, :]
    if dense_rows is not None:
        row_blocks = blocks_holding(dense_rows, num_q_blocks)
        if dense_row_keys is None:
            key_blocks = torch.ones(batch_size, num_kv_blocks, dtype=torch.bool, device=device)
        else:
            key_blocks = blocks_holding(dense_row_keys, num_kv_blocks)
        present |= row_blocks[:, :, None] & key_blocks[:, None, :]

    if full is None:
        full_tiles = torch.zeros_like(present)
    else:
        lo, hi, full_queries, full_keys = full
        inside = (kv_start[None, :] >= lo[:, None]) & (kv_stop[None, :] <= hi[:, None])
        rows_ok = full_queries.view(batch_size, num_q_blocks, FLEX_BLOCK).all(-1)
        keys_ok = full_keys.view(batch_size, num_kv_blocks, FLEX_BLOCK).all(-1)
        full_tiles = present & inside[None] & rows_ok[:, :, None] & keys_ok[:, None, :]
    partial_tiles = present & ~full_tiles

    def counts_and_indices(tiles):  # [B, q blocks, kv blocks] -> BlockMask's [B, 1, ...] count and index tensors
        indices = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return tiles.sum(-1).to(torch.int32)[:, None], indices[:, None]

    return (*counts_and_indices(partial_tiles), *counts_and_indices(full_tiles))


def _mask_holder(pattern):
    """A copy of the pattern for the BlockMask's mask function, without its cache (which a cached BlockMask would keep
    alive) and with tensors of its own: a compiled layer given both the pattern (its score modifier) and the
    BlockMask then never sees the two share a tensor, whether the mask was just built or came from the cache (Dynamo
    guards on such aliasing and would compile again). The tables that need gradients are the score modifier's, not
    the mask's: left out. Inside a caller's compiled model (one graph, nothing to guard between calls) a shallow
    copy."""
    if torch.compiler.is_compiling():
        holder = copy.copy(pattern)
        holder._cache = {}
        return holder
    memo = {id(pattern._cache): {}, id(pattern._mask_inputs): None}
    for value in vars(pattern).values():
        if isinstance(value, torch.Tensor) and value.requires_grad:
            memo[id(value)] = None
    return copy.deepcopy(pattern, memo)


# Devices where the BlockMask's tile tensors are computed by a compiled function: on a GPU the eager builder is some
# hundred small kernel launches; on the CPU it is a few milliseconds, less than a compile.
COMPILED_BUILDER_DEVICES = ("cuda",)
_compiled_tile_tensors = None


def block_mask_from_layout(pattern) -> BlockMask:
    """A BlockMask from the pattern's layout, built from block indices (no quadratic mask evaluation).

    Tiles the layout may need are present; those the layout promises fully allowed skip the mask, the others
    apply `mask_mod`. Nothing is read back from the device: positions come as flags (`block_flags`) where a
    pattern has them. The layout's functions are evaluated here, at the query blocks' first and last rows, so that
    the compiled part takes only tensors and sizes (and recompiles only for a new shape, not for a new pattern).
    Dense rows that run outside flex (`AttentionPattern.dense_rows_outside_flex`) get no tiles: `flex_mask_mod`
    leaves them out.
    """
    global _compiled_tile_tensors
    layout = pattern.flex_layout()
    flags = pattern.block_flags()
    dense_rows = flags.get("dense_rows", layout.dense_rows)
    if pattern.dense_rows_outside_flex:
        dense_rows = None
    num_q_blocks = pattern.flex_query_length // FLEX_BLOCK
    q_first = torch.arange(num_q_blocks, device=pattern.device) * FLEX_BLOCK
    q_last = q_first + FLEX_BLOCK - 1
    # [num_q_blocks] key ranges [lo, hi) a query block may need; both ends are non-decreasing in the query, so a
    # block needs [first(its first row), last(its last row)]
    key_ranges = []
    if layout.band is not None:
        key_ranges.append((layout.band(q_first)[0], layout.band(q_last)[1] + 1))
    if layout.key_prefix is not None:
        key_ranges.append((torch.zeros_like(q_last), layout.key_prefix(q_last) + 1))
    full = None
    if layout.full_band is not None:  # keys promised to every row of the block: [first(last row), last(first row)]
        full = (layout.full_band(q_last)[0], layout.full_band(q_first)[1] + 1, layout.full_queries, layout.full_keys)
    arguments = (
        tuple(key_ranges),
        full,
        flags.get("extra_keys", layout.extra_keys),
        dense_rows,
        flags.get("dense_row_keys", layout.dense_row_keys),
        pattern.batch_size,
        num_q_blocks,
        pattern.flex_key_length // FLEX_BLOCK,
        pattern.device,
    )
    tiles = tile_tensors
    if pattern.device.type in COMPILED_BUILDER_DEVICES and not torch.compiler.is_compiling():
        if _compiled_tile_tensors is None:
            raise_recompile_limit()
            _compiled_tile_tensors = torch.compile(tile_tensors, dynamic=False)
        tiles = _compiled_tile_tensors
    return BlockMask.from_kv_blocks(
        *tiles(*arguments),
        BLOCK_SIZE=FLEX_BLOCK,
        mask_mod=_mask_holder(pattern).flex_mask_mod,
        seq_lengths=(pattern.flex_query_length, pattern.flex_key_length),
    )
