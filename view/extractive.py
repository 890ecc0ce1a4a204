"""The view of an extractive or stepwise summary: the document with every sentence the model read shaded by its
score (the score also as text and on hover), the chosen ones highlighted and numbered in the order they were chosen,
grouped by document for multi-document input, the part the model did not read marked as such; for a stepwise model,
each step's choice and the model's other candidates at that step.

Reads a pipeline's output with `return_sentences=True` (and, for stepwise models, `return_steps=True`), plus
`unread_sentences` (per document, the sentences past what the model read) where the caller knows them."""

import math

from .page import score_text, shade, text

ALTERNATIVES = 3  # candidates shown per step besides the choice


def is_stepwise(output: dict) -> bool:
    return "steps" in output


def sentence_scores(output: dict) -> list[float]:
    """The score that shades each sentence: an extractive model's probability; for a stepwise model, the
    probability of each sentence at the first step (before anything was chosen)."""
    if not is_stepwise(output):
        return list(output["sentence_scores"])
    steps = output["steps"]
    if not steps or "distribution" not in steps[0]:
        raise ValueError("a stepwise output needs return_steps=True to be shown")
    return list(steps[0]["distribution"][: len(output["document_sentences"])])


def selection_order(output: dict) -> list[int]:
    """The chosen sentences in the order the model chose them: a stepwise model's steps; an extractive model takes
    them best-scored first."""
    if is_stepwise(output):
        return list(output["selection_order"])
    scores = output["sentence_scores"]
    return sorted(output["sentences"], key=lambda index: -scores[index])


def _sentence_span(index: int, sentence: str, score: float, top: float, order: int | None, label: str) -> str:
    title = f"sentence {index + 1}: {label} {score_text(score)}"
    if order is not None:
        title += f", chosen {order}"
        return (
            f'<span class="sentence chosen" id="s{index}" data-index="{index}" data-order="{order}" '
            f'title="{text(title)}"><span class="order">{order}</span>{text(sentence)} '
            f'<span class="score">({score_text(score)})</span></span>'
        )
    return (
        f'<span class="sentence" id="s{index}" data-index="{index}" style="{shade(score, top)}" '
        f'title="{text(title)}">{text(sentence)} <span class="score">({score_text(score)})</span></span>'
    )


def _steps_table(output: dict) -> str:
    sentences = output["document_sentences"]

    def name(index: int | None) -> str:
        if index is None or index >= len(sentences):
            return "END (stop)"
        return f"sentence {index + 1}: {sentences[index][:60]}{'...' if len(sentences[index]) > 60 else ''}"

    rows, previous = [], 0.0
    for number, step in enumerate(output["steps"], start=1):
        distribution = step.get("distribution") or []
        choice = len(distribution) - 1 if step["sentence"] is None else step["sentence"]
        candidates = sorted((i for i in range(len(distribution)) if i != choice), key=lambda i: -distribution[i])
        alternatives = "<br>".join(
            f"{text(name(None if i == len(distribution) - 1 else i))} "
            f'<span class="score">p {score_text(distribution[i])}, beam '
            f"{previous + math.log(max(distribution[i], 1e-300)):.2f}</span>"
            for i in candidates[:ALTERNATIVES]
        )
        rows.append(
            f'<tr class="step" data-step="{number}"><td>{number}</td><td>{text(name(step["sentence"]))}</td>'
            f'<td>{score_text(step["probability"])}</td><td>{step["score"]:.2f}</td><td>{alternatives}</td></tr>'
        )
        previous = step["score"]
    return (
        "<h2>Steps</h2><p class=\"legend\">Each step's choice, its probability and the beam score after it (the sum "
        "of log-probabilities); beside it the model's next most probable candidates at that step, with the beam "
        "score each would have given (some may have been ruled out by trigram blocking or the word budget).</p>"
        "<table class=\"steps\"><tr><th>step</th><th>chosen</th><th>probability</th><th>beam score</th>"
        f"<th>other candidates</th></tr>{''.join(rows)}</table>"
    )


def extractive_body(output: dict) -> str:
    """The summary, then the document(s) as described in the module docstring, then a stepwise model's steps."""
    sentences = output["document_sentences"]
    scores = sentence_scores(output)
    order = {index: rank for rank, index in enumerate(selection_order(output), start=1)}
    label = "first-step probability" if is_stepwise(output) else "probability"
    top = max(scores, default=0.0)
    summary = "".join(
        f'<p class="summary-sentence" data-index="{index}"><span class="order">{order[index]}</span>'
        f"{text(sentences[index])}</p>"
        for index in output["sentences"]
    ) or "<p>(empty summary: no sentence to choose)</p>"
    documents = output.get("sentence_documents") or [0] * len(sentences)
    unread = output.get("unread_sentences") or []
    count = max([*documents, len(unread) - 1], default=0) + 1
    parts = []
    for document in range(count):
        spans = " ".join(
            _sentence_span(index, sentences[index], scores[index], top, order.get(index), label)
            for index in range(len(sentences))
            if documents[index] == document
        )
        heading = f"<h3>Document {document + 1}</h3>" if count > 1 else ""
        parts.append(f'{heading}<p class="document" data-document="{document}">{spans}</p>')
        missed = unread[document] if document < len(unread) else []
        if missed:
            parts.append(
                f'<div class="unread" data-document="{document}"><p><strong>Not read by the model</strong> '
                f"({len(missed)} sentence{'s' * (len(missed) != 1)} past its input limit):</p>"
                f"<p>{text(' '.join(missed))}</p></div>"
            )
    legend = (
        '<p class="legend">Highlighted and numbered: the chosen sentences, in the order the model chose them. Every '
        f"sentence read is shaded by its score ({label}, in brackets and on hover); darker is higher.</p>"
    )
    steps = _steps_table(output) if is_stepwise(output) else ""
    return (
        f'<h2>Summary</h2><div class="summary">{summary}</div><h2>Document</h2>{legend}{"".join(parts)}{steps}'
    )


__all__ = ["extractive_body", "selection_order", "sentence_scores"]
