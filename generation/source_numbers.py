"""Numbers copied from the input only, for data-to-text generation: a realizer free to write any number writes
plausible but wrong ones ("scored 23 points" for a player who scored 17). [`SourceNumbersLogitsProcessor`] bans every
number token that the step's input (for the Rotowire realizer: the plan sentence's records, the previous sentence
and the game's context) does not contain, so each number the model writes is one it was given. Not in Narayan et al.
(2020); an option of the `table-to-text` pipeline (`numbers_from_input`)."""

import re

import torch
from transformers import LogitsProcessor
from transformers.generation.logits_process import LOGITS_PROCESSOR_INPUTS_DOCSTRING
from transformers.utils import add_start_docstrings

# digits only, as a word ("25"), a WordPiece continuation ("##5") or a byte-level / SentencePiece word start ("Ġ25")
_NUMBER_TOKEN = re.compile(r"(##|Ġ|▁)?\d+")


def number_token_mask(tokenizer) -> torch.BoolTensor:
    """[len(tokenizer)] True for the tokens that are digits only (with or without a subword marker)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return torch.tensor([bool(token) and _NUMBER_TOKEN.fullmatch(token) is not None for token in tokens])


class SourceNumbersLogitsProcessor(LogitsProcessor):
    r"""
    [`LogitsProcessor`] that gives the number tokens absent from a row's source the score `-inf`.

    Args:
        source_ids (`torch.LongTensor` of shape `(batch_size, source_length)`):
            The encoder's input ids (padding is no number, so it needs no mask).
        number_tokens (`torch.BoolTensor` of shape `(vocab_size,)`):
            The number tokens (`number_token_mask`). Ids past its length (a padded output layer) are not numbers.

    With beam search the scores hold `num_beams` consecutive rows per source row, as `generate()` expands them.
    """

    def __init__(self, source_ids: torch.LongTensor, number_tokens: torch.BoolTensor):
        if source_ids.dim() != 2:
            raise ValueError(f"`source_ids` must be [batch, length], got shape {list(source_ids.shape)}")
        vocab = number_tokens.shape[0]
        # one extra column collects the ids past the vocabulary, then is dropped
        in_source = torch.zeros(source_ids.shape[0], vocab + 1, dtype=torch.bool, device=source_ids.device)
        in_source.scatter_(1, source_ids.clamp(0, vocab), True)
        self.banned = number_tokens.to(source_ids.device) & ~in_source[:, :vocab]  # [batch, vocab]
        self._score_mask = None  # `banned` laid out as the scores, built at the first step and reused by the others

    @add_start_docstrings(LOGITS_PROCESSOR_INPUTS_DOCSTRING)
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        mask = self._score_mask
        if mask is None or mask.shape != scores.shape or mask.device != scores.device:
            rows, sources = scores.shape[0], self.banned.shape[0]
            if rows % sources:
                raise ValueError(f"the scores have {rows} rows, not a multiple of the {sources} source rows")
            mask = self.banned.repeat_interleave(rows // sources, dim=0)[:, : scores.shape[1]]
            if mask.shape[1] < scores.shape[1]:
                mask = torch.nn.functional.pad(mask, (0, scores.shape[1] - mask.shape[1]), value=False)
            self._score_mask = mask = mask.to(scores.device)
        return scores.masked_fill(mask, float("-inf"))


__all__ = ["SourceNumbersLogitsProcessor", "number_token_mask"]
