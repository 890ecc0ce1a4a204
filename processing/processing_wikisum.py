"""Processor of WikiSum (Liu et al. 2018): a title and documents in, paragraphs ranked against the title (the
extractive stage) and the best that fit in L tokens out, as one decoder input
``[bos] title [sep] paragraph [sep] ... [separator]``; the generated ids back into text."""

from pathlib import Path

import torch

from ..text.jsonl import read_jsonl
from ..text.ranking import RANKERS, RANKING_UNITS, fit_to_budget, rank_paragraphs, split_paragraphs
from ..text.sentences import split_sentences, strip_transcript_markup
from .processing_utils import SummarizationProcessor


def wikisum_inputs(inputs) -> tuple[str, list[str], str | None]:
    """(title, documents, reference) of a pipeline input: a string (one document, no title) or a dict with `title`
    (optional), `documents` (list of strings) or `document` (string), and `reference` (needed by the oracle). A dict
    with a title and neither `documents` nor `document` has no documents."""
    if isinstance(inputs, str):
        return "", [inputs], None
    if not isinstance(inputs, dict):
        # ValueError like every other input check of WikiSum's (the pipelines catch both)
        raise ValueError(  # noqa: TRY004
            f"expected a string or a dict with `title` and `documents`, got {type(inputs).__name__}"
        )
    title = inputs.get("title") or ""
    documents = inputs.get("documents", inputs.get("document"))
    if documents is None and "title" in inputs:
        documents = []
    if isinstance(documents, str):
        documents = [documents]
    if not isinstance(title, str):
        raise ValueError("`title` must be a string")  # noqa: TRY004
    if not isinstance(documents, (list, tuple)) or not all(isinstance(document, str) for document in documents):
        raise ValueError("give `documents` (a list of strings) or `document` (a string)")
    reference = inputs.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise ValueError("`reference` must be a string")
    return title, list(documents), reference


def encode_wikisum_input(tokenizer, config, title: str, ranked, max_input_tokens: int) -> tuple[list[int], list]:
    """Token ids of the decoder input ``[bos] title [sep] paragraph [sep] paragraph [sep] ... [separator]``, the
    part before the separator holding at most `max_input_tokens` tokens (the paper's L; the last paragraph is cut),
    and the (RankedParagraph, token count) pairs that were fed in. Training and the pipeline both use it."""
    if max_input_tokens < 2:
        raise ValueError(f"max_input_tokens must be at least 2, got {max_input_tokens}")
    paragraph_separator = config.paragraph_separator_token_id

    def token_ids(text):  # verbose=False: the tokenizer's own length limit (512 for MiniLM) does not apply here
        return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    prefix = ([config.bos_token_id] + token_ids(title) + [paragraph_separator])[:max_input_tokens]

    def paragraph_tokens(text):
        return token_ids(text) + [paragraph_separator]

    fitted = fit_to_budget(ranked, max_input_tokens - len(prefix), paragraph_tokens)
    input_ids = prefix + [token for _, tokens in fitted for token in tokens] + [config.separator_token_id]
    return input_ids, [(item, len(tokens)) for item, tokens in fitted]


def _topic_title(row: dict) -> str:
    """QMSum: its topic list; FewSum: the product category; otherwise the row's title or nothing."""
    if isinstance(row.get("title"), str):
        return row["title"]
    if isinstance(row.get("topics"), list):
        return "; ".join(topic["topic"] for topic in row["topics"] if isinstance(topic, dict) and topic.get("topic"))
    if isinstance(row.get("category"), str):
        return row["category"].replace("_", " ")
    return ""


def sentence_lines(documents: list[str]) -> list[str]:
    """Each document rewritten one sentence a line, so that the rankers rank sentences."""
    return ["\n".join(split_sentences(document)) for document in documents]


def read_wikisum_examples(
    path: str, specific_queries: bool = False, ranking_unit: str = "paragraph", max_rows: int | None = None
) -> list[dict]:
    """Rows of a shared-data JSONL file (gzip-compressed if it ends in .gz; the first `max_rows` if given) as {"id",
    "title", "documents", "summary"} (a row without `id` gets `<file stem>:<row number>`); with `specific_queries`,
    QMSum's query/answer pairs are added with the query as title. With `ranking_unit="sentence"` every document is
    rewritten one sentence a line, so that the rankers rank sentences: CNN/DM articles (one `document`, the
    highlights as `summary`) have no paragraph breaks."""
    if ranking_unit not in RANKING_UNITS:
        raise ValueError(f"ranking_unit must be one of {RANKING_UNITS}, got {ranking_unit!r}")
    examples = []
    for row_number, row in enumerate(read_jsonl(path)[:max_rows], start=1):
        row_id = str(row.get("id", f"{Path(path).stem}:{row_number}"))
        documents = row.get("documents") if isinstance(row.get("documents"), list) else [row.get("document")]
        if not all(isinstance(document, str) for document in documents) or not isinstance(row.get("summary"), str):
            raise ValueError(f"{path}, row {row_number}: needs `document` or `documents` (text) and `summary` (text)")
        # QMSum's transcript markup is noise for ranking and modelling.
        documents = [strip_transcript_markup(document) for document in documents]
        if ranking_unit == "sentence":
            documents = sentence_lines(documents)
        examples.append({"id": row_id, "title": _topic_title(row), "documents": documents, "summary": row["summary"]})
        if specific_queries:
            for number, query in enumerate(row.get("specific_queries") or []):
                examples.append(
                    {
                        "id": f"{row_id}-q{number}",
                        "title": query["query"],
                        "documents": documents,
                        "summary": query["answer"],
                    }
                )
    return examples


class WikiSumProcessor(SummarizationProcessor):
    """Inputs: a string (one long text, no title) or ``{"title": ..., "documents": [...]}`` (``"document"`` for one
    text; ``"reference"`` for the oracle ranker). `__call__` returns `input_ids`, `attention_mask` (a batch of one)
    and `paragraphs`, the ranked paragraphs that were fed in (best first).

    Documents without a paragraph (no documents, empty or whitespace-only text; a title alone does not count) leave
    nothing to summarize: `input_ids` and `attention_mask` then have length 0 and `paragraphs` is empty, and the
    pipeline returns an empty summary without generating."""

    def check_input(self, inputs) -> None:
        wikisum_inputs(inputs)

    def encode(
        self,
        inputs,
        ranker: str | None = None,
        max_input_tokens: int | None = None,
        ranking_unit: str = "paragraph",
    ) -> tuple[list[int], list]:
        """The decoder input's token ids (a list) and the (RankedParagraph, token count) pairs fed in: paragraphs
        (with `ranking_unit="sentence"`: sentences) ranked by `ranker` (default the config's), cut at
        `max_input_tokens` (default the config's L)."""
        title, documents, reference = wikisum_inputs(inputs)
        ranker = ranker or self.config.ranker
        if ranker not in RANKERS:
            raise ValueError(f"ranker must be one of {RANKERS}, got {ranker!r}")
        if ranking_unit not in RANKING_UNITS:
            raise ValueError(f"ranking_unit must be one of {RANKING_UNITS}, got {ranking_unit!r}")
        if ranking_unit == "sentence":
            documents = sentence_lines(documents)
        if ranker == "oracle" and reference is None:
            raise ValueError("the oracle ranker needs the reference summary in the input: {'reference': ...}")
        paragraphs = split_paragraphs(documents)
        if not paragraphs:  # nothing to summarize: no decoder input (the pipeline then writes no summary)
            return [], []
        ranked = rank_paragraphs(paragraphs, title=title, ranker=ranker, reference=reference)
        return encode_wikisum_input(
            self.tokenizer, self.config, title, ranked, max_input_tokens or self.config.max_input_tokens
        )

    def training_features(
        self, example: dict, max_summary_tokens: int, ranker: str | None = None, max_input_tokens: int | None = None
    ) -> dict:
        """One training example (`title`, `documents`, `summary`) as lists (what `collate` pads): `input_ids`, the
        decoder input `__call__` gives the model, `summary_start` (its length) and `summary_ids`, the summary's first
        `max_summary_tokens` tokens and the end token. The documents are ranked as given: the training data is laid
        out once when read (`read_wikisum_examples`' `ranking_unit`)."""
        inputs = {"title": example["title"], "documents": example["documents"]}
        input_ids, _ = self.encode(inputs, ranker, max_input_tokens)
        summary_ids = self.tokenizer(example["summary"], add_special_tokens=False, verbose=False)["input_ids"]
        summary_ids = summary_ids[:max_summary_tokens] + [self.config.eos_token_id]
        return {"input_ids": input_ids, "summary_start": len(input_ids), "summary_ids": summary_ids}

    def collate(self, features: list[dict], summary_loss_only: bool = False) -> dict:
        """Right-padded ``[input ; separator ; summary]`` with labels on every real token (the paper's T-D loss), or
        with `summary_loss_only` on the summary tokens and the end token alone (a conditional language model); then
        the model scores only the positions that predict a label (`logits_to_keep`, from the batch's earliest
        separator on, with the labels cut to match): the vocabulary softmax over the input tokens is most of a
        step's output layer and has no label to serve."""
        sequences = [feature["input_ids"] + feature["summary_ids"] for feature in features]
        width = max(len(sequence) for sequence in sequences)
        input_ids = torch.full((len(features), width), self.config.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros(len(features), width, dtype=torch.long)
        for row, sequence in enumerate(sequences):
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention_mask[row, : len(sequence)] = 1
        labels = input_ids.masked_fill(attention_mask == 0, -100)
        if not summary_loss_only:
            return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
        for row, feature in enumerate(features):
            labels[row, : feature["summary_start"]] = -100
        # the position before a row's first label predicts it (the model shifts the labels)
        keep = width - min(feature["summary_start"] for feature in features) + 1
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels[:, -keep:],
                "logits_to_keep": keep}

    def __call__(
        self, inputs, ranker: str | None = None, max_input_tokens: int | None = None, ranking_unit: str | None = None
    ) -> dict:
        """The pipeline's input: ranked by `ranking_unit`, default the config's (a model trained on sentences ranks
        the sentences of a plain article, as it was trained and scored)."""
        input_ids, fed = self.encode(inputs, ranker, max_input_tokens, ranking_unit or self.config.ranking_unit)
        if not input_ids:
            empty = torch.zeros(1, 0, dtype=torch.long)
            return {"input_ids": empty, "attention_mask": empty.clone(), "paragraphs": ()}
        paragraphs = tuple(
            {
                "index": item.paragraph.index,
                "document": item.paragraph.document,
                "rank": item.rank,
                "score": item.score,
                "tokens": used,
                "text": item.paragraph.text,
            }
            for item, used in fed
        )
        return {
            "input_ids": torch.tensor([input_ids]),
            "attention_mask": torch.ones(1, len(input_ids), dtype=torch.long),
            # a tuple (not a list) so that a pipeline batch of them can be told apart from one input
            "paragraphs": paragraphs,
        }

    def decode(self, summary_ids) -> str:
        return self.tokenizer.decode(
            list(summary_ids), skip_special_tokens=True, clean_up_tokenization_spaces=True
        ).strip()


__all__ = ["RANKING_UNITS", "WikiSumProcessor", "encode_wikisum_input", "read_wikisum_examples", "wikisum_inputs"]
