"""What every processor shares: built from a model's tokenizer and config, it checks an input, turns it into that
model's tensors (`__call__`, a batch of one, as a pipeline's `preprocess` needs), and pads several encoded inputs into
a training batch (`collate`)."""

import torch
from transformers import AutoConfig, AutoTokenizer


def padded_rows(rows: list[list[int]], padding: int) -> torch.Tensor:
    """Integer rows (token ids, masks, labels) right-padded with `padding` into one [rows, longest] long tensor."""
    batch = torch.full((len(rows), max(len(row) for row in rows)), padding, dtype=torch.long)
    for index, row in enumerate(rows):
        batch[index, : len(row)] = torch.tensor(row, dtype=torch.long)
    return batch


class SummarizationProcessor:
    """Base of the per-architecture processors.

    `processor(document)` returns the model inputs of one document as tensors with a batch axis of one, plus the
    text units the model scores (`sentences`, a tuple) so that the model's choices can be turned back into text.
    `check_input(document)` raises a TypeError or ValueError whose one-line message says what is expected.
    `decode_inputs` names what a generating model's `decode` needs from `__call__`'s output besides the generated
    ids (the CopyTransformer's unknown source words); the pipeline keeps it out of the model's inputs.
    """

    decode_inputs: tuple[str, ...] = ()

    def __init__(self, tokenizer, config):
        self.tokenizer = tokenizer
        self.config = config

    @classmethod
    def from_pretrained(cls, name_or_path, **kwargs):
        """The processor of a saved model (folder or Hub id): its tokenizer and config."""
        return cls(
            AutoTokenizer.from_pretrained(name_or_path, **kwargs), AutoConfig.from_pretrained(name_or_path, **kwargs)
        )

    @classmethod
    def register_for_auto_class(cls, auto_class: str = "AutoProcessor") -> None:
        """What `AutoProcessor` calls on a processor it loads from an exported repo's code, as on a ProcessorMixin."""
        cls._auto_class = auto_class

    def check_input(self, document) -> None:
        raise NotImplementedError

    def __call__(self, document, max_length: int | None = None) -> dict:
        raise NotImplementedError

    def collate(self, features: list[dict]) -> dict:
        raise NotImplementedError

    def token_limit(self, max_length: int | None) -> int:
        """The input length in tokens: `max_length` if given, never more than the model reads."""
        limit = self.config.max_position_embeddings
        return min(max_length, limit) if max_length else limit


def with_oracle_labels(encoded: dict, sentences: list[str], oracle, document: list[str] | None = None) -> dict:
    """`encoded` (one training example, lists) with `oracle`, the indices that `oracle(sentences)` picks among the
    `sentences` the example kept (in its order), and `labels`: 1.0 for those sentences, 0.0 for the other kept ones.
    With `document` (all the sentences, of which `sentences` is the start), the oracle runs over the whole document
    and its picks past the kept sentences are dropped."""
    if document is not None:
        chosen = [index for index in oracle(document) if index < len(sentences)] if document else []
    else:
        chosen = list(oracle(sentences)) if sentences else []
    return dict(encoded, oracle=chosen, labels=[float(index in chosen) for index in range(len(sentences))])


__all__ = ["SummarizationProcessor", "with_oracle_labels"]
