"""Processor of the CopyTransformer: the document as one stream of word pieces, each source word the vocabulary lacks
(a `[UNK]` piece) under a temporary id past the vocabulary so that the model can copy it; the summary as the decoder
writes it (`sentence [unused2] sentence ... [unused1]`, PreSumm's separator and end tokens); generated ids back to
text, copied unknown words included.

Extended ids: the k-th distinct unknown source word (normalized as the tokenizer normalizes, e.g. lowercased) gets
id `vocab_size + k`. `source_extended_ids` are the input ids with those ids in place of `[UNK]`; a summary word equal
to one of them is labelled with its extended id, any other unknown summary word with `[UNK]`."""

import warnings

import torch

from ..text.sentences import to_sentences
from .processing_utils import SummarizationProcessor, padded_rows
from .sentence_layout import check_document, document_sentences, valid_unicode

SOURCE_KEYS = ("input_ids", "attention_mask", "source_extended_ids")


class CopyTransformerProcessor(SummarizationProcessor):
    """Text in, tensors out (`input_ids`, `attention_mask`, `source_extended_ids`), with the document's `sentences`
    and its unknown words (`source_oov_words`, which `decode` needs to write copied words back);
    `training_features` and `collate` make training batches (`labels`)."""

    decode_inputs = ("source_oov_words",)
    # the config fields that tokenizing reads (the lengths, the vocabulary and the ids it writes; the pad and start ids
    # go with them, which the config checks together): configs that agree on them make the same training features
    feature_fields = ("vocab_size", "pad_token_id", "unk_token_id", "decoder_start_token_id", "eos_token_id",
                      "sentence_separator_token_id", "max_source_positions", "max_target_positions")

    def __init__(self, tokenizer, config):
        if not tokenizer.is_fast:
            raise TypeError(f"the CopyTransformer needs a fast tokenizer (offsets), got {type(tokenizer).__name__}")
        if len(tokenizer) != config.vocab_size or tokenizer.unk_token_id != config.unk_token_id:
            raise ValueError(
                f"the tokenizer ({len(tokenizer)} tokens, [UNK] {tokenizer.unk_token_id}) does not fit the model "
                f"({config.vocab_size} tokens, [UNK] {config.unk_token_id})"
            )
        super().__init__(tokenizer, config)
        self.normalizer = tokenizer.backend_tokenizer.normalizer

    def check_input(self, document) -> None:
        check_document(document)

    def pieces(self, texts: list[str]) -> list[tuple[list[int], list[str | None]]]:
        """Each text's word-piece ids, and for each `[UNK]` piece the (normalized) word it stands for."""
        encoded = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        unknown = self.tokenizer.unk_token_id
        result = []
        for text, ids, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"]):
            words = [self.normalized(text[start:end]) if token == unknown else None
                     for token, (start, end) in zip(ids, offsets)]
            result.append((ids, words))
        return result

    def normalized(self, word: str) -> str:
        return self.normalizer.normalize_str(word) if self.normalizer is not None else word

    def source_features(self, document, max_length: int | None = None, warn_on_truncation: bool = True) -> dict:
        """The document as lists: `input_ids`, `attention_mask`, `source_extended_ids`, the kept `sentences` (those
        whose first piece fits) and `source_oov_words`. Cut at `max_length` tokens (never more than the model reads)."""
        sentences = document_sentences(document)
        if not sentences:  # the pipeline summarizes such a document as "" without encoding it
            raise ValueError("the document has no text")
        limit = self.token_limit(max_length)
        pieces = self.pieces(sentences)
        input_ids, words, kept = [], [], []
        for sentence, (ids, unknown_words) in zip(sentences, pieces):
            room = limit - len(input_ids)
            if room <= 0:
                break
            kept.append(sentence)
            input_ids.extend(ids[:room])
            words.extend(unknown_words[:room])
        if warn_on_truncation and sum(len(ids) for ids, _ in pieces) > limit:
            cut = ", the last one cut" if sum(len(ids) for ids, _ in pieces[: len(kept)]) > limit else ""
            warnings.warn(
                f"Input truncated to the model's limit of {limit} tokens: kept {len(kept)} of {len(sentences)} "
                f"sentences{cut}.",
                stacklevel=2,
            )
        oov_words = list(dict.fromkeys(word for word in words if word is not None))
        extended_ids = {word: self.config.vocab_size + index for index, word in enumerate(oov_words)}
        extended = [token if word is None else extended_ids[word] for token, word in zip(input_ids, words)]
        return {
            "input_ids": input_ids,
            "attention_mask": [1] * len(input_ids),
            "source_extended_ids": extended,
            "sentences": kept,
            "source_oov_words": oov_words,
        }

    def target_features(self, summary, source_oov_words=(), max_target_length: int | None = None) -> dict:
        """`labels`: the summary's pieces, a separator after every sentence but the last, the end token, an unknown
        word of the source under its extended id; cut at `max_target_length` tokens (default: what the decoder's
        positions hold, less the begin token). `summary` is lines or one text split into sentences."""
        config = self.config
        limit = min(max_target_length or config.max_target_positions, config.max_target_positions) - 1
        sentences = to_sentences(valid_unicode(summary)) if isinstance(summary, str) else list(summary)
        oov_ids = {word: config.vocab_size + index for index, word in enumerate(source_oov_words)}
        labels = []
        for ids, words in self.pieces(sentences) if sentences else []:
            room = limit - len(labels)
            if room <= 0:
                break
            pieces = [token if word is None else oov_ids.get(word, token) for token, word in zip(ids, words)]
            labels.extend([*pieces, config.sentence_separator_token_id][:room])
        if labels and labels[-1] == config.sentence_separator_token_id:
            labels[-1] = config.eos_token_id
        elif len(labels) < limit:
            labels.append(config.eos_token_id)
        return {"labels": labels}

    def training_features(self, document, summary, max_length: int | None = None, max_target_length=None) -> dict:
        """One training example as lists: the document as `source_features` encodes it (cut without warnings) and
        the summary as `target_features` encodes it."""
        source = self.source_features(document, max_length, warn_on_truncation=False)
        target = self.target_features(summary, source["source_oov_words"], max_target_length)
        return {**{key: source[key] for key in SOURCE_KEYS}, **target}

    def features_processor(self) -> "CopyTransformerProcessor":
        """This processor over a config that keeps only `feature_fields`: the same `training_features`, and one key
        in datasets' cache for every model variant that shares those fields (the ablations' runs at one input length
        tokenize their common documents once instead of once each)."""
        config = type(self.config)(**{name: getattr(self.config, name) for name in self.feature_fields})
        return type(self)(self.tokenizer, config)

    def __call__(self, document, max_length: int | None = None) -> dict:
        source = self.source_features(document, max_length)
        inputs = {key: torch.tensor([source[key]], dtype=torch.long) for key in SOURCE_KEYS}
        texts = {key: tuple(source[key]) for key in ("sentences", "source_oov_words")}
        return {**inputs, **texts}

    def collate(self, features: list[dict]) -> dict:
        """Pad the documents (pad id, attention mask 0) and `labels` (-100) into tensors."""
        pad = self.config.pad_token_id
        padding = {"input_ids": pad, "attention_mask": 0, "source_extended_ids": pad}
        batch = {key: padded_rows([feature[key] for feature in features], padding[key]) for key in SOURCE_KEYS}
        if "labels" in features[0]:
            batch["labels"] = padded_rows([feature["labels"] for feature in features], -100)
        return batch

    def decode(self, token_ids, source_oov_words=()) -> str:
        """Generated ids to the summary: one sentence per line, split at the separator token, stopped at the end
        token; an id past the vocabulary is the source's unknown word it stands for; the begin token, padding and
        the tokenizer's special tokens are dropped."""
        config, tokenizer = self.config, self.tokenizer
        special = set(tokenizer.all_special_ids) | {config.decoder_start_token_id, config.pad_token_id}
        sentences, current = [], []
        for token in [int(token) for token in token_ids]:
            if token in (config.sentence_separator_token_id, config.eos_token_id):
                sentences.append(current)
                current = []
                if token == config.eos_token_id:
                    break
            elif token >= config.vocab_size:
                if token - config.vocab_size >= len(source_oov_words):
                    raise ValueError(
                        f"id {token} stands for source word {token - config.vocab_size}, but the source has "
                        f"{len(source_oov_words)} unknown words"
                    )
                current.append(source_oov_words[token - config.vocab_size])
            elif token not in special:
                current.append(tokenizer.convert_ids_to_tokens(token))
        sentences.append(current)
        texts = [tokenizer.convert_tokens_to_string(tokens).strip() for tokens in sentences if tokens]
        if tokenizer.clean_up_tokenization_spaces:
            texts = [tokenizer.clean_up_tokenization(text) for text in texts]
        return "\n".join(text for text in texts if text)


__all__ = ["CopyTransformerProcessor"]
