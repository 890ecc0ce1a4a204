"""The encoder-decoder summarizer every abstractive model here shares: BertSumExtAbs (Liu & Lapata 2019), a pretrained
BERT/RoBERTa encoder over the BERTSum input layout and a Transformer decoder of the same width whose input and output
embeddings are the encoder's word embeddings (tied). Decoder layers follow the sentence planner paper's equations 2-4
(post-norm): s = LN(x + SelfAtt(x)), c = LN(s + CrossAtt(s, enc)), h = LN(c + FF(c)). With decoder_init="shared" the
decoder's self-attention and feed-forward are the encoder layers' own modules (BERT2BERT-share): only the
cross-attention, the position table and its LayerNorm are the decoder's.

Generation is transformers' `generate()` (beam search, length penalty, min/max length, KV cache through
`EncoderDecoderCache`); the `abstractive-summarization` pipeline adds the blocking of repeated word trigrams."""

from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoModel, GenerationConfig, GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from ..configuration.configuration_bertsumabs import BertSumAbsConfig
from .attention import attention_forward
from .bert_blocks import (
    BertStyleFeedForward,
    BottomLayersMixin,
    ResidualOutput,
    bert_layer_state,
    init_bert_style_weights,
    load_encoder_and_config,
)
from .keys_and_values import cached_keys_and_values, split_heads
from .summarizer_mixin import SummarizerMixin, decoding_cache


def decoder_inputs_from_labels(labels: torch.LongTensor, config: BertSumAbsConfig) -> torch.LongTensor:
    """The decoder inputs of `labels`: the begin token, then the labels but the last (-100 read as padding)."""
    start = torch.full_like(labels[:, :1], config.decoder_start_token_id)
    return torch.cat([start, labels[:, :-1].masked_fill(labels[:, :-1] == -100, config.pad_token_id)], 1)


class DecoderAttention(nn.Module):
    """Multi-head attention with BERT's parameter names (so an encoder layer's self-attention loads into it) and
    residual output. Self-attention appends its keys to the cache; cross-attention projects the encoder states once
    per generation and reuses them. Given `encoder_layer` (decoder_init="shared"), it owns no parameters: its
    projections and output are that BERT layer's self-attention modules."""

    def __init__(self, config: BertSumAbsConfig, layer_idx: int, is_cross_attention: bool, encoder_layer=None):
        super().__init__()
        hidden = config.hidden_size
        self.config = config
        self.layer_idx = layer_idx
        self.is_cross_attention = is_cross_attention
        self.is_causal = not is_cross_attention  # read by transformers' sdpa attention when no mask is given
        self.num_heads = config.decoder_attention_heads
        self.head_dim = hidden // self.num_heads
        if encoder_layer is not None:
            # in a tuple, not registered: the parameters keep one name (the encoder's) in state dicts and PEFT
            self._shared = (encoder_layer,)
            return
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = ResidualOutput(hidden, hidden, config.dropout, config.encoder_config.layer_norm_eps)

    def projections(self) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module]:
        """(query, key, value, output): looked up on the encoder layer at every call when shared, so that the LoRA
        layers PEFT puts into the encoder (and `merge_and_unload` takes out) serve the decoder too."""
        if hasattr(self, "_shared"):
            attention = self._shared[0].attention
            return attention.self.query, attention.self.key, attention.self.value, attention.output
        return self.query, self.key, self.value, self.output

    def forward(self, states, context, mask, cache=None, residual_addition=None) -> torch.Tensor:
        """LN(states + Att(states, context) [+ residual_addition]); `context` is `states` for self-attention."""
        query, key, value, output = self.projections()
        keys, values = cached_keys_and_values(self, key, value, context, cache)
        attended, _ = attention_forward(
            self,
            split_heads(query(states), self.num_heads),
            keys,
            values,
            mask,
            dropout=self.config.dropout if self.training else 0.0,
            scaling=self.head_dim**-0.5,
        )
        residual = states if residual_addition is None else states + residual_addition
        return output(attended.reshape(*states.shape[:-1], -1), residual)


def feed_forward_settings(config: BertSumAbsConfig) -> SimpleNamespace:
    encoder = config.encoder_config
    return SimpleNamespace(
        hidden_size=config.hidden_size,
        intermediate_size=config.decoder_ffn_dim,
        hidden_act=encoder.hidden_act,
        hidden_dropout_prob=config.dropout,
        layer_norm_eps=encoder.layer_norm_eps,
    )


class SharedFeedForward(nn.Module):
    """A BERT layer's own feed-forward (`intermediate`, then `output` with add & LayerNorm), owning no parameters:
    decoder_init="shared"."""

    def __init__(self, encoder_layer: nn.Module):
        super().__init__()
        self._shared = (encoder_layer,)  # unregistered, as in `DecoderAttention`

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        layer = self._shared[0]
        return layer.output(layer.intermediate(states), states)


class DecoderLayer(GradientCheckpointingLayer):
    """Self-attention, cross-attention, feed-forward, each with add & LayerNorm (the paper's equations 2-4); a
    sentence plan vector, when given, is added inside the cross-attention sublayer (equation 5). With
    `encoder_layer` the self-attention and feed-forward are that encoder layer's modules."""

    def __init__(self, config: BertSumAbsConfig, layer_idx: int, encoder_layer: nn.Module | None = None):
        super().__init__()
        self.attention = DecoderAttention(config, layer_idx, is_cross_attention=False, encoder_layer=encoder_layer)
        self.cross_attention = DecoderAttention(config, layer_idx, is_cross_attention=True)
        if encoder_layer is None:
            self.feed_forward = BertStyleFeedForward(feed_forward_settings(config))
        else:
            self.feed_forward = SharedFeedForward(encoder_layer)

    def forward(self, states, self_mask, encoder_states, cross_mask, cache=None, plan=None):
        states = self.attention(states, states, self_mask, cache)
        states = self.cross_attention(states, encoder_states, cross_mask, cache, residual_addition=plan)
        return self.feed_forward(states)


class SummaryDecoder(nn.Module):
    """Position embeddings and LayerNorm over the (shared) word embeddings, then the decoder layers (given
    `encoder_layers`, decoder layer i's self-attention and feed-forward are encoder layer i's)."""

    def __init__(self, config: BertSumAbsConfig, encoder_layers: nn.ModuleList | None = None):
        super().__init__()
        self.config = config
        self.position_embeddings = nn.Embedding(config.max_target_positions, config.hidden_size)
        self.embedding_norm = nn.LayerNorm(config.hidden_size, eps=config.encoder_config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            DecoderLayer(config, index, None if encoder_layers is None else encoder_layers[index])
            for index in range(config.decoder_layers)
        )

    @torch.no_grad()
    def copy_encoder(self, encoder: nn.Module) -> None:
        """BERT2BERT start: layer i's self-attention and feed-forward from encoder layer i, the embedding LayerNorm
        and position table from the encoder's (segment 0 folded into the positions); cross-attention stays new. Shared
        layers (decoder_init="shared") already are the encoder's: only the embedding side is copied."""
        embeddings = encoder.embeddings
        positions = embeddings.position_embeddings.weight[: self.config.max_target_positions]
        segment = embeddings.token_type_embeddings.weight[0]
        self.position_embeddings.weight[: len(positions)] = positions + segment
        self.embedding_norm.load_state_dict(embeddings.LayerNorm.state_dict())
        for layer, encoder_layer in zip(self.layers, encoder.encoder.layer):
            if isinstance(layer.feed_forward, SharedFeedForward):
                continue
            state = bert_layer_state(encoder_layer)
            layer.attention.load_state_dict(
                {name[len("attention.") :]: value for name, value in state.items() if name.startswith("attention.")}
            )
            layer.feed_forward.load_state_dict(
                {name[len("feed_forward.") :]: v for name, v in state.items() if name.startswith("feed_forward.")}
            )

    def forward(self, word_embeddings, attention_mask, encoder_states, encoder_mask, cache=None, plan=None):
        past = cache.get_seq_length() if cache is not None else 0
        length = word_embeddings.shape[1]
        if past + length > self.config.max_target_positions:
            raise ValueError(
                f"summary of {past + length} tokens is longer than max_target_positions="
                f"{self.config.max_target_positions}"
            )
        positions = torch.arange(past, past + length, device=word_embeddings.device)
        states = self.dropout(self.embedding_norm(word_embeddings + self.position_embeddings(positions)))
        # the cache by position: transformers 5.24 renamed this argument from `past_key_values` to `cache`
        self_mask = create_causal_mask(
            self.config, states, attention_mask, cache.self_attention_cache if cache is not None else None
        )
        cross_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=states, attention_mask=encoder_mask, encoder_hidden_states=encoder_states
        )
        for layer in self.layers:
            states = layer(states, self_mask, encoder_states, cross_mask, cache, plan)
        return states


class SummaryGenerator(nn.Module):
    """Word logits: BERT's prediction-head transform (dense, activation, LayerNorm), then the tied word embeddings
    and a vocabulary bias."""

    def __init__(self, config: BertSumAbsConfig):
        super().__init__()
        encoder = config.encoder_config
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.GELU()
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=encoder.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return F.linear(self.LayerNorm(self.activation(self.dense(states))), word_embeddings, self.bias)


class BertSumAbsPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = BertSumAbsConfig
    base_model_prefix = "bertsumabs"
    # the layers FSDP wraps one by one (training_scripts/accelerate/fsdp.yaml); transformers adds those the
    # pretrained encoder's class lists (BertLayer and BertEmbeddings for BERT/MiniLM)
    _no_split_modules = ["DecoderLayer"]
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    attention_backends = ("eager", "sdpa")
    accepts_loss_kwargs = False

    @torch.no_grad()
    def _init_weights(self, module):
        init_bert_style_weights(module, getattr(self.config.encoder_config, "initializer_range", 0.02))
        if isinstance(module, SummaryGenerator):
            module.bias.zero_()


class BertSumAbsForConditionalGeneration(BottomLayersMixin, BertSumAbsPreTrainedModel, GenerationMixin):
    """BertSumExtAbs: `input_ids` in the BERTSum layout (`[CLS] sentence [SEP]` per sentence, interval segments) are
    encoded once; the decoder writes the summary as `[unused0] sentence [unused2] sentence ... [unused1]` (PreSumm's
    begin, sentence-separator and end tokens; `labels` hold it without the begin token). The loss is label-smoothed
    cross-entropy over the labelled tokens."""

    pretrained_modules = ("encoder", "decoder")
    # The decoder's self-attention and feed-forward start from the encoder (decoder_init="encoder"), are the
    # encoder's (decoder_init="shared": LoRA on the encoder layers adapts them for both) or are new ("random": then
    # the whole decoder is trained in full, see `sumformers.training.apply_lora`).
    new_modules = ("cross_attention", "generator")
    lora_layers = ("encoder.encoder.layer", "decoder.layers")

    def __init__(self, config: BertSumAbsConfig):
        super().__init__(config)
        self.encoder = AutoModel.from_config(
            config.encoder_config, add_pooling_layer=False, attn_implementation=config._attn_implementation
        )
        shared = self.encoder_layers() if config.decoder_init == "shared" else None
        self.decoder = SummaryDecoder(config, shared)
        self.generator = SummaryGenerator(config)
        self.post_init()
        self.generation_config = self.default_generation_config(config)

    @staticmethod
    def default_generation_config(config: BertSumAbsConfig) -> GenerationConfig:
        """PreSumm's decoding: beam 5, length penalty alpha 0.95, 50 to 200 tokens."""
        return GenerationConfig(
            decoder_start_token_id=config.decoder_start_token_id,
            bos_token_id=config.decoder_start_token_id,
            eos_token_id=config.eos_token_id,
            pad_token_id=config.pad_token_id,
            num_beams=5,
            length_penalty=0.95,
            min_length=50,
            max_length=200,
            early_stopping=True,
        )

    @classmethod
    def from_encoder(cls, encoder_path: str, config: BertSumAbsConfig | None = None, tokenizer=None, **config_kwargs):
        """A summarizer whose encoder (and with decoder_init="encoder", the decoder's self-attention and feed-forward)
        start from the pretrained BERT/RoBERTa checkpoint at `encoder_path`. Without `config`, one is made from the
        encoder's settings and `config_kwargs`, its special token ids from `tokenizer` (default: the encoder's)."""
        encoder, config = load_encoder_and_config(cls.config_class, encoder_path, config, **config_kwargs)
        if config.sentence_separator_token_id is None:
            if tokenizer is None:
                from transformers import AutoTokenizer

                from .pretrained_encoder import resolve_encoder

                tokenizer = AutoTokenizer.from_pretrained(resolve_encoder(encoder_path))
            config.set_special_tokens(tokenizer)
        model = cls(config)
        model.encoder.load_state_dict(encoder.state_dict())
        if config.decoder_init in ("encoder", "shared"):
            model.decoder.copy_encoder(model.encoder)
        return model

    def get_encoder(self):
        return self.encoder

    def get_decoder(self):
        return self.decoder

    def get_input_embeddings(self):
        return self.encoder.get_input_embeddings()

    def encode(self, input_ids=None, attention_mask=None, token_type_ids=None, bottom_states=None, bottom_layers=0):
        """[rows, tokens, hidden] encoder states; from cached `bottom_states` the encoder runs only its layers from
        `bottom_layers` on."""
        if bottom_states is not None:
            return self.run_layers(bottom_states.to(self.generator.dense.weight.dtype), attention_mask, bottom_layers)
        if input_ids is None:
            raise ValueError("give `input_ids`, `encoder_outputs` or precomputed `bottom_states`")
        return self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state

    def sentence_plan(self, decoder_input_ids, encoder_states, attention_mask, past_length, **inputs):
        """What the word generator adds inside every cross-attention sublayer at each fed position (the sentence
        planner's r'_sent); None for BertSumAbs. Returns (plan or None, auxiliary loss or None)."""
        return None, None

    def word_loss(self, logits: torch.Tensor, labels: torch.LongTensor) -> torch.Tensor:
        """Label-smoothed cross-entropy in float32 over the labelled tokens (-100: ignored)."""
        return F.cross_entropy(
            logits.float(), labels, ignore_index=-100, label_smoothing=self.config.label_smoothing
        )

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.LongTensor | None = None,
        encoder_outputs: tuple | BaseModelOutput | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        bottom_states: torch.FloatTensor | None = None,
        bottom_layers: int = 0,
        cache: EncoderDecoderCache | None = None,
        **inputs,
    ) -> Seq2SeqLMOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*): the summary tokens after the
            begin token, -100 where padded; `decoder_input_ids` default to them shifted right. In training mode with
            labels the output holds the loss and no logits.
        bottom_states (`torch.FloatTensor` of shape `(batch_size, tokens, hidden_size)`, *optional*): cached states of
            the encoder's frozen bottom `bottom_layers` layers (training), instead of `input_ids`.
        cache (`EncoderDecoderCache`, *optional*): `past_key_values` under the name transformers 5.24's `generate()`
            gives it.
        """
        past_key_values = decoding_cache(past_key_values, cache)
        if encoder_outputs is None:
            encoder_states = self.encode(input_ids, attention_mask, token_type_ids, bottom_states, bottom_layers)
        else:
            encoder_states = encoder_outputs[0]
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("give `decoder_input_ids` or `labels`")
            decoder_input_ids = decoder_inputs_from_labels(labels, self.config)
        if use_cache and past_key_values is None:
            past_key_values = EncoderDecoderCache(DynamicCache(), DynamicCache())
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        plan, auxiliary_loss = self.sentence_plan(
            decoder_input_ids, encoder_states, attention_mask, past_length, labels=labels, **inputs
        )
        word_embeddings = self.get_input_embeddings().weight
        states = self.decoder(
            F.embedding(decoder_input_ids, word_embeddings),
            decoder_attention_mask,
            encoder_states,
            attention_mask,
            past_key_values,
            plan,
        )
        loss = logits = None
        if labels is not None and self.training:
            # the vocabulary projection is most of a CPU step: training projects only the labelled positions
            labelled = labels != -100
            loss = self.word_loss(self.generator(states[labelled], word_embeddings), labels[labelled])
        else:
            logits = self.generator(states, word_embeddings)
            if labels is not None:
                loss = self.word_loss(logits.flatten(0, 1), labels.flatten())
        if loss is not None and auxiliary_loss is not None:
            loss = loss + auxiliary_loss
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            past_key_values=past_key_values if use_cache else None,
            encoder_last_hidden_state=encoder_states,
        )


__all__ = [
    "BertSumAbsForConditionalGeneration",
    "BertSumAbsPreTrainedModel",
    "DecoderLayer",
    "decoder_inputs_from_labels",
]
