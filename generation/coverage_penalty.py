"""The coverage penalty of beam search (OpenNMT's stepwise "summary" penalty, as the CopyTransformer's original
decoding used with beta 5): a hypothesis whose attention has visited a source token more than once in total pays
beta * sum_i (max(c_i, 1) - 1), c_i the attention on source token i summed over the decoded steps.

transformers' beam search adds each step's processed log-probabilities to a hypothesis' score, so the processor
subtracts, from every token of a row, how much that row's penalty grew with this step's attention: the score of a
hypothesis is then its log-probability minus the penalty of its coverage, at every step (a term that is the same for
every token of a row changes which beams survive, not which token a greedy step takes)."""

from collections.abc import Callable

import torch
from transformers import LogitsProcessor
from transformers.generation.logits_process import LOGITS_PROCESSOR_INPUTS_DOCSTRING
from transformers.utils import add_start_docstrings


def summary_coverage_penalty(coverage: torch.Tensor, beta: float) -> torch.Tensor:
    """[rows, source] coverage -> [rows]: beta * sum_i (max(c_i, 1) - 1). Padding positions (coverage 0) add 0."""
    return beta * (coverage.clamp(min=1.0) - 1.0).sum(-1)


class CoveragePenaltyLogitsProcessor(LogitsProcessor):
    r"""
    [`LogitsProcessor`] that applies the stepwise summary coverage penalty (see the module docstring).

    Args:
        beta (`float`):
            Weight of the penalty (at least 0).
        attention_history (`Callable[[], torch.Tensor]`):
            Returns the attention of every decoded step so far, the current one last, as `[rows, steps, source]`
            with its rows in the order of `input_ids` (beam search reorders the model's cache, which keeps it).
    """

    def __init__(self, beta: float, attention_history: Callable[[], torch.Tensor]):
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0:
            raise ValueError(f"`beta` has to be a number of at least 0, but is {beta!r}")
        self.beta = float(beta)
        self.attention_history = attention_history

    @add_start_docstrings(LOGITS_PROCESSOR_INPUTS_DOCSTRING)
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        history = self.attention_history().float()
        if history.shape[0] != scores.shape[0]:
            raise ValueError(f"the attention history has {history.shape[0]} rows, the scores {scores.shape[0]}")
        # the previous coverage summed as the previous step summed it, so that the growths add up exactly
        growth = summary_coverage_penalty(history.sum(1), self.beta) - summary_coverage_penalty(
            history[:, :-1].sum(1), self.beta
        )
        return scores - growth.to(scores.dtype)[:, None]


__all__ = ["CoveragePenaltyLogitsProcessor", "summary_coverage_penalty"]
