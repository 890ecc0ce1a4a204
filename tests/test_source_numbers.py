"""Numbers from the input only (`generation.source_numbers`), the table-to-text realizer's option against wrong
numbers."""

import pytest
import torch

from sumformers.generation.source_numbers import SourceNumbersLogitsProcessor, number_token_mask

# A 6-token vocabulary: ids 2, 3 and 4 are numbers.
NUMBERS = torch.tensor([False, False, True, True, True, False])


class _Vocabulary:  # the duck-typed tokenizer `number_token_mask` reads
    def __init__(self, tokens):
        self.tokens = tokens

    def __len__(self):
        return len(self.tokens)

    def convert_ids_to_tokens(self, ids):
        return [self.tokens[i] for i in ids]


def test_number_tokens_of_wordpiece_and_byte_level_vocabularies(minilm_tokenizer):
    mask = number_token_mask(minilm_tokenizer)
    ids = minilm_tokenizer.convert_tokens_to_ids(["25", "##5", "106", "points", "three", "-", "[PAD]", "[unused3]"])
    assert mask[ids].tolist() == [True, True, True, False, False, False, False, False]
    byte_level = _Vocabulary(["<s>", "Ġ25", "25", "Ġpoints", "▁7", "1st", "", "Ġ"])
    assert number_token_mask(byte_level).tolist() == [False, True, True, False, True, False, False, False]


def test_only_the_numbers_of_each_source_row_survive_in_its_beams():
    # source row 0 holds number 2, row 1 numbers 3 and 4 (and an id past the vocabulary, ignored); two beams each
    processor = SourceNumbersLogitsProcessor(torch.tensor([[1, 2, 0], [3, 4, 9]]), NUMBERS)
    scores = torch.zeros(4, 7)  # one more column than the mask: a padded output layer, never a number
    out = processor(torch.zeros(4, 1, dtype=torch.long), scores)
    banned = torch.isinf(out)
    assert banned.tolist() == [
        [False, False, False, True, True, False, False],
        [False, False, False, True, True, False, False],
        [False, False, True, False, False, False, False],
        [False, False, True, False, False, False, False],
    ]
    assert (out[~banned] == 0).all() and (out[banned] < 0).all()


def test_rows_that_do_not_match_the_sources_are_refused():
    processor = SourceNumbersLogitsProcessor(torch.tensor([[2], [3]]), NUMBERS)
    with pytest.raises(ValueError, match="not a multiple of the 2 source rows"):
        processor(torch.zeros(3, 1, dtype=torch.long), torch.zeros(3, 6))
    with pytest.raises(ValueError, match=r"must be \[batch, length\]"):
        SourceNumbersLogitsProcessor(torch.tensor([2, 3]), NUMBERS)
