"""One HTML page per input: `render_html` draws a pipeline's output (with the details the view reads), and
`summarize_to_html` runs a pipeline with those details and draws its output, or the pipeline's one-line message for
input it refuses."""

import warnings

from ..processing.sentence_layout import document_sentences
from ..text.readable_text import readable_text
from ..text.rotowire_records import Game, parse_game
from .abstractive import COPY_ATTENTION, WORD_OVERLAP, abstractive_body, copy_attention_sources, overlap_sources
from .extractive import extractive_body
from .page import error_block, page, reference_section
from .table_to_text import table_to_text_body

EXTRACTIVE_TASKS = ("extractive-summarization", "stepwise-summarization")
TABLE_TASKS = ("table-to-text", "content-planning")
GENERATING_TASKS = ("abstractive-summarization", "wikisum")
TASKS = (*EXTRACTIVE_TASKS, *GENERATING_TASKS, *TABLE_TASKS)


def render_html(output: dict, task: str, reference: str | None = None, game=None, title: str = "Summary",
                model: str | None = None) -> str:
    """The page of one pipeline output.

    `output`: what the task's pipeline returns, with the details its view reads (`summarize_to_html` asks for them):
    extractive and stepwise, `document_sentences` and `sentence_scores` or the `steps` (`return_sentences=True`,
    stepwise also `return_steps=True`); abstractive and wikisum, `source_sentences`, `sources` and `attribution`;
    table-to-text and content planning, the parsed `game`. Any view also reads `unread_sentences` (per document, the
    sentences past what the model read). An output `{"error": message}` (a batch's refused item) gives a page with
    the message. `reference`: a reference summary (one sentence per line), shown beside the summary with its ROUGE."""
    meta = f"{task}" + (f" · model {model}" if model else "")
    if "error" in output:
        return page(title, error_block(output["error"]), meta)
    if task in EXTRACTIVE_TASKS:
        body = extractive_body(output)
    elif task in GENERATING_TASKS:
        body = abstractive_body(output)
    elif task == "table-to-text":
        body = table_to_text_body(output, game)
    elif task == "content-planning":  # the plan's template sentences, checked as realized text would be
        body = table_to_text_body({"sentences": output["plan_text"], "plan": output["plan"]}, game)
    else:
        raise ValueError(f"no view for task {task!r} (known: {', '.join(TASKS)})")
    summary = output.get("summary", "\n".join(output.get("plan_text", [])))
    return page(title, body + reference_section(summary, reference), meta)


def error_page(message: str, title: str = "Summary", task: str = "", model: str | None = None) -> str:
    """The page of an input that could not be summarized: its one-line message."""
    return page(title, error_block(message), task + (f" · model {model}" if model else ""))


def _full_documents(pipe, document) -> list[list[str]]:
    """Every sentence of each document of `document`, as the model's processor splits it but without the cut at the
    model's limits (the pipeline cuts far past what the model reads, so what it read is a prefix of these)."""
    processor = pipe.model_processor
    if isinstance(document, str):
        document = readable_text(document)
    elif isinstance(document, dict) and isinstance(document.get("documents"), list):
        document = {"documents": [readable_text(item) if isinstance(item, str) else item
                                  for item in document["documents"]]}
    if hasattr(processor, "documents"):  # multi-document processors (HetFormer: markup stripped as it reads)
        return processor.documents(document)
    if isinstance(document, dict) and "documents" in document:
        document = "\n\n".join(item if isinstance(item, str) else " ".join(item) for item in document["documents"])
    return [document_sentences(document)]


def _unread(pipe, document, read_per_document: list[int]) -> list[list[str]]:
    full = _full_documents(pipe, document)
    return [sentences[read_per_document[index] if index < len(read_per_document) else 0 :]
            for index, sentences in enumerate(full)]


def view_output(pipe, inputs, **options) -> dict:
    """The pipeline's output for one input, with the details `render_html` reads for its task (a ValueError or
    TypeError of the pipeline propagates: `summarize_to_html` shows it)."""
    task = pipe.task
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation warnings: the page marks the unread part instead
        if task == "extractive-summarization":
            output = pipe(inputs, return_sentences=True, **options)
        elif task == "stepwise-summarization":
            output = pipe(inputs, return_sentences=True, return_steps=True, **options)
        else:
            output = pipe(inputs, **options)
        if task in EXTRACTIVE_TASKS:
            documents = output.get("sentence_documents") or [0] * len(output["document_sentences"])
            read = [documents.count(index) for index in range(max(documents, default=0) + 1)]
            output["unread_sentences"] = _unread(pipe, inputs, read)
        elif task == "abstractive-summarization":
            copied = copy_attention_sources(pipe, inputs, output["summary"])
            if copied is not None:
                output.update(source_sentences=list(copied[0]), sources=copied[1], attribution=COPY_ATTENTION)
                output["unread_sentences"] = _unread(pipe, inputs, [len(copied[0])])
            else:
                units = _full_documents(pipe, inputs)[0]
                output.update(source_sentences=units, attribution=WORD_OVERLAP,
                              sources=overlap_sources(units, output["summary"].splitlines()))
        elif task == "wikisum":
            paragraphs = output["paragraphs"]
            units = [paragraph["text"] for paragraph in paragraphs]
            output.update(
                source_sentences=units, attribution=WORD_OVERLAP,
                source_labels=[f"rank {p['rank'] + 1}, document {p['document'] + 1}" for p in paragraphs],
                sources=overlap_sources(units, output["summary"].splitlines()),
            )
    return output


def summarize_to_html(pipe, inputs, reference: str | None = None, title: str = "Summary", model: str | None = None,
                      **options) -> str:
    """Summarize one input with `pipe` (any sumformers pipeline; `options` are its call options) and return its
    page. Input the pipeline refuses (its one-line TypeError or ValueError) gives a page with that message, never a
    traceback. For table-to-text and content planning the reference defaults to the game's own summary."""
    try:
        output = view_output(pipe, inputs, **options)
        game = None
        if pipe.task in TABLE_TASKS:
            # parsed with this package's own copy of `Game` (an exported model's processor has another)
            given = inputs["game"] if isinstance(inputs, dict) and "game" in inputs else inputs
            game = given if isinstance(given, Game) else parse_game(given)
    except (TypeError, ValueError) as error:
        return error_page(" ".join(str(error).split()) or type(error).__name__, title, pipe.task, model)
    if game is not None and reference is None and game.summary:
        reference = " ".join(game.summary)
    return render_html(output, pipe.task, reference, game, title, model)


__all__ = ["TASKS", "error_page", "render_html", "summarize_to_html", "view_output"]
