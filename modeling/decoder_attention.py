"""What the encoder-decoders' attention layers share (BertSumAbs and its family, the CopyTransformer): the eager
reference attention handed to transformers' `ALL_ATTENTION_FUNCTIONS`, and the keys and values of a decoder
attention read through an `EncoderDecoderCache` (self-attention appends, cross-attention projects the encoder states
once per generation)."""

import torch
from torch import nn
from torch.nn import functional as F


def eager_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """The reference attention: softmax(q k^T * scaling + mask) v, with `attention_mask` additive (0 / -inf)."""
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = F.dropout(torch.softmax(weights, dim=-1), p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def split_heads(states: torch.Tensor, num_heads: int) -> torch.Tensor:
    """[..., length, heads * head_dim] -> [..., heads, length, head_dim]."""
    return states.view(*states.shape[:-1], num_heads, -1).transpose(1, 2)


def cached_keys_and_values(module, key: nn.Module, value: nn.Module, context: torch.Tensor, cache):
    """The per-head keys and values of `context` for `module` (an attention layer with `layer_idx`,
    `is_cross_attention` and `num_heads`) through `key` and `value`: all of them with the cache, once projected."""
    if cache is not None and module.is_cross_attention and cache.is_updated.get(module.layer_idx):
        layer = cache.cross_attention_cache.layers[module.layer_idx]
        return layer.keys, layer.values
    keys, values = split_heads(key(context), module.num_heads), split_heads(value(context), module.num_heads)
    if cache is None:
        return keys, values
    if not module.is_cross_attention:
        return cache.self_attention_cache.update(keys, values, module.layer_idx)
    cache.is_updated[module.layer_idx] = True
    return cache.cross_attention_cache.update(keys, values, module.layer_idx)


__all__ = ["cached_keys_and_values", "eager_attention", "split_heads"]
