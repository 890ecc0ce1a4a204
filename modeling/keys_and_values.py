"""The per-head keys and values of the encoder-decoders' attention layers (BertSumAbs and its family, the
CopyTransformer), read through an `EncoderDecoderCache`: self-attention appends, cross-attention projects the encoder
states once per generation."""

import torch
from torch import nn


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


__all__ = ["cached_keys_and_values", "split_heads"]
