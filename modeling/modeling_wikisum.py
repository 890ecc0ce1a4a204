"""WikiSum's decoder-only summarizer (Liu et al. 2018, "Generating Wikipedia by Summarizing Long Sequences").

One causal language model reads ``[title and ranked paragraphs ; separator ; summary]`` and is trained with the loss
on every token (the paper's T-D). Each layer has one of three self-attention types (`WikiSumConfig.attention_layers`):

- ``full``: every earlier position. No sparse pattern: ``eager`` materializes the scores, the other implementations
  use PyTorch's fused causal SDPA.
- ``local``: `BlockLocalCausalPattern` (own block so far + previous block), through the sparse attention backends.
- ``compressed``: keys and values shortened by a strided convolution (kernel = stride = 3), a learned "null" slot in
  front; `MemoryCompressedCausalPattern` lets a query see only slots made entirely of earlier positions.

The default layout L-M-L-M-L is T-DMCA; any feed-forward block can be a top-k mixture of experts (`moe_layers`).

Incremental decoding uses `WikiSumCache`: full layers keep every key, local layers only the previous and current
block, compressed layers their slots plus the at most ``stride - 1`` positions of the slot being filled. A forward
that starts at position 0 runs the sparse backends; one that continues from a cache evaluates the same mask
functions on the new queries' absolute positions, so both paths see exactly the same keys.
"""

import copy
import math
import numbers
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, CacheLayerMixin, DynamicLayer
from transformers.conversion_mapping import register_checkpoint_conversion_mapping
from transformers.core_model_loading import WeightRenaming
from transformers.modeling_outputs import BaseModelOutputWithPast, MoeCausalLMOutputWithPast

from ..configuration.configuration_wikisum import DEFAULT_ATTENTION_LAYERS, WikiSumConfig
from ..configuration.summarizer_config import position_offset
from ..generation.length_penalty import LengthPenaltyTypeMixin, resolve_length_penalty_type
from .attention import eager_attention, get_sparse_attention_function
from .attention_patterns import BlockLocalCausalPattern, MemoryCompressedCausalPattern
from .bert_blocks import init_bert_style_weights
from .pointer_generator import PointerGenerator, mixture_log_probs
from .pretrained_encoder import load_pretrained_encoder, portable_encoder_name
from .summarizer_mixin import SummarizerMixin, decoding_cache

# Checkpoints name the null slot's parameters as they were named before the slot became a module
# (`WikiSumNullSlot`): transformers renames them when loading and back when saving, so every checkpoint, older or
# newer, holds `attention.null_key` and `attention.null_value`.
NULL_SLOT_RENAMING = (
    ("attention.null_key", "attention.null_slot.key"),
    ("attention.null_value", "attention.null_slot.value"),
)
register_checkpoint_conversion_mapping(
    WikiSumConfig.model_type,
    [WeightRenaming(saved, held) for saved, held in NULL_SLOT_RENAMING],
    overwrite=True,  # an exported repo's copy of this module registers it again
)


def timing_signal(positions: torch.Tensor, channels: int, max_timescale: float = 1.0e4) -> torch.Tensor:
    """Tensor2Tensor's sinusoidal timing signal: [..., n] positions -> [..., n, channels] (sines, then cosines,
    timescales geometric from 1 to `max_timescale`). No parameters, so any input length works."""
    num_timescales = channels // 2
    log_increment = math.log(max_timescale) / max(num_timescales - 1, 1)
    inverse_timescales = torch.exp(
        torch.arange(num_timescales, device=positions.device, dtype=torch.float32) * -log_increment
    )
    scaled = positions.to(torch.float32)[..., None] * inverse_timescales
    signal = torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=-1)
    return F.pad(signal, (0, channels % 2))


# ----------------------------------------------------------------------------------------------------------------
# Cache
# ----------------------------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------------------------
# Attention
# ----------------------------------------------------------------------------------------------------------------


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


def _evaluate_mask(pattern, batch_size: int, query_positions: torch.Tensor, key_indices: torch.Tensor) -> torch.Tensor:
    """A pattern's mask function at absolute query positions and key indices -> [batch, 1, queries, keys]."""
    device = query_positions.device
    b = torch.arange(batch_size, device=device).view(-1, 1, 1, 1)
    head = torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device)
    return pattern.mask_mod(b, head, query_positions.view(1, 1, -1, 1), key_indices.view(1, 1, 1, -1))


def _full_causal_mask(valid: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    causal = key_positions.view(1, 1, 1, -1) <= query_positions.view(1, 1, -1, 1)
    return causal & valid[:, None, query_positions, None] & valid[:, None, None, key_positions]


def masked_attention(query, key, value, mask, scaling, dropout_p=0.0, materialize=False):
    """Attention under a boolean mask [batch, 1, queries, keys]; rows without a visible key give zeros.

    ``materialize`` computes the score matrix explicitly (the ``eager`` reference); otherwise SDPA is used.
    """
    if materialize:
        return eager_attention(query, key, value, scaling, mask, dropout_p=dropout_p)[0]
    has_key = mask.any(dim=-1, keepdim=True)
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask | ~has_key, dropout_p=dropout_p, scale=scaling
    )
    return output.masked_fill(~has_key, 0.0)


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
    """Multi-head causal self-attention of one of the three types (see the module docstring)."""

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
        implementation = self.config._attn_implementation
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

        if self.layer_type == "full":
            if from_start and implementation != "eager" and bool(context.valid.all()):
                output = F.scaled_dot_product_attention(
                    query, keys, values, is_causal=True, dropout_p=dropout, scale=self.scaling
                )
            else:
                mask = _full_causal_mask(context.valid, context.query_positions(), key_indices)
                output = masked_attention(
                    query, keys, values, mask, self.scaling, dropout, materialize=implementation == "eager"
                )
        elif from_start:
            attention = get_sparse_attention_function(implementation)
            output, _ = attention(
                self, query, keys, values, None, scaling=self.scaling, dropout=dropout, attention_pattern=pattern
            )
            output = output.transpose(1, 2)
        else:
            mask = _evaluate_mask(pattern, batch, context.query_positions(), key_indices)
            output = masked_attention(query, keys, values, mask, self.scaling, dropout)
        return self.o_proj(output.transpose(1, 2).reshape(batch, length, -1))


# ----------------------------------------------------------------------------------------------------------------
# Feed-forward and mixture of experts
# ----------------------------------------------------------------------------------------------------------------


class WikiSumFeedForward(nn.Module):
    """Dense feed-forward block (ReLU in Tensor2Tensor, GELU in BERT: `config.hidden_act`)."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "relu"):
        super().__init__()
        self.up = nn.Linear(hidden_size, intermediate_size)
        self.activation = ACT2FN[activation]
        self.down = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.down(self.activation(self.up(hidden_states)))


def coefficient_of_variation_squared(values: torch.Tensor) -> torch.Tensor:
    """Var / mean^2 over experts: 0 exactly when all are equal (Shazeer et al. 2017's balancing measure)."""
    if values.numel() <= 1:
        return values.new_zeros(())
    return values.var(unbiased=False) / (values.mean() ** 2 + 1e-10)


@dataclass
class MixtureOfExpertsOutput:
    hidden_states: torch.Tensor
    aux_loss: torch.Tensor
    gates: torch.Tensor  # [tokens, experts] combine weights, zero outside each token's top k


class WikiSumMixtureOfExperts(nn.Module):
    """Top-k gated mixture of feed-forward experts (Shazeer et al. 2017, as in the paper's best model).

    Gates are the softmax over each token's k largest router logits (deterministic: no gating noise). The
    load-balancing loss is ``cv^2(importance) + cv^2(load)`` over real tokens, with importance = sum of each expert's
    gates and load = number of tokens routed to it: zero (its minimum) exactly when routing is balanced. Without
    gating noise the load term has no gradient; importance carries the balancing signal.
    """

    def __init__(self, config: WikiSumConfig):
        super().__init__()
        self.num_experts = config.num_experts
        self.top_k = config.num_experts_per_token
        self.router = nn.Linear(config.hidden_size, config.num_experts, bias=False)
        self.experts = nn.ModuleList(
            WikiSumFeedForward(config.hidden_size, config.expert_intermediate_size, config.hidden_act)
            for _ in range(config.num_experts)
        )

    def forward(self, hidden_states: torch.Tensor, token_mask: torch.Tensor | None = None) -> MixtureOfExpertsOutput:
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        top_logits, top_experts = self.router(flat).topk(self.top_k, dim=-1)
        top_gates = torch.softmax(top_logits, dim=-1, dtype=torch.float32).to(flat.dtype)
        output = torch.zeros_like(flat)
        for index, expert in enumerate(self.experts):
            tokens, slots = (top_experts == index).nonzero(as_tuple=True)
            if tokens.numel():
                output.index_add_(0, tokens, expert(flat[tokens]) * top_gates[tokens, slots, None])
        gates = torch.zeros(flat.shape[0], self.num_experts, dtype=top_gates.dtype, device=flat.device)
        gates = gates.scatter(1, top_experts, top_gates)
        real = gates if token_mask is None else gates[token_mask.reshape(-1)]
        aux_loss = coefficient_of_variation_squared(real.sum(0).float()) + coefficient_of_variation_squared(
            (real > 0).sum(0).float()
        )
        return MixtureOfExpertsOutput(output.view_as(hidden_states), aux_loss, gates)


# ----------------------------------------------------------------------------------------------------------------
# Decoder
# ----------------------------------------------------------------------------------------------------------------


class WikiSumDecoderLayer(nn.Module):
    """Attention, then feed-forward (dense or experts), each with dropout and a residual; LayerNorm before each
    sublayer (`layer_norm_position="pre"`) or after each residual addition (`"post"`, BERT's)."""

    def __init__(self, config: WikiSumConfig, layer_idx: int):
        super().__init__()
        self.post_norm = config.layer_norm_position == "post"
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = WikiSumAttention(config, layer_idx)
        self.feed_forward_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        if layer_idx in config.moe_layers:
            self.feed_forward = WikiSumMixtureOfExperts(config)
        else:
            self.feed_forward = WikiSumFeedForward(config.hidden_size, config.intermediate_size, config.hidden_act)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, hidden_states, context: AttentionContext, cache_layer=None):
        if self.post_norm:
            attended = self.attention(hidden_states, context, cache_layer)
            hidden_states = self.attention_norm(hidden_states + self.dropout(attended))
            transformed, aux_loss = self._feed_forward(hidden_states, context)
            return self.feed_forward_norm(hidden_states + self.dropout(transformed)), aux_loss
        attended = self.attention(self.attention_norm(hidden_states), context, cache_layer)
        hidden_states = hidden_states + self.dropout(attended)
        transformed, aux_loss = self._feed_forward(self.feed_forward_norm(hidden_states), context)
        return hidden_states + self.dropout(transformed), aux_loss

    def _feed_forward(self, hidden_states, context: AttentionContext):
        """(output, load-balancing loss or None)."""
        if isinstance(self.feed_forward, WikiSumMixtureOfExperts):
            mixed = self.feed_forward(hidden_states, token_mask=context.new_valid)
            return mixed.hidden_states, mixed.aux_loss
        return self.feed_forward(hidden_states), None


@dataclass
class WikiSumModelOutput(BaseModelOutputWithPast):
    """
    aux_loss (`torch.FloatTensor`, *optional*): summed load-balancing loss of the mixture-of-experts layers.
    """

    aux_loss: torch.FloatTensor | None = None


class WikiSumPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = WikiSumConfig
    base_model_prefix = "model"
    _no_split_modules = ["WikiSumDecoderLayer"]
    _supports_sdpa = True
    _supports_flex_attn = True
    attention_backends = ("eager", "sdpa", "flex_attention", "blocked")
    # `forward` returns a mean loss and takes **kwargs only to ignore Trainer's extras
    accepts_loss_kwargs = False

    @torch.no_grad()
    def _init_weights(self, module):
        std = self.config.initializer_range
        init_bert_style_weights(module, std, projections=(nn.Linear, nn.Conv1d))
        if isinstance(module, WikiSumNullSlot):
            module.key.normal_(mean=0.0, std=std)
            module.value.normal_(mean=0.0, std=std)


class WikiSumModel(WikiSumPreTrainedModel):
    """Embeddings (a narrow table projected to the layer width, plus the sinusoidal timing signal or, with
    `position_embeddings="learned"`, a learned position table), the decoder layers and a final layer norm (pre-norm
    layers) or a layer norm over the embeddings (post-norm layers, BERT's layout: `embed_norm`)."""

    def __init__(self, config: WikiSumConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.embed_projection = nn.Linear(config.embedding_size, config.hidden_size, bias=False)
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
        learned = config.position_embeddings == "learned"
        self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size) if learned else None
        post_norm = config.layer_norm_position == "post"
        self.embed_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if post_norm else None
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(WikiSumDecoderLayer(config, index) for index in range(config.num_hidden_layers))
        self.norm = None if post_norm else nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def _context(self, valid: torch.Tensor, past_length: int) -> AttentionContext:
        layer_types = set(self.config.attention_layers)
        local = BlockLocalCausalPattern(valid, self.config.local_block_size) if "local" in layer_types else None
        compressed = None
        if "compressed" in layer_types:
            stride = self.config.compression_stride
            compressed = MemoryCompressedCausalPattern(valid, valid.shape[1] // stride, compression_stride=stride)
        return AttentionContext(valid, past_length, local, compressed)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        **kwargs,
    ):
        past_key_values = decoding_cache(past_key_values, cache)  # `cache`: the name transformers 5.24 gives it
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids and inputs_embeds")
        if inputs_embeds is None:
            if input_ids.dim() != 2:
                raise ValueError(f"input_ids must have shape [batch, length], got {list(input_ids.shape)}")
            inputs_embeds = self.embed_tokens(input_ids)
        batch, length = inputs_embeds.shape[:2]
        if use_cache and past_key_values is None:
            past_key_values = WikiSumCache(self.config)
        if past_key_values is not None and not isinstance(past_key_values, WikiSumCache):
            raise ValueError(
                "WikiSum layers need a WikiSumCache (local windows, compressed slots), "
                f"got {type(past_key_values).__name__}"
            )
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        device = inputs_embeds.device
        if attention_mask is None:
            attention_mask = torch.ones(batch, past_length + length, dtype=torch.bool, device=device)
        if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch, past_length + length):
            raise ValueError(
                f"attention_mask must have shape [batch, past + new tokens] = {[batch, past_length + length]}, "
                f"got {list(attention_mask.shape)}"
            )
        if position_ids is None:
            position_ids = torch.arange(past_length, past_length + length, device=device).expand(batch, -1)

        hidden_states = self.embed_projection(inputs_embeds) * self.embed_scale
        if self.embed_positions is not None:
            limit = self.config.max_position_embeddings
            if position_ids.numel() and position_ids.max().item() >= limit:
                raise ValueError(
                    f"position {position_ids.max().item()} is beyond the learned position table's {limit} positions "
                    "(config.max_position_embeddings)"
                )
            positions = self.embed_positions(position_ids)
        else:
            positions = timing_signal(position_ids, self.config.hidden_size) * self.config.timing_signal_scale
        hidden_states = hidden_states + positions.to(hidden_states.dtype)
        if self.embed_norm is not None:
            hidden_states = self.embed_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        context = self._context(attention_mask.bool(), past_length)
        all_hidden_states = [] if output_hidden_states else None
        aux_losses = []
        for index, layer in enumerate(self.layers):
            if all_hidden_states is not None:
                all_hidden_states.append(hidden_states)
            cache_layer = past_key_values.layers[index] if past_key_values is not None else None
            hidden_states, aux_loss = layer(hidden_states, context, cache_layer)
            if aux_loss is not None:
                aux_losses.append(aux_loss)
        if self.norm is not None:
            hidden_states = self.norm(hidden_states)
        if all_hidden_states is not None:
            all_hidden_states.append(hidden_states)
        return WikiSumModelOutput(
            last_hidden_state=hidden_states,
            past_key_values=past_key_values if use_cache else None,
            hidden_states=tuple(all_hidden_states) if all_hidden_states is not None else None,
            aux_loss=torch.stack(aux_losses).sum() if aux_losses else None,
        )


def encoder_decoder_settings(encoder: PreTrainedModel, encoder_path: str) -> dict:
    """The WikiSumConfig settings under which a decoder can take over a BERT-style encoder's weights: its vocabulary
    and special tokens (from its tokenizer), its layer sizes, activation, post-norm layout and attention biases, and
    a timing signal the size of its centred learned position vectors."""
    from transformers import AutoTokenizer

    from .pretrained_encoder import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder(encoder_path))
    special = {
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
        "separator_token_id": tokenizer.mask_token_id,
        "paragraph_separator_token_id": tokenizer.sep_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    missing = [name for name, value in special.items() if value is None]
    if missing:
        raise ValueError(f"the encoder's tokenizer needs [CLS], [SEP], [MASK] and [PAD] tokens; it lacks {missing}")
    settings = encoder.config
    positions = learned_positions(encoder).detach().float()
    signal = timing_signal(torch.arange(positions.shape[0]), settings.hidden_size)
    scale = (positions - positions.mean(dim=0)).pow(2).mean().sqrt() / signal.pow(2).mean().sqrt()
    return {
        **special,
        "decoder_init": "encoder",
        "embedding_size": settings.hidden_size,
        "hidden_size": settings.hidden_size,
        "num_attention_heads": settings.num_attention_heads,
        "intermediate_size": settings.intermediate_size,
        "expert_intermediate_size": settings.intermediate_size,
        "hidden_act": settings.hidden_act,
        "layer_norm_eps": settings.layer_norm_eps,
        "hidden_dropout": settings.hidden_dropout_prob,
        "layer_norm_position": "post",
        "attention_bias": True,
        "scale_embedding": False,
        "timing_signal_scale": round(scale.item(), 6),
    }


def learned_positions(encoder: PreTrainedModel) -> torch.Tensor:
    """A BERT-style encoder's learned position vectors, without the ones RoBERTa reserves below its padding index."""
    return encoder.embeddings.position_embeddings.weight[position_offset(encoder.config) :]


def encoder_mismatches(encoder: PreTrainedModel, config: WikiSumConfig) -> list[str]:
    """What keeps `config`'s decoder from taking over `encoder`'s weights (empty: nothing)."""
    settings = encoder.config
    expected = {
        "hidden_size": settings.hidden_size,
        "embedding_size": settings.hidden_size,
        "num_attention_heads": settings.num_attention_heads,
        "intermediate_size": settings.intermediate_size,
        "hidden_act": settings.hidden_act,
        "layer_norm_position": "post",
        "attention_bias": True,
    }
    if config.moe_layers:
        expected["expert_intermediate_size"] = settings.intermediate_size
    problems = [
        f"{name}={getattr(config, name)!r} (the encoder's: {value!r})"
        for name, value in expected.items()
        if getattr(config, name) != value
    ]
    learned = learned_positions(encoder).shape[0]
    if config.position_embeddings == "learned" and config.max_position_embeddings > learned:
        problems.append(f"max_position_embeddings={config.max_position_embeddings} (the encoder learned {learned})")
    layer_map = config.encoder_layer_map
    if layer_map is None or any(not 0 <= index < settings.num_hidden_layers for index in layer_map):
        layers = settings.num_hidden_layers
        problems.append(f"encoder_layer_map={layer_map!r} must name one of the {layers} layers each")
    return problems


# generate() settings that must be whole numbers: a float or a string ends deep inside transformers or torch
INTEGER_GENERATION_SETTINGS = (
    "max_new_tokens",
    "min_new_tokens",
    "max_length",
    "min_length",
    "num_beams",
    "num_return_sequences",
    "no_repeat_ngram_size",
)


@torch.no_grad()
def start_compression_as_averages(attention: "WikiSumAttention", stride: int) -> None:
    """A compressed layer's start: its key and value convolutions the average over each stride (a slot is the mean
    key and mean value of its positions, so attention to a slot first behaves like attention to the group's average),
    and the always-visible null slot zero (score 0, contributes nothing)."""
    identity = torch.eye(attention.key_compression.weight.shape[0])
    for convolution in (attention.key_compression, attention.value_compression):
        convolution.weight.copy_(identity[:, :, None].expand(-1, -1, stride) / stride)
        convolution.bias.zero_()
    attention.null_slot.key.zero_()
    attention.null_slot.value.zero_()


def is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class WikiSumForCausalLM(WikiSumPreTrainedModel, LengthPenaltyTypeMixin, GenerationMixin):
    """The decoder with its language-modelling head: hidden states projected to the embedding width and scored
    against the (tied) embedding table."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    reads_multiple_documents = True

    def __init__(self, config: WikiSumConfig):
        super().__init__(config)
        self.model = WikiSumModel(config)
        self.output_projection = nn.Linear(config.hidden_size, config.embedding_size, bias=False)
        self.lm_head = nn.Linear(config.embedding_size, config.vocab_size, bias=False)
        self.pointer = PointerGenerator(config.hidden_size) if config.copy_mechanism else None
        self.post_init()

    # The model contract (`SummarizerMixin`) depends on how the decoder started, so it is read from the config.
    # From scratch (`decoder_init="random"`) nothing is pretrained and the decoder trains in full. Started from the
    # encoder (`"encoder"`), `from_encoder` rebuilds the whole decoder from it: the parts with a counterpart in the
    # encoder (word embeddings tied with the output, the embedding LayerNorm, every layer's attention and feed-forward
    # projections and LayerNorms) are pretrained and LoRA adapts the layers' projections; the parts without one are
    # new, trained in full and saved with an adapter: the projections to and from `embedding_size` (identity at the
    # start), the compressed layers' convolutions (stride averages) and null slots (zero), the experts' routers
    # (random) and the copy head (random).

    @property
    def pretrained_modules(self) -> tuple[str, ...]:
        return ("model", "lm_head") if self.config.decoder_init == "encoder" else ()

    @property
    def new_modules(self) -> tuple[str, ...]:
        if self.config.decoder_init != "encoder":
            return ()
        names = ["embed_projection", "output_projection"]
        if "compressed" in self.config.attention_layers:
            names += ["key_compression", "value_compression", "null_slot"]
        if self.config.moe_layers:
            names.append("router")
        if self.pointer is not None:
            names.append("pointer")
        return tuple(names)

    @property
    def lora_layers(self) -> str | None:
        return "model.layers" if self.config.decoder_init == "encoder" else None

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # generate() must not hand us a DynamicCache: the first forward creates a WikiSumCache itself
        return False

    def with_caller_maximum_length(self, generation_config: GenerationConfig | None, kwargs: dict) -> dict:
        """`generate()` keywords with `min_new_tokens` lowered to the caller's `max_new_tokens` where only the saved
        generation config asks for more: a length given at the call wins over a checkpoint's default minimum (a
        minimum the caller gives too is checked as given)."""

        def given(name):
            value = kwargs.get(name)
            return value if value is not None else getattr(generation_config, name, None)

        maximum, saved_minimum = given("max_new_tokens"), self.generation_config.min_new_tokens
        if given("min_new_tokens") is not None or not (is_integer(maximum) and is_integer(saved_minimum)):
            return kwargs
        return {**kwargs, "min_new_tokens": maximum} if saved_minimum > maximum else kwargs

    def check_generation_settings(
        self, prompt_length: int, generation_config: GenerationConfig | None = None, **kwargs
    ) -> None:
        """Raise a one-line ValueError for `generate()` settings that would otherwise fail deep inside transformers
        or torch (`num_beams=0` or `2.5`) or run for hours (`max_new_tokens=10**9`); `generate()` and the `wikisum`
        pipeline call it before any work. `prompt_length` is the length of the input the summary continues;
        `generation_config` and `kwargs` are `generate()`'s, on top of the model's `generation_config`.

        Besides transformers' own checks (`GenerationConfig.validate()`: `max_new_tokens` at least 1, ...), the
        integer settings must be integers, `num_beams` and `num_return_sequences` at least 1, `min_new_tokens`
        between 0 and `max_new_tokens`, `length_penalty_type` one of `LENGTH_PENALTY_TYPES`, and the input plus the
        summary must fit in `config.max_position_embeddings`.
        """
        resolve_length_penalty_type(kwargs.pop("length_penalty_type", None), generation_config, self.generation_config)
        for source in (kwargs, generation_config, self.generation_config):
            for name in INTEGER_GENERATION_SETTINGS:
                value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
                if value is not None and not is_integer(value):
                    raise ValueError(f"{name} must be an integer, got {value!r}")
        # transformers' own merge of the model's defaults, `generation_config` and the keywords, which runs
        # GenerationConfig.validate() (it refuses e.g. max_new_tokens <= 0)
        settings, _ = self._prepare_generation_config(generation_config, **kwargs)
        for name in ("num_beams", "num_return_sequences"):
            value = getattr(settings, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        max_new_tokens, min_new_tokens = settings.max_new_tokens, settings.min_new_tokens
        if min_new_tokens is not None and min_new_tokens < 0:
            raise ValueError(f"min_new_tokens must be at least 0, got {min_new_tokens}")
        if min_new_tokens is not None and max_new_tokens is not None and min_new_tokens > max_new_tokens:
            raise ValueError(f"min_new_tokens ({min_new_tokens}) must not exceed max_new_tokens ({max_new_tokens})")
        limit = self.config.max_position_embeddings
        where = f"the model's limit of {limit} positions (config.max_position_embeddings)"
        if prompt_length >= limit:
            raise ValueError(f"an input of {prompt_length} tokens leaves no room for a summary within {where}")
        if max_new_tokens is not None:
            total = prompt_length + max_new_tokens
            if total > limit:
                raise ValueError(
                    f"{prompt_length} input tokens + max_new_tokens={max_new_tokens} = {total} exceed {where}"
                )
            return
        # as in generate(): without max_new_tokens, an explicit max_length is the total length (the default one is
        # capped at max_position_embeddings by transformers itself)
        explicit_max_length = (
            kwargs.get("max_length") is not None
            or (generation_config is not None and generation_config.max_length is not None)
            or self.generation_config.max_length is not None
        )
        if explicit_max_length and settings.max_length > limit:
            raise ValueError(f"max_length={settings.max_length} exceeds {where}")

    def generate(
        self,
        inputs: torch.Tensor | None = None,
        generation_config: GenerationConfig | None = None,
        length_penalty_type: str | None = None,
        **kwargs,
    ):
        """`GenerationMixin.generate` after `check_generation_settings`: absurd settings raise a one-line ValueError
        before any work instead of failing inside transformers or torch.

        `length_penalty_type` (default: the generation config's `length_penalty_type`, else `"transformers"`) is how
        beam search normalises a finished hypothesis' log-probability: `"transformers"` divides it by
        |Y| ** `length_penalty`, `"gnmt"` by ((5 + |Y|) / 6) ** `length_penalty` (the paper's beam search, alpha
        0.6), |Y| counting the generated tokens and the end token (`generation/length_penalty.py`)."""
        prompt = next(
            (tensor for tensor in (inputs, kwargs.get("input_ids"), kwargs.get("inputs_embeds")) if tensor is not None),
            None,
        )
        kwargs = self.with_caller_maximum_length(generation_config, kwargs)
        # no input: generate() starts from the bos token alone
        self.check_generation_settings(1 if prompt is None else prompt.shape[1], generation_config, **kwargs)
        return super().generate(inputs, generation_config, length_penalty_type=length_penalty_type, **kwargs)

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    @classmethod
    def from_encoder(
        cls, encoder_path: str, config: WikiSumConfig | None = None, **config_kwargs
    ) -> "WikiSumForCausalLM":
        """A new model over a pretrained BERT-style encoder (default: the bundled MiniLM).

        `decoder_init="random"` (the default): the paper's from-scratch decoder, whose word embeddings start from the
        encoder's, reduced to `embedding_size` columns by PCA and rescaled to the initializer's std.

        `decoder_init="encoder"`: the whole decoder starts from the encoder (`copy_encoder`). Without `config`, the
        vocabulary and special tokens come from the encoder's tokenizer ([CLS] begins, [SEP] ends and separates
        paragraphs, [MASK] separates input and summary) and the layer settings from the encoder (hidden, heads,
        feed-forward and expert sizes, activation, post-norm, attention biases, unscaled embeddings);
        `config_kwargs` set the rest (`attention_layers`, ...) and `encoder_layer_map` (default: decoder layer i
        from encoder layer i mod the encoder's depth, so that a decoder deeper than the encoder reuses its stack
        from the bottom again)."""
        encoder = load_pretrained_encoder(encoder_path, add_pooling_layer=False)
        decoder_init = config.decoder_init if config is not None else config_kwargs.get("decoder_init", "random")
        if config is None:
            config_kwargs.setdefault("encoder_name_or_path", portable_encoder_name(encoder_path))
            config_kwargs.setdefault("vocab_size", encoder.config.vocab_size)
            if decoder_init == "encoder":
                config_kwargs = {**encoder_decoder_settings(encoder, encoder_path), **config_kwargs}
                if config_kwargs.get("position_embeddings") == "learned":
                    config_kwargs.setdefault("max_position_embeddings", learned_positions(encoder).shape[0])
                layers = len(config_kwargs.get("attention_layers") or DEFAULT_ATTENTION_LAYERS)
                config_kwargs.setdefault(
                    "encoder_layer_map", [index % encoder.config.num_hidden_layers for index in range(layers)]
                )
            config = WikiSumConfig(**config_kwargs)
        if config.vocab_size != encoder.config.vocab_size:
            raise ValueError(f"the encoder has {encoder.config.vocab_size} tokens but the config {config.vocab_size}")
        model = cls(config)
        if config.decoder_init == "encoder":
            model.copy_encoder(encoder)
            return model
        table = encoder.get_input_embeddings().weight.detach().float()
        centered = table - table.mean(dim=0)
        if config.embedding_size < centered.shape[1]:
            _, _, components = torch.linalg.svd(centered, full_matrices=False)
            reduced = centered @ components[: config.embedding_size].T
        else:
            reduced = F.pad(centered, (0, config.embedding_size - centered.shape[1]))
        reduced = reduced * (config.initializer_range / reduced.std())
        with torch.no_grad():
            model.model.embed_tokens.weight.copy_(reduced)
        return model

    @torch.no_grad()
    def copy_encoder(self, encoder: PreTrainedModel) -> None:
        """Copy a BERT-style encoder (transformers' `BertModel` layout) into this decoder (`decoder_init="encoder"`).

        - Word embeddings (tied with the output as always; the projections to and from `embedding_size` start as the
          identity) plus the position-independent part of BERT's input: segment 0's vector and the mean of the
          learned position vectors. A vector added to every row of the tied table shifts all logits of a position by
          the same amount, so the output distribution is unchanged while the input is BERT's.
        - Positions: the learned table covers 512 positions and WikiSum reads thousands, so by default the varying
          part of the positions is carried by the timing signal, scaled (`timing_signal_scale`, set by
          `from_encoder`) to the size of the centred learned vectors; the copied layers thus see position vectors of
          the size they were trained with, though not the same ones. With `position_embeddings="learned"` the
          decoder's table is the centred learned vectors themselves (at most 512 positions), so its input is BERT's
          exactly. The embedding LayerNorm is the encoder's.
        - Decoder layer i from encoder layer `config.encoder_layer_map[i]`: query, key, value and output
          projections, both LayerNorms (post-norm, as BERT was trained) and the feed-forward block; every expert of
          a mixture-of-experts layer starts as that feed-forward block (sparse upcycling: identical experts give the
          dense layer's output whatever the router picks).
        - Memory-compressed layers: the key and value convolutions start as the average over each stride (a slot is
          the mean key and mean value of its positions, so attention to a slot first behaves like attention to the
          group's average), and the always-visible null slot as zero (score 0, contributes nothing)."""
        config = self.config
        problems = encoder_mismatches(encoder, config)
        if problems:
            raise ValueError(f"decoder_init='encoder' needs the encoder's layer settings: {'; '.join(problems)}")
        embeddings, encoder_layers = encoder.embeddings, encoder.encoder.layer
        positions = learned_positions(encoder)
        offset = positions.mean(dim=0)
        if getattr(embeddings, "token_type_embeddings", None) is not None:
            offset = offset + embeddings.token_type_embeddings.weight[0]
        model = self.model
        model.embed_tokens.weight.copy_(embeddings.word_embeddings.weight + offset)
        if model.embed_positions is not None:
            model.embed_positions.weight.copy_(positions[: config.max_position_embeddings] - positions.mean(dim=0))
        identity = torch.eye(config.hidden_size)
        model.embed_projection.weight.copy_(identity)
        self.output_projection.weight.copy_(identity)
        model.embed_norm.load_state_dict(embeddings.LayerNorm.state_dict())
        for layer, source_index in zip(model.layers, config.encoder_layer_map):
            source = encoder_layers[source_index]
            attention = layer.attention
            for target, origin in (
                (attention.q_proj, source.attention.self.query),
                (attention.k_proj, source.attention.self.key),
                (attention.v_proj, source.attention.self.value),
                (attention.o_proj, source.attention.output.dense),
            ):
                target.load_state_dict(origin.state_dict())
            layer.attention_norm.load_state_dict(source.attention.output.LayerNorm.state_dict())
            layer.feed_forward_norm.load_state_dict(source.output.LayerNorm.state_dict())
            experts = getattr(layer.feed_forward, "experts", [layer.feed_forward])
            for expert in experts:
                expert.up.load_state_dict(source.intermediate.dense.state_dict())
                expert.down.load_state_dict(source.output.dense.state_dict())
            if attention.layer_type == "compressed":
                start_compression_as_averages(attention, config.compression_stride)

    @classmethod
    @torch.no_grad()
    def from_trained_decoder(cls, source: "WikiSumForCausalLM", **layout) -> "WikiSumForCausalLM":
        """A decoder with `source`'s weights under another layout: `layout` replaces config entries (for the T-D /
        T-DMCA / MoE comparison: `attention_layers`, `moe_layers`, `num_experts`, `max_input_tokens`, ...), so that
        the variants start from one trained model. The embeddings, output, copy head and every layer's attention
        projections and LayerNorms are copied by name; a mixture-of-experts layer's experts all start as `source`'s
        feed-forward block of that layer (sparse upcycling, as `copy_encoder` does) with a random router; a compressed
        layer keeps `source`'s convolutions and null slot where `source`'s layer was compressed too, else they start
        as stride averages and zero (`copy_encoder`'s start). A full or local layer has no such parts: `source`'s are
        dropped. Sizes (hidden, heads, vocabulary, depth) must stay `source`'s."""
        unknown = [name for name in layout if not hasattr(source.config, name)]
        if unknown:
            raise ValueError(f"from_trained_decoder: {unknown} are not WikiSumConfig settings")
        fixed = ("hidden_size", "num_attention_heads", "vocab_size", "embedding_size", "copy_mechanism")
        changed = [name for name in fixed if name in layout and layout[name] != getattr(source.config, name)]
        if changed:
            raise ValueError(f"from_trained_decoder keeps the source's sizes; cannot change {changed}")
        layers = layout.get("attention_layers", source.config.attention_layers)
        if len(layers) != len(source.config.attention_layers):
            raise ValueError(
                f"from_trained_decoder keeps the source's depth ({len(source.config.attention_layers)} layers), "
                f"got {len(layers)} attention_layers"
            )
        config = copy.deepcopy(source.config)
        for name, value in layout.items():
            setattr(config, name, value)
        config = type(config)(**config.to_dict())  # re-validated
        model = cls._from_config(config, attn_implementation=source.config._attn_implementation)
        weights, uncopied = source.state_dict(), []
        for name, target in model.state_dict().items():
            origin = name
            if ".feed_forward.experts." in name:  # layers.i.feed_forward.experts.j.up <- layers.i.feed_forward.up
                head, tail = name.split(".experts.")
                origin = f"{head}.{tail.split('.', 1)[1]}"
            if origin in weights and weights[origin].shape == target.shape:
                target.copy_(weights[origin])
            elif not any(part in name for part in (".router.", "_compression.", ".null_slot.")):
                uncopied.append(name)
        if uncopied:
            raise ValueError(f"from_trained_decoder found no weights of the right shape for {uncopied}")
        for layer, source_type in zip(model.model.layers, source.config.attention_layers):
            if layer.attention.layer_type == "compressed" and source_type != "compressed":
                start_compression_as_averages(layer.attention, config.compression_stride)
        return model

    def copy_log_probs(self, input_ids, states, attention_mask, past_length: int, cache, logits_to_keep: int = 0):
        """The copy head's log p(w) [batch, kept positions, vocab] (float32) for positions `past_length` on: from a
        row's first separator on, the mixture p_gen P_copy + (1 - p_gen) P_vocab, its copy attention over the real
        positions before that separator (in this call or cached: `WikiSumCache.copy_memory`); before it, or in a
        row without one, the vocabulary softmax."""
        keys = self.pointer.copy_attention.key(states)
        if cache is not None:
            keys, memory, memory_ids = cache.add_copy_memory(keys, states, input_ids)
        else:
            memory, memory_ids = states, input_ids
        total = memory_ids.shape[1]
        positions = torch.arange(total, device=states.device)
        separator = torch.where(memory_ids == self.config.separator_token_id, positions, total).amin(dim=1)
        valid = attention_mask.bool() if attention_mask is not None else torch.ones_like(memory_ids, dtype=torch.bool)
        source = valid & (positions < separator[:, None])
        has_source = source.any(dim=1)
        query_positions = positions[past_length:]
        if logits_to_keep:
            states, input_ids, query_positions = (
                states[:, -logits_to_keep:],
                input_ids[:, -logits_to_keep:],
                query_positions[-logits_to_keep:],
            )
        copying = (query_positions >= separator[:, None]) & has_source[:, None]
        vocab_logits = self.lm_head(self.output_projection(states))
        # p_gen = sigmoid(-inf) = 0 where nothing is copied: the mixture is then the vocabulary softmax exactly, so
        # the positions before every row's separator (in training, the whole input) skip the copy attention
        copied = copying.any(dim=0)
        first = int(copied.int().argmax()) if bool(copied.any()) else copying.shape[1]
        plain = F.log_softmax(vocab_logits[:, :first].float(), dim=-1)
        if first == copying.shape[1]:
            return plain
        # a row with nothing to copy attends everywhere instead of nowhere (no NaN); its copy weight is 0 below
        attention, switch = self.pointer(
            states[:, first:],
            self.model.embed_projection(self.model.embed_tokens(input_ids[:, first:])),
            memory,
            source | ~has_source[:, None],
            keys=keys,
        )
        mixed = mixture_log_probs(
            vocab_logits[:, first:], attention, switch.masked_fill(~copying[:, first:], -torch.inf), memory_ids
        )
        return torch.cat([plain, mixed], dim=1)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        logits_to_keep: int = 0,
        token_type_ids: torch.LongTensor | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> MoeCausalLMOutputWithPast:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Next-token targets aligned with `input_ids` (the model shifts them); -100 is ignored. The paper's T-D
            trains on every token of ``[input ; separator ; summary]``.
        logits_to_keep (`int`, *optional*, defaults to 0):
            Compute logits for the last `logits_to_keep` positions only (0 = all); `generate()` sets 1.
        token_type_ids (`torch.LongTensor`, *optional*):
            Ignored: segment ids that BERT-style tokenizers return.
        cache (`WikiSumCache`, *optional*):
            `past_key_values` under the name transformers 5.24's `generate()` gives it.
        """
        past_key_values = decoding_cache(past_key_values, cache)
        if use_cache and past_key_values is None:  # made here, so that the copy head reads it without asking the output
            past_key_values = WikiSumCache(self.config)
        # Ignored, since a decoder-only model reads one stream and has no segment embedding; accepted because the
        # bundled WordPiece tokenizer returns segment ids and generate() refuses a keyword that forward() does not
        # name, so that the standard `model.generate(**tokenizer(text, return_tensors="pt"))` works.
        del token_type_ids
        if self.pointer is not None and input_ids is None:
            raise ValueError("the copy head (copy_mechanism) copies token ids: give input_ids, not inputs_embeds")
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_hidden_states=output_hidden_states,
        )
        hidden_states = outputs.last_hidden_state
        if self.pointer is not None:
            # float32 log-probabilities for the loss; the logits come back in the model's dtype, as without the head
            scores = self.copy_log_probs(
                input_ids, hidden_states, attention_mask, past_length, past_key_values, logits_to_keep
            )
            logits = scores.to(hidden_states.dtype)
        else:
            if logits_to_keep:
                hidden_states = hidden_states[:, -logits_to_keep:]
            scores = logits = self.lm_head(self.output_projection(hidden_states))
        loss = None
        if labels is not None:
            if labels.shape != logits.shape[:2]:
                raise ValueError(f"labels must have shape {list(logits.shape[:2])}, got {list(labels.shape)}")
            # on log-probabilities (the copy head's) cross-entropy is their negative log-likelihood
            loss = F.cross_entropy(
                scores[:, :-1].reshape(-1, scores.shape[-1]).float(), labels[:, 1:].reshape(-1), ignore_index=-100
            )
            if outputs.aux_loss is not None:
                loss = loss + self.config.router_aux_loss_coef * outputs.aux_loss
        return MoeCausalLMOutputWithPast(
            loss=loss,
            aux_loss=outputs.aux_loss,
            logits=logits,
            past_key_values=past_key_values if use_cache else None,
            hidden_states=outputs.hidden_states,
        )


__all__ = [
    "WikiSumCache",
    "WikiSumForCausalLM",
    "WikiSumModel",
    "WikiSumModelOutput",
    "WikiSumPreTrainedModel",
    "timing_signal",
]
