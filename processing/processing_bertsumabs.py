"""Processor of the encoder-decoder summarizers: the document in the BERTSum layout (as the extractive models read
it), the summary as the decoder writes it (`sentence [unused2] sentence ... [unused1]`, PreSumm's separator and end
tokens), each summary sentence alone as the sentence planner's encoder reads it, and generated ids back to text."""

import torch

from ..text.sentences import to_sentences
from .processing_utils import padded_rows
from .sentence_layout import SentenceLayoutProcessor, collate_sentence_batch, valid_unicode

DOCUMENT_KEYS = ("input_ids", "token_type_ids", "attention_mask")


class BertSumAbsProcessor(SentenceLayoutProcessor):
    """Text in, tensors out (`input_ids`, `token_type_ids`, `attention_mask`); `target_features` and `collate` make
    training batches (`labels`, and `summary_sentences` for the sentence planner); `decode` turns generated ids into
    the summary, one sentence per line."""

    def summary_sentence_ids(self, summary) -> list[list[int]]:
        """The summary's sentences (lines, or `split_sentences` of a single line) as word-piece ids."""
        sentences = to_sentences(valid_unicode(summary)) if isinstance(summary, str) else list(summary)
        if not sentences:
            return []
        return self.tokenizer(sentences, add_special_tokens=False, verbose=False)["input_ids"]

    def target_features(self, summary, max_target_length: int | None = None) -> dict:
        """`labels`: the summary's tokens, a separator after every sentence but the last, the end token; cut at
        `max_target_length` tokens (default: what the decoder's position table holds, less the begin token).
        `summary_sentences`: each sentence the labels hold, alone as `[CLS] tokens [SEP]`."""
        config = self.config
        limit = min(max_target_length or config.max_target_positions, config.max_target_positions) - 1
        labels, sentences = [], []
        for piece in self.summary_sentence_ids(summary):
            room = limit - len(labels)
            if room <= 0:
                break
            labels.extend([*piece, config.sentence_separator_token_id][:room])
            sentences.append([self.tokenizer.cls_token_id, *piece[:room], self.tokenizer.sep_token_id])
        if labels and labels[-1] == config.sentence_separator_token_id:
            labels[-1] = config.eos_token_id
        elif len(labels) < limit:
            labels.append(config.eos_token_id)
        return {"labels": labels, "summary_sentences": sentences}

    def training_features(self, document, summary, max_length: int | None = None, max_target_length=None) -> dict:
        """One training example as lists: the document as `__call__` encodes it (cut without warnings) and the
        summary as `target_features` encodes it."""
        encoded = self.encode(self.sentences(document, warn_on_truncation=False), max_length, warn_on_truncation=False)
        document_features = {key: encoded[key] for key in DOCUMENT_KEYS}
        return {**document_features, **self.target_features(summary, max_target_length)}

    def __call__(self, document, max_length: int | None = None) -> dict:
        inputs = super().__call__(document, max_length)
        return {key: inputs[key] for key in (*DOCUMENT_KEYS, "sentences")}

    def collate(self, features: list[dict]) -> dict:
        """Pad documents (the BERTSum layout), `labels` with -100 and `summary_sentences` to
        [rows, sentences, tokens] with the pad id (a row of padding is no sentence)."""
        documents = [{**{key: f[key] for key in DOCUMENT_KEYS}, "cls_positions": []} for f in features]
        batch = {key: collate_sentence_batch(documents, self.tokenizer.pad_token_id)[key] for key in DOCUMENT_KEYS}
        if "labels" in features[0]:
            batch["labels"] = padded_rows([feature["labels"] for feature in features], -100)
        if "summary_sentences" in features[0]:
            count = max(1, max(len(f["summary_sentences"]) for f in features))
            width = max((len(s) for f in features for s in f["summary_sentences"]), default=2)
            sentences = torch.full((len(features), count, width), self.tokenizer.pad_token_id, dtype=torch.long)
            for row, feature in enumerate(features):
                for index, sentence in enumerate(feature["summary_sentences"]):
                    sentences[row, index, : len(sentence)] = torch.tensor(sentence, dtype=torch.long)
            batch["summary_sentences"] = sentences
        return batch

    def decode(self, token_ids) -> str:
        """Generated ids to the summary: one sentence per line, split at the separator token, stopped at the end
        token; the begin token and padding are dropped."""
        config = self.config
        sentences, current = [], []
        for token in [int(token) for token in token_ids]:
            if token in (config.decoder_start_token_id, config.pad_token_id):
                continue
            if token in (config.sentence_separator_token_id, config.eos_token_id):
                sentences.append(current)
                current = []
                if token == config.eos_token_id:
                    break
                continue
            current.append(token)
        sentences.append(current)
        texts = [self.tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in sentences]
        return "\n".join(text for text in texts if text)


__all__ = ["BertSumAbsProcessor"]
