"""WikiSum's feed-forward blocks: the dense one and the top-k mixture of experts that may replace it in any layer
(`WikiSumConfig.moe_layers`)."""

from dataclasses import dataclass

import torch
from torch import nn
from transformers.activations import ACT2FN

from ..configuration.configuration_wikisum import WikiSumConfig


class WikiSumFeedForward(nn.Module):
    """Dense feed-forward block (ReLU in Tensor2Tensor, GELU in BERT: `config.hidden_act`)."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str = "relu"):
        super().__init__()
        self.up = nn.Linear(hidden_size, intermediate_size)
        self.activation = ACT2FN[activation]
        self.down = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.down(self.activation(self.up(hidden_states)))


def coefficient_of_variation_squared(values: torch.Tensor) -> torch.Tensor:
    """Var / mean^2 over experts: 0 exactly when all are equal (Shazeer et al. 2017's balancing measure)."""
    if values.numel() <= 1:
        return values.new_zeros(())
    return values.var(unbiased=False) / (values.mean() ** 2 + 1e-10)


@dataclass
class MixtureOfExpertsOutput:
    hidden_states: torch.Tensor
    aux_loss: torch.Tensor
    gates: torch.Tensor  # [tokens, experts] combine weights, zero outside each token's top k


class WikiSumMixtureOfExperts(nn.Module):
    """Top-k gated mixture of feed-forward experts (Shazeer et al. 2017, as in the paper's best model).

    Gates are the softmax over each token's k largest router logits (deterministic: no gating noise). The
    load-balancing loss is ``cv^2(importance) + cv^2(load)`` over real tokens, with importance = sum of each expert's
    gates and load = number of tokens routed to it: zero (its minimum) exactly when routing is balanced. Without
    gating noise the load term has no gradient; importance carries the balancing signal.
    """

    def __init__(self, config: WikiSumConfig):
        super().__init__()
        self.num_experts = config.num_experts
        self.top_k = config.num_experts_per_token
        self.router = nn.Linear(config.hidden_size, config.num_experts, bias=False)
        self.experts = nn.ModuleList(
            WikiSumFeedForward(config.hidden_size, config.expert_intermediate_size, config.hidden_act)
            for _ in range(config.num_experts)
        )

    def forward(self, hidden_states: torch.Tensor, token_mask: torch.Tensor | None = None) -> MixtureOfExpertsOutput:
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        top_logits, top_experts = self.router(flat).topk(self.top_k, dim=-1)
        top_gates = torch.softmax(top_logits, dim=-1, dtype=torch.float32).to(flat.dtype)
        output = torch.zeros_like(flat)
        for index, expert in enumerate(self.experts):
            tokens, slots = (top_experts == index).nonzero(as_tuple=True)
            if tokens.numel():
                output.index_add_(0, tokens, expert(flat[tokens]) * top_gates[tokens, slots, None])
        gates = torch.zeros(flat.shape[0], self.num_experts, dtype=top_gates.dtype, device=flat.device)
        gates = gates.scatter(1, top_experts, top_gates)
        real = gates if token_mask is None else gates[token_mask.reshape(-1)]
        aux_loss = coefficient_of_variation_squared(real.sum(0).float()) + coefficient_of_variation_squared(
            (real > 0).sum(0).float()
        )
        return MixtureOfExpertsOutput(output.view_as(hidden_states), aux_loss, gates)


__all__ = ["MixtureOfExpertsOutput", "WikiSumFeedForward", "WikiSumMixtureOfExperts"]
