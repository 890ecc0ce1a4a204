"""The `sumformers` commands: summarize, view, evaluate, export.

The argument parser and its checks are in the top-level module `sumformers_cli` (the console script), which answers
`--help` and argument errors without importing torch; it calls `run` here once the arguments are valid.
"""

import contextlib
import functools
import json
import pickle
import re
import signal
import sys
import warnings
from pathlib import Path

from .text.readable_text import html_main_text

ERROR_EXIT = 2
STDIN = "-"
HTML_SUFFIXES = (".html", ".htm")
TEXT_SUFFIXES = (".txt", ".md", *HTML_SUFFIXES)
# Terminal colour and style codes (ESC [ ... m) that some libraries put in their error messages.
_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _one_line_warnings(message, category, filename, lineno, line=None):
    return f"warning: {message}\n"


def _fail(message: str) -> None:
    print(f"sumformers: error: {message}", file=sys.stderr)
    sys.exit(ERROR_EXIT)


def decoded_text(data: bytes, name) -> str:
    """`data` read as UTF-8; undecodable bytes are replaced (with a warning naming `name`) rather than failing the
    document."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        warnings.warn(f"{name}: bytes that are not UTF-8 were replaced with U+FFFD")
        return data.decode("utf-8", errors="replace")


def read_text_file(path: Path) -> str:
    """Read text as UTF-8 (see `decoded_text`)."""
    return decoded_text(path.read_bytes(), path)


def read_input(name: str) -> list[dict]:
    """The records of the summarize command's input: `read_documents` of a path, or of standard input for `-`."""
    if name == STDIN:
        return stream_records(decoded_text(sys.stdin.buffer.read(), "standard input"), "stdin")
    return read_documents(Path(name))


def stream_records(text: str, name: str) -> list[dict]:
    """The records of a stream (standard input, a pipe): JSONL when every line that is not blank is a JSON object,
    else one text document."""
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and all(_is_json_object(line) for line in lines):
        return jsonl_records(text, name, name)
    return [{"id": name, "document": text}]


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def read_documents(source: Path) -> list[dict]:
    """Documents from a text file, an HTML file (its main text), a JSONL file (`document` or `documents` per line), a
    folder of those, or a pipe (`stream_records`).

    Returns records {"id", "document"} and/or {"documents": [...]} (a JSONL line's list of strings, kept as a list:
    `model_input` decides how a model reads it), with "title" when the line has one, {"id", "game"} for a Rotowire
    game (a line with a `box_score`, for table-to-text), or {"id", "error"} for entries that cannot be used, so one
    bad line does not cost the others.
    """
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.is_file() and p.suffix in (*TEXT_SUFFIXES, ".jsonl"))
        if not files:
            raise ValueError(f"{source} holds no .txt, .md, .html or .jsonl files")
        return [record for path in files for record in read_documents(path)]
    if not source.exists():
        raise ValueError(f"{source}: no such file or folder")
    if not source.is_file():  # a pipe or a device: /dev/stdin, a shell's <(...)
        return stream_records(read_text_file(source), source.name)
    if source.suffix in HTML_SUFFIXES:
        return [{"id": source.stem, "document": html_main_text(read_text_file(source))}]
    if source.suffix != ".jsonl":
        return [{"id": source.stem, "document": read_text_file(source)}]
    return jsonl_records(read_text_file(source), str(source), source.stem)


def jsonl_records(text: str, name: str, stem: str) -> list[dict]:
    """The records of JSONL `text` (see `read_documents`); a record without `id` gets `<stem>:<line number>`, and an
    error names `<name>:<line number>`."""
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record_id = f"{stem}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            records.append({"id": record_id, "error": f"{name}:{number}: not valid JSON ({error.msg})"})
            continue
        if not isinstance(row, dict):
            records.append({"id": record_id, "error": f"{name}:{number}: expected a JSON object"})
            continue
        record = {"id": str(row.get("id", record_id))}
        if "box_score" in row:
            records.append({**record, "game": row})
            continue
        if isinstance(row.get("document"), str):
            record["document"] = row["document"]
        documents = row.get("documents")
        if isinstance(documents, list) and all(isinstance(part, str) for part in documents):
            record["documents"] = documents
        if "document" not in record and "documents" not in record:
            record["error"] = f"{name}:{number}: no `document` string (or `documents` list of strings)"
            records.append(record)
            continue
        # two-stage (WikiSum) models rank the paragraphs of each document against the title
        if isinstance(row.get("title"), str):
            record["title"] = row["title"]
        if isinstance(row.get("summary"), str):  # the reference summary `view` shows beside the model's
            record["reference"] = row["summary"]
        records.append(record)
    return records


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
    if summarizer.task == TABLE_TO_TEXT and "planner" not in options and "plan" not in options:
        _fail("a table-to-text model needs --planner MODEL or --plan oracle")
    if "planner" in options:
        options["planner"] = _load(planner_pipeline, options["planner"])
    return summarizer, options


def _records_and_pipeline(args) -> tuple[list[dict], object, dict]:
    """The input's records (those the model's task cannot read as errors), and `_pipeline_and_options`."""
    try:
        records = read_input(args.input)
    except ValueError as error:
        _fail(str(error))
    summarizer, options = _pipeline_and_options(args)
    return [_task_record(record, summarizer.task) for record in records], summarizer, options


def summarize_command(args) -> int:
    from tqdm.auto import tqdm

    records, summarizer, options = _records_and_pipeline(args)
    valid = [record for record in records if "error" not in record]
    multiple = summarizer.model.reads_multiple_documents
    inputs = (model_input(record, summarizer.task, multiple) for record in valid)
    try:
        outputs = summarizer(inputs, batch_size=args.batch_size, **options) if valid else []
    except ValueError as error:  # options the pipeline refuses before any work (a summary beyond the model's limit)
        _fail(one_line(error))
    progress = tqdm(outputs, total=len(valid), disable=len(valid) <= 1, desc="summarizing", file=sys.stderr)
    results = iter(progress)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115 (closed below)
    failed = written = 0
    try:
        for record in records:
            if "error" in record:
                failed += 1
                print(f"sumformers: error: {record['error']}", file=sys.stderr)
                row = {"id": record["id"], "error": record["error"]}
            else:
                row = {"id": record["id"], **next(results)}
            # each result reaches the file as soon as it is finished, so that a stopped command keeps it
            with signals_held():
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
                written += 1
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM (sumformers_cli prints the line and exits)
        progress.close()
        stop.add_note(f"{written} of {len(records)} results written to {args.output or 'standard output'}")
        raise
    finally:
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
        games = {record["id"]: record["game"] for record in read_documents(Path(args.games)) if "game" in record}
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


def main(argv=None) -> int:
    """The command line (kept here for `python -m sumformers.cli` and callers of `sumformers.cli.main`)."""
    from sumformers_cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
