"""The `sumformers` command: summarize, view, evaluate, export.

This module parses and checks the arguments; it sits outside the package so that `--help` and every argument error
answer without loading any of it (nor torch and transformers, which the commands need), and it is the top of the
import graph: it imports the commands (`sumformers.cli`) only once the arguments are valid, and nothing in the
package imports it. Every error is one line
`sumformers: error: ...` on standard error and exit status 2. Ctrl-C (SIGINT) and SIGTERM stop a command with one
line `sumformers: interrupted ...` and exit status 128 + the signal's number (130, 143).
"""

import argparse
import re
import signal
import sys
from pathlib import Path

from sumformers_model_names import model_path_problem

ERROR_EXIT = 2
PROG = "sumformers"
STDIN = "-"

_BASELINE = re.compile(r"(lead|oracle)(?:-([1-9][0-9]*))?")
GAMES_HELP = ("a JSONL of Rotowire games (one a line, in Rotowire's JSON; this project's copy: "
              "../shared/data/rotowire/games.jsonl) to pick from, for a table-to-text or content-planning model")


def fail(message: str):
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(ERROR_EXIT)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so that both stop a command the same way."""


def _terminate(signal_number, frame):
    raise Terminated(signal_number)


def _interrupted_exit(stop: KeyboardInterrupt) -> int:
    """One line for a stopped command (what it had finished: the notes `sumformers.cli` adds), and its exit status."""
    signal_number = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
    notes = "".join(f"; {note}" for note in getattr(stop, "__notes__", ()))
    print(f"{PROG}: interrupted by {signal.Signals(signal_number).name}{notes}", file=sys.stderr)
    return 128 + signal_number


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (argparse prints the usage first); `--help` still shows it."""

    def error(self, message):
        fail(f"{message} (see `{self.prog} --help`)")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def baseline_name(text: str) -> str:
    if _BASELINE.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(f"expected lead, lead-K, oracle or oracle-K (K >= 1), got {text!r}")
    return text


def add_summary_options(parser: argparse.ArgumentParser) -> None:
    """The options that shape a summary, which `summarize` and `view` share."""
    parser.add_argument(
        "--num-sentences", type=positive_int, default=None, help="extractive models: summary length (default: model's)"
    )
    parser.add_argument(
        "--trigram-blocking",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="extractive models: skip a sentence sharing a trigram with one already chosen",
    )
    parser.add_argument(
        "--max-words",
        type=positive_int,
        default=None,
        help="extractive models: summary budget in words (skip what exceeds it)",
    )
    parser.add_argument(
        "--ranker",
        default=None,
        choices=("identity", "tfidf", "textrank", "sumbasic"),
        help="wikisum: paragraph ranker",
    )
    parser.add_argument(
        "--max-input-tokens", type=positive_int, default=None, help="wikisum: L, tokens fed to the decoder"
    )
    parser.add_argument("--num-beams", type=positive_int, default=None, help="wikisum, abstractive: beam size")
    parser.add_argument(
        "--max-new-tokens", type=positive_int, default=None, help="wikisum, abstractive: summary length limit in tokens"
    )
    parser.add_argument(
        "--planner", default=None, help="table-to-text: content-planning model (shipped name, folder or Hub repo id)"
    )
    parser.add_argument(
        "--plan", default=None, choices=("oracle", "template"),
        help="table-to-text: realize each game's oracle plan, or the template plan (the default without --planner)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    summarize = commands.add_parser("summarize", help="summarize a text file, a JSONL file or a folder")
    summarize.add_argument(
        "input",
        help="text or HTML file, JSONL with `document` (or a `documents` list, and `title` for wikisum; a Rotowire "
        "game for table-to-text) per line, a folder of those, or - for standard input; a file or standard input is "
        "JSONL when most of its first lines are JSON objects, whatever its name",
    )
    summarize.add_argument(
        "--model", default=None, help="shipped checkpoint name, model folder or Hub repo id (default: bundled)"
    )
    summarize.add_argument("--output", default=None, help="JSONL output file (default: standard output)")
    add_summary_options(summarize)
    summarize.add_argument("--batch-size", type=positive_int, default=4, help="documents per forward pass")

    view = commands.add_parser("view", help="one self-contained HTML page per input: what the model chose and why")
    view.add_argument("input", help="as for summarize: a text, HTML or JSONL file, a folder, or - for standard input")
    view.add_argument(
        "--model", default=None, help="shipped checkpoint name, model folder or Hub repo id (default: bundled)"
    )
    view.add_argument("--output-dir", required=True, help="folder for the pages (<id>.html each)")
    view.add_argument(
        "--reference",
        default=None,
        help="a reference summary file (one sentence per line) for a single input; a JSONL line's `summary` is "
        "taken by itself, and a Rotowire game's own summary",
    )
    add_summary_options(view)

    demo = commands.add_parser("demo", help="a Gradio app showing the view of pasted text, a file or a Rotowire game")
    demo.add_argument(
        "--model", default=None, help="shipped checkpoint name, model folder or Hub repo id (default: bundled)"
    )
    demo.add_argument("--host", default="127.0.0.1", help="address to serve on (0.0.0.0: every interface)")
    demo.add_argument("--port", type=positive_int, default=None, help="port (default: Gradio's, 7860 or the next free)")
    demo.add_argument("--games", default=None, metavar="JSONL", help=GAMES_HELP)
    add_summary_options(demo)

    evaluate = commands.add_parser("evaluate", help="ROUGE of predictions or a baseline against references")
    evaluate.add_argument("--data", required=True, help="JSONL with `id`, `document` and `summary`")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("--predictions", default=None, help="JSONL with `id` and `summary`")
    source.add_argument("--baseline", type=baseline_name, default=None, help="lead-3 (lead-K) or oracle (oracle-K)")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")

    export = commands.add_parser("export", help="write a self-contained Hub repo: export [MODEL] OUTPUT_DIR")
    export.add_argument("paths", nargs="+", metavar="[MODEL] OUTPUT_DIR")
    export.add_argument("--push-to-hub", default=None, metavar="REPO_ID", help="upload the export (needs network)")
    export.add_argument(
        "--space",
        action="store_true",
        help="write a Hub Space instead: the export in model/, the Gradio demo (app.py), requirements.txt, README.md",
    )
    export.add_argument("--games", default=None, metavar="JSONL", help=f"with --space: {GAMES_HELP}, copied in")
    export.add_argument(
        "--onnx",
        action="store_true",
        help="write ONNX graphs for ONNX Runtime instead (extractive models; needs sumformers[onnx]; see docs/onnx.md)",
    )
    export.add_argument(
        "--quantize",
        choices=["int8"],
        default=None,
        help="with --onnx: int8 graphs (dynamic quantization): faster on CPU, scores further from PyTorch's than "
        "the float32 default (measured drift in docs/onnx.md)",
    )
    return parser


def check_model(name: str | None, flag: str = "--model") -> None:
    """A model that is a local path must be a folder with a config.json (`model_path_problem`)."""
    problem = model_path_problem(name) if name is not None else None
    if problem is not None:
        fail(f"{flag} {problem}")


def check_output_file(name: str | None, flag: str = "--output") -> None:
    if name is None:
        return
    path = Path(name).expanduser()
    if path.is_dir():
        fail(f"{flag} {name}: a folder, not a file")
    if not path.parent.is_dir():
        fail(f"{flag} {name}: the folder {path.parent} does not exist")


def check_input_file(name: str, flag: str) -> None:
    if not Path(name).expanduser().is_file():
        fail(f"{flag} {name}: no such file")


def check_arguments(args) -> None:
    """Everything that can be checked before a model is loaded; an error exits with status 2."""
    if args.command in ("summarize", "view", "demo"):
        if args.command != "demo" and args.input != STDIN and not Path(args.input).exists():
            fail(f"{args.input}: no such file or folder")
        check_model(args.model)
        check_model(args.planner, flag="--planner")
        if args.planner is not None and args.plan is not None:
            fail("give --planner or --plan, not both")
    if getattr(args, "games", None) is not None:
        check_input_file(args.games, "--games")
    if args.command == "summarize":
        check_output_file(args.output)
    elif args.command == "view":
        if args.reference is not None:
            check_input_file(args.reference, "--reference")
        if Path(args.output_dir).expanduser().is_file():
            fail(f"--output-dir {args.output_dir}: a file, not a folder")
    elif args.command == "evaluate":
        check_input_file(args.data, "--data")
        if args.predictions is not None:
            check_input_file(args.predictions, "--predictions")
    elif args.command == "export":
        if len(args.paths) > 2:
            fail("export takes [MODEL] OUTPUT_DIR")
        if args.space and args.push_to_hub:
            fail("--push-to-hub uploads a model repo; upload a Space folder with `hf upload --repo-type space`")
        if args.onnx and args.space:
            fail("--onnx writes a model folder, --space a Space: give one of them")
        if args.quantize is not None and not args.onnx:
            fail("--quantize goes with --onnx (it quantizes the ONNX graphs)")
        if args.games is not None and not args.space:
            fail("--games goes with --space (a model repo carries no games)")
        if len(args.paths) == 2:
            check_model(args.paths[0], flag="export MODEL")
        output = Path(args.paths[-1]).expanduser()
        if output.is_file():
            fail(f"{args.paths[-1]}: a file, not a folder")
        if output.is_dir() and any(output.iterdir()):
            fail(f"{args.paths[-1]} exists and is not empty")


def main(argv=None) -> int:
    # SIGTERM stops a command as Ctrl-C does (unless this process was started with it ignored)
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        check_arguments(args)
        from sumformers import cli  # the heavy import: torch, transformers, every model

        return cli.run(args)
    except KeyboardInterrupt as stop:
        return _interrupted_exit(stop)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
