"""Beam search over extraction steps, driven by scripted step distributions so every result can be worked out by
hand."""

import math

import pytest
import torch

from sumformers.generation.stepwise_decoding import stepwise_beam_search

END = "END"


class ScriptedScorer:
    """Step distributions by partial summary: {prefix: {sentence index or END: probability}} (the rest is 0).

    Records every row it is asked for; an unexpected prefix is an error, so the tests also pin down which
    hypotheses the search expands."""

    def __init__(self, num_document_sentences: int, script: dict, default: dict | None = None):
        self.num_document_sentences = num_document_sentences
        self.script = script
        self.default = default
        self.calls: list[list[tuple[int, ...]]] = []

    def __call__(self, document_indices, prefixes):
        self.calls.append(list(prefixes))
        rows = []
        for prefix in prefixes:
            distribution = self.script.get(tuple(prefix), self.default)
            if distribution is None:
                raise AssertionError(f"unexpected prefix {prefix}")
            sentences = [distribution.get(i, 0.0) for i in range(self.num_document_sentences)]
            probabilities = [*sentences, distribution.get(END, 0.0)]
            rows.append([math.log(p) if p > 0 else -1e9 for p in probabilities])
        return torch.tensor(rows, dtype=torch.float64)


SENTENCES = [f"Sentence number {word} is here." for word in ("one", "two", "three", "four")]

# Greedy takes 0 first (0.4 > 0.35); the beam finds that 1 then 0 scores higher overall.
SCRIPT = {
    (): {0: 0.4, 1: 0.35, 2: 0.1, 3: 0.05, END: 0.1},
    (0,): {1: 0.3, 2: 0.3, 3: 0.2, END: 0.2},
    (1,): {0: 0.9, 2: 0.05, END: 0.05},
    (0, 1): {2: 0.1, 3: 0.1, END: 0.8},
    (0, 2): {1: 0.1, 3: 0.1, END: 0.8},
    (1, 0): {2: 0.2, 3: 0.1, END: 0.7},
}


def test_beam_search_gives_the_hand_computed_beam():
    scorer = ScriptedScorer(4, SCRIPT)
    best = stepwise_beam_search(scorer, [SENTENCES], beam_size=2, num_sentences=4)[0]
    # Step 1 keeps (0) ln .4 and (1) ln .35 (END is not allowed first). Step 2 expands both: (1,0) ln .35 + ln .9 =
    # -1.155 and (0,1) = (0,2) = ln .4 + ln .3 = -2.120 (tie: (0,1) was generated first) are kept. Step 3: (1,0,END)
    # -1.512 and (0,1,END) -2.343 are both finished, so the search ends with (1,0,END).
    assert best.sentences == (1, 0) and best.ended
    expected_scores = [math.log(0.35), math.log(0.35) + math.log(0.9), math.log(0.35) + math.log(0.9) + math.log(0.7)]
    assert [step.score for step in best.steps] == pytest.approx(expected_scores)
    assert [step.probability for step in best.steps] == pytest.approx([0.35, 0.9, 0.7])
    assert [step.sentence for step in best.steps] == [1, 0, None]
    assert scorer.calls == [[()], [(0,), (1,)], [(1, 0), (0, 1)]]


def test_beam_of_one_is_greedy():
    best = stepwise_beam_search(ScriptedScorer(4, SCRIPT), [SENTENCES], beam_size=1, num_sentences=4)[0]
    # (0) then (0,1) (0.3, tied with 2, first generated) then END (0.8)
    assert best.sentences == (0, 1)
    assert best.score == pytest.approx(math.log(0.4) + math.log(0.3) + math.log(0.8))


def test_search_stops_once_a_finished_hypothesis_beats_every_live_one():
    script = {
        (): {0: 0.6, 1: 0.4},
        (0,): {1: 0.05, END: 0.95},  # (0,END) = ln .57 = -0.562 beats (1) = ln .4 = -0.916
        (1,): {0: 0.5, END: 0.5},
    }
    scorer = ScriptedScorer(2, script)
    best = stepwise_beam_search(scorer, [SENTENCES[:2]], beam_size=2, num_sentences=4)[0]
    assert best.sentences == (0,) and best.ended
    # Step 2 keeps (0,END) -0.562 (finished) and (1,0) ln .4 + ln .5 = -1.609 (live): no further call is needed.
    assert scorer.calls == [[()], [(0,), (1,)]]


def test_no_sentence_is_chosen_twice():
    # The scorer keeps most of its mass on sentence 0 even after it was chosen; the search must not repeat it.
    scorer = ScriptedScorer(3, {}, default={0: 0.9, 1: 0.04, 2: 0.03, END: 0.03})
    best = stepwise_beam_search(scorer, [SENTENCES[:3]], beam_size=3, num_sentences=4)[0]
    assert len(set(best.sentences)) == len(best.sentences)
    for calls in scorer.calls:
        for prefix in calls:
            assert len(set(prefix)) == len(prefix)


def test_a_sentence_break_lets_repeatable_units_back_only_in_a_later_plan_sentence():
    # unit 0 is the break and unit 1 a team name (both repeatable); the scorer always prefers the team name, then
    # the break, then unit 2, so free repeats would loop on "1 0 1 0 ..." (the unconstrained search shows it)
    default = {1: 0.5, 0: 0.3, 2: 0.15, END: 0.05}
    free = stepwise_beam_search(ScriptedScorer(3, {}, default), [SENTENCES[:3]], 1, 5, repeatable=[{0, 1}])[0]
    assert free.sentences == (1, 1, 1, 1, 1)
    scorer = ScriptedScorer(3, {}, default)
    planned = stepwise_beam_search(scorer, [SENTENCES[:3]], 1, 6, repeatable=[{0, 1}], sentence_break=0)[0]
    # greedy by hand: 1; 1 again is closed in this sentence, so the break; then 1 in the new sentence; then the
    # break; then 1; then (1 closed) the break, at the length limit, and END
    assert planned.sentences == (1, 0, 1, 0, 1, 0)
    # a break never opens a plan or follows a break: the first choice is 1 even when the break is likelier
    script = {(): {0: 0.6, 1: 0.3, END: 0.1}, (1,): {0: 0.7, 2: 0.2, END: 0.1}, (1, 0): {0: 0.6, 2: 0.3, END: 0.1}}
    script[(1, 0, 2)] = {END: 1.0}
    best = stepwise_beam_search(ScriptedScorer(3, script), [SENTENCES[:3]], 1, 6, repeatable=[{0, 1}], sentence_break=0)
    assert best[0].sentences == (1, 0, 2) and best[0].ended


def test_a_sentence_break_bias_shifts_the_break_logit_and_renormalizes():
    # unit 0 is the break; after unit 1 the model prefers the break (0.5) to unit 2 (0.3): greedy plans "1 0 2".
    # A bias of ln(0.5) halves the break's weight: 0.25 / (0.25 + 0.3 + 0.2) = 1/3 against 0.3 / 0.75 = 0.4, so unit 2
    # is chosen with probability 0.4 (the biased distribution's), then the break (unbiased weight 1.0: probability 1).
    script = {(): {1: 0.9, END: 0.1}, (1,): {0: 0.5, 2: 0.3, END: 0.2}, (1, 0): {2: 1.0}, (1, 2): {0: 1.0},
              (1, 0, 2): {END: 1.0}, (1, 2, 0): {END: 1.0}}
    plain = stepwise_beam_search(ScriptedScorer(3, script), [SENTENCES[:3]], 1, 6, repeatable=[{0}], sentence_break=0)
    assert plain[0].sentences == (1, 0, 2)
    biased = stepwise_beam_search(ScriptedScorer(3, script), [SENTENCES[:3]], 1, 6, repeatable=[{0}],
                                  sentence_break=0, sentence_break_bias=math.log(0.5))[0]
    assert biased.sentences == (1, 2, 0) and biased.ended
    assert [step.probability for step in biased.steps] == pytest.approx([0.9, 0.4, 1.0, 1.0])
    with pytest.raises(ValueError, match="sentence_break_bias needs a sentence_break"):
        stepwise_beam_search(ScriptedScorer(3, script), [SENTENCES[:3]], 1, 6, sentence_break_bias=-1.0)


def test_an_end_bias_shifts_the_end_logit_and_renormalizes():
    # after sentence 0 the model prefers END (0.6) to sentence 1 (0.4); a bias of ln(1/3) gives END the weight 0.2:
    # 0.2 / (0.2 + 0.4) = 1/3 against 2/3 for sentence 1, which is then chosen, and the summary ends after it
    script = {(): {0: 0.9, END: 0.1}, (0,): {1: 0.4, END: 0.6}, (0, 1): {END: 1.0}}
    plain = stepwise_beam_search(ScriptedScorer(2, script), [SENTENCES[:2]], 1, 4)[0]
    assert plain.sentences == (0,) and plain.ended
    biased = stepwise_beam_search(ScriptedScorer(2, script), [SENTENCES[:2]], 1, 4, end_bias=math.log(1 / 3))[0]
    assert biased.sentences == (0, 1) and biased.ended
    assert [step.probability for step in biased.steps] == pytest.approx([0.9 / (0.9 + 0.1 / 3), 2 / 3, 1.0])


def test_end_is_not_a_first_choice_and_stops_a_hypothesis():
    script = {(): {0: 0.05, END: 0.95}, (0,): {1: 0.01, END: 0.99}}
    scorer = ScriptedScorer(2, script)
    best = stepwise_beam_search(scorer, [SENTENCES[:2]], beam_size=1, num_sentences=4)[0]
    assert best.sentences == (0,) and best.ended
    assert scorer.calls == [[()], [(0,)]]  # nothing after END


def test_min_sentences_holds_end_back_until_the_summary_is_long_enough():
    script = {(): {0: 0.6, 1: 0.4}, (0,): {1: 0.2, END: 0.8}, (0, 1): {END: 1.0}}
    best = stepwise_beam_search(
        ScriptedScorer(2, script), [SENTENCES[:2]], beam_size=1, num_sentences=4, min_sentences=2
    )[0]
    # END (0.8) is not allowed after one sentence, so 1 (0.2) is taken, then END.
    assert best.sentences == (0, 1) and best.ended
    assert best.score == pytest.approx(math.log(0.6) + math.log(0.2) + math.log(1.0))
    # A document too short for the minimum ends when nothing is left.
    short = stepwise_beam_search(
        ScriptedScorer(1, {(): {0: 1.0}, (0,): {END: 1.0}}), [SENTENCES[:1]], 3, 4, min_sentences=3
    )[0]
    assert short.sentences == (0,) and short.ended


def test_without_end_at_limit_num_sentences_cuts_the_summary_without_end():
    scorer = ScriptedScorer(4, {}, default={0: 0.3, 1: 0.3, 2: 0.3, 3: 0.09, END: 0.01})
    best = stepwise_beam_search(scorer, [SENTENCES], beam_size=1, num_sentences=2, end_at_limit=False)[0]
    assert best.sentences == (0, 1) and not best.ended
    assert best.score == pytest.approx(2 * math.log(0.3))


def test_at_the_limit_a_summary_pays_for_its_end_and_that_can_change_the_winner():
    """The paper's rule: every hypothesis is scored on a complete plan. With beam 2 and at most 2 sentences, (0, 1)
    scores log .5 + log .6 = -1.20 when cut, above the finished (0, END) at log .5 + log .4 = -1.61; closed by END
    (probability .05 after two sentences) it scores -4.20, and (0, END) wins."""
    script = {
        (): {0: 0.5, 1: 0.4, END: 0.1},
        (0,): {1: 0.6, END: 0.4},
        (1,): {0: 0.5, END: 0.5},
        (0, 1): {END: 0.05, 2: 0.95},
    }
    cut = stepwise_beam_search(ScriptedScorer(3, script), [SENTENCES[:3]], beam_size=2, num_sentences=2,
                               end_at_limit=False)[0]
    assert cut.sentences == (0, 1) and not cut.ended
    scorer = ScriptedScorer(3, script)
    closed = stepwise_beam_search(scorer, [SENTENCES[:3]], beam_size=2, num_sentences=2)[0]
    assert closed.sentences == (0,) and closed.ended
    assert closed.score == pytest.approx(math.log(0.5) + math.log(0.4))
    # the third step scores only (0, 1), and sentence 2 (probability .95) is not allowed there
    assert scorer.calls[-1] == [(0, 1)]


def test_trigram_blocking_blocks_sentences_sharing_a_trigram():
    sentences = [
        "The storm hit the coast on Friday.",
        "Officials said the storm hit the coast hard.",  # shares "the storm hit" with sentence 0
        "Power was cut to ten thousand homes.",
    ]
    script = {
        (): {0: 0.6, 1: 0.3, 2: 0.1},
        (0,): {1: 0.8, 2: 0.1, END: 0.1},
        (0, 1): {2: 0.5, END: 0.5},
        (0, 2): {1: 0.5, END: 0.5},
        (0, 1, 2): {END: 1.0},  # at the limit: END only
    }
    plain = stepwise_beam_search(ScriptedScorer(3, script), [sentences], beam_size=1, num_sentences=3)[0]
    assert plain.sentences[:2] == (0, 1)
    blocked = stepwise_beam_search(
        ScriptedScorer(3, script), [sentences], beam_size=1, num_sentences=3, trigram_blocking=True
    )[0]
    # (0) then 1 is blocked, so 2 (0.1) ties with END (0.1) and wins as the first generated; then 1 is still blocked.
    assert blocked.sentences == (0, 2) and blocked.ended
    assert blocked.score == pytest.approx(math.log(0.6) + math.log(0.1) + math.log(0.5))


def test_length_budgets_in_sentences_and_words():
    sentences = ["one two three four five six", "one two", "a b c", "x y z w"]
    uniform = {0: 0.24, 1: 0.24, 2: 0.24, 3: 0.24, END: 0.04}
    by_sentences = stepwise_beam_search(
        ScriptedScorer(4, {}, default=uniform), [sentences], beam_size=1, num_sentences=2
    )[0]
    assert by_sentences.sentences == (0, 1) and by_sentences.ended  # after two sentences END is the only choice
    by_words = stepwise_beam_search(
        ScriptedScorer(4, {}, default=uniform), [sentences], beam_size=1, num_sentences=4, max_words=6
    )[0]
    # 0 fills the six words: nothing else fits, END closes the summary
    assert by_words.sentences == (0,) and by_words.ended
    skip_long = stepwise_beam_search(
        ScriptedScorer(4, {}, default=uniform), [sentences], beam_size=1, num_sentences=4, max_words=5
    )[0]
    assert skip_long.sentences == (1, 2) and skip_long.ended  # 6-word sentence never fits; 2 + 3 words do


def test_documents_in_a_batch_are_decoded_independently():
    other = {(): {1: 0.7, 0: 0.3}, (1,): {0: 0.2, END: 0.8}, (0,): {1: 0.9, END: 0.1}}

    def batch_scorer(document_indices, prefixes):
        scorers = [ScriptedScorer(4, SCRIPT), ScriptedScorer(4, other)]
        rows = [scorers[d]([0], [prefix])[0] for d, prefix in zip(document_indices, prefixes)]
        return torch.stack(rows)

    results = stepwise_beam_search(batch_scorer, [SENTENCES, SENTENCES[:2], []], beam_size=2, num_sentences=4)
    assert results[0] == stepwise_beam_search(ScriptedScorer(4, SCRIPT), [SENTENCES], beam_size=2, num_sentences=4)[0]
    assert results[1] == stepwise_beam_search(
        ScriptedScorer(4, other), [SENTENCES[:2]], beam_size=2, num_sentences=4
    )[0]
    assert results[2].steps == ()  # a document without sentences gives an empty summary


def test_return_distributions_gives_each_steps_full_distribution():
    best = stepwise_beam_search(
        ScriptedScorer(4, SCRIPT), [SENTENCES], beam_size=2, num_sentences=4, return_distributions=True
    )[0]
    assert best.steps[0].distribution == pytest.approx([0.4, 0.35, 0.1, 0.05, 0.1])
    assert best.steps[1].distribution == pytest.approx([0.9, 0.0, 0.05, 0.0, 0.05])


@pytest.mark.parametrize(
    "options",
    [dict(beam_size=0), dict(num_sentences=0), dict(max_words=0), dict(num_sentences=-1), dict(beam_size=1.5)],
)
def test_bad_options_are_value_errors(options):
    with pytest.raises(ValueError, match="must be a positive integer"):
        stepwise_beam_search(ScriptedScorer(4, SCRIPT), [SENTENCES], **{"beam_size": 3, "num_sentences": 4, **options})
