"""Transformer blocks whose parameter names follow transformers' `BertLayer`, so that pretrained BERT layers load into
layers built from them (`bert_layer_state`): a layer holds `attention` (`query`, `key`, `value`, `output.dense`,
`output.LayerNorm`) and `feed_forward` (`intermediate`, `output.dense`, `output.LayerNorm`). Post-LayerNorm, as in
BERT. Used by the HiBERT document layers and the ETCSum encoder layers."""

import torch
from torch import nn
from torch.nn import functional as F
from transformers.activations import ACT2FN


class ResidualOutput(nn.Module):
    """Projection, dropout, residual connection and post-LayerNorm (BERT's `BertSelfOutput` / `BertOutput`)."""

    def __init__(self, in_size: int, hidden_size: int, dropout: float, eps: float):
        super().__init__()
        self.dense = nn.Linear(in_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(residual + self.dropout(self.dense(states)))


class BertStyleAttention(nn.Module):
    """Dense multi-head attention of `queries` over `context` (self-attention when they are the same), with BERT's
    residual output. `context_mask` [rows, keys] marks the keys that may be attended; every row needs one."""

    def __init__(self, config):
        super().__init__()
        hidden = config.hidden_size
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
        attended = F.scaled_dot_product_attention(
            self._heads(self.query(queries)),
            self._heads(self.key(context)),
            self._heads(self.value(context)),
            attn_mask=context_mask[:, None, None, :],
            dropout_p=self.attention_dropout if self.training else 0.0,
        )
        return self.output(attended.transpose(1, 2).flatten(2), queries)


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
    """A transformers `BertLayer`'s weights under the names of a layer built from these blocks."""
    renames = (
        ("attention.self.", "attention."),
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


__all__ = ["BertStyleAttention", "BertStyleFeedForward", "ResidualOutput", "bert_layer_state"]
