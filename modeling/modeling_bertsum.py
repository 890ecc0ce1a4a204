"""BERTSum-style extractive summarizer (Liu & Lapata 2019): a `[CLS]` token before every sentence, interval segment
embeddings, a few transformer layers over the sentence vectors, and a sigmoid scorer trained with BCE against oracle
labels. Works over any BERT/RoBERTa encoder; the default is the bundled all-MiniLM-L6-v2."""

import math

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoModel, PreTrainedModel

from ..configuration.configuration_bertsum import BertSumConfig
from .bert_blocks import BottomLayersMixin, dense_attention, init_bert_style_weights
from .pretrained_encoder import load_pretrained_encoder
from .sentence_scoring import ExtractiveSummarizerOutput, sentence_logits_and_loss
from .summarizer_mixin import SummarizerMixin


def sinusoidal_positions(length: int, dim: int, device=None) -> torch.Tensor:
    """The fixed sine/cosine position table of Vaswani et al., used for sentence positions as in PreSumm."""
    position = torch.arange(length, device=device, dtype=torch.float).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
    return table


class InterSentenceAttention(nn.Module):
    """`nn.MultiheadAttention`'s self-attention (its parameter names: `in_proj_weight`, `in_proj_bias`, `out_proj`, so
    that checkpoints trained with `nn.TransformerEncoderLayer` load) through the model's `attn_implementation`."""

    is_causal = False  # read by transformers' sdpa attention

    def __init__(self, config: BertSumConfig):
        super().__init__()
        hidden = config.hidden_size
        self.config = config
        self.num_heads = config.inter_sentence_heads
        self.dropout = config.dropout
        self.in_proj_weight = nn.Parameter(torch.empty(3 * hidden, hidden))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * hidden))
        self.out_proj = nn.Linear(hidden, hidden)
        nn.init.xavier_uniform_(self.in_proj_weight)  # as nn.MultiheadAttention starts
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, states: torch.Tensor, sentence_mask: torch.Tensor) -> torch.Tensor:
        rows, length, hidden = states.shape
        heads = (
            part.view(rows, length, self.num_heads, -1).transpose(1, 2)
            for part in F.linear(states, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        )
        attended = dense_attention(self, *heads, sentence_mask, self.dropout if self.training else 0.0)
        return self.out_proj(attended.reshape(rows, length, hidden))


class InterSentenceLayer(nn.Module):
    """A pre-norm transformer layer (`nn.TransformerEncoderLayer(norm_first=True, activation="gelu")`, same parameter
    names) whose attention honours the model's `attn_implementation`."""

    def __init__(self, config: BertSumConfig):
        super().__init__()
        hidden = config.hidden_size
        self.self_attn = InterSentenceAttention(config)
        self.linear1 = nn.Linear(hidden, config.inter_sentence_ff_size)
        self.linear2 = nn.Linear(config.inter_sentence_ff_size, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, states: torch.Tensor, sentence_mask: torch.Tensor) -> torch.Tensor:
        states = states + self.dropout(self.self_attn(self.norm1(states), sentence_mask))
        feed_forward = self.linear2(self.dropout(F.gelu(self.linear1(self.norm2(states)))))
        return states + self.dropout(feed_forward)


class InterSentenceEncoder(nn.Module):
    """Pre-norm transformer layers over sentence vectors (PreSumm's `ExtTransformerEncoder`)."""

    def __init__(self, config: BertSumConfig):
        super().__init__()
        self.layers = nn.ModuleList(InterSentenceLayer(config) for _ in range(config.inter_sentence_layers))
        self.norm = nn.LayerNorm(config.hidden_size, eps=1e-6)

    def forward(self, sentence_vectors: torch.Tensor, sentence_mask: torch.Tensor) -> torch.Tensor:
        hidden = sentence_vectors.size(-1)
        states = sentence_vectors * sentence_mask.unsqueeze(-1)
        states = states + sinusoidal_positions(states.size(1), hidden, states.device).to(states.dtype)
        # a document without sentences keeps one key per row (its output is masked below)
        keys = sentence_mask | ~sentence_mask.any(-1, keepdim=True)
        for layer in self.layers:
            states = layer(states, keys)
        return self.norm(states) * sentence_mask.unsqueeze(-1)


class BertSumPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = BertSumConfig
    base_model_prefix = "bertsum"
    # the layers FSDP wraps one by one (training_scripts/accelerate/fsdp.yaml); transformers adds those the
    # pretrained encoder's class lists (BertLayer and BertEmbeddings for BERT/MiniLM)
    _no_split_modules = ["InterSentenceLayer"]
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    attention_backends = ("eager", "sdpa")
    # `forward` takes **kwargs only to ignore them; the loss is already a mean.
    accepts_loss_kwargs = False

    @torch.no_grad()
    def _init_weights(self, module):
        init_bert_style_weights(module, getattr(self.config.encoder_config, "initializer_range", 0.02))


class BertSumForExtractiveSummarization(BottomLayersMixin, BertSumPreTrainedModel):
    pretrained_modules = ("encoder",)
    # The segment table is new for RoBERTa (grown from one type to two), so it is trained and saved too.
    new_modules = ("inter_sentence", "scorer", "token_type_embeddings")
    lora_layers = "encoder.encoder.layer"

    def __init__(self, config: BertSumConfig):
        super().__init__(config)
        self.encoder = AutoModel.from_config(
            config.encoder_config, add_pooling_layer=False, attn_implementation=config._attn_implementation
        )
        self.inter_sentence = InterSentenceEncoder(config) if config.inter_sentence_layers > 0 else None
        self.scorer = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @classmethod
    def from_encoder(
        cls, encoder_path: str, config: BertSumConfig | None = None, **config_kwargs
    ) -> "BertSumForExtractiveSummarization":
        """A summarizer whose encoder starts from a pretrained BERT/RoBERTa checkpoint; the other layers are new.

        `encoder_path` is a folder or Hub id (`pretrained_encoder.resolve_encoder` maps the default's names to the
        bundled copy). With `config`, its settings are used as they are (to rebuild a saved model before loading its
        adapter); otherwise a config is made from the encoder's and `config_kwargs`.
        """
        encoder = load_pretrained_encoder(encoder_path, add_pooling_layer=False)
        if encoder.config.type_vocab_size < 2:
            # RoBERTa has one segment type: interval segments need two, both start from the trained one.
            table = encoder.embeddings.token_type_embeddings
            grown = nn.Embedding(2, table.embedding_dim)
            grown.weight.data.copy_(table.weight.data[:1].expand(2, -1))
            encoder.embeddings.token_type_embeddings = grown
            encoder.config.type_vocab_size = 2
        if config is None:
            config_kwargs.setdefault("encoder_name_or_path", encoder_path)
            config = BertSumConfig(encoder_config=encoder.config, **config_kwargs)
        model = cls(config)
        model.encoder.load_state_dict(encoder.state_dict())
        return model

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        cls_positions: torch.LongTensor | None = None,
        sentence_mask: torch.BoolTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        labels: torch.FloatTensor | None = None,
        bottom_states: torch.FloatTensor | None = None,
        bottom_layers: int = 0,
        **kwargs,
    ) -> ExtractiveSummarizerOutput:
        r"""
        bottom_states (`torch.FloatTensor` of shape `(batch_size, tokens, hidden_size)`, *optional*):
            `bottom_states(input_ids, bottom_layers, ...)` computed beforehand (frozen bottom layers cached for
            training); the encoder then runs only its layers from `bottom_layers` on, and `input_ids` is not needed.
        """
        if cls_positions is None or sentence_mask is None:
            raise ValueError("`cls_positions` and `sentence_mask` are required (the processor's BERTSum layout)")
        if bottom_states is not None:
            states = bottom_states.to(self.scorer.weight.dtype)
            token_states = self.run_layers(states, attention_mask, bottom_layers)
        elif input_ids is None:
            raise ValueError("give `input_ids` or precomputed `bottom_states`")
        else:
            token_states = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
        sentence_mask = sentence_mask.bool()
        index = cls_positions.unsqueeze(-1).expand(-1, -1, token_states.size(-1))
        sentence_states = torch.gather(token_states, 1, index)
        if self.inter_sentence is not None:
            sentence_states = self.inter_sentence(sentence_states, sentence_mask)
        logits, loss = sentence_logits_and_loss(self.scorer(sentence_states).squeeze(-1), sentence_mask, labels)
        return ExtractiveSummarizerOutput(loss=loss, logits=logits, sentence_states=sentence_states)


__all__ = ["BertSumForExtractiveSummarization", "BertSumPreTrainedModel", "ExtractiveSummarizerOutput"]
