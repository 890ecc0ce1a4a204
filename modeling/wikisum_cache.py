"""WikiSum's decoding cache (`WikiSumCache`): one layer per decoder layer, of the kind its attention type needs.

Full layers keep every key, local layers only the previous and current block, compressed layers their slots plus the
at most ``stride - 1`` positions of the slot being filled; the copy head's memory rides along (see
`modeling_wikisum`)."""

import torch
from transformers.cache_utils import Cache, CacheLayerMixin, DynamicLayer

from ..configuration.configuration_wikisum import WikiSumConfig


class LocalAttentionCacheLayer(DynamicLayer):
    """Keys and values of the previous and the current block only (at most ``2 * block_size - 1`` positions), since a
    local query never looks further back. ``window_start`` is the absolute position of the first kept key."""

    is_sliding = True
    is_croppable = False

    def __init__(self, block_size: int):
        super().__init__()
        self.block_size = block_size
        self.window_start = 0
        self.seen_tokens = 0

    def update(self, key_states, value_states, *args, **kwargs):
        """Append the new keys/values; return the kept and new ones (positions ``window_start`` before the call
        onward), then drop what the next query can no longer see."""
        keys, values = super().update(key_states, value_states)
        self.seen_tokens += key_states.shape[-2]
        keep_from = max(0, (self.seen_tokens // self.block_size - 1) * self.block_size)
        self.keys = keys[:, :, keep_from - self.window_start :]
        self.values = values[:, :, keep_from - self.window_start :]
        self.window_start = keep_from
        return keys, values

    def get_seq_length(self) -> int:
        return self.seen_tokens

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.seen_tokens - self.window_start + query_length, self.window_start

    def get_max_length(self) -> int:
        return 2 * self.block_size

    def reset(self) -> None:
        super().reset()
        self.window_start = self.seen_tokens = 0

    def crop(self, tokens_to_remove: int) -> None:
        raise ValueError("a local-attention cache has dropped old positions and cannot be rolled back")


class CompressedAttentionCacheLayer(CacheLayerMixin):
    """Compressed key/value slots ([batch, slots, hidden], `keys`/`values`) plus the raw projected keys/values of the
    slot still being filled (`pending_keys`/`pending_values`, fewer than ``stride`` positions)."""

    is_croppable = False

    def __init__(self, stride: int):
        super().__init__()
        self.stride = stride
        self.seen_tokens = 0
        self.pending_keys = self.pending_values = None

    def lazy_initialization(self, key_states, value_states) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        empty = key_states.new_zeros(key_states.shape[0], 0, key_states.shape[-1])
        self.keys, self.values = empty, value_states.new_zeros(empty.shape)
        self.pending_keys, self.pending_values = empty, value_states.new_zeros(empty.shape)
        self.is_initialized = True

    def update(self, key_states, value_states, *args, compress=None, **kwargs):
        """Add projected keys/values [batch, n, hidden]; every completed group of ``stride`` positions becomes a
        slot through ``compress(keys, values) -> (slot_keys, slot_values)``. Returns all slots so far."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        raw_keys = torch.cat([self.pending_keys, key_states], dim=1)
        raw_values = torch.cat([self.pending_values, value_states], dim=1)
        complete = raw_keys.shape[1] // self.stride * self.stride
        if complete:
            slot_keys, slot_values = compress(raw_keys[:, :complete], raw_values[:, :complete])
            self.keys = torch.cat([self.keys, slot_keys], dim=1)
            self.values = torch.cat([self.values, slot_values], dim=1)
        self.pending_keys, self.pending_values = raw_keys[:, complete:], raw_values[:, complete:]
        self.seen_tokens += key_states.shape[1]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.seen_tokens

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return (self.seen_tokens + query_length) // self.stride + 1, 0

    def get_max_length(self) -> int:
        return -1

    def _map(self, function) -> None:
        if self.is_initialized:
            self.keys, self.values = function(self.keys), function(self.values)
            self.pending_keys, self.pending_values = function(self.pending_keys), function(self.pending_values)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._map(lambda tensor: tensor.index_select(0, beam_idx.to(tensor.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._map(lambda tensor: tensor.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._map(lambda tensor: tensor[indices])

    def reset(self) -> None:
        self.keys = self.values = self.pending_keys = self.pending_values = None
        self.is_initialized = False
        self.seen_tokens = 0

    def crop(self, tokens_to_remove: int) -> None:
        raise ValueError("a memory-compressed cache has merged positions into slots and cannot be rolled back")


class WikiSumCache(Cache):
    """One cache layer per decoder layer, of the kind its attention type needs, and for the copy head
    (`copy_mechanism`) the copy memory: every position's final state, its copy key and its token id so far
    ([batch, positions, ...]), which beam search reorders with the layers."""

    def __init__(self, config: WikiSumConfig):
        layers = []
        for layer_type in config.attention_layers:
            if layer_type == "local":
                layers.append(LocalAttentionCacheLayer(config.local_block_size))
            elif layer_type == "compressed":
                layers.append(CompressedAttentionCacheLayer(config.compression_stride))
            else:
                layers.append(DynamicLayer())
        super().__init__(layers=layers)
        self.copy_memory = None

    def add_copy_memory(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Append the new positions' (keys, states, ids); return all positions' so far."""
        previous = self.copy_memory
        self.copy_memory = (
            tensors if previous is None else tuple(torch.cat(pair, dim=1) for pair in zip(previous, tensors))
        )
        return self.copy_memory

    def _map_copy_memory(self, function) -> None:
        if self.copy_memory is not None:
            self.copy_memory = tuple(map(function, self.copy_memory))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        self._map_copy_memory(lambda rows: rows.index_select(0, beam_idx.to(rows.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._map_copy_memory(lambda rows: rows.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        self._map_copy_memory(lambda rows: rows[indices])

    def crop(self, max_length: int) -> None:
        super().crop(max_length)  # refused by local and compressed layers; full layers keep their first positions
        self._map_copy_memory(lambda rows: rows[:, : self.get_seq_length()])

    def reset(self) -> None:
        super().reset()
        self.copy_memory = None


__all__ = ["CompressedAttentionCacheLayer", "LocalAttentionCacheLayer", "WikiSumCache"]
