"""WikiSum's position vectors: Tensor2Tensor's sinusoidal timing signal, and the learned table of a BERT-style encoder
that a decoder started from it (`decoder_init="encoder"`) stands in for."""

import math

import torch
import torch.nn.functional as F

from ..configuration.summarizer_config import position_offset


def timing_signal(positions: torch.Tensor, channels: int, max_timescale: float = 1.0e4) -> torch.Tensor:
    """Tensor2Tensor's sinusoidal timing signal: [..., n] positions -> [..., n, channels] (sines, then cosines,
    timescales geometric from 1 to `max_timescale`). No parameters, so any input length works."""
    num_timescales = channels // 2
    log_increment = math.log(max_timescale) / max(num_timescales - 1, 1)
    inverse_timescales = torch.exp(
        torch.arange(num_timescales, device=positions.device, dtype=torch.float32) * -log_increment
    )
    scaled = positions.to(torch.float32)[..., None] * inverse_timescales
    signal = torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=-1)
    return F.pad(signal, (0, channels % 2))


def learned_positions(encoder) -> torch.Tensor:
    """A BERT-style encoder's learned position vectors, without the ones RoBERTa reserves below its padding index."""
    return encoder.embeddings.position_embeddings.weight[position_offset(encoder.config) :]


__all__ = ["learned_positions", "timing_signal"]
