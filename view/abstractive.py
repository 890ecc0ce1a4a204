"""The view of a generated summary: each summary sentence with the source units (sentences, or a WikiSum model's
ranked paragraphs) it drew most from, linked to the source below it.

What "drew from" means is stated on the page:
- a model with a copy attention (the CopyTransformer) is run once more, teacher-forced on its own summary, and each
  summary sentence's copy attention is summed over the tokens of each source sentence (`copy_attention_sources`);
- any other model: the share of the summary sentence's words (rouge-score's stemmed tokens, counts clipped) that the
  source unit holds (`overlap_sources`), which says where the words could have come from, not what the model read.
"""

from collections import Counter

import torch

from ..text.scoring import rouge_tokenize
from .page import score_text, shade, text

TOP_SOURCES = 3
COPY_ATTENTION = (
    "copy attention: the model's copy attention, summed over the summary sentence's tokens and each source "
    "sentence's tokens, as a share of the sentence's whole copy attention (the model re-run on its own summary)"
)
WORD_OVERLAP = (
    "word overlap: the share of the summary sentence's words (stemmed) that the source unit holds; this model "
    "exposes no copy or cross-attention, so this shows where the words could come from, not what the model attended to"
)


def _top(weights: list[float]) -> list[list]:
    ranked = sorted(range(len(weights)), key=lambda index: -weights[index])
    return [[index, weights[index]] for index in ranked[:TOP_SOURCES] if weights[index] > 0]


def overlap_sources(source_units: list[str], summary_sentences: list[str]) -> list[list[list]]:
    """Per summary sentence, the `TOP_SOURCES` source units holding most of its words: [[unit index, share], ...]."""
    unit_counts = [Counter(rouge_tokenize(unit)) for unit in source_units]
    result = []
    for sentence in summary_sentences:
        words = Counter(rouge_tokenize(sentence))
        total = sum(words.values())
        shares = [sum((words & counts).values()) / total if total else 0.0 for counts in unit_counts]
        result.append(_top(shares))
    return result


def copy_attention_sources(pipe, document, summary: str) -> tuple[list[str], list[list[list]]] | None:
    """The source sentences a CopyTransformer-style model read and, per summary sentence, the `TOP_SOURCES` ones
    that hold most of its copy attention; None when the model has no copy attention."""
    processor, model = pipe.model_processor, pipe.model
    if not hasattr(processor, "source_features") or not summary.strip():
        return None
    source = processor.source_features(pipe.readable_input(document), warn_on_truncation=False)
    sentences, length = source["sentences"], len(source["input_ids"])
    token_sentence = [index for index, (ids, _) in enumerate(processor.pieces(sentences)) for _ in ids][:length]
    labels = processor.target_features(summary.splitlines(), source["source_oov_words"])["labels"]
    tensors = {key: torch.tensor([source[key]], device=model.device)
               for key in ("input_ids", "attention_mask", "source_extended_ids")}
    with torch.no_grad():
        output = model(**tensors, labels=torch.tensor([labels], device=model.device))
    attention = getattr(output, "copy_attentions", None)
    if attention is None:
        return None
    # source tokens -> source sentences: [target tokens, sentences]
    to_sentences = torch.zeros(length, len(sentences))
    to_sentences[torch.arange(length), torch.tensor(token_sentence)] = 1.0
    per_sentence = attention[0].float().cpu() @ to_sentences
    config = model.config
    ends = (config.sentence_separator_token_id, config.eos_token_id)
    result, current = [], torch.zeros(len(sentences))
    for position, token in enumerate(labels):
        if token in ends:
            result.append(current)
            current = torch.zeros(len(sentences))
            if token == config.eos_token_id:
                break
            continue
        current += per_sentence[position]
    if current.any():
        result.append(current)
    return sentences, [_top((mass / mass.sum()).tolist() if mass.sum() > 0 else mass.tolist()) for mass in result]


def abstractive_body(output: dict) -> str:
    """The summary sentences with their sources, then the source units shaded by the attribution they got.

    Reads `summary`, `source_sentences` (the units the sources index; `source_labels` names them, default
    "sentence N"), `sources` (per summary sentence: [[unit index, share], ...]) and `attribution` (what the shares
    are), plus `unread_sentences` where known."""
    units = output["source_sentences"]
    labels = output.get("source_labels") or [f"sentence {index + 1}" for index in range(len(units))]
    summary_sentences = [line for line in output["summary"].splitlines() if line.strip()]
    received = [0.0] * len(units)
    rows = []
    for number, (sentence, sources) in enumerate(zip(summary_sentences, output["sources"]), start=1):
        for index, share in sources:
            received[index] += share
        links = ", ".join(
            f'<a class="source" href="#u{index}" data-index="{index}">{text(labels[index])}</a> '
            f'<span class="score">({score_text(share)})</span>'
            for index, share in sources
        ) or "none found"
        rows.append(
            f'<tr class="summary-sentence" data-sentence="{number}"><td>{number}</td><td>{text(sentence)}</td>'
            f"<td>{links}</td></tr>"
        )
    top = max(received, default=0.0)
    source = " ".join(
        f'<span class="sentence" id="u{index}" data-index="{index}" style="{shade(received[index], top)}" '
        f'title="{text(labels[index])}: drawn from {score_text(received[index])}">{text(unit)} '
        f'<span class="score">[{text(labels[index])}]</span></span>'
        for index, unit in enumerate(units)
    )
    unread = [sentence for document in output.get("unread_sentences") or [] for sentence in document]
    unread_block = (
        f'<div class="unread"><p><strong>Not read by the model</strong> ({len(unread)} sentences past its input '
        f"limit):</p><p>{text(' '.join(unread))}</p></div>"
        if unread else ""
    )
    summary_table = (
        "<table class=\"sources\"><tr><th>#</th><th>summary sentence</th><th>drew most from</th></tr>"
        f"{''.join(rows)}</table>" if rows else "<p>(empty summary)</p>"
    )
    return (
        f'<h2>Summary</h2><div class="summary">{summary_table}</div>'
        f'<p class="legend attribution">Sources by {text(output["attribution"])}.</p>'
        f'<h2>Source</h2><p class="legend">Shaded by the share of the summary drawn from each unit.</p>'
        f'<p class="document">{source}</p>{unread_block}'
    )


__all__ = ["COPY_ATTENTION", "WORD_OVERLAP", "abstractive_body", "copy_attention_sources", "overlap_sources"]
