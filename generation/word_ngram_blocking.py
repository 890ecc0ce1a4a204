"""Word-level n-gram blocking for beam search over subword vocabularies (PreSumm's trigram blocking).

transformers' [`NoRepeatNGramLogitsProcessor`] compares token ids, so with a WordPiece or byte-level BPE vocabulary a
repeated word trigram slips through as soon as one of its words is split into several pieces (the id trigram then
spans fewer than three words), while a repeated id trigram inside one long word is banned although no word repeats.
[`NoRepeatWordNGramLogitsProcessor`] reads each hypothesis as words instead.
"""

import re
from collections.abc import Iterable, Sequence

import torch
from transformers import LogitsProcessor
from transformers.generation.logits_process import LOGITS_PROCESSOR_INPUTS_DOCSTRING
from transformers.utils import add_start_docstrings

# A vocabulary is taken to use a marker when at least this share of its tokens carry it: a few literal "##" or "Ġ..."
# strings (markdown headings, say) in a vocabulary of another kind must not decide the scheme.
_MIN_MARKER_SHARE = 0.05
# a word as the summaries' repeated-trigram count reads one: word characters, with inner apostrophes ("it's")
_TEXT_WORD = re.compile(r"\w+(?:'\w+)*")
_CONTINUES_A_WORD = re.compile(r"\w|'\w")


def word_start_mask(tokenizer) -> torch.BoolTensor:
    r"""
    Marks the tokens that start a new word when appended to a sequence.

    The subword scheme is read from the vocabulary:

    - WordPiece (BERT): continuation pieces start with `"##"`; every other token starts a word (punctuation included,
      as BERT's pre-tokenizer splits it off).
    - Byte-level BPE (GPT-2, RoBERTa): tokens that start with `"Ġ"` (an encoded leading space) start a word; every
      other token continues the previous one.

    Special tokens always start a word.

    Only a duck-typed interface is used, so any object providing it works: `len(tokenizer)`,
    `tokenizer.convert_ids_to_tokens(list_of_ids)` and `tokenizer.all_special_ids`.

    Args:
        tokenizer ([`PreTrainedTokenizerBase`]):
            The tokenizer whose vocabulary the generating model predicts.

    Returns:
        `torch.BoolTensor` of shape `(len(tokenizer),)`: `True` where the token starts a word.

    Raises:
        `ValueError`: if the vocabulary is neither WordPiece nor byte-level BPE.
    """
    size = len(tokenizer)
    # Ids missing from the vocabulary come back as None; they count as neither kind.
    tokens = [token if isinstance(token, str) else "" for token in tokenizer.convert_ids_to_tokens(list(range(size)))]
    # A bare "##" is a literal token in WordPiece vocabularies, not a continuation marker.
    wordpiece = sum(token.startswith("##") and len(token) > 2 for token in tokens)
    byte_bpe = sum(token.startswith("Ġ") for token in tokens)
    if max(wordpiece, byte_bpe) < _MIN_MARKER_SHARE * size:
        raise ValueError(
            f"cannot tell word starts in {type(tokenizer).__name__}'s vocabulary: "
            "neither WordPiece (##) nor byte-level BPE (Ġ)"
        )
    if wordpiece > byte_bpe:
        starts = [not token.startswith("##") for token in tokens]
    else:
        starts = [token.startswith("Ġ") for token in tokens]
    mask = torch.tensor(starts, dtype=torch.bool)
    special_ids = [i for i in tokenizer.all_special_ids if 0 <= i < size]
    mask[special_ids] = True
    return mask


def text_word_starts(tokenizer) -> tuple[torch.BoolTensor, list[str]]:
    """For `NoRepeatWordNGramLogitsProcessor(token_texts=...)`, any tokenizer: what each token id decodes to, and
    which tokens end a word when appended to one (a text that does not begin with a word character: a space, a
    no-break or zero-width mark, punctuation, a newline; and every special token). A decoder that spells a word in
    other pieces, or ends it with a mark other than a space, is read by the text it writes."""
    size = len(tokenizer)
    texts = tokenizer.batch_decode([[token_id] for token_id in range(size)])
    ends = torch.tensor([_CONTINUES_A_WORD.match(text) is None for text in texts], dtype=torch.bool)
    ends[[i for i in tokenizer.all_special_ids if 0 <= i < size]] = True
    return ends, texts


class NoRepeatWordNGramLogitsProcessor(LogitsProcessor):
    r"""
    [`LogitsProcessor`] that blocks repeated n-grams of *words* in a sequence of subword tokens, as PreSumm's trigram
    blocking does for its abstractive summarizer (`ngram_size=3`).

    Each row of `input_ids` is read as words: a word-start token followed by its continuation tokens (a continuation
    at the very start forms a word on its own). The last word may still be growing. If the last `ngram_size` words,
    the last one included as it stands, already occur as an n-gram among the earlier completed words, any word-start
    token appended now would close the last word and complete a repeated n-gram, so all word-start tokens get a score
    of `-inf` for that row. Continuation tokens stay allowed: they change the last word, and with it the n-gram.

    Unlike [`NoRepeatNGramLogitsProcessor`], which works on token ids, this catches a repeated word n-gram whose words
    are split into several pieces, and leaves alone a repeated run of pieces inside words that do not repeat.

    Special tokens count as word starts in [`word_start_mask`], so the end-of-sequence token is banned with the others:
    ending the sequence also closes the last word.

    Args:
        ngram_size (`int`):
            All word n-grams of size `ngram_size` can only occur once.
        word_starts (`torch.BoolTensor` of shape `(vocab_size,)`):
            `True` for the tokens that start a word, as built by [`word_start_mask`]. Ids of `input_ids` past its end
            are read as continuation tokens, and columns of `scores` past its end are never banned: the model's output
            layer may be padded beyond the tokenizer's vocabulary, and those ids are not words the tokenizer knows.
        ignored_token_ids (`Iterable[int]`, *optional*):
            Tokens that are not text, such as the decoder start token or padding: they are skipped when the sequence is
            read as words. Whether they are banned is up to `word_starts`, like any other token.
        token_texts (`Sequence[str]`, *optional*):
            What each token id decodes to (`text_word_starts`, whose mask is then `word_starts`: the tokens that end
            a word). Given, the row is read as the words of its text (lowercased word characters, inner apostrophes
            kept; punctuation and spaces between them), however a decoder spells them in pieces or separates them:
            "released." and "released" are one word, and "from,which" two.
        prompt_ignore_length (`int`, *optional*, defaults to 0):
            The first tokens of each row that are left out, as transformers' [`RepetitionPenaltyLogitsProcessor`]
            names it: a decoder-only model's rows start with its prompt, whose word n-grams a summary may repeat.

    Examples:

    ```py
    >>> from transformers import AutoTokenizer, LogitsProcessorList

    >>> tokenizer = AutoTokenizer.from_pretrained("google-bert/bert-base-uncased")
    >>> blocking = NoRepeatWordNGramLogitsProcessor(
    ...     3, word_start_mask(tokenizer), ignored_token_ids=[tokenizer.cls_token_id, tokenizer.pad_token_id]
    ... )
    >>> # `model`: an encoder-decoder that generates BERT's WordPiece tokens, `inputs`: its tokenized documents.
    >>> outputs = model.generate(**inputs, num_beams=5, logits_processor=LogitsProcessorList([blocking]))
    ```
    """

    def __init__(
        self,
        ngram_size: int,
        word_starts: torch.BoolTensor,
        ignored_token_ids: Iterable[int] = (),
        token_texts: Sequence[str] | None = None,
        prompt_ignore_length: int = 0,
    ):
        if not isinstance(ngram_size, int) or isinstance(ngram_size, bool) or ngram_size <= 0:
            raise ValueError(f"`ngram_size` has to be a strictly positive integer, but is {ngram_size!r}")
        word_starts = torch.as_tensor(word_starts)
        if word_starts.dtype != torch.bool or word_starts.dim() != 1:
            shape = tuple(word_starts.shape)
            raise ValueError(f"`word_starts` has to be a 1-D bool tensor, but is {word_starts.dtype} of shape {shape}")
        self.ngram_size = ngram_size
        self.word_starts = word_starts.cpu()
        self.ignored_token_ids = frozenset(int(i) for i in ignored_token_ids)
        self.token_texts = token_texts
        self.prompt_ignore_length = prompt_ignore_length
        # Reading rows runs in plain Python: a list indexes far faster than a tensor there.
        self._word_start_list = self.word_starts.tolist()

    def _read_words(self, token_ids: list[int]) -> list[tuple[int, ...]]:
        """The row as words, each the tuple of its token ids. The tokenizer spells a word one way in pieces; a model
        that spells it another way makes a different word here."""
        starts, known = self._word_start_list, len(self._word_start_list)
        words, current = [], []
        for token_id in token_ids:
            if token_id in self.ignored_token_ids:
                continue
            if current and token_id < known and starts[token_id]:
                words.append(tuple(current))
                current = []
            current.append(token_id)
        if current:
            words.append(tuple(current))
        return words

    def _text_words(self, token_ids: list[int]) -> list[str] | None:
        """The row's words as text (`token_texts`), the last one growing; None when the text does not end inside a
        word (the last word is closed already: nothing new to block)."""
        known = len(self.token_texts)
        text = "".join(self.token_texts[i] for i in token_ids if i < known and i not in self.ignored_token_ids)
        if not text or _CONTINUES_A_WORD.match(text[-1]) is None:
            return None
        return _TEXT_WORD.findall(text.lower())

    def _closing_repeats(self, token_ids: list[int]) -> bool:
        """Whether closing the last word now completes a word n-gram that occurs earlier in the row."""
        words = self._read_words(token_ids) if self.token_texts is None else self._text_words(token_ids)
        n = self.ngram_size
        # An earlier n-gram needs n completed words besides the last one.
        if words is None or len(words) <= n:
            return False
        last = words[len(words) - n :]
        # Earlier n-grams lie within the completed words (all but the last), i.e. start before len(words) - n.
        return any(words[start : start + n] == last for start in range(len(words) - n))

    @add_start_docstrings(LOGITS_PROCESSOR_INPUTS_DOCSTRING)
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        blocked = [self._closing_repeats(row) for row in input_ids[:, self.prompt_ignore_length :].tolist()]
        if not any(blocked):
            return scores

        # Fit the mask to the scores' width: truncated when the output layer is smaller than the tokenizer, padded
        # with False (never banned) when it is larger.
        vocab_size = scores.shape[-1]
        banned = torch.zeros(vocab_size, dtype=torch.bool)
        known = min(vocab_size, self.word_starts.shape[0])
        banned[:known] = self.word_starts[:known]
        rows = torch.tensor(blocked, dtype=torch.bool)
        banned = (rows[:, None] & banned[None, :]).to(scores.device)
        # Out of place, as transformers' own processors do: callers may still hold the unprocessed scores.
        return scores.masked_fill(banned, -float("inf"))
