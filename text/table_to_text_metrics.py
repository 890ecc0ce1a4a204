"""Table-to-text metrics for Rotowire (Wiseman et al. 2017; Puduppully et al. 2019; Narayan et al. 2020, section 7).

Plans (lists of record ids and units, as `rotowire_plans.oracle_plan` makes them):

- content selection (CS): precision, recall and F1 of the distinct records of a plan against those of the oracle plan,
  units ignored. As Narayan et al. (2020, section 7) define it (``records="statistics"``, the default), only the
  records that state a number count, the numeric relations the paper's information extractor finds: the records
  that only name leave the count (players' names, the teams' names and cities and the date, `NAME_KEYS`; 46% of the
  record mentions of the 15 test games' oracle plans, 31% of their distinct records, and a planner that cycles
  through team names would score on them), and so does a player's starting position (``START_POSITION``, a word
  such as "forward"; no oracle plan holds one, so a planner's were counted as wrong), `NON_NUMERIC_KEYS` in all;
  ``records="all"`` counts every record, the definition this package used before. Over a corpus CS is micro-averaged
  as the paper does (`pooled_content_selection`: overlaps and sizes summed over the games, then P, R, F1);
- content ordering (CO): the normalized Damerau-Levenshtein similarity, 1 - DLD / max(len), between the two record
  sequences, units removed and a record's repeats after its first mention dropped (Wiseman et al.'s
  ``dedup_triples``), over the same records as CS (``records="statistics"``: `NON_NUMERIC_KEYS` left out, as the
  relations Wiseman et al. order carry numbers; ``records="all"``: every record, the package's earlier CO), averaged
  over the games. The paper reports CS alone for plans (CO only for realized text): CO of plans is this package's
  extension. The distance is the optimal string alignment variant (adjacent transpositions, no substring edited
  twice), which is what Wiseman et al.'s ``pyxDamerauLevenshtein`` computes: "ca" -> "abc" costs 3, where the
  unrestricted distance is 2; computed by rapidfuzz (``rapidfuzz.distance.OSA``).

Realized text:

- `extract_relations`, a rule-based relation extractor: the sentence analysis of `rotowire_plans` (entity mentions,
  pronouns resolved to the last named player or team, numbers typed by the words around them), then each number is
  tied to the nearest mentioned entity that can have that statistic (`SentenceAnalysis.candidates`: those before
  it first); in a score ("118 - 101") the first number goes to the winner, the team before a verb of winning
  ("defeated", "beat", ...) or the other team where the team before the verb lost ("fell to"), else the first team
  named, and the second number to the other team of the game;
- relation generation (RG): the share of the text's distinct relations that the table supports, and their count;
- CS and CO of the text's relations against the reference text's; BLEU with sacrebleu (its default 13a tokenization).

How the extractor differs from the published one. Wiseman et al. (2017) train an ensemble of convolutional and LSTM
classifiers on every (entity, number) pair of a sentence, labelled by matching the pair against the table; the
classifier learns the wording of a relation, picks among all the entities of a sentence (not only the nearest) and
reads numbers it has never seen matched. Ours types a number only from a short list of words after it ("points",
"rebounds", "percent", "5 - of - 10 from three", "( 8 - 8 )", a quarter), so it extracts fewer relations (a number
whose statistic is left implicit is skipped), never learns synonyms outside its list, and ties a number to the
nearest entity even where the sentence's syntax says otherwise. On the 80 shared human summaries it extracts 28
relations a summary, 87% of them supported by the table (some of the rest are the writers' own errors). Its numbers
are therefore not comparable to published RG/CS/CO figures; they compare systems with each other under one extractor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz.distance import OSA

from .rotowire_plans import (
    NumberMention,
    SentenceAnalysis,
    analyze_summary,
    entity_key,
    plan_records,
)
from .rotowire_records import DATE_KEY, TEAM, Game
from .scoring import bootstrap_interval

__all__ = [
    "CS_RECORDS",
    "NAME_KEYS",
    "NON_NUMERIC_KEYS",
    "Relation",
    "bleu",
    "bootstrap_interval",
    "content_ordering",
    "content_selection",
    "damerau_levenshtein_distance",
    "dld_similarity",
    "extract_relations",
    "is_supported",
    "number_relations",
    "pooled_content_selection",
    "plan_scores",
    "relation_generation",
    "text_content_ordering",
    "text_content_selection",
]

# The team before one of these words won: the first number of "118 - 101" is its score.
_WIN_WORDS = frozenset({
    "defeated", "defeat", "defeats", "beat", "beats", "topped", "tops", "downed", "routed", "edged", "won", "wins",
    "dispatched", "outlasted", "trounced", "crushed", "survived", "rolled", "cruised", "handled", "dominated",
    "blasted", "toppled", "outscored", "outpaced", "overcame", "victory", "win",
})
# The team before one of these words lost.
_LOSS_WORDS = frozenset({"fell", "falls", "lost", "loses", "dropped", "drops", "succumbed", "loss"})

# The records that only name an entity or the game.
NAME_KEYS = frozenset({"PLAYER_NAME", "TEAM-NAME", "TEAM-CITY", DATE_KEY})
# The records that state no number (the names, the date and a starting position): the paper's extractor counts
# numeric relations only, so content selection as the paper defines it leaves them out.
NON_NUMERIC_KEYS = NAME_KEYS | {"START_POSITION"}
# What planning CS and CO count: "statistics" (the paper's: every record but NON_NUMERIC_KEYS) or "all" (every record).
CS_RECORDS = ("statistics", "all")


def damerau_levenshtein_distance(first: Sequence, second: Sequence) -> int:
    """The optimal-string-alignment Damerau-Levenshtein distance between two sequences of hashable items:
    insertions, deletions, substitutions and transpositions of two adjacent items, each costing 1, no item edited
    twice (rapidfuzz's `OSA`; its `DamerauLevenshtein` is the unrestricted distance, which is not what the papers
    used)."""
    return OSA.distance(first, second)


def dld_similarity(first: Sequence, second: Sequence) -> float:
    """1 - DLD / max(len(first), len(second)); 1.0 for two empty sequences."""
    longest = max(len(first), len(second))
    return 1.0 - damerau_levenshtein_distance(first, second) / longest if longest else 1.0


def _first_mentions(items: Sequence) -> list:
    return list(dict.fromkeys(items))


def _selection(predicted: set, reference: set) -> dict[str, float]:
    overlap = len(predicted & reference)
    precision = overlap / len(predicted) if predicted else 0.0
    recall = overlap / len(reference) if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if overlap else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "overlap": overlap, "predicted": len(predicted),
            "reference": len(reference)}


def _counted_records(plan: Sequence[str], records: str) -> list[str]:
    """The plan's records that CS and CO count, each at its first mention, in plan order."""
    if records not in CS_RECORDS:
        raise ValueError(f"records must be one of {', '.join(CS_RECORDS)}, got {records!r}")
    ids = _first_mentions(plan_records(plan))
    # a record id is "<entity>|<key>"
    return ids if records == "all" else [record for record in ids if record.rpartition("|")[2] not in NON_NUMERIC_KEYS]


def content_selection(plan: Sequence[str], reference_plan: Sequence[str], records: str = "statistics") -> dict:
    """CS of `plan` against `reference_plan` over distinct record ids, units ignored: ``precision``, ``recall``,
    ``f1`` (0.0 where undefined: nothing predicted, or nothing to find) and the counts ``overlap``, ``predicted``,
    ``reference`` (for `pooled_content_selection`). `records`: "statistics" (the paper's definition, the records
    that state no number left out: `NON_NUMERIC_KEYS`) or "all"."""
    return _selection(set(_counted_records(plan, records)), set(_counted_records(reference_plan, records)))


def pooled_content_selection(selections: Sequence[dict[str, float]]) -> dict[str, float]:
    """CS over a corpus from per-example counts (micro average, as Wiseman et al. report it)."""
    if not selections:
        raise ValueError("pooled_content_selection needs at least one example")
    overlap = sum(s["overlap"] for s in selections)
    predicted = sum(s["predicted"] for s in selections)
    reference = sum(s["reference"] for s in selections)
    precision = overlap / predicted if predicted else 0.0
    recall = overlap / reference if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if overlap else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "overlap": overlap, "predicted": predicted,
            "reference": reference}


def content_ordering(plan: Sequence[str], reference_plan: Sequence[str], records: str = "statistics") -> float:
    """CO: `dld_similarity` of the two plans' record sequences, units removed and repeats after a record's first
    mention dropped, over the records CS counts (`records`, see `content_selection`)."""
    return dld_similarity(_counted_records(plan, records), _counted_records(reference_plan, records))


def plan_scores(plans: Sequence[Sequence[str]], reference_plans: Sequence[Sequence[str]],
                records: str = "statistics") -> dict:
    """CS and CO x 100 of `plans` against `reference_plans` (one each), both over `records` (see
    `content_selection`): ``cs_precision``, ``cs_recall``, ``cs_f1`` micro-averaged over the games as the paper does
    (`pooled_content_selection`), ``co`` the mean CO, ``selections`` (per game: the `content_selection` counts, what a
    bootstrap of the pooled CS resamples) and ``per_game`` (per game: CS precision, recall, F1 and CO x 100; their
    means are the macro averages)."""
    if len(plans) != len(reference_plans) or not plans:
        raise ValueError(f"plan_scores needs one reference plan per plan, at least one: got {len(plans)} and "
                         f"{len(reference_plans)}")
    selections = [content_selection(plan, reference, records) for plan, reference in zip(plans, reference_plans)]
    orderings = [content_ordering(plan, reference, records) for plan, reference in zip(plans, reference_plans)]
    pooled = pooled_content_selection(selections)
    per_game = [{"cs_precision": 100 * s["precision"], "cs_recall": 100 * s["recall"], "cs_f1": 100 * s["f1"],
                 "co": 100 * co} for s, co in zip(selections, orderings)]
    return {"cs_precision": 100 * pooled["precision"], "cs_recall": 100 * pooled["recall"],
            "cs_f1": 100 * pooled["f1"], "co": 100 * sum(orderings) / len(orderings), "selections": selections,
            "per_game": per_game}


# --- relations in realized text ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Relation:
    """A statistic a text states: entity (a player's full name or a team's name), its type, the table key
    (``"PTS"``, ``"TEAM-PTS_QTR3"``) and the value as the table writes it."""

    entity: str
    entity_type: str
    key: str
    value: str


def _team_verdict(analysis: SentenceAnalysis, end: int) -> str | None:
    """ "won" or "lost" from the words right after a team mention (a bracketed record skipped)."""
    tokens = [token.lower() for token in analysis.tokens[end:]]
    if tokens[:1] == ["("] and ")" in tokens:
        tokens = tokens[tokens.index(")") + 1 :]
    for token in tokens[:3]:
        if token in _WIN_WORDS:
            return "won"
        if token in _LOSS_WORDS:
            return "lost"
    return None


def _score_teams(game: Game, analysis: SentenceAnalysis, number: NumberMention) -> tuple[str, str] | None:
    """(first team, second team) of a score pair: the winner's score is written first."""
    teams = [m for m in analysis.mentions if m.entity_type == TEAM]
    if not teams:
        return None
    both = (game.home_name, game.vis_name)
    first = teams[0].entity
    for mention in teams:
        verdict = _team_verdict(analysis, mention.end)
        if verdict is not None:
            other = both[1] if mention.entity == both[0] else both[0]
            first = mention.entity if verdict == "won" else other
            break
    second = both[1] if first == both[0] else both[0]
    return first, second


def _relation(game: Game, analysis: SentenceAnalysis, number: NumberMention) -> Relation | None:
    key = number.keys[0]
    if number.pair is not None and key not in ("WINS", "LOSSES"):
        teams = _score_teams(game, analysis, number)
        if teams is None:
            return None
        entity = teams[0] if number.position < number.pair else teams[1]
        return Relation(entity, TEAM, entity_key(key, TEAM), str(number.value))
    for mention in analysis.candidates(number):
        specific = entity_key(key, mention.entity_type)
        if specific is not None:
            return Relation(mention.entity, mention.entity_type, specific, str(number.value))
    return None


def number_relations(
    game: Game, text: str | Sequence[str]
) -> list[tuple[SentenceAnalysis, list[tuple[NumberMention, Relation | None]]]]:
    """Each sentence of `text` (`analyze_summary`) with each number it holds and the relation the extractor ties it
    to (None where it ties it to nobody): what `extract_relations` reads, with the numbers' positions kept."""
    return [(analysis, [(number, _relation(game, analysis, number)) for number in analysis.numbers])
            for analysis in analyze_summary(game, text)]


def is_supported(game: Game, relation: Relation) -> bool:
    """Whether the box score holds `relation`'s value for its entity and key."""
    return game.table.get((relation.entity, relation.key)) == relation.value


def extract_relations(game: Game, text: str | Sequence[str]) -> list[Relation]:
    """The relations `text` states about `game`'s players and teams, in order of mention (repeats kept). Reads the
    names from the game, never its numbers."""
    return [relation for _, numbers in number_relations(game, text) for _, relation in numbers if relation is not None]


def relation_generation(game: Game, text: str | Sequence[str]) -> dict[str, float]:
    """RG: ``precision``, the share of the text's distinct relations that the table supports (0.0 when none was
    extracted); ``supported``, their count; ``extracted``, the distinct relations found."""
    relations = set(extract_relations(game, text))
    supported = sum(is_supported(game, r) for r in relations)
    return {"precision": supported / len(relations) if relations else 0.0, "supported": supported,
            "extracted": len(relations)}


def text_content_selection(game: Game, text: str | Sequence[str], reference: str | Sequence[str]) -> dict[str, float]:
    """CS of the relations extracted from `text` against those extracted from `reference` (distinct relations)."""
    return _selection(set(extract_relations(game, text)), set(extract_relations(game, reference)))


def text_content_ordering(game: Game, text: str | Sequence[str], reference: str | Sequence[str]) -> float:
    """CO of the extracted relation sequences (repeats after the first mention dropped)."""
    return dld_similarity(_first_mentions(extract_relations(game, text)),
                          _first_mentions(extract_relations(game, reference)))


def bleu(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU x 100 of `predictions` against one reference each (sacrebleu, default settings)."""
    import sacrebleu

    if isinstance(predictions, str) or isinstance(references, str):
        raise ValueError("bleu takes lists of texts, not one string")
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"bleu needs as many predictions as references, at least one: "
                         f"got {len(predictions)} and {len(references)}")
    return sacrebleu.corpus_bleu(list(predictions), [list(references)]).score
