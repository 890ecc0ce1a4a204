"""WikiSum's causal self-attention: one of three types per layer (see `modeling_wikisum`'s docstring), the padding
and causal masks every layer of a forward shares (`AttentionContext`), and the memory-compressed layers' null slot.

Every layer runs `attention.attention_forward` on the model's back end. A forward that starts at position 0 gives it
the layer's pattern (full layers a `CausalPattern`); one that continues from a cache evaluates the same mask
functions on the new queries' absolute positions and gives it that dense mask (its few query rows have no layout to
skip: "blocked" and "flex_attention" run SDPA there), so both paths see exactly the same keys."""

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import nn

from ..configuration.configuration_wikisum import WikiSumConfig
from .attention import attention_forward
from .attention_patterns import BlockLocalCausalPattern, CausalPattern, MemoryCompressedCausalPattern


@dataclass
class AttentionContext:
    """What every layer of one forward shares: the padding mask over all positions so far ([batch, past + n], True
    for real tokens), the number of cached positions, and the patterns built over that mask."""

    valid: torch.Tensor
    past_length: int
    local_pattern: BlockLocalCausalPattern | None
    compressed_pattern: MemoryCompressedCausalPattern | None

    @property
    def new_valid(self) -> torch.Tensor:
        return self.valid[:, self.past_length :]

    def query_positions(self) -> torch.Tensor:
        return torch.arange(self.past_length, self.valid.shape[1], device=self.valid.device)

    @cached_property
    def full_pattern(self) -> CausalPattern:
        """The full layers' pattern over a forward that starts at position 0 (built once, shared by them)."""
        return CausalPattern(self.valid)


def _evaluate_mask(pattern, batch_size: int, query_positions: torch.Tensor, key_indices: torch.Tensor) -> torch.Tensor:
    """A pattern's mask function at absolute query positions and key indices -> [batch, 1, queries, keys]."""
    device = query_positions.device
    b = torch.arange(batch_size, device=device).view(-1, 1, 1, 1)
    head = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
    return pattern.mask_mod(b, head, query_positions.view(1, 1, -1, 1), key_indices.view(1, 1, 1, -1))


def _full_causal_mask(valid: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    causal = key_positions.view(1, 1, 1, -1) <= query_positions.view(1, 1, -1, 1)
    return causal & valid[:, None, query_positions, None] & valid[:, None, None, key_positions]


class WikiSumNullSlot(nn.Module):
    """The learned key/value slot in front of a memory-compressed layer's slots, visible to every query (a query
    whose group is not yet complete sees nothing else).

    A module of its own, rather than two parameters of the attention, so that an adapter checkpoint can train and
    save it in full (PEFT's `modules_to_save` takes modules); it is applied by calling it, which a PEFT wrapper
    redirects to its trained copy. Checkpoints keep the parameters' earlier names `attention.null_key` and
    `attention.null_value` (`NULL_SLOT_RENAMING`)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.key = nn.Parameter(torch.zeros(hidden_size))
        self.value = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, m, hidden] slot keys/values -> [B, 1 + m, hidden], the null slot first."""
        batch = keys.shape[0]
        return (
            torch.cat([self.key.expand(batch, 1, -1), keys], dim=1),
            torch.cat([self.value.expand(batch, 1, -1), values], dim=1),
        )


class WikiSumAttention(nn.Module):
    """Multi-head causal self-attention of one of the three types (see `modeling_wikisum`'s docstring)."""

    def __init__(self, config: WikiSumConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_type = config.attention_layers[layer_idx]
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        hidden, bias = config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(hidden, hidden, bias=bias)
        self.k_proj = nn.Linear(hidden, hidden, bias=bias)
        self.v_proj = nn.Linear(hidden, hidden, bias=bias)
        self.o_proj = nn.Linear(hidden, hidden, bias=bias)
        if self.layer_type == "compressed":
            stride = config.compression_stride
            self.key_compression = nn.Conv1d(hidden, hidden, kernel_size=stride, stride=stride)
            self.value_compression = nn.Conv1d(hidden, hidden, kernel_size=stride, stride=stride)
            self.null_slot = WikiSumNullSlot(hidden)

    def _heads(self, states: torch.Tensor) -> torch.Tensor:  # [B, n, hidden] -> [B, heads, n, head_dim]
        return states.view(states.shape[0], states.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def compress(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, stride * m, hidden] keys/values -> [B, m, hidden] slots (strided convolution, no padding)."""
        return (
            self.key_compression(keys.transpose(1, 2)).transpose(1, 2),
            self.value_compression(values.transpose(1, 2)).transpose(1, 2),
        )

    def forward(self, hidden_states: torch.Tensor, context: AttentionContext, cache_layer=None) -> torch.Tensor:
        batch, length, _ = hidden_states.shape
        query = self._heads(self.q_proj(hidden_states))
        keys, values = self.k_proj(hidden_states), self.v_proj(hidden_states)
        dropout = self.config.attention_dropout if self.training else 0.0
        from_start = context.past_length == 0

        if self.layer_type == "compressed":
            # padding must not leak into the slots it shares with real tokens
            keys = keys * context.new_valid[..., None]
            values = values * context.new_valid[..., None]
            if cache_layer is None:
                usable = length // self.config.compression_stride * self.config.compression_stride
                keys, values = self.compress(keys[:, :usable], values[:, :usable])
            else:
                keys, values = cache_layer.update(keys, values, compress=self.compress)
            keys, values = self.null_slot(keys, values)
            keys, values = self._heads(keys), self._heads(values)
            pattern = context.compressed_pattern
            key_indices = torch.arange(keys.shape[2], device=keys.device)
        else:
            keys, values = self._heads(keys), self._heads(values)
            first_key = 0
            if cache_layer is not None:
                first_key = cache_layer.window_start if self.layer_type == "local" else 0
                keys, values = cache_layer.update(keys, values)
            pattern = context.local_pattern if self.layer_type == "local" else None
            key_indices = torch.arange(first_key, first_key + keys.shape[2], device=keys.device)

        if from_start:
            pattern = context.full_pattern if self.layer_type == "full" else pattern
            output, _ = attention_forward(
                self, query, keys, values, scaling=self.scaling, dropout=dropout, attention_pattern=pattern
            )
        else:
            if self.layer_type == "full":
                mask = _full_causal_mask(context.valid, context.query_positions(), key_indices)
            else:
                mask = _evaluate_mask(pattern, batch, context.query_positions(), key_indices)
            output, _ = attention_forward(self, query, keys, values, mask, scaling=self.scaling, dropout=dropout)
        return self.o_proj(output.reshape(batch, length, -1))

    @torch.no_grad()
    def start_compression_as_averages(self) -> None:
        """A compressed layer's start: its key and value convolutions the average over each stride (a slot is the
        mean key and mean value of its positions, so attention to a slot first behaves like attention to the group's
        average), and the always-visible null slot zero (score 0, contributes nothing)."""
        stride = self.config.compression_stride
        identity = torch.eye(self.key_compression.weight.shape[0])
        for convolution in (self.key_compression, self.value_compression):
            convolution.weight.copy_(identity[:, :, None].expand(-1, -1, stride) / stride)
            convolution.bias.zero_()
        self.null_slot.key.zero_()
        self.null_slot.value.zero_()


__all__ = ["AttentionContext", "WikiSumAttention", "WikiSumNullSlot"]
