"""Word n-gram blocking (PreSumm's trigram blocking) on WordPiece / byte-level BPE tokens."""

import random

import pytest
import torch
from transformers import NoRepeatNGramLogitsProcessor

from sumformers.generation.word_ngram_blocking import NoRepeatWordNGramLogitsProcessor, word_start_mask

# "the unbelievably quick fox saw the unbelievably quick dog": "unbelievably" is un ##bel ##ie ##va ##bly.
REPEATING = "the unbelievably quick fox saw the unbelievably quick dog"


def ids_of(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def banned(before, after):
    """Columns a processor set to -inf (none of the inputs is -inf)."""
    assert not torch.isinf(before).any()
    return torch.isinf(after) & (after < 0)


def test_word_start_mask_wordpiece(minilm_tokenizer):
    mask = word_start_mask(minilm_tokenizer)
    tokens = minilm_tokenizer.convert_ids_to_tokens(list(range(len(minilm_tokenizer))))
    assert mask.dtype == torch.bool and mask.shape == (len(minilm_tokenizer),)
    assert mask.tolist() == [not token.startswith("##") for token in tokens]
    ids = minilm_tokenizer.convert_tokens_to_ids(["the", "un", "##bel", "##bly", ".", ",", "[SEP]", "[CLS]", "[PAD]"])
    assert mask[ids].tolist() == [True, True, False, False, True, True, True, True, True]


def test_blocks_repeated_word_trigram_with_split_word(minilm_tokenizer):
    tokenizer = minilm_tokenizer
    ids = ids_of(tokenizer, REPEATING)
    assert tokenizer.convert_ids_to_tokens(ids[1:6]) == ["un", "##bel", "##ie", "##va", "##bly"]
    cls = tokenizer.cls_token_id
    mask = word_start_mask(tokenizer)
    processor = NoRepeatWordNGramLogitsProcessor(3, mask, ignored_token_ids=[cls, tokenizer.pad_token_id])
    # Rows: the prefix up to the second "quick" (the trigram would close), and up to the second "un ##bel ##ie"
    # (the last word is unfinished and "saw the unbelie" is new).
    repeat_step = [cls] + ids[:16]
    partial_step = [cls, cls, cls, cls] + ids[:13]
    assert tokenizer.convert_ids_to_tokens(repeat_step[-3:]) == ["##va", "##bly", "quick"]
    input_ids = torch.tensor([repeat_step, partial_step])
    torch.manual_seed(0)
    scores = torch.randn(2, len(tokenizer)).to(torch.bfloat16)
    original = scores.clone()

    out = processor(input_ids, scores)

    assert out.dtype == torch.bfloat16 and out.shape == scores.shape
    assert torch.equal(scores, original)  # the caller's tensor is not touched
    ban = banned(scores, out)
    assert ban[0].tolist() == mask.tolist()  # every word start, and only those, in the repeating row
    assert torch.equal(out[0][~mask], scores[0][~mask])
    assert out[0, tokenizer.convert_tokens_to_ids("##ly")] == scores[0, tokenizer.convert_tokens_to_ids("##ly")]
    assert out[0, tokenizer.sep_token_id] == -float("inf")  # ending the summary closes the word too
    assert torch.equal(out[1], scores[1])  # no repeat would complete: exactly unchanged

    # One step later the row has moved on to a new word: nothing is blocked.
    later = torch.tensor([[cls] + ids[:16] + ids_of(tokenizer, "dog")])
    assert torch.equal(processor(later, scores[:1]), scores[:1])


def brute_force_blocked(sequence, candidate, starts, ngram_size):
    """Whether appending `candidate` closes the last word and completes a word n-gram seen before, read from the
    detokenized text: word-start ids are " w{id}", continuations "c{id}"."""
    if not starts[candidate]:
        return False
    text = "".join(f" w{t}" if starts[t] else f"c{t}" for t in sequence)
    words = text.split()  # the appended word start is a new word; `words` are the completed ones
    ngrams = [tuple(words[i : i + ngram_size]) for i in range(len(words) - ngram_size + 1)]
    return len(ngrams) > 1 and ngrams[-1] in ngrams[:-1]


@pytest.mark.parametrize("ngram_size", [1, 2, 3, 4])
def test_ban_matrix_matches_brute_force(ngram_size):
    # Ids 0-9 start words, 10-14 continue them; scores have two extra columns past the mask, never banned.
    starts = [True] * 10 + [False] * 5
    processor = NoRepeatWordNGramLogitsProcessor(ngram_size, torch.tensor(starts))
    rng = random.Random(ngram_size)
    # Few distinct pieces, so that repeats are common even for 4-grams; 16 is an id past the mask (read as a
    # continuation).
    pieces = [0, 0, 0, 1, 1, 1, 10, 16]
    checked_blocked = 0
    for length in [1, 2, 5, 9, 20, 40]:
        input_ids = torch.tensor([[rng.choice(pieces) for _ in range(length)] for _ in range(64)])
        scores = torch.randn(64, 17)
        ban = banned(scores, processor(input_ids, scores))
        extended = starts + [False] * 2
        expected = torch.tensor(
            [[brute_force_blocked(row, t, extended, ngram_size) for t in range(17)] for row in input_ids.tolist()]
        )
        assert torch.equal(ban, expected)
        checked_blocked += int(expected.any(dim=1).sum())
    assert checked_blocked > 10  # the random rows do exercise blocking


def test_differs_from_token_id_blocking(minilm_tokenizer):
    tokenizer = minilm_tokenizer
    mask = word_start_mask(tokenizer)
    words = NoRepeatWordNGramLogitsProcessor(3, mask)
    tokens = NoRepeatNGramLogitsProcessor(3)
    vocab = len(tokenizer)

    # A repeated word trigram with a split word: the id-level processor only bans the id that followed "##bly quick"
    # ("fox"), so "the unbelievably quick dog" would go through; the word-level one bans every word start.
    ids = ids_of(tokenizer, REPEATING)
    input_ids = torch.tensor([ids[:16]])
    scores = torch.zeros(1, vocab)
    assert banned(scores, tokens(input_ids, scores))[0].nonzero().flatten().tolist() == ids_of(tokenizer, "fox")
    assert banned(scores, words(input_ids, scores))[0].tolist() == mask.tolist()

    # A repeated id trigram that is no word trigram ("un ##bel ##ie" inside two different sentences' words): the
    # id-level processor bans "##va", the word-level one leaves the row alone.
    input_ids = torch.tensor([ids_of(tokenizer, "unbelievably fast") + ids_of(tokenizer, "unbelievably")[:3]])
    token_ban = banned(scores, tokens(input_ids, scores))[0].nonzero().flatten().tolist()
    assert tokenizer.convert_ids_to_tokens(token_ban) == ["##va"]
    assert torch.equal(words(input_ids, scores), scores)


class FakeTokenizer:
    """The duck-typed interface `word_start_mask` uses: `len`, `convert_ids_to_tokens`, `all_special_ids`."""

    def __init__(self, tokens, special_ids):
        self.tokens = tokens
        self.all_special_ids = special_ids

    def __len__(self):
        return len(self.tokens)

    def convert_ids_to_tokens(self, ids):
        return [self.tokens[i] for i in ids]


def test_word_start_mask_byte_level_bpe():
    tokens = ["<s>", "<pad>", "</s>", "Ġthe", "Ġquick", "ly", "Ġfox", ".", "Ġ", "##", "Ġun", "bel", "iev", "ably"]
    tokenizer = FakeTokenizer(tokens, special_ids=[0, 1, 2])
    mask = word_start_mask(tokenizer)
    assert mask.tolist() == [True, True, True, True, True, False, True, False, True, False, True, False, False, False]

    # "Ġthe Ġun bel iev ably Ġquick Ġfox Ġthe Ġun bel iev ably Ġquick": closing "quick" repeats a trigram.
    processor = NoRepeatWordNGramLogitsProcessor(3, mask, ignored_token_ids=[0, 1])
    sequence = [0, 3, 10, 11, 12, 13, 4, 6, 3, 10, 11, 12, 13, 4]
    scores = torch.zeros(2, len(tokens))
    out = processor(torch.tensor([sequence, [1] + sequence[:-1]]), scores)
    assert banned(scores, out).tolist() == [mask.tolist(), [False] * len(tokens)]


@pytest.mark.parametrize(
    "tokens",
    [
        ["<s>", "▁the", "▁quick", "ly", "▁fox"],  # SentencePiece
        ["<s>"] + [f"▁w{i}" for i in range(40)] + ["###"],  # a stray "##..." token does not make it WordPiece
    ],
)
def test_word_start_mask_rejects_other_schemes(tokens):
    with pytest.raises(ValueError, match="neither WordPiece") as error:
        word_start_mask(FakeTokenizer(tokens, special_ids=[0]))
    assert "\n" not in str(error.value)


def test_ignored_tokens_are_skipped(minilm_tokenizer):
    tokenizer = minilm_tokenizer
    cls, pad = tokenizer.cls_token_id, tokenizer.pad_token_id
    mask = word_start_mask(tokenizer)
    ids = ids_of(tokenizer, REPEATING)[:16]
    # [CLS] inside the first "the unbelievably quick", and padding inside the second "unbelievably".
    row = [pad, cls] + ids[:1] + [cls] + ids[1:11] + [pad] + ids[11:]
    input_ids = torch.tensor([row])
    scores = torch.zeros(1, len(tokenizer))

    skipping = NoRepeatWordNGramLogitsProcessor(3, mask, ignored_token_ids=[cls, pad])
    assert banned(scores, skipping(input_ids, scores))[0].tolist() == mask.tolist()
    # Read as words, the tokens break both trigrams up and nothing repeats.
    assert torch.equal(NoRepeatWordNGramLogitsProcessor(3, mask)(input_ids, scores), scores)


def test_scores_wider_or_narrower_than_the_mask(minilm_tokenizer):
    mask = word_start_mask(minilm_tokenizer)
    processor = NoRepeatWordNGramLogitsProcessor(3, mask)
    input_ids = torch.tensor([ids_of(minilm_tokenizer, REPEATING)[:16]])
    wide = processor(input_ids, torch.zeros(1, len(mask) + 6))
    assert torch.isinf(wide[0, : len(mask)]).tolist() == mask.tolist()
    assert torch.equal(wide[0, len(mask) :], torch.zeros(6))  # padded model outputs are left alone
    narrow = processor(input_ids, torch.zeros(1, 1000))
    assert torch.isinf(narrow[0]).tolist() == mask[:1000].tolist()


@pytest.mark.parametrize("ngram_size", [0, -3, 2.0, "3", None, True])
def test_ngram_size_validation(ngram_size):
    with pytest.raises(ValueError, match="strictly positive integer") as error:
        NoRepeatWordNGramLogitsProcessor(ngram_size, torch.ones(5, dtype=torch.bool))
    assert "\n" not in str(error.value)


def test_word_starts_validation():
    with pytest.raises(ValueError, match="1-D bool tensor"):
        NoRepeatWordNGramLogitsProcessor(3, torch.ones(5))
