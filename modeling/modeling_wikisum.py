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

This file holds the model family (the decoder stack, the language-modelling and copy heads); its parts live beside
it: `wikisum_attention.py` (the three attention types), `wikisum_feed_forward.py` (dense and mixture-of-experts
blocks), `wikisum_positions.py` (timing signal), `wikisum_cache.py`, `wikisum_from_encoder.py` (starting from a
pretrained encoder) and `wikisum_generation.py` (`generate()`'s settings checked first).
"""

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.conversion_mapping import register_checkpoint_conversion_mapping
from transformers.core_model_loading import WeightRenaming
from transformers.modeling_outputs import BaseModelOutputWithPast, MoeCausalLMOutputWithPast

from ..configuration.configuration_wikisum import DEFAULT_ATTENTION_LAYERS, WikiSumConfig
from ..generation.length_penalty import LengthPenaltyTypeMixin
from .attention_patterns import BlockLocalCausalPattern, MemoryCompressedCausalPattern
from .bert_blocks import init_bert_style_weights
from .pointer_generator import PointerGenerator, mixture_log_probs
from .pretrained_encoder import load_pretrained_encoder, portable_encoder_name
from .summarizer_mixin import SummarizerMixin, decoding_cache
from .wikisum_attention import AttentionContext, WikiSumAttention, WikiSumNullSlot
from .wikisum_cache import WikiSumCache
from .wikisum_feed_forward import WikiSumFeedForward, WikiSumMixtureOfExperts
from .wikisum_from_encoder import copy_encoder_weights, encoder_decoder_settings, reduced_word_table
from .wikisum_generation import CheckedGenerationMixin
from .wikisum_positions import learned_positions, timing_signal

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
    dense_attention_layers = "decoding steps that continue from a cache"
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


class WikiSumForCausalLM(WikiSumPreTrainedModel, CheckedGenerationMixin, LengthPenaltyTypeMixin, GenerationMixin):
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

    @property
    def padding_alignment(self) -> int:
        """Left padding under which a row's outputs are its own alone: local blocks and compressed slots are counted
        from position 0, so padding that is not a whole number of blocks and slots moves them (full layers: any)."""
        sizes = {"local": self.config.local_block_size, "compressed": self.config.compression_stride}
        return math.lcm(*(sizes.get(layer_type, 1) for layer_type in self.config.attention_layers))

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # generate() must not hand us a DynamicCache: the first forward creates a WikiSumCache itself
        return False

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

        `decoder_init="encoder"`: the whole decoder starts from the encoder (`copy_encoder_weights`). Without
        `config`, the vocabulary and special tokens come from the encoder's tokenizer ([CLS] begins, [SEP] ends and
        separates paragraphs, [MASK] separates input and summary) and the layer settings from the encoder (hidden,
        heads, feed-forward and expert sizes, activation, post-norm, attention biases, unscaled embeddings);
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
            copy_encoder_weights(model, encoder)
            return model
        with torch.no_grad():
            model.model.embed_tokens.weight.copy_(reduced_word_table(encoder, config))
        return model

    @classmethod
    @torch.no_grad()
    def from_trained_decoder(cls, source: "WikiSumForCausalLM", **layout) -> "WikiSumForCausalLM":
        """A decoder with `source`'s weights under another layout: `layout` replaces config entries (for the T-D /
        T-DMCA / MoE comparison: `attention_layers`, `moe_layers`, `num_experts`, `max_input_tokens`, ...), so that
        the variants start from one trained model. The embeddings, output, copy head and every layer's attention
        projections and LayerNorms are copied by name; a mixture-of-experts layer's experts all start as `source`'s
        feed-forward block of that layer (sparse upcycling, as `copy_encoder_weights` does) with a random router; a
        compressed layer keeps `source`'s convolutions and null slot where `source`'s layer was compressed too, else
        they start as stride averages and zero (`start_compression_as_averages`). A full or local layer has no such
        parts: `source`'s are dropped. Sizes (hidden, heads, vocabulary, depth) must stay `source`'s."""
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
        config = type(config).from_dict(config.to_dict())  # re-validated (a saved config's keys, as when loading)
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
                layer.attention.start_compression_as_averages()
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

