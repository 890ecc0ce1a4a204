"""GNMT's length penalty for transformers' beam search, as an option beside transformers' own.

A finished beam hypothesis Y is ranked by its log-probability divided by a length penalty. transformers divides by
|Y| ** length_penalty; GNMT (Wu et al. 2016, eq. 14), and Tensor2Tensor's beam search with it (alpha 0.6 in the WikiSum
paper), divide by lp(Y) = ((5 + |Y|) / 6) ** alpha, which punishes short hypotheses less. |Y| counts the generated
tokens and the end token in both.

A `LogitsProcessor` sees only next-token scores, and re-ranking the beams `generate()` returns would rank only the
hypotheses that transformers' normalisation had kept, so `LengthPenaltyTypeMixin` changes the normalisation where
transformers' `_beam_search` applies it: `_update_finished_beams` (the scores of hypotheses that just finished, which
compete with the kept ones) and `_check_early_stop_heuristic` (whether a running beam may still beat them). Both get
`length_penalty`; under "gnmt" they are handed the scores already divided by lp(Y) and `length_penalty=0`, so that
transformers divides by 1 and its beam bookkeeping is used as it is.
"""

from contextvars import ContextVar

import torch

LENGTH_PENALTY_TYPES = ("transformers", "gnmt")
# The normalisation of the generate() call under way, read by the two beam-search hooks below: a context variable, not
# a model attribute, so that threads generating with one model at once each keep their own.
_LENGTH_PENALTY_TYPE: ContextVar[str] = ContextVar("length_penalty_type", default="transformers")


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha."""
    return ((5 + length) / 6) ** alpha


def resolve_length_penalty_type(value: str | None, *generation_configs) -> str:
    """`value`, else the first of `generation_configs` that sets `length_penalty_type`, else "transformers"; a
    one-line ValueError for anything else."""
    for config in generation_configs:
        if value is None:
            value = getattr(config, "length_penalty_type", None)
    value = value or "transformers"
    if value not in LENGTH_PENALTY_TYPES:
        raise ValueError(f"length_penalty_type must be one of {LENGTH_PENALTY_TYPES}, got {value!r}")
    return value


class LengthPenaltyTypeMixin:
    """Placed before `GenerationMixin` in a model's bases: `generate(..., length_penalty_type="gnmt")` (or a
    generation config with `length_penalty_type`, saved in generation_config.json as a custom entry) ranks finished
    beams with GNMT's penalty, `length_penalty` being its alpha."""

    def generate(self, inputs=None, generation_config=None, length_penalty_type: str | None = None, **kwargs):
        chosen = resolve_length_penalty_type(length_penalty_type, generation_config, self.generation_config)
        token = _LENGTH_PENALTY_TYPE.set(chosen)
        try:
            return super().generate(inputs, generation_config, **kwargs)
        finally:
            _LENGTH_PENALTY_TYPE.reset(token)

    def _update_finished_beams(self, *, topk_log_probs, cur_len, decoder_prompt_len, length_penalty, **kwargs):
        if _LENGTH_PENALTY_TYPE.get() == "gnmt":
            topk_log_probs = topk_log_probs / gnmt_length_penalty(cur_len + 1 - decoder_prompt_len, length_penalty)
            length_penalty = 0.0
        return super()._update_finished_beams(
            topk_log_probs=topk_log_probs,
            cur_len=cur_len,
            decoder_prompt_len=decoder_prompt_len,
            length_penalty=length_penalty,
            **kwargs,
        )

    def _check_early_stop_heuristic(
        self, *, running_beam_scores, cur_len, max_length, decoder_prompt_len, early_stopping, length_penalty, **kwargs
    ) -> torch.Tensor:
        if _LENGTH_PENALTY_TYPE.get() == "gnmt":
            # transformers' guess of the best length a running beam may still reach, under GNMT's penalty
            best_length = max_length if early_stopping == "never" and length_penalty > 0.0 else cur_len
            running_beam_scores = running_beam_scores / gnmt_length_penalty(
                best_length - decoder_prompt_len, length_penalty
            )
            length_penalty = 0.0
        return super()._check_early_stop_heuristic(
            running_beam_scores=running_beam_scores,
            cur_len=cur_len,
            max_length=max_length,
            decoder_prompt_len=decoder_prompt_len,
            early_stopping=early_stopping,
            length_penalty=length_penalty,
            **kwargs,
        )


__all__ = ["LENGTH_PENALTY_TYPES", "LengthPenaltyTypeMixin", "gnmt_length_penalty", "resolve_length_penalty_type"]
