"""The `sumformers` commands: summarize, view, evaluate, export.

The argument parser, its checks and `main` are in the top-level module `sumformers_cli` (the console script, also
`python -m sumformers_cli`), which answers `--help` and argument errors without loading the package; it calls `run`
here once the arguments are valid.
"""

import contextlib
import functools
import json
import pickle
import re
import signal
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from .input_records import batched, path_records, read_records, read_text_file

ERROR_EXIT = 2
# Terminal colour and style codes (ESC [ ... m) that some libraries put in their error messages.
_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _one_line_warnings(message, category, filename, lineno, line=None):
    return f"warning: {message}\n"


def _fail(message: str) -> None:
    print(f"sumformers: error: {message}", file=sys.stderr)
    sys.exit(ERROR_EXIT)


def model_input(record: dict, task: str, multiple_documents: bool):
    """A read record as the pipeline's input: table-to-text gets its game, WikiSum its title and documents, a
    multi-document model the `documents` list, any other model one text (several documents joined one per
    paragraph)."""
    if task == TABLE_TO_TEXT:
        return record["game"]
    documents = record.get("documents")
    if task == "wikisum":
        return {"title": record.get("title", ""), "documents": documents or [record.get("document", "")]}
    if multiple_documents and documents:
        return {"documents": documents}
    return record["document"] if "document" in record else "\n\n".join(documents)


_EXTRACTIVE_OPTIONS = {
    "num_sentences": "--num-sentences",
    "trigram_blocking": "--trigram-blocking",
    "max_words": "--max-words",
}
_WIKISUM_OPTIONS = {
    "ranker": "--ranker",
    "max_input_tokens": "--max-input-tokens",
    "num_beams": "--num-beams",
    "max_new_tokens": "--max-new-tokens",
}


_ABSTRACTIVE_OPTIONS = {"num_beams": "--num-beams", "max_new_tokens": "--max-new-tokens"}
TABLE_TO_TEXT = "table-to-text"
_TABLE_TO_TEXT_OPTIONS = {"planner": "--planner", "plan": "--plan", **_ABSTRACTIVE_OPTIONS}
_TASK_OPTIONS = {
    "wikisum": _WIKISUM_OPTIONS,
    "wikisum-llama": {"max_new_tokens": "--max-new-tokens"},
    "abstractive-summarization": _ABSTRACTIVE_OPTIONS,
    TABLE_TO_TEXT: _TABLE_TO_TEXT_OPTIONS,
}


def _task_options(args, task: str) -> dict:
    """The summarize options that were given, checked against the model's task."""
    accepted = _TASK_OPTIONS.get(task, _EXTRACTIVE_OPTIONS)
    for name, flag in {**_EXTRACTIVE_OPTIONS, **_WIKISUM_OPTIONS, **_TABLE_TO_TEXT_OPTIONS}.items():
        if getattr(args, name) is not None and name not in accepted:
            _fail(f"{flag} does not apply to a {task} model")
    return {name: getattr(args, name) for name in accepted if getattr(args, name) is not None}


def _load(loader, name: str | None):
    """`loader(name)`, with a model that cannot be loaded (no such name or Hub repo, a broken folder, weights it
    refuses to unpickle) as one error line rather than a traceback."""
    try:
        return loader(name)
    except Exception as error:  # noqa: BLE001 (transformers, huggingface_hub, peft and torch raise many kinds)
        _fail(f"could not load model {name or 'default'}: {load_error(error)}")


def one_line(error: Exception) -> str:
    """An error's whole message on one line: its lines joined, runs of whitespace made one space, terminal colour
    codes removed (torch's refusal to unpickle, for one, has all three)."""
    return " ".join(_TERMINAL_CODES.sub("", str(error)).split()) or type(error).__name__


def load_error(error: Exception) -> str:
    """`one_line(error)` of a model that failed to load, saying first what a refused pickle means here."""
    if isinstance(error, pickle.UnpicklingError):
        return f"its weights are a pickle holding more than tensors, refused as unsafe: {one_line(error)}"
    return one_line(error)


@contextlib.contextmanager
def signals_held():
    """Ctrl-C and SIGTERM wait until the block has run (and then stop the command), so that a result line is written
    whole or not at all."""
    stops = {signal.SIGINT, signal.SIGTERM}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _task_record(record: dict, task: str) -> dict:
    """A record the model's task cannot read (a document for table-to-text, a game for the others) as an error."""
    if "error" in record or ("game" in record) == (task == TABLE_TO_TEXT):
        return record
    wanted = "a Rotowire game (a line with `box_score`)" if task == TABLE_TO_TEXT else "a document, not a game"
    return {"id": record["id"], "error": f"{record['id']}: a {task} model reads {wanted}"}


def _pipeline_and_options(args) -> tuple[object, dict]:
    """The model's pipeline and the options given for its task (`summarize`, `view`, `demo`)."""
    from .hub import load_pipeline
    from .pipelines.table_to_text import planner_pipeline

    summarizer = _load(load_pipeline, args.model)
    options = _task_options(args, summarizer.task)
    if (summarizer.task == TABLE_TO_TEXT and "planner" not in options and "plan" not in options
            and summarizer.model.config.plan_template is None):
        _fail("this table-to-text model has no plan template: give --planner MODEL or --plan oracle")
    if "planner" in options:
        options["planner"] = _load(planner_pipeline, options["planner"])
    return summarizer, options


def _records_and_pipeline(args) -> tuple[Iterator[dict], object, dict]:
    """The input's records, read as they are consumed (those the model's task cannot read as errors), and
    `_pipeline_and_options`."""
    try:
        records = read_records(args.input)
    except ValueError as error:
        _fail(str(error))
    summarizer, options = _pipeline_and_options(args)
    return (_task_record(record, summarizer.task) for record in records), summarizer, options


def _output_rows(records: Iterator[dict], summarizer, options: dict, batch_size: int) -> Iterator[dict]:
    """Each record's output row, in input order: its summary, or its error placed by where it came from (a record
    that could not be read, an input the pipeline refuses). A batch of `batch_size` records at a time: a stream of
    any length is read in constant memory, and a batch's rows are out as soon as its forward pass is done."""
    multiple = summarizer.model.reads_multiple_documents
    for batch in batched(records, batch_size):
        valid = [record for record in batch if "error" not in record]
        inputs = [model_input(record, summarizer.task, multiple) for record in valid]
        try:
            results = iter(summarizer(inputs, batch_size=batch_size, **options) if valid else [])
        except ValueError as error:  # options the pipeline refuses before any work (a summary beyond the model's limit)
            _fail(one_line(error))
        for record in batch:
            if "error" in record:
                yield {"id": record["id"], "error": record["error"]}
                continue
            result = next(results)
            if "error" in result:
                result = {"error": f"{record['id']}: {result['error']}"}
            yield {"id": record["id"], **result}


def summarize_command(args) -> int:
    from tqdm.auto import tqdm

    records, summarizer, options = _records_and_pipeline(args)
    progress = tqdm(desc="summarizing", unit=" documents", file=sys.stderr, disable=None)  # None: only on a terminal
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115 (closed below)
    failed = written = 0
    try:
        for row in _output_rows(records, summarizer, options, args.batch_size):
            if "error" in row:
                failed += 1
                print(f"sumformers: error: {row['error']}", file=sys.stderr)
            # each result reaches the file as soon as it is finished, so that a stopped command keeps it
            with signals_held():
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                written += 1
            progress.update()
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM (sumformers_cli prints the line and exits)
        stop.add_note(f"{written} results written to {args.output or 'standard output'}")
        raise
    finally:
        progress.close()
        if out is not sys.stdout:
            out.close()
    return ERROR_EXIT if failed else 0


def page_file_name(record_id: str, taken: set[str]) -> str:
    """A file name for a record's page: its id with anything but letters, digits, `.`, `_` and `-` made `_`,
    numbered where two ids give the same name."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", record_id).strip(".") or "page"
    name, number = f"{stem}.html", 1
    while name in taken:
        number += 1
        name = f"{stem}-{number}.html"
    taken.add(name)
    return name


def view_command(args) -> int:
    from .view import error_page, summarize_to_html

    records, summarizer, options = _records_and_pipeline(args)
    records = list(records)
    if args.reference is not None and len(records) != 1:
        _fail(f"--reference is for a single input; {args.input} holds {len(records)} (give each a `summary`)")
    reference = read_text_file(Path(args.reference)) if args.reference is not None else None
    output = Path(args.output_dir).expanduser()
    output.mkdir(parents=True, exist_ok=True)
    model, task = args.model or "default", summarizer.task
    multiple = summarizer.model.reads_multiple_documents
    failed, taken = 0, set()
    for record in records:
        if "error" in record:
            failed += 1
            print(f"sumformers: error: {record['error']}", file=sys.stderr)
            page = error_page(record["error"], record["id"], task, model)
        else:
            page = summarize_to_html(summarizer, model_input(record, task, multiple),
                                     reference=record.get("reference", reference), title=record["id"], model=model,
                                     **options)
        path = output / page_file_name(record["id"], taken)
        path.write_text(page, encoding="utf-8")
        print(path)
    return ERROR_EXIT if failed else 0


def demo_command(args) -> int:
    try:
        from .demo.app import build_demo
    except ImportError as error:
        _fail(f'the demo needs Gradio ({one_line(error)}): pip install "sumformers[demo]"')
    summarizer, options = _pipeline_and_options(args)
    games = {}
    if args.games is not None:
        games = {record["id"]: record["game"] for record in path_records(Path(args.games)) if "game" in record}
    build_demo(summarizer, args.model or "default", options, games).launch(
        server_name=args.host, server_port=args.port
    )
    return 0


def evaluate_command(args) -> int:
    from .text.evaluation import evaluate_file

    try:
        scores = evaluate_file(args.data, predictions_path=args.predictions, baseline=args.baseline)
    except (ValueError, FileNotFoundError) as error:
        _fail(str(error))
    if args.json:
        print(json.dumps(scores))
    else:
        print(f"{'metric':<10} {'F1 x 100':>9}")
        for metric in ("rouge1", "rouge2", "rougeLsum"):
            print(f"{metric:<10} {scores[metric]:>9.2f}")
        print(f"({scores['num_examples']} examples)")
    return 0


def export_command(args) -> int:
    from .hub import export_model, push_to_hub

    model, output = (None, args.paths[0]) if len(args.paths) == 1 else args.paths
    write = export_model
    if args.space:
        try:
            from .demo.space import write_space
        except ImportError as error:
            _fail(f'a Space needs Gradio ({one_line(error)}): pip install "sumformers[demo]"')
        write = functools.partial(write_space, games_file=args.games)
    if args.onnx:
        try:
            from .onnx_export import export_onnx

            write = functools.partial(export_onnx, quantize=args.quantize)
        except ImportError as error:
            _fail(f'ONNX export needs onnxscript and onnxruntime ({one_line(error)}): pip install "sumformers[onnx]"')
    try:
        folder = write(model, output)
    except FileExistsError as error:
        _fail(str(error))
    except Exception as error:  # noqa: BLE001 (loading: no such name or Hub repo, a broken folder)
        _fail(f"could not export model {model or 'default'}: {load_error(error)}")
    print(f"exported to {folder}")
    if args.push_to_hub:
        print(f"pushed: {push_to_hub(str(folder), args.push_to_hub)}")
    return 0


COMMANDS = {
    "summarize": summarize_command,
    "view": view_command,
    "demo": demo_command,
    "evaluate": evaluate_command,
    "export": export_command,
}


def run(args) -> int:
    """Run a parsed, checked command (`sumformers_cli.main` parses and checks)."""
    warnings.formatwarning = _one_line_warnings
    # Deprecation notices from the libraries underneath are for developers, not for someone summarizing a file.
    warnings.filterwarnings("ignore", category=FutureWarning)
    # Loading reports and weight-loading progress bars are noise for a command-line user; warnings stay.
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    return COMMANDS[args.command](args)


if __name__ == "__main__":  # the commands need parsed, checked arguments: the console script's
    sys.exit("sumformers: error: run the command line as `sumformers` or `python -m sumformers_cli`")
