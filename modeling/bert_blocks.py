"""Transformer blocks whose parameter names follow transformers' `BertLayer`, so that pretrained BERT layers load into
layers built from them (`bert_layer_state`): a layer holds `attention` (`query`, `key`, `value`, `output.dense`,
`output.LayerNorm`) and `feed_forward` (`intermediate`, `output.dense`, `output.LayerNorm`). Post-LayerNorm, as in
BERT. Used by the HiBERT document layers and the ETCSum encoder layers.

Also what the models built over a pretrained BERT share: BERT's weight initialization (`init_bert_style_weights`)
and loading the pretrained encoder with a config made from its settings (`load_encoder_and_config`)."""

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask

from .attention import attention_forward
from .pretrained_encoder import load_pretrained_encoder


class ResidualOutput(nn.Module):
    """Projection, dropout, residual connection and post-LayerNorm (BERT's `BertSelfOutput` / `BertOutput`)."""

    def __init__(self, in_size: int, hidden_size: int, dropout: float, eps: float):
        super().__init__()
        self.dense = nn.Linear(in_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(states)))


def dense_attention(module: nn.Module, query, key, value, keep: torch.Tensor, dropout: float) -> torch.Tensor:
    """Multi-head attention of [rows, heads, n, head_dim] queries over keys where `keep` [rows, keys] allows, through
    `attention.attention_forward` (the back end `module.config._attn_implementation` names). Returns
    [rows, n, heads, head_dim]."""
    mask = torch.zeros(keep.shape, dtype=query.dtype, device=query.device)
    mask = mask.masked_fill(~keep, torch.finfo(query.dtype).min)[:, None, None, :]
    attended, _ = attention_forward(module, query, key, value, mask, dropout=dropout, scaling=query.shape[-1] ** -0.5)
    return attended


class BertStyleAttention(nn.Module):
    """Dense multi-head attention of `queries` over `context` (self-attention when they are the same), with BERT's
    residual output. `context_mask` [rows, keys] marks the keys that may be attended; every row needs one.

    `config` gives the sizes (a BERT-style config); `model_config` (default `config`) is the model's, whose
    `_attn_implementation` chooses the back end at each call (see `dense_attention`)."""

    is_causal = False  # read by transformers' sdpa attention

    def __init__(self, config, model_config=None):
        super().__init__()
        hidden = config.hidden_size
        self.config = config if model_config is None else model_config
        self.num_heads = config.num_attention_heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attention_dropout = config.attention_probs_dropout_prob
        self.output = ResidualOutput(hidden, hidden, config.hidden_dropout_prob, config.layer_norm_eps)

    def _heads(self, states: torch.Tensor) -> torch.Tensor:
        rows, length, hidden = states.shape
        return states.view(rows, length, self.num_heads, hidden // self.num_heads).transpose(1, 2)

    def forward(self, queries: torch.Tensor, context: torch.Tensor, context_mask: torch.Tensor) -> torch.Tensor:
        attended = dense_attention(
            self,
            self._heads(self.query(queries)),
            self._heads(self.key(context)),
            self._heads(self.value(context)),
            context_mask,
            self.attention_dropout if self.training else 0.0,
        )
        return self.output(attended.flatten(2), queries)


class BertStyleFeedForward(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = ACT2FN[config.hidden_act]
        self.output = ResidualOutput(
            config.intermediate_size, config.hidden_size, config.hidden_dropout_prob, config.layer_norm_eps
        )

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.output(self.activation(self.intermediate(states)), states)


def bert_layer_state(bert_layer: nn.Module) -> dict[str, torch.Tensor]:
    """A transformers `BertLayer`'s (or `MPNetLayer`'s) weights under the names of a layer built from these
    blocks."""
    renames = (
        ("attention.self.", "attention."),
        ("attention.attn.q.", "attention.query."),
        ("attention.attn.k.", "attention.key."),
        ("attention.attn.v.", "attention.value."),
        ("attention.attn.o.", "attention.output.dense."),
        ("attention.LayerNorm.", "attention.output.LayerNorm."),
        ("intermediate.dense.", "feed_forward.intermediate."),
        ("output.", "feed_forward.output."),
    )
    state = {}
    for name, tensor in bert_layer.state_dict().items():
        for old, new in renames:
            if name.startswith(old):
                name = new + name[len(old) :]
                break
        state[name] = tensor
    return state


@torch.no_grad()
def init_bert_style_weights(module: nn.Module, std: float, projections: tuple[type, ...] = (nn.Linear,)) -> None:
    """BERT's initialization of `module` (for a model's `_init_weights`): normal(0, std) weights for `projections` and
    embeddings, zero biases, LayerNorms at identity. Other modules are left to the caller."""
    if isinstance(module, projections):
        module.weight.normal_(mean=0.0, std=std)
        if module.bias is not None:
            module.bias.zero_()
    elif isinstance(module, nn.Embedding):
        module.weight.normal_(mean=0.0, std=std)
    elif isinstance(module, nn.LayerNorm):
        module.weight.fill_(1.0)
        module.bias.zero_()


class BottomLayersMixin:
    """For a model whose `self.encoder` is a BERT/RoBERTa-style encoder (`encoder.layer`): its bottom layers' states
    (`bottom_states`), so that a training run keeping them frozen computes them once per document, and the layers
    above (`run_layers`) that each step still runs."""

    def encoder_layers(self) -> nn.ModuleList:
        layers = getattr(getattr(self.encoder, "encoder", None), "layer", None)
        if not isinstance(layers, nn.ModuleList):
            raise ValueError(
                f"bottom-layer states need a BERT/RoBERTa-style encoder (`encoder.layer`); "
                f"{type(self.encoder).__name__} has none"
            )
        return layers

    def run_layers(self, states, attention_mask, first: int, last: int | None = None) -> torch.Tensor:
        """The encoder's layers `first` to `last` (default: the top) over `states`."""
        mask = create_bidirectional_mask(
            config=self.encoder.config, inputs_embeds=states, attention_mask=attention_mask
        )
        for layer in self.encoder_layers()[first:last]:
            states = layer(states, mask)
        return states

    def bottom_states(
        self,
        input_ids: torch.LongTensor,
        num_layers: int,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
    ) -> torch.Tensor:
        """[batch, tokens, hidden]: the token states after the encoder's first `num_layers` layers. A training run that
        keeps those layers frozen computes them once per document and passes them back as `bottom_states`."""
        if not 0 <= num_layers <= len(self.encoder_layers()):
            raise ValueError(f"num_layers must be within 0..{len(self.encoder_layers())}, got {num_layers}")
        states = self.encoder.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        return self.run_layers(states, attention_mask, 0, num_layers)


def load_encoder_and_config(config_class, encoder_path: str, config=None, **config_kwargs):
    """The pretrained encoder at `encoder_path` (without pooler) and the summarizer's config: `config` as it is (to
    rebuild a saved model before loading its adapter), or else a `config_class` made from the encoder's settings and
    `config_kwargs` (`encoder_name_or_path` defaulting to `encoder_path`)."""
    encoder = load_pretrained_encoder(encoder_path, add_pooling_layer=False)
    if config is None:
        config_kwargs.setdefault("encoder_name_or_path", encoder_path)
        config = config_class(encoder_config=encoder.config, **config_kwargs)
    return encoder, config


__all__ = [
    "BertStyleAttention",
    "dense_attention",
    "BottomLayersMixin",
    "BertStyleFeedForward",
    "ResidualOutput",
    "bert_layer_state",
    "init_bert_style_weights",
    "load_encoder_and_config",
]
