"""What the encoder-decoders' attention layers share (BertSumAbs and its family, the CopyTransformer): the eager
reference attention in the form transformers' `ALL_ATTENTION_FUNCTIONS` calls, and the keys and values of a decoder
attention read through an `EncoderDecoderCache` (self-attention appends, cross-attention projects the encoder states
once per generation)."""

import torch
from torch import nn

from .attention import eager_attention as reference_attention


def eager_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """`attention.eager_attention`, the reference, in transformers' attention-function form (what
    `ALL_ATTENTION_FUNCTIONS.get_interface` falls back to): `attention_mask` additive (0 / very negative), the output
    [batch, queries, heads, head_dim]."""
    output, weights = reference_attention(query, key, value, scaling, bias=attention_mask, dropout_p=dropout)
    return output.transpose(1, 2).contiguous(), weights


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
