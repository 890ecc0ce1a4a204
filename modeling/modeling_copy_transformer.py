"""The CopyTransformer (Aksenov et al. 2020, "Abstractive Text Summarization based on Language Model Conditioning and
Locality Modeling"): a Transformer encoder-decoder (pre-LayerNorm, as the OpenNMT Transformer the paper builds on)
with a pointer-generator head (See et al. 2017).

- Encoder: word embeddings (scaled by sqrt(d_model)) plus sinusoidal or learned positions, `encoder_layers` layers of
  self-attention and feed-forward, a final LayerNorm. With `convolution`, the lowest `convolution_layers` layers
  attend within a convolutional neighbourhood (`modeling.convolutional_attention.ConvolutionalPattern`, built once per
  forward and shared by those layers) through the same pre-LayerNorm layers and projections.
- BERT conditioning (`encoder_input`): the frozen BERT's windowed features (`modeling.windowed_encoder`) replace the
  word embeddings ("bert_windowed", stacking) or are concatenated with the output of the lowest
  `concat_after_layers` encoder layers and projected, the layers above running over the result ("bert_concat");
  `decoder_embeddings="bert"` reads the decoder inputs through BERT's word embeddings, projected and scaled by
  sqrt(d_model) as the model's own table is (unscaled, they were a thirtieth of the positions' norm at
  initialisation); `decoder_embeddings="bert_embedding_layer"` is the original code's decoder input exactly: BERT's
  whole embedding layer (word, position and token-type embeddings, LayerNorm) through a linear layer, neither
  scaled nor given the decoder's own positions. The frozen BERT lives at
  `encoder.bert.encoder`; `save_pretrained` leaves it out and `from_pretrained` reloads it from
  `config.bert_name_or_path` (as `from_encoder` loads it), and `forward(bert_features=...)` takes cached features.
- Word embeddings: a vocabulary x d_model table, or with `word_embedding_size` a narrower table and a linear map to
  d_model (ALBERT's factorization; the tied output layer reads the same product).
- Decoder: the same word embeddings (one vocabulary), positions, `decoder_layers` layers of causal self-attention
  (KV cache), cross-attention and feed-forward, a final LayerNorm; P_vocab = softmax(lm_head(h_t)), the output layer
  tied to the decoder's word embeddings unless `tie_word_embeddings=False` (BERT's projected ones with
  BERT-conditioned decoder, a factorized table's product: `ProjectedEmbeddingsOutput`).
- Pointer: a copy attention of its own (one head, as OpenNMT's copy generator reads one, but with parameters apart
  from the decoder's cross-attention) over the encoder states gives a_t over the source positions and the context
  c_t = sum_i a_ti e_i; p_gen = sigmoid(w [h_t; c_t; x_t] + b), x_t the decoder input's embedding.
- Output: p(w) = p_gen P_copy(w) + (1 - p_gen) P_vocab(w), P_copy(w) the copy attention summed over the source
  positions holding w (scatter-add over `source_extended_ids`), over the vocabulary extended by the source's unknown
  words. p_gen is the probability of copying (the paper's formula; See et al. call the complement p_gen).
  `copy_mechanism=False` drops the pointer: the plain Transformer baseline, p(w) = P_vocab(w).

`logits` are log p(w). transformers' beam search takes the log_softmax of the logits, which leaves normalized
log-probabilities as they are, and greedy search their argmax, so `generate()` decodes the mixture. A generated id past
the vocabulary is a copied unknown word: the next step reads it as `[UNK]`, the processor's `decode` writes the word.
The loss is the label-smoothed negative log-likelihood of the mixture (see `CopyTransformerConfig.label_smoothing`).
"""

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig, AutoModel, GenerationConfig, GenerationMixin, LogitsProcessorList, PreTrainedModel
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from ..configuration.configuration_copy_transformer import CopyTransformerConfig
from ..generation.coverage_penalty import CoveragePenaltyLogitsProcessor
from .attention import attention_forward
from .bert_blocks import init_bert_style_weights
from .convolutional_attention import ConvolutionalPattern
from .keys_and_values import cached_keys_and_values, split_heads
from .pointer_generator import PointerGenerator, extended_vocabulary_size, mixture_log_probs
from .pretrained_encoder import encoder_attention, load_pretrained_encoder, portable_encoder_name, resolve_encoder
from .summarizer_mixin import GENERATE_CACHE_KEYWORD, SummarizerMixin, decoding_cache
from .windowed_encoder import WindowedEncoder


def sinusoidal_positions(positions: torch.Tensor, channels: int) -> torch.Tensor:
    """Vaswani et al.'s encodings, [n] positions -> [n, channels]: PE(p, 2i) = sin(p / 10000^(2i / channels)),
    PE(p, 2i + 1) = cos(p / 10000^(2i / channels))."""
    frequencies = torch.exp(
        torch.arange(0, channels, 2, dtype=torch.float32, device=positions.device) * (-math.log(10000.0) / channels)
    )
    angles = positions.to(torch.float32)[:, None] * frequencies
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)


def shift_labels_right(labels: torch.LongTensor, config: CopyTransformerConfig) -> torch.LongTensor:
    """The decoder inputs of `labels`: the begin token, then the labels but the last (-100 read as padding)."""
    start = torch.full_like(labels[:, :1], config.decoder_start_token_id)
    return torch.cat([start, labels[:, :-1].masked_fill(labels[:, :-1] == -100, config.pad_token_id)], 1)


# ----------------------------------------------------------------------------------------------------------------
# Cache and outputs
# ----------------------------------------------------------------------------------------------------------------


class CopyTransformerCache(EncoderDecoderCache):
    """transformers' `EncoderDecoderCache` (the decoder's self-attention keys and values; the cross-attention's,
    projected from the encoder states once) plus the pointer's per-row state: the copy attention's keys (projected
    once) and the copy attention of every decoded position, `copy_attention` [rows, positions, source tokens], which the
    coverage penalty reads. Beam search reorders it all together."""

    def __init__(self, *caches):
        super().__init__(*(caches or (DynamicCache(), DynamicCache())))
        self.copy_keys = None
        self.copy_attention = None

    def add_copy_attention(self, attention: torch.Tensor) -> None:
        previous = self.copy_attention
        self.copy_attention = attention if previous is None else torch.cat([previous, attention], dim=1)

    def _map_rows(self, function) -> None:
        if self.copy_keys is not None:
            self.copy_keys = function(self.copy_keys)
        if self.copy_attention is not None:
            self.copy_attention = function(self.copy_attention)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        # beam search moves a row only among the beams of its document, which share its encoder states: the
        # cross-attention's keys and values and the copy keys stay (reordering them was a quarter of CPU decoding
        # at 2,048 source tokens); the decoded positions' keys, values and copy attention move with their beams
        self.self_attention_cache.reorder_cache(beam_idx)
        if self.copy_attention is not None:
            self.copy_attention = self.copy_attention.index_select(0, beam_idx.to(self.copy_attention.device))

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        self._map_rows(lambda rows: rows.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        self._map_rows(lambda rows: rows[indices])

    def crop(self, max_length: int) -> None:
        super().crop(max_length)
        if self.copy_attention is not None:
            self.copy_attention = self.copy_attention[:, : self.get_seq_length()]

    def reset(self) -> None:
        super().reset()
        self.copy_keys = self.copy_attention = None


@dataclass
class CopyTransformerOutput(Seq2SeqLMOutput):
    r"""
    logits (`torch.FloatTensor` of shape `(batch_size, target_length, vocab_size + unknown source words)`):
        log p(w) of the mixture (normalized log-probabilities, not unnormalized scores).
    p_gen (`torch.FloatTensor` of shape `(batch_size, target_length)`):
        The probability of copying at each position (None without the copy mechanism).
    copy_attentions (`torch.FloatTensor` of shape `(batch_size, target_length, source_length)`):
        The copy attention (float32), P_copy before it is scattered onto word ids (None without the copy mechanism).
    """

    p_gen: torch.FloatTensor | None = None
    copy_attentions: torch.FloatTensor | None = None


def bert_config(config: CopyTransformerConfig):
    """The frozen BERT's config: `config.bert_config`, read from `bert_name_or_path` (and kept) when missing."""
    if config.bert_config is None:
        config.bert_config = AutoConfig.from_pretrained(resolve_encoder(config.bert_name_or_path))
        config.bert_config.name_or_path = ""  # a local path would leak into exported repos
    bert = config.bert_config
    if bert.vocab_size != config.vocab_size:
        raise ValueError(
            f"the BERT's vocabulary ({bert.vocab_size}) must be the model's ({config.vocab_size}): the same ids feed "
            "both"
        )
    return bert


# ----------------------------------------------------------------------------------------------------------------
# Layers
# ----------------------------------------------------------------------------------------------------------------


class PositionEmbedding(nn.Module):
    """Sinusoidal encodings (any length) or a learned table of `max_positions` rows."""

    def __init__(self, config: CopyTransformerConfig, max_positions: int, what: str):
        super().__init__()
        self.channels = config.d_model
        self.max_positions = max_positions
        self.what = what
        self.learned = config.position_embedding_type == "learned"
        if self.learned:
            self.table = nn.Embedding(max_positions, config.d_model)

    def forward(self, start: int, length: int, device: torch.device) -> torch.Tensor:
        if self.learned and start + length > self.max_positions:
            raise ValueError(f"{self.what} of {start + length} tokens is longer than the model's {self.max_positions}")
        positions = torch.arange(start, start + length, device=device)
        if self.learned:
            return self.table(positions)
        return sinusoidal_positions(positions, self.channels)


class CopyTransformerAttention(nn.Module):
    """Multi-head attention through transformers' attention functions (`eager` the reference). Decoder
    self-attention appends its keys to the cache; cross-attention projects the encoder states once per generation."""

    def __init__(self, config: CopyTransformerConfig, layer_idx: int, is_causal=False, is_cross_attention=False):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.is_causal = is_causal  # read by transformers' sdpa attention when no mask is given
        self.is_cross_attention = is_cross_attention
        self.num_heads = config.attention_heads
        self.head_dim = config.d_model // config.attention_heads
        self.q_proj = nn.Linear(config.d_model, config.d_model)
        self.k_proj = nn.Linear(config.d_model, config.d_model)
        self.v_proj = nn.Linear(config.d_model, config.d_model)
        self.out_proj = nn.Linear(config.d_model, config.d_model)

    def forward(self, states, context, mask, cache=None, pattern: ConvolutionalPattern | None = None) -> torch.Tensor:
        if pattern is not None:
            return self._pattern_attention(states, pattern)
        keys, values = cached_keys_and_values(self, self.k_proj, self.v_proj, context, cache)
        attended, _ = attention_forward(
            self,
            split_heads(self.q_proj(states), self.num_heads),
            keys,
            values,
            mask,
            dropout=self.config.attention_dropout if self.training else 0.0,
            scaling=self.head_dim**-0.5,
        )
        return self.out_proj(attended.reshape(*states.shape[:-1], -1))

    def _pattern_attention(self, states, pattern: ConvolutionalPattern) -> torch.Tensor:
        """Self-attention restricted to `pattern`, on the model's back end ("blocked", the default, has memory linear
        in the length: documents read through windowed BERT are long)."""
        attended = pattern.attend(
            self, self.q_proj(states), self.k_proj(states), self.v_proj(states), self.num_heads,
            self.head_dim**-0.5, self.config.attention_dropout if self.training else 0.0,
        )
        return self.out_proj(attended)


class FeedForward(nn.Module):
    def __init__(self, config: CopyTransformerConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.ffn_dim)
        self.fc2 = nn.Linear(config.ffn_dim, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(states))))


class EncoderLayer(GradientCheckpointingLayer):
    """x + SelfAtt(LN(x)), then x + FF(LN(x)) (pre-LayerNorm); SelfAtt within `pattern` when one is given."""

    def __init__(self, config: CopyTransformerConfig, layer_idx: int):
        super().__init__()
        self.self_attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.self_attention = CopyTransformerAttention(config, layer_idx)
        self.feed_forward_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, states, mask, pattern=None):
        normed = self.self_attention_norm(states)
        states = states + self.dropout(self.self_attention(normed, normed, mask, pattern=pattern))
        return states + self.dropout(self.feed_forward(self.feed_forward_norm(states)))


class DecoderLayer(GradientCheckpointingLayer):
    """Causal self-attention, cross-attention to the encoder states, feed-forward, each pre-LayerNorm."""

    def __init__(self, config: CopyTransformerConfig, layer_idx: int):
        super().__init__()
        self.self_attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.self_attention = CopyTransformerAttention(config, layer_idx, is_causal=True)
        self.cross_attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.cross_attention = CopyTransformerAttention(config, layer_idx, is_cross_attention=True)
        self.feed_forward_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, states, self_mask, encoder_states, cross_mask, cache=None):
        normed = self.self_attention_norm(states)
        states = states + self.dropout(self.self_attention(normed, normed, self_mask, cache))
        normed = self.cross_attention_norm(states)
        states = states + self.dropout(self.cross_attention(normed, encoder_states, cross_mask, cache))
        return states + self.dropout(self.feed_forward(self.feed_forward_norm(states)))


class CopyTransformerEncoder(nn.Module):
    """What `encoder_input` says feeds it (the model's word embeddings, which the decoder reads too, or the windowed
    BERT features) plus positions, the encoder layers (the lowest `convolution_layers` convolutional with
    `convolution`), a final LayerNorm; with "bert_concat" the states after the lowest `concat_after_layers` layers
    (the paper's: after the convolutional layer) concatenated with the BERT features and projected back to `d_model`,
    the layers above over the result (with `concat_after_layers=encoder_layers`, the normed output concatenated and
    projected, no layer above)."""

    main_input_name = "input_ids"  # what generate() feeds the encoder

    def __init__(self, config: CopyTransformerConfig):
        super().__init__()
        self.config = config
        # the stacked BERT variant with BERT's embeddings in the decoder reads no tokens of its own
        if not (config.encoder_input == "bert_windowed" and config.decoder_reads_bert):
            width = config.word_embedding_size or config.d_model
            self.embed_tokens = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
            if config.word_embedding_size is not None:
                self.embed_projection = WordEmbeddingProjection(width, config.d_model, bias=False)
        self.embed_scale = math.sqrt(config.d_model)
        self.positions = PositionEmbedding(config, config.max_source_positions, "a document")
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(EncoderLayer(config, index) for index in range(config.encoder_layers))
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        if config.uses_bert:
            # the model's attention choice reaches the frozen BERT too (as from_pretrained's attn_implementation)
            bert_attention = encoder_attention(bert_config(config), config._attn_implementation, "the frozen BERT")
            self.bert = WindowedEncoder(
                config.d_model,
                AutoModel.from_config(bert_config(config), add_pooling_layer=False, attn_implementation=bert_attention),
                window=config.bert_window,
                stride=config.bert_stride,
                cls_token_id=config.cls_token_id,
                sep_token_id=config.sep_token_id,
            )
        if config.encoder_input == "bert_concat":
            self.concat_projection = nn.Linear(2 * config.d_model, config.d_model)

    def embed(self, token_ids: torch.LongTensor) -> torch.Tensor:
        """Word embeddings scaled by sqrt(d_model); ids past the vocabulary (copied unknown words) read as [UNK]."""
        token_ids = token_ids.masked_fill(token_ids >= self.config.vocab_size, self.config.unk_token_id)
        embeddings = self.embed_tokens(token_ids)
        if self.config.word_embedding_size is not None:
            embeddings = self.embed_projection(embeddings)
        return embeddings * self.embed_scale

    def convolutional_pattern(self, attention_mask, shape, device) -> ConvolutionalPattern | None:
        """The convolutional layers' pattern over this batch (built once, shared by them), None without one."""
        config = self.config
        if config.convolution == "none":
            return None
        if attention_mask is None:
            attention_mask = torch.ones(shape, dtype=torch.bool, device=device)
        return ConvolutionalPattern(
            attention_mask, config.convolution, config.convolution_window, config.attention_heads,
            config.convolution_head_window,
        )

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        bert_features: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ) -> BaseModelOutput:
        """The encoder states (`output_hidden_states`: also the input of every layer); a ModelOutput always.
        `bert_features` [batch, tokens, 4 * BERT hidden]: `encoder.bert.frozen_features` computed beforehand (cached
        for training), used instead of running BERT."""
        if output_attentions:
            raise ValueError("the CopyTransformer encoder does not return attention weights")
        if input_ids is not None and input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape [batch, tokens], got {list(input_ids.shape)}")
        if bert_features is not None and not self.config.uses_bert:
            raise ValueError(f"bert_features need a BERT encoder input, not {self.config.encoder_input!r}")
        if input_ids is None and (bert_features is None or self.config.encoder_input != "bert_windowed"):
            raise ValueError("give `input_ids` (with encoder_input='bert_windowed', `bert_features` suffice)")
        shape = input_ids.shape if input_ids is not None else bert_features.shape[:2]
        if bert_features is not None and (bert_features.dim() != 3 or bert_features.shape[:2] != shape):
            raise ValueError(
                f"bert_features of shape {list(bert_features.shape)} must be [batch, tokens, features] over the "
                f"source {list(shape)}"
            )
        bert_states = None
        if self.config.uses_bert:
            if bert_features is None:
                bert_states = self.bert(input_ids, attention_mask)
            else:
                bert_states = self.bert(features=bert_features)
        embeddings = bert_states if self.config.encoder_input == "bert_windowed" else self.embed(input_ids)
        device = embeddings.device
        states = self.dropout(embeddings + self.positions(0, shape[1], device).to(embeddings.dtype))
        mask = create_bidirectional_mask(config=self.config, inputs_embeds=states, attention_mask=attention_mask)
        pattern = self.convolutional_pattern(attention_mask, shape, device)
        concat_at = self.config.concat_after_layers if self.config.encoder_input == "bert_concat" else None
        hidden_states = []
        for index, layer in enumerate(self.layers):
            if index == concat_at:
                states = self.concat_projection(torch.cat([states, bert_states.to(states.dtype)], dim=-1))
            hidden_states.append(states)
            states = layer(states, mask, pattern if index < self.config.convolution_layers else None)
        states = self.norm(states)
        if concat_at == len(self.layers):
            states = self.concat_projection(torch.cat([states, bert_states.to(states.dtype)], dim=-1))
        hidden_states.append(states)
        return BaseModelOutput(
            last_hidden_state=states, hidden_states=tuple(hidden_states) if output_hidden_states else None
        )


class CopyTransformerDecoder(nn.Module):
    """Positions over the (scaled) word embeddings of the decoder inputs (with `decoder_embeddings=
    "bert_embedding_layer"` the inputs as they come: BERT's embedding layer gave them positions), the decoder
    layers, a final LayerNorm."""

    def __init__(self, config: CopyTransformerConfig):
        super().__init__()
        self.config = config
        bert_layer = config.decoder_embeddings == "bert_embedding_layer"
        self.positions = None if bert_layer else PositionEmbedding(config, config.max_target_positions, "a summary")
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(DecoderLayer(config, index) for index in range(config.decoder_layers))
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        if bert_layer and config.max_target_positions > bert_config(config).max_position_embeddings:
            raise ValueError(
                f"max_target_positions={config.max_target_positions} exceeds the BERT's "
                f"max_position_embeddings={bert_config(config).max_position_embeddings}: "
                'decoder_embeddings="bert_embedding_layer" reads the summary at BERT\'s positions'
            )
        if bert_layer or (config.decoder_embeddings == "bert" and bert_config(config).hidden_size != config.d_model):
            # BERT's embeddings stay frozen; this projection to d_model trains (the original's at every width)
            self.bert_embedding_projection = nn.Linear(bert_config(config).hidden_size, config.d_model)

    def forward(self, embeddings, attention_mask, encoder_states, encoder_mask, cache=None) -> torch.Tensor:
        past = cache.get_seq_length() if cache is not None else 0
        if self.positions is None:  # as the original: no positions, scaling or dropout of the decoder's own
            states = embeddings
        else:
            positions = self.positions(past, embeddings.shape[1], embeddings.device).to(embeddings.dtype)
            states = self.dropout(embeddings + positions)
        # the cache by position: transformers 5.24 renamed this argument from `past_key_values` to `cache`
        self_mask = create_causal_mask(
            self.config, states, attention_mask, cache.self_attention_cache if cache is not None else None
        )
        cross_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=states, attention_mask=encoder_mask, encoder_hidden_states=encoder_states
        )
        for layer in self.layers:
            states = layer(states, self_mask, encoder_states, cross_mask, cache)
        return self.norm(states)


class WordEmbeddingProjection(nn.Linear):
    """The map from a factorized word table (`word_embedding_size`) to `d_model`. Initialised with std
    1/sqrt(in_features) rather than the model's 0.02, so that the projected embeddings start at the 0.02 scale of an
    unfactorized table."""


class ProjectedEmbeddingsOutput(nn.Module):
    """The output layer tied to word embeddings that reach `d_model` through a projection, P e_w + c: the
    BERT-conditioned decoder's (e_w BERT's frozen embedding, P and c the decoder's trainable projection) or a
    factorized word table's (e_w a row of the table, P its `WordEmbeddingProjection`, c = 0).
    logits_w = (P^T h) . e_w + b_w: the term h . c is the same for every word, so softmax over the vocabulary drops
    it; the per-word bias b is this layer's only parameter (the untied output layer's bias)."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, states, word_embeddings: torch.Tensor, projection: nn.Linear | None = None) -> torch.Tensor:
        if projection is not None:  # P^T h: back to BERT's width, cheaper than projecting the whole table
            states = states @ projection.weight
        return F.linear(states, word_embeddings, self.bias)


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------


class CopyTransformerPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = CopyTransformerConfig
    base_model_prefix = "copy_transformer"
    # the layers FSDP wraps one by one (training_scripts/accelerate/fsdp.yaml); the tied word embeddings stay in
    # the outer unit with the output layer that shares them
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    attention_backends = ("eager", "sdpa", "blocked")
    dense_attention_layers = "the decoder's attention and the encoder's layers above the convolutional ones"
    accepts_loss_kwargs = False

    @property
    def default_attention(self) -> str | None:
        # convolutional layers: "blocked", whose memory is linear in the length (documents through windowed BERT are
        # long); without them every layer is dense: transformers' choice
        return "blocked" if self.config.convolution != "none" else None

    @torch.no_grad()
    def _init_weights(self, module):
        init_bert_style_weights(module, self.config.init_std)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()
        if isinstance(module, ProjectedEmbeddingsOutput):
            module.bias.zero_()
        if isinstance(module, WordEmbeddingProjection):
            module.weight.normal_(mean=0.0, std=module.in_features**-0.5)


class CopyTransformerForConditionalGeneration(CopyTransformerPreTrainedModel, GenerationMixin):
    """The CopyTransformer, trained from scratch (no pretrained modules, no LoRA). `input_ids` are the document's
    word pieces and `source_extended_ids` the same with each unknown source word under its id past the vocabulary
    (default: `input_ids`, nothing to copy past the vocabulary); the decoder writes `sentence [unused2] sentence ...
    [unused1]` (`labels` hold it without the begin token, unknown source words under their extended ids)."""

    _tied_weights_keys = {"lm_head.weight": "encoder.embed_tokens.weight"}

    # The frozen BERT of the BERT-conditioned variants is left out of checkpoints (see `__init__`) and reloaded.
    _keys_to_ignore_on_load_missing = [r"^encoder\.bert\.encoder\."]

    def __init__(self, config: CopyTransformerConfig):
        super().__init__(config)
        self.encoder = CopyTransformerEncoder(config)
        self.decoder = CopyTransformerDecoder(config)
        self.pointer = PointerGenerator(config.d_model) if config.copy_mechanism else None
        projected_words = config.decoder_reads_bert or config.word_embedding_size is not None
        if projected_words and config.tie_word_embeddings:
            self.lm_head = ProjectedEmbeddingsOutput(config.vocab_size)
            self._tied_weights_keys = {}  # tied through its forward, not by sharing a parameter
        else:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size)
        if config.uses_bert:  # exact keys (transformers matches them so); post_init collects them
            self._keys_to_ignore_on_save = {f"encoder.bert.encoder.{key}" for key in self.frozen_bert.state_dict()}
        self.post_init()
        self.generation_config = self.default_generation_config(config)

    @staticmethod
    def default_generation_config(config: CopyTransformerConfig) -> GenerationConfig:
        """The original's decoding: beam 4, at least 55 and at most 100 summary tokens (transformers counts the begin
        token in min_length and max_length), length penalty 0.9 (transformers divides a beam's score by
        length^0.9, OpenNMT's "wu" penalty that the original used with alpha 0.9 by ((5 + length) / 6)^0.9)."""
        return GenerationConfig(
            decoder_start_token_id=config.decoder_start_token_id,
            bos_token_id=config.decoder_start_token_id,
            eos_token_id=config.eos_token_id,
            pad_token_id=config.pad_token_id,
            num_beams=4,
            min_length=min(56, config.max_target_positions),
            max_length=min(101, config.max_target_positions),
            length_penalty=0.9,
            early_stopping=True,
        )

    @property
    def frozen_bert(self) -> nn.Module | None:
        """The frozen BERT of the BERT-conditioned variants (None without one)."""
        return self.encoder.bert.encoder if self.config.uses_bert else None

    def load_bert(self, name_or_path: str | None) -> None:
        """Load the frozen BERT's weights from `name_or_path` (see `load_pretrained_encoder`) and keep it frozen."""
        bert = load_pretrained_encoder(name_or_path, add_pooling_layer=False)
        self.frozen_bert.load_state_dict(bert.state_dict())
        self.frozen_bert.requires_grad_(False)

    @classmethod
    def from_encoder(cls, encoder_path: str, config: CopyTransformerConfig | None = None, **config_kwargs):
        """A BERT-conditioned CopyTransformer whose frozen BERT is the pretrained encoder at `encoder_path` (the rest
        new). Without `config`, one is made from `config_kwargs` (`encoder_input` defaulting to "bert_windowed") and
        the encoder's settings."""
        if config is None:
            bert = AutoConfig.from_pretrained(resolve_encoder(encoder_path))
            config_kwargs.setdefault("encoder_input", "bert_windowed")
            config_kwargs.setdefault("encoder_name_or_path", portable_encoder_name(encoder_path))
            config_kwargs.update(bert_name_or_path=portable_encoder_name(encoder_path), bert_config=bert)
            config = cls.config_class(**config_kwargs)
        if not config.uses_bert:
            raise ValueError("from_encoder builds the BERT-conditioned variants: set encoder_input to a 'bert_*' value")
        model = cls(config)
        model.load_bert(encoder_path)
        return model

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """`PreTrainedModel.from_pretrained`, then the frozen BERT (which checkpoints leave out) from
        `config.bert_name_or_path`."""
        model = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if model.config.uses_bert:
            model.load_bert(model.config.bert_name_or_path)
        return model

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # generate() must not hand us a plain EncoderDecoderCache: the first forward creates a CopyTransformerCache
        return False

    def get_encoder(self):
        return self.encoder

    def get_decoder(self):
        return self.decoder

    def get_input_embeddings(self):
        if not hasattr(self.encoder, "embed_tokens"):  # the stacked variant with the BERT-conditioned decoder
            return self.frozen_bert.get_input_embeddings()
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value):
        if not hasattr(self.encoder, "embed_tokens"):  # the table get_input_embeddings gives: the frozen BERT's
            self.frozen_bert.set_input_embeddings(value)
        else:
            self.encoder.embed_tokens = value

    def get_output_embeddings(self):
        # an output layer tied to projected embeddings (BERT's, a factorized table's) has no table to resize or tie
        return None if isinstance(self.lm_head, ProjectedEmbeddingsOutput) else self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def embed_decoder_inputs(self, token_ids: torch.LongTensor, past_length: int = 0) -> torch.Tensor:
        """The decoder inputs' word embeddings scaled by sqrt(d_model): the model's own, or BERT's (frozen) projected
        to d_model. The output layer reads the same table unscaled (as the shared table's). With
        `decoder_embeddings="bert_embedding_layer"`: BERT's embedding layer over the tokens at positions
        `past_length` on (the summary tokens before them are cached), then the projection, unscaled."""
        if self.config.decoder_embeddings == "shared":
            return self.encoder.embed(token_ids)
        token_ids = token_ids.masked_fill(token_ids >= self.config.vocab_size, self.config.unk_token_id)
        projection = getattr(self.decoder, "bert_embedding_projection", None)
        if self.config.decoder_embeddings == "bert_embedding_layer":
            if past_length + token_ids.shape[1] > self.config.max_target_positions:
                raise ValueError(f"a summary of {past_length + token_ids.shape[1]} tokens is longer than the model's "
                                 f"{self.config.max_target_positions}")
            # positions given, not the cached length: transformers renamed that argument (5.24: cache_length)
            positions = torch.arange(past_length, past_length + token_ids.shape[1], device=token_ids.device)
            embeddings = self.frozen_bert.embeddings(input_ids=token_ids, position_ids=positions.expand_as(token_ids))
            return projection(embeddings)
        embeddings = self.frozen_bert.get_input_embeddings()(token_ids)
        return self.encoder.embed_scale * (projection(embeddings) if projection is not None else embeddings)

    def vocab_logits(self, states: torch.Tensor) -> torch.Tensor:
        """P_vocab's logits from the decoder states: the output layer (tied to the decoder's word embeddings)."""
        if not isinstance(self.lm_head, ProjectedEmbeddingsOutput):
            return self.lm_head(states)
        if self.config.decoder_reads_bert:
            embeddings = self.frozen_bert.get_input_embeddings().weight
            return self.lm_head(states, embeddings, getattr(self.decoder, "bert_embedding_projection", None))
        return self.lm_head(states, self.encoder.embed_tokens.weight, self.encoder.embed_projection)

    def copy_loss(self, log_probs: torch.Tensor, labels: torch.LongTensor) -> torch.Tensor:
        """Mean over the labelled tokens (-100: ignored) of (1 - eps) (-log p(y)) + eps mean_w (-log p(w)), w over
        the fixed vocabulary, p the mixture (float32)."""
        labelled = labels != -100
        targets = labels[labelled]
        if targets.numel() and not 0 <= int(targets.min()) <= int(targets.max()) < log_probs.shape[-1]:
            raise ValueError(
                f"labels must lie in the extended vocabulary [0, {log_probs.shape[-1]}) or be -100, got ids "
                f"{int(targets.min())} to {int(targets.max())}"
            )
        picked = log_probs[labelled]
        loss = -picked.gather(-1, targets[:, None]).squeeze(-1)
        smoothing = self.config.label_smoothing
        if smoothing:
            loss = (1 - smoothing) * loss - smoothing * picked[:, : self.config.vocab_size].mean(-1)
        return loss.mean()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        source_extended_ids: torch.LongTensor | None = None,
        bert_features: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.LongTensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values: CopyTransformerCache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        return_dict: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: CopyTransformerCache | None = None,
    ) -> CopyTransformerOutput:
        r"""
        source_extended_ids (`torch.LongTensor` of shape `(batch_size, source_length)`, *optional*): `input_ids` with
            each unknown source word (a `[UNK]` piece) under its id past the vocabulary; default `input_ids`.
        bert_features (`torch.FloatTensor` of shape `(batch_size, source_length, 4 * bert_hidden)`, *optional*):
            the BERT-conditioned variants' frozen windowed features (`model.encoder.bert.frozen_features`), computed
            beforehand (e.g. cached for training) instead of running BERT.
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*): the summary after the begin
            token (extended ids allowed), -100 where padded; `decoder_input_ids` default to them shifted right.
        return_dict, output_attentions, output_hidden_states: what `generate()` passes; the output is always a
            `CopyTransformerOutput` and holds no attention weights or hidden states.
        cache (`CopyTransformerCache`, *optional*): `past_key_values` under the name transformers 5.24's `generate()`
            gives it.
        """
        past_key_values = decoding_cache(past_key_values, cache)
        if output_attentions or output_hidden_states:
            raise ValueError("the CopyTransformer returns no attention weights or hidden states (see copy_attentions)")
        if encoder_outputs is None:
            if input_ids is None:
                raise ValueError("give `input_ids` or `encoder_outputs`")
            encoder_outputs = self.encoder(input_ids, attention_mask, bert_features)
        encoder_states = encoder_outputs[0]
        if source_extended_ids is None:
            if input_ids is None:
                raise ValueError("with `encoder_outputs`, give `source_extended_ids` (the ids the pointer copies)")
            source_extended_ids = input_ids
        if source_extended_ids.shape != encoder_states.shape[:2]:
            raise ValueError(
                f"source_extended_ids of shape {list(source_extended_ids.shape)} must match the source "
                f"{list(encoder_states.shape[:2])}"
            )
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("give `decoder_input_ids` or `labels`")
            decoder_input_ids = shift_labels_right(labels, self.config)
        if use_cache and past_key_values is None:
            past_key_values = CopyTransformerCache()
        if past_key_values is not None and not isinstance(past_key_values, CopyTransformerCache):
            raise ValueError(f"the CopyTransformer needs a CopyTransformerCache, got {type(past_key_values).__name__}")
        embeddings = self.embed_decoder_inputs(
            decoder_input_ids, past_key_values.get_seq_length() if past_key_values is not None else 0
        )
        states = self.decoder(embeddings, decoder_attention_mask, encoder_states, attention_mask, past_key_values)
        if self.pointer is None:  # the plain Transformer: a summary word it cannot generate is trained as [UNK]
            log_probs, p_gen, copy_attention = F.log_softmax(self.vocab_logits(states).float(), dim=-1), None, None
            if labels is not None:
                labels = labels.masked_fill(labels >= self.config.vocab_size, self.config.unk_token_id)
        else:
            copy_attention, switch_logits = self.pointer(
                states, embeddings, encoder_states, attention_mask, past_key_values
            )
            if past_key_values is not None:
                past_key_values.add_copy_attention(copy_attention)
            log_probs = mixture_log_probs(self.vocab_logits(states), copy_attention, switch_logits, source_extended_ids)
            p_gen = torch.sigmoid(switch_logits.float())
        return CopyTransformerOutput(
            loss=self.copy_loss(log_probs, labels) if labels is not None else None,
            logits=log_probs.to(states.dtype),
            past_key_values=past_key_values if use_cache else None,
            encoder_last_hidden_state=encoder_states,
            p_gen=p_gen,
            copy_attentions=copy_attention,
        )

    def generate(self, inputs=None, generation_config=None, logits_processor=None, coverage_penalty=None, **kwargs):
        """`GenerationMixin.generate`, with `source_extended_ids` defaulting to the input ids and the coverage
        penalty: `coverage_penalty` (default `config.coverage_penalty`; 0 is off) adds a
        `CoveragePenaltyLogitsProcessor` over the copy attention that the cache keeps, so it needs `use_cache`."""
        if kwargs.get("source_extended_ids") is None:
            source = inputs if inputs is not None else kwargs.get("input_ids")
            if source is None:
                raise ValueError("give `input_ids` (or `source_extended_ids` with `encoder_outputs`)")
            kwargs["source_extended_ids"] = source
        beta = self.config.coverage_penalty if coverage_penalty is None else coverage_penalty
        if beta and self.pointer is None:
            raise ValueError("the coverage penalty reads the copy attention: this model has no copy mechanism")
        if beta:
            if kwargs.get("use_cache", (generation_config or self.generation_config).use_cache) is False:
                raise ValueError("the coverage penalty reads the copy attention the cache keeps: keep use_cache on")
            given = decoding_cache(kwargs.pop("past_key_values", None), kwargs.pop("cache", None))
            cache = kwargs[GENERATE_CACHE_KEYWORD] = CopyTransformerCache() if given is None else given
            if not isinstance(cache, CopyTransformerCache):
                raise ValueError(f"the coverage penalty needs a CopyTransformerCache, got {type(cache).__name__}")
            penalty = CoveragePenaltyLogitsProcessor(beta, lambda: cache.copy_attention)
            logits_processor = LogitsProcessorList([*(logits_processor or []), penalty])
        width = extended_vocabulary_size(self.config.vocab_size, kwargs["source_extended_ids"]) if self.pointer else 0
        with self.config.extended_vocabulary(width):
            return super().generate(inputs, generation_config, logits_processor=logits_processor, **kwargs)


__all__ = [
    "CopyTransformerCache",
    "CopyTransformerForConditionalGeneration",
    "CopyTransformerOutput",
    "CopyTransformerPreTrainedModel",
    "ProjectedEmbeddingsOutput",
    "mixture_log_probs",
    "shift_labels_right",
    "sinusoidal_positions",
]
