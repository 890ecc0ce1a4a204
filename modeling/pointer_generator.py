"""The pointer-generator head (See et al. 2017, as the CopyTransformer of Aksenov et al. 2020 uses it): a copy
attention of its own over the source states, a switch p_gen = sigmoid(w [h_t; c_t; x_t] + b), and the mixture
p(w) = p_gen P_copy(w) + (1 - p_gen) P_vocab(w). Shared by the CopyTransformer (over its encoder's states) and the
WikiSum decoder's optional copy head (over the states of its own input positions)."""

import torch
from torch import nn
from torch.nn import functional as F


def _log(probabilities: torch.Tensor) -> torch.Tensor:
    """log, with log 0 = -inf and a zero (not NaN) gradient there: the copy mass of words absent from the source."""
    positive = probabilities > 0
    return torch.where(positive, probabilities.masked_fill(~positive, 1.0).log(), -torch.inf)


def extended_vocabulary_size(vocab_size: int, source_extended_ids: torch.LongTensor) -> int:
    """The width of the mixture's scores: the vocabulary, extended up to the largest id of `source_extended_ids` (the
    batch's unknown source words)."""
    return max(vocab_size, int(source_extended_ids.max()) + 1)


def mixture_log_probs(
    vocab_logits: torch.Tensor,
    copy_attention: torch.Tensor,
    switch_logits: torch.Tensor,
    source_extended_ids: torch.LongTensor,
) -> torch.Tensor:
    """log p(w) in float32, [batch, steps, vocab + unknown source words], for p(w) = p_gen P_copy(w) + (1 - p_gen)
    P_vocab(w): `vocab_logits` [batch, steps, vocab], `copy_attention` [batch, steps, source] (rows sum to one),
    `switch_logits` [batch, steps] (p_gen = sigmoid; -inf: no copying at that step), `source_extended_ids` [batch,
    source]. The extended vocabulary reaches the largest id of `source_extended_ids`; an extended id no source
    position holds has probability 0."""
    vocab_size = vocab_logits.shape[-1]
    size = extended_vocabulary_size(vocab_size, source_extended_ids)
    switch = switch_logits.float()[..., None]
    # in log space, so that a word with a tiny vocabulary probability keeps a finite log-probability
    generated = F.logsigmoid(-switch) + F.log_softmax(vocab_logits.float(), dim=-1)
    if size > vocab_size:  # unknown source words: no vocabulary probability
        generated = F.pad(generated, (0, size - vocab_size), value=-torch.inf)
    # only the source's words change, each by its whole copy mass: the attention summed over the positions holding it
    copy_weights = copy_attention.float() * torch.sigmoid(switch)
    index = source_extended_ids[:, None, :].expand(copy_attention.shape)
    if not torch.is_grad_enabled():  # decoding, one step at a time: a scatter into [rows, 1, vocabulary] is cheap
        copy_mass = torch.zeros_like(generated).scatter_add_(-1, index, copy_weights).gather(-1, index)
        return generated.scatter(-1, index, torch.logaddexp(generated.gather(-1, index), _log(copy_mass)))
    # training, every summary position at once: a [source, source] same-word matrix, not a vocabulary-wide scatter
    same = source_extended_ids[:, :, None] == source_extended_ids[:, None, :]
    copy_mass = torch.matmul(copy_weights, same.float())
    mixed = torch.logaddexp(generated.gather(-1, index), _log(copy_mass))
    # a word at several positions is written once per position, with equal values; scatter's backward would pass
    # the gradient to each of them, so only its first position keeps one
    earlier = torch.ones_like(same[0]).tril(diagonal=-1).T  # [i, j]: i before j
    first = ~(same & earlier).any(dim=1)
    mixed = torch.where(first[:, None, :], mixed, mixed.detach())
    return generated.scatter(-1, index, mixed)


class CopyAttention(nn.Module):
    """The pointer's attention: one head over the encoder states, with parameters of its own. Returns the attention
    [batch, steps, source] (float32, zero on padding) and the context sum_i a_i e_i [batch, steps, d_model]. The
    keys are `keys` when given (already projected), else projected once and kept in `cache.copy_keys`."""

    def __init__(self, width: int):
        super().__init__()
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.scaling = width**-0.5

    def forward(self, states, encoder_states, encoder_mask=None, cache=None, keys=None):
        if keys is None:
            cached = cache.copy_keys if cache is not None else None
            keys = cached if cached is not None else self.key(encoder_states)
            if cache is not None:
                cache.copy_keys = keys
        scores = torch.matmul(self.query(states), keys.transpose(1, 2)).float() * self.scaling
        if encoder_mask is not None:
            scores = scores.masked_fill(~encoder_mask.bool()[:, None, :], -torch.inf)
        attention = torch.softmax(scores, dim=-1)
        return attention, torch.matmul(attention.to(encoder_states.dtype), encoder_states)


class PointerGenerator(nn.Module):
    """The copy attention and the switch: p_gen = sigmoid(w [h_t; c_t; x_t] + b). Returns the copy attention and
    the switch's logits [batch, steps]."""

    def __init__(self, width: int):
        super().__init__()
        self.copy_attention = CopyAttention(width)
        self.switch = nn.Linear(3 * width, 1)

    def forward(self, states, input_embeddings, encoder_states, encoder_mask=None, cache=None, keys=None):
        attention, context = self.copy_attention(states, encoder_states, encoder_mask, cache, keys)
        return attention, self.switch(torch.cat([states, context, input_embeddings], dim=-1)).squeeze(-1)
