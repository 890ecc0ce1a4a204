"""One pipeline object called from several threads (as a server calls it) gives exactly the results of calling it
from one thread: for every task with a shipped checkpoint, 4 threads over the same inputs give the same outputs as
a sequential run. Short inputs keep the default run fast; the `slow` variants run 50 documents (or games) through
every pipeline."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_rotowire import tiny_game

from sumformers.hub import load_pipeline
from sumformers.text.rotowire_records import EOS, EOT
from sumformers.text.sentences import split_sentences

pytestmark = pytest.mark.usefixtures("one_thread")

THREADS = 4
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def bundled_articles() -> list[str]:
    """The four bundled CNN articles."""
    rows = (EXAMPLES / "cnn_three_articles.jsonl").read_text().splitlines()
    return [(EXAMPLES / "cnn_missing_student.txt").read_text(), *(json.loads(row)["document"] for row in rows)]


def short_documents(count: int) -> list[str]:
    """`count` distinct documents of 2 to 4 consecutive sentences of the bundled articles (77 sentences)."""
    sentences = [sentence for article in bundled_articles() for sentence in split_sentences(article)]
    return [" ".join(sentences[(3 * i) % 73 : (3 * i) % 73 + 2 + i % 3]) for i in range(count)]


def games(count: int) -> list[dict]:
    """`count` variants of the hand-written test game, each with other points for the home team and Kevin Love."""
    variants = []
    for index in range(count):
        game = tiny_game(id=f"tiny-{index}")
        game["home_line"]["TEAM-PTS"] = str(90 + index)
        game["box_score"]["PTS"]["0"] = str(10 + index)
        variants.append(game)
    return variants


def plans(count: int) -> list[dict]:
    """Games with a two-sentence plan of their own (the realizer's input)."""
    plan = ["Kevin Love|PLAYER_NAME", "Kevin Love|PTS", EOS, "Cavaliers|TEAM-NAME", "Cavaliers|TEAM-PTS", EOT]
    return [{"game": game, "plan": plan} for game in games(count)]


def threaded(function, inputs: list) -> list:
    """`function` over `inputs` (at least THREADS) in THREADS threads that start together, results in input order."""
    start = threading.Barrier(THREADS)
    with ThreadPoolExecutor(THREADS, initializer=start.wait, initargs=(60,)) as pool:
        return list(pool.map(function, inputs))


# name: inputs(count), the call options (cycled over the inputs), inputs in the default run. Generation is cut short
# where decoding dominates; WikiSum's calls alternate its two length penalties, which generate() keeps per call.
GNMT = {"length_penalty_type": "gnmt", "length_penalty": 0.6}
CASES = {
    "bertsum-minilm-cnndm": (short_documents, [{}], 16),
    "hibert-minilm-cnndm": (short_documents, [{}], 16),
    "etcsum-minilm-cnndm": (short_documents, [{}], 12),
    "hetformer-minilm-qmsum": (short_documents, [{}], 6),
    "stepwise-hibert-minilm-cnndm": (short_documents, [{}], 24),
    "stepwise-etcsum-minilm-cnndm": (short_documents, [{"beam_size": 2, "num_sentences": 2}], 4),
    "copytransformer-circular2d-cnndm": (short_documents, [{"num_beams": 2, "min_length": 2, "max_length": 12}], 8),
    "wikisum-tdmca-copy-minilm-cnndm": (short_documents, [{"num_beams": 2, "max_new_tokens": 8, **GNMT},
                                                          {"num_beams": 2, "max_new_tokens": 8}], 8),
    "stepwise-hibert-planner-minilm-rotowire": (games, [{"num_sentences": 2}], 4),
    "realizer-minilm-rotowire": (plans, [{"num_beams": 2, "max_new_tokens": 8}], 4),
}


def check_threads_give_the_sequential_results(name: str, count: int) -> None:
    make_inputs, options, _ = CASES[name]
    calls = [(item, options[index % len(options)]) for index, item in enumerate(make_inputs(count))]
    summarizer = load_pipeline(name)

    def call(item_and_options):
        item, item_options = item_and_options
        return summarizer(item, **item_options)

    # threads first, on a fresh pipeline: first calls that set up shared state race with each other
    in_threads = threaded(call, calls)
    in_sequence = [call(item_and_options) for item_and_options in calls]
    assert len({json.dumps(output, sort_keys=True) for output in in_sequence}) > 1  # the inputs are told apart
    mismatched = [index for index, (got, want) in enumerate(zip(in_threads, in_sequence)) if got != want]
    assert not mismatched, f"{len(mismatched)} of {count} results differ in threads: {mismatched}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_threads_give_the_sequential_results(name):
    check_threads_give_the_sequential_results(name, CASES[name][2])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_threads_give_the_sequential_results_over_50_inputs(name):
    check_threads_give_the_sequential_results(name, 50)


def test_sentence_splitting_in_threads_gives_the_sequential_sentences():
    """Sentences split in threads are the sequential ones (pysbd, the splitter before blingfire, kept the text it
    segmented on a shared segmenter and mixed up documents)."""
    articles = bundled_articles()
    documents = [articles[i % 4][(i * 37) % 500 :] for i in range(50)]
    expected = [split_sentences(document) for document in documents]
    assert threaded(split_sentences, documents) == expected
