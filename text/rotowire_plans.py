"""Content plans over Rotowire records: oracle plans induced from the human summaries (Narayan et al. 2020, appendix
B.2) and plans as text for a realizer.

A plan is a list of record ids (`Record.id`) and units: ``<EOS>`` between the sentences of the summary and ``<EOT>``
at the end. Induction reads the summary sentence by sentence:

- entities: a player's full name, his last name (or the part after his first name: "Mbah a Moute"), a one-word name
  ("Nene"); a team's name, city, "city name", a few nicknames ("Cavs", "Sixers", "Blazers"); a name that fits two
  players ("Morris") goes to the one last named in full, or to none. A named player gives his ``PLAYER_NAME``
  record, a named team its ``TEAM-NAME`` and/or ``TEAM-CITY`` record;
- pronouns: he/him/his/himself to the last named player, they/them/their/themselves to the last named team, carried
  across sentences; a sentence that names nobody and has no pronoun ("The Greek Freak scored 34 points") refers to
  the last named player and team;
- numbers (digits and number words) typed by the words around them ("34 points", "( 8 - 8 )" wins and losses,
  "5 - of - 10 from three", "118 - 101", "54 percent from the field", "32 points in the first quarter"); a number
  whose words name no statistic ("four in a row", "a 12 - 0 run", "a four - point lead") is not matched;
- a number becomes the record of the nearest mentioned entity (pronouns included; those before the number first, then
  those after it) that has a record of that type and value; for points, rebounds, assists and turnovers the players
  are tried first, or the teams first where the value is a team's size ("37 assists"); a score or a two-team pair
  ("a 51 - 36 advantage in rebounds") may go to the team the sentence leaves unnamed;
- the date record where the summary names the game's weekday;
- records keep their order of mention within a sentence (a record once per sentence, repeats across sentences
  allowed), sentences without a record are dropped.

The same sentence analysis, without the table, is the relation extractor of `table_to_text_metrics`.

The template plan (`template_plan`), the baseline of the planning tables, is also what a realizer realizes when it is
given no plan: the records most mentioned by the training games' oracle plans, as roles that fit any game ("home team |
TEAM-PTS", "scorer 1 | PTS"), in their mean order (`learn_plan_template`).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .rotowire_records import DATE_KEY, EOS, EOT, GAME, GAME_ENTITY, PLAYER, TEAM, UNITS, Game

PLAYER_PRONOUNS = frozenset({"he", "him", "his", "himself"})
TEAM_PRONOUNS = frozenset({"they", "them", "their", "theirs", "themselves"})
_NAME_SUFFIXES = frozenset({"Jr.", "Jr", "Sr.", "II", "III", "IV"})
TEAM_NICKNAMES = {
    "Cavaliers": ("Cavs",), "76ers": ("Sixers",), "Trail Blazers": ("Blazers",), "Mavericks": ("Mavs",),
    "Timberwolves": ("T-Wolves", "Wolves"), "Grizzlies": ("Grizz",),
}
CITY_NICKNAMES = {"LA": ("Los Angeles", "L.A."), "Los Angeles": ("LA", "L.A."), "Oklahoma City": ("OKC",)}
NUMBER_WORDS = {
    word: value for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50})
_SENTENCE_ENDS = frozenset({".", "!", "?"})
_ABBREVIATIONS = frozenset({"jr.", "sr.", "st.", "mr.", "dr.", "vs.", "jan.", "feb.", "aug.", "sept.", "oct.", "nov.",
                            "dec."})
_CLITICS = frozenset({"'s", "'d", "'ll", "'re", "'ve", "'m", "n't"})

# Statistic words after a number, first match wins; keys are box-score columns (a team's are mapped on matching).
_STAT_WORDS = {
    "points": "PTS", "point": "PTS", "pts": "PTS",
    "rebounds": "REB", "rebound": "REB", "boards": "REB", "board": "REB",
    "assists": "AST", "assist": "AST", "dimes": "AST",
    "steals": "STL", "steal": "STL",
    "blocks": "BLK", "block": "BLK", "blocked": "BLK", "rejections": "BLK",
    "turnovers": "TO", "turnover": "TO",
    "fouls": "PF", "foul": "PF",
    "minutes": "MIN", "minute": "MIN",
    "threes": "FG3M", "triples": "FG3M", "treys": "FG3M",
}
_SCORING_VERBS = frozenset({"scored", "scoring", "poured", "dropped", "netted", "tallied"})
# "a steal", "an assist": one of them.
_SINGULAR_STATS = {"steal": "STL", "block": "BLK", "assist": "AST", "rebound": "REB", "turnover": "TO"}
_THREE_WORDS = frozenset({"three", "3", "deep", "arc", "downtown", "long", "distance", "perimeter", "threes"})
_FREE_THROW_WORDS = frozenset({"free", "line", "stripe", "charity", "foul"})
_QUARTERS = {"first": 1, "1st": 1, "opening": 1, "one": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
             "4th": 4, "final": 4}
_QUARTER_WORDS = frozenset({"quarter", "period", "frame", "quarters"})
# A pair followed by these is a run, a half-time score or a home/road record, not a line-score cell.
_NOT_A_SCORE = frozenset({"run", "spurt", "surge", "lead", "halftime", "half", "intermission", "break", "deficit",
                          "road", "home", "last", "against", "since", "when", "conference", "division", "overall"})
# A number after these is a margin, a bound or a season average.
_NOT_A_STAT_BEFORE = frozenset({"first", "least", "within", "than", "averaging", "averages", "average", "last", "past"})
# A number counting these is no statistic, whatever word follows ("five seconds remaining was blocked").
_NOT_A_STAT_AFTER = frozenset({"seconds", "second", "games", "game", "times", "straight", "consecutive", "years",
                               "days", "players", "starters", "remaining", "left", "overtime"})
_SHOT_ABBREVIATIONS = {"fg": "FG", "fgs": "FG", "3pt": "FG3", "3p": "FG3", "3pm": "FG3", "ft": "FT", "fts": "FT"}
# Words after "51 - 36" that make it the two teams' statistic.
_PAIR_STATS = {"rebounding": "REB", "rebounds": "REB", "boards": "REB", "glass": "REB", "assists": "AST",
               "turnovers": "TO"}
# Nouns after "18 - point" that make it a player's statistic, not a margin ("lead", "win").
_PERFORMANCE_WORDS = frozenset({"performance", "performances", "effort", "efforts", "outing", "outings", "showing",
                                "night", "double", "triple", "tally", "tallies", "haul", "contribution", "display",
                                "output", "line", "stat"})
# Counts a player and a team both have, and the value from which it is a team's rather than a player's.
_TEAM_SIZED = {"PTS": 70, "REB": 28, "AST": 21, "TO": 11}
_CLAUSE_BREAKS = frozenset({",", ";", ".", "and", "while", "(", ")", "but", "as", "with", "on"})
_TEAM_KEYS = {
    "PTS": "TEAM-PTS", "REB": "TEAM-REB", "AST": "TEAM-AST", "TO": "TEAM-TOV", "FG_PCT": "TEAM-FG_PCT",
    "FG3_PCT": "TEAM-FG3_PCT", "FT_PCT": "TEAM-FT_PCT", "WINS": "TEAM-WINS", "LOSSES": "TEAM-LOSSES",
    **{f"QTR{quarter}": f"TEAM-PTS_QTR{quarter}" for quarter in range(1, 5)},
}


# --- tokens and sentences ---------------------------------------------------------------------------------------


def _split_chunk(chunk: str) -> list[str]:
    """One whitespace-separated chunk as nltk-like tokens: brackets and trailing punctuation apart, a sentence-final
    period apart unless the chunk is an abbreviation or initials ("Jr.", "J.R."), a possessive apart, and hyphens
    apart where a side is a number or a lower-case word ("118-101", "three-pointers"; not "Karl-Anthony")."""
    if chunk in _CLITICS:
        return [chunk]
    head, tail = [], []
    while chunk and chunk[0] in "([\"“‘{":
        head.append(chunk[0])
        chunk = chunk[1:]
    while chunk:
        if chunk[-1] in ")]\"”’,;:!?}%":
            tail.insert(0, chunk[-1])
        elif chunk[-1] == "." and len(chunk) > 1 and not (
            chunk.lower() in _ABBREVIATIONS or re.fullmatch(r"(?:[A-Za-z]\.)+", chunk) or chunk.strip(".") == ""
        ):
            tail.insert(0, ".")
        else:
            break
        chunk = chunk[:-1]
    for clitic in ("'s", "’s"):
        if chunk.endswith(clitic) and len(chunk) > 2:
            tail.insert(0, "'s")
            chunk = chunk[: -len(clitic)]
    if chunk.endswith("s'") and len(chunk) > 2:
        tail.insert(0, "'")
        chunk = chunk[:-1]
    middle = [chunk] if chunk else []
    if "-" in chunk.strip("-"):
        parts = chunk.split("-")
        if any(part and (part[0].isdigit() or part[0].islower()) for part in parts):
            middle = []
            for index, part in enumerate(parts):
                if index:
                    middle.append("-")
                if part:
                    middle.append(part)
    return head + middle + tail


def tokenize(text: str | Sequence[str]) -> list[str]:
    """Text (a string, or tokens such as the data's ``summary``) as tokens in the data's nltk style."""
    if not isinstance(text, str):
        if not all(isinstance(token, str) for token in text):
            raise ValueError("tokens must be strings")
        text = " ".join(text)
    tokens = []
    for token in (token for chunk in text.split() for token in _split_chunk(chunk)):
        # The data writes "P.J ." for "P.J.": the period belongs to the initials.
        if token == "." and tokens and re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", tokens[-1]):
            tokens[-1] += "."
        else:
            tokens.append(token)
    return tokens


def split_token_sentences(tokens: Sequence[str]) -> list[list[str]]:
    """Tokens cut after each ".", "!" or "?" token; empty sentences dropped."""
    sentences, current = [], []
    for token in tokens:
        current.append(token)
        if token in _SENTENCE_ENDS:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return [sentence for sentence in sentences if any(token not in _SENTENCE_ENDS for token in sentence)]


# --- entity mentions --------------------------------------------------------------------------------------------


def _normal(token: str) -> str:
    # "J.R." and the box score's "JR" are one name; curly apostrophes are straight.
    return token.replace("’", "'").replace(".", "") if any(c.isalpha() for c in token) else token


@dataclass(frozen=True)
class Mention:
    """An entity mentioned in a sentence: tokens [start, end), the entity (a player's full name or a team's name),
    its type, the name/city records the words state (none for pronouns), and how it was found ("name",
    "pronoun", or "implicit" for the subject carried into a sentence that names nobody)."""

    start: int
    end: int
    entity: str
    entity_type: str
    record_ids: tuple[str, ...]
    kind: str


def _player_forms(name: str) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """A player's full-name tokens and his shorter forms (last name, the part after the first name)."""
    words = [word.rstrip(",") for word in name.split()]
    words = [word for word in words if word not in _NAME_SUFFIXES] or words
    full = tuple(_normal(word) for word in words)
    short = []
    if len(full) > 1:
        short.append(full[1:])
        short.append(full[-1:])
    return full, list(dict.fromkeys(short))


class _Name(NamedTuple):
    entity: str
    entity_type: str
    record_ids: tuple[str, ...]
    full: bool  # a player's full name (what settles a shared last name later on)


class _Lexicon:
    """The game's names as token tuples, each with the entities it may name."""

    def __init__(self, game: Game):
        self.forms: dict[tuple[str, ...], list[_Name]] = {}
        for name, city in ((game.home_name, game.home_city), (game.vis_name, game.vis_city)):
            name_id, city_id = f"{name}|TEAM-NAME", f"{name}|TEAM-CITY"
            names = (name, *TEAM_NICKNAMES.get(name, ()))
            names += tuple(form[:-1] for form in names if form.endswith("s"))  # "the only other Cavalier"
            cities = (city, *CITY_NICKNAMES.get(city, ()))
            for team_name in names:
                self._add(team_name.split(), _Name(name, TEAM, (name_id,), True))
                for team_city in cities:
                    self._add([*team_city.split(), *team_name.split()], _Name(name, TEAM, (city_id, name_id), True))
            for team_city in cities:
                self._add(team_city.split(), _Name(name, TEAM, (city_id,), True))
        for record in game.players:
            full, short = _player_forms(record.entity)
            self._add(full, _Name(record.entity, PLAYER, (record.id,), True))
            for form in short:
                self._add(form, _Name(record.entity, PLAYER, (record.id,), False))
        self.longest = max(len(form) for form in self.forms)

    def _add(self, words: Sequence[str], name: _Name) -> None:
        names = self.forms.setdefault(tuple(_normal(word) for word in words), [])
        if all(name.entity != other.entity for other in names):
            names.append(name)


@dataclass
class _Context:
    """What the summary said so far: the last named player and team, and the players named in full."""

    last_player: str | None = None
    last_team: str | None = None
    named_in_full: tuple[str, ...] = ()


def _find_mentions(tokens: Sequence[str], lexicon: _Lexicon, context: _Context) -> list[Mention]:
    mentions, position = [], 0
    normal = [_normal(token) for token in tokens]
    while position < len(tokens):
        found = None
        for length in range(min(lexicon.longest, len(tokens) - position), 0, -1):
            candidates = lexicon.forms.get(tuple(normal[position : position + length]))
            if candidates:
                found = length, candidates
                break
        if found is None:
            lower = tokens[position].lower()
            pronoun_of = context.last_player if lower in PLAYER_PRONOUNS else (
                context.last_team if lower in TEAM_PRONOUNS else None)
            if pronoun_of is not None:
                entity_type = PLAYER if lower in PLAYER_PRONOUNS else TEAM
                mentions.append(Mention(position, position + 1, pronoun_of, entity_type, (), "pronoun"))
            position += 1
            continue
        length, candidates = found
        if len(candidates) > 1:
            # A name two players share goes to the one named in full most recently, else to neither.
            named = [c for c in candidates if c.entity in context.named_in_full]
            candidates = sorted(named, key=lambda c: context.named_in_full.index(c.entity))[-1:]
        if candidates:
            name = candidates[0]
            mentions.append(Mention(position, position + length, name.entity, name.entity_type, name.record_ids,
                                    "name"))
            if name.entity_type == PLAYER:
                context.last_player = name.entity
                if name.full:
                    context.named_in_full = (*[n for n in context.named_in_full if n != name.entity], name.entity)
            else:
                context.last_team = name.entity
        position += length
    return mentions


# --- numbers ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NumberMention:
    """A number in a sentence and the statistics its words allow, most likely first (box-score columns; a team's
    are mapped on matching). `team_only` marks scores, wins and losses; `pair` is the position of the other number
    of a score ("118 - 101"); `anchor`, where set, is the position a mention must end at to own the number (the
    bracket of "Bucks ( 8 - 8 )")."""

    position: int
    value: int
    keys: tuple[str, ...]
    team_only: bool = False
    pair: int | None = None
    anchor: int | None = None


def _number(token: str) -> int | None:
    if token.isdigit():
        return int(token)
    return NUMBER_WORDS.get(token.lower())


def _window(lower: Sequence[str], start: int, size: int) -> list[str]:
    words = []
    for token in lower[start : start + size]:
        if token in _CLAUSE_BREAKS or _number(token) is not None and token not in ("three", "3"):
            break
        words.append(token)
    return words


def _shot_family(words: Sequence[str]) -> str:
    if any(word in _THREE_WORDS for word in words):
        return "FG3"
    if any(word in _FREE_THROW_WORDS for word in words):
        return "FT"
    return "FG"


def _quarter(lower: Sequence[str], start: int, end: int) -> int | None:
    for index in range(max(start, 0), min(end, len(lower))):
        if lower[index] in _QUARTER_WORDS:
            for before in lower[max(index - 3, 0) : index]:
                if before in _QUARTERS:
                    return _QUARTERS[before]
    return None


def _is_three(lower: Sequence[str], position: int) -> bool:
    # "three - pointers", "3 - point": the word of a shot, not a count.
    return lower[position] in ("three", "3") and lower[position + 1 : position + 3] in (
        ["-", "pointers"], ["-", "point"], ["-", "pointer"])


def _compound_key(lower: Sequence[str], position: int) -> tuple[str, ...]:
    """A number in a compound modifier: a statistic in "an 18 - point , 11 - assist double - double" or "a pair of
    13 - point performances", none in "a four - point lead" or "an 18 - point win"."""
    key = _STAT_WORDS.get(lower[position + 2]) if position + 2 < len(lower) else None
    if key is None or key.startswith("FG3"):
        return ()
    index = position + 3
    # Skip the further compounds of a list: ", 11 - assist", "and 10 - rebound".
    while lower[index : index + 1] in ([","], ["and"]) or (
            index + 2 < len(lower) and _number(lower[index]) is not None and lower[index + 1] == "-"):
        index += 3 if _number(lower[index]) is not None else 1
    return (key,) if lower[index : index + 1] and lower[index] in _PERFORMANCE_WORDS else ()


def _stat_keys(lower: Sequence[str], position: int) -> tuple[str, ...]:
    """The statistic a lone number states, from the words after it (or a scoring verb before it)."""
    after = lower[position + 1 : position + 3]
    if after[:1] == ["-"] and len(after) == 2 and _number(after[1]) is None:
        return _compound_key(lower, position)
    if position > 0 and lower[position - 1] in _NOT_A_STAT_BEFORE:
        return ()  # a margin or a season average
    if position > 0 and lower[position - 1] == "by" and "from" not in lower[position + 1 : position + 5]:
        return ()  # "won by 17 points", not "paced by 27 points from Hayward"
    if any(word in _NOT_A_STAT_AFTER for word in lower[position + 1 : position + 4]):
        return ()
    words = _window(lower, position + 1, 6)
    quarter = _quarter(lower, position + 1, position + 7)
    for index, word in enumerate(words):
        if word in ("percent", "%"):
            return (f"{_shot_family(_window(lower, position + 1, 8))}_PCT",)
        if _is_three(words, index):
            return ("FG3M",)
        if word == "free" and words[index + 1 : index + 2] in (["throws"], ["-"]):
            return ("FTM",)
        if word == "field" and words[index + 1 : index + 2] == ["goals"]:
            return ("FGM",)
        if word in ("offensive", "defensive") and _STAT_WORDS.get(next(iter(words[index + 1 :]), "")) == "REB":
            return ("OREB" if word == "offensive" else "DREB",)
        key = _STAT_WORDS.get(word)
        if key == "PTS" and quarter is not None:
            return (f"QTR{quarter}",)
        if key is not None:
            return (key,)
    if any(word in _SCORING_VERBS for word in lower[max(position - 2, 0) : position]):
        return ("PTS",)
    return ()


def _shot_pair(lower: Sequence[str], position: int) -> tuple[list[NumberMention], int] | None:
    """ "5 - of - 10", "5 of 10", "5 - for - 10" (from three, from the line): made and attempted shots, and the
    position after them."""
    for pattern in (["-", "of", "-"], ["-", "for", "-"], ["of"], ["for"]):
        second = position + 1 + len(pattern)
        if list(lower[position + 1 : second]) == pattern and second < len(lower) and \
                _number(lower[second]) is not None:
            family = _shot_family(_window(lower, second + 1, 8))
            return [NumberMention(position, _number(lower[position]), (f"{family}M",)),
                    NumberMention(second, _number(lower[second]), (f"{family}A",))], second + 1
    return None


def _dash_pair(lower: Sequence[str], position: int) -> tuple[list[NumberMention], int] | None:
    """ "a - b" and the position after it: shots ("7 - 13 from the floor", "4 - 9 3PT"), a season record ("Bucks
    ( 8 - 8 )", "improved to 8 - 8"), a team statistic ("a 51 - 36 advantage in rebounds"), a game or quarter
    score ("118 - 101", "34 - 20 in the third"); no statistic for runs, scores during the game, home or road records
    and other pairs."""
    second = position + 2
    if lower[position + 1 : second] != ["-"] or second >= len(lower) or _number(lower[second]) is None:
        return None
    first, other = _number(lower[position]), _number(lower[second])
    before = lower[position - 1] if position else ""
    after = list(lower[second + 1 : second + 4])
    words = _window(lower, second + 1, 6)
    quarter = _quarter(lower, position - 8, second + 7)

    def pair(keys, other_keys=None, team=True, anchor=None) -> tuple[list[NumberMention], int]:
        # Team pairs know each other (a score's first number is the winner's); shots are a player's.
        links = dict(team_only=True, anchor=anchor) if team else {}
        return [NumberMention(position, first, keys, pair=second if team else None, **links),
                NumberMention(second, other, other_keys or keys, pair=position if team else None, **links)], second + 1

    if after[:1] and after[0] in _SHOT_ABBREVIATIONS:
        family = _SHOT_ABBREVIATIONS[after[0]]
        return pair((f"{family}M",), (f"{family}A",), team=False)
    if after[:1] in (["from"], ["shooting"]):
        family = _shot_family(words)
        return pair((f"{family}M",), (f"{family}A",), team=False)
    team_stat = next((_PAIR_STATS[word] for word in words if word in _PAIR_STATS), None)
    if team_stat:
        return pair((team_stat,))
    if before in ("up", "down") or any(word in _NOT_A_SCORE for word in after):
        return [], second + 1  # a score during the game ("put the Thunder up 92 - 90"), a run, a half-time score
    bracketed = before == "(" and after[:1] == [")"]
    if bracketed or after[:1] == ["record"] or (before == "to" and max(first, other) <= 82 and quarter is None):
        return pair(("WINS",), ("LOSSES",), anchor=position - 1 if bracketed else None)
    if quarter is not None and max(first, other) <= 60:
        return pair((f"QTR{quarter}",))
    if quarter is None and 50 <= min(first, other) and max(first, other) < 200:
        return pair(("PTS",))
    return [], second + 1


def _article_count(lower: Sequence[str], position: int) -> NumberMention | None:
    """ "a steal", "an assist" (one) and "a pair of steals" (two)."""
    if lower[position] not in ("a", "an"):
        return None
    key = _SINGULAR_STATS.get(lower[position + 1]) if position + 1 < len(lower) else None
    if key is not None:
        return NumberMention(position, 1, (key,))
    if lower[position + 1 : position + 3] == ["pair", "of"] and position + 3 < len(lower):
        key = _STAT_WORDS.get(lower[position + 3])
        if key is not None and key != "PTS":
            return NumberMention(position, 2, (key,))
    return None


def _find_numbers(tokens: Sequence[str]) -> list[NumberMention]:
    lower = [token.lower() for token in tokens]
    numbers, position = [], 0
    while position < len(tokens):
        article = _article_count(lower, position)
        if article:
            numbers.append(article)
            position += 1
            continue
        value = _number(lower[position])
        # Years and other big numbers, the word "three" of "three - pointers", and players' sums ("combined for").
        if value is None or value >= 200 or _is_three(lower, position) or any(
                word in ("combined", "combining", "combine") for word in lower[max(position - 3, 0) : position]):
            position += 1
            continue
        pair = _shot_pair(lower, position) or _dash_pair(lower, position)
        if pair is not None:
            found, position = pair
            numbers.extend(found)
            continue
        keys = _stat_keys(lower, position)
        if keys:
            numbers.append(NumberMention(position, value, keys))
        position += 1
    return numbers


def entity_key(key: str, entity_type: str) -> str | None:
    """A statistic (box-score column) as the key of an entity of `entity_type`: "PTS" is a team's "TEAM-PTS";
    None where that entity has no such column (a team's steals, a player's wins)."""
    if entity_type == TEAM:
        return _TEAM_KEYS.get(key)
    return None if key in ("WINS", "LOSSES") or key.startswith("QTR") else key


# --- sentence analysis ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SentenceAnalysis:
    """One summary sentence: its tokens, entity mentions (pronouns resolved), numbers with their possible
    statistics, and the positions where it names the game's weekday."""

    tokens: tuple[str, ...]
    mentions: tuple[Mention, ...]
    numbers: tuple[NumberMention, ...]
    date_positions: tuple[int, ...]

    def candidates(self, number: NumberMention) -> list[Mention]:
        """The mentions that may own `number`, most likely first: those before it, nearest first, then those after
        it, nearest first (an implicit subject stands before the sentence). For a count both players and teams
        have, players first, or teams first where the value is a team's size ("37 assists"). Only teams for scores,
        wins and losses; only the mention right before the bracket for "Bucks ( 8 - 8 )"."""
        mentions = [m for m in self.mentions if (not number.team_only or m.entity_type == TEAM)
                    and (number.anchor is None or m.end == number.anchor)]
        before = sorted((m for m in mentions if m.end <= number.position), key=lambda m: number.position - m.end)
        after = sorted((m for m in mentions if m.end > number.position), key=lambda m: m.start - number.position)
        ordered = before + after
        key = number.keys[0]
        if key in _TEAM_SIZED:
            first = TEAM if number.value >= _TEAM_SIZED[key] else PLAYER
            ordered = [m for m in ordered if m.entity_type == first] + [m for m in ordered if m.entity_type != first]
        return ordered


def analyze_summary(game: Game, text: str | Sequence[str] | None = None) -> list[SentenceAnalysis]:
    """The sentences of `text` (the game's human summary by default) with their mentions and numbers."""
    if not isinstance(game, Game):
        raise ValueError(f"analyze_summary takes a parsed Game (parse_game), got {type(game).__name__}")
    tokens = tokenize(game.summary if text is None else text)
    lexicon, context = _Lexicon(game), _Context()
    weekday = f"{game.date:%A}"
    analyses = []
    for sentence in split_token_sentences(tokens):
        mentions = _find_mentions(sentence, lexicon, context)
        if not mentions and not any(token.lower() in PLAYER_PRONOUNS | TEAM_PRONOUNS for token in sentence):
            # Nobody named and no pronoun: the sentence goes on about the last named player and team.
            mentions = [Mention(-1, -1, entity, entity_type, (), "implicit") for entity, entity_type in
                        ((context.last_player, PLAYER), (context.last_team, TEAM)) if entity is not None]
        analyses.append(SentenceAnalysis(
            tokens=tuple(sentence), mentions=tuple(mentions), numbers=tuple(_find_numbers(sentence)),
            date_positions=tuple(i for i, token in enumerate(sentence) if token == weekday),
        ))
    return analyses


# --- oracle plans -----------------------------------------------------------------------------------------------


def _match_number(game: Game, analysis: SentenceAnalysis, number: NumberMention) -> str | None:
    """The record of the nearest mentioned entity whose statistic and value the number fits; a two-team pair
    ("a 51 - 36 advantage") may also belong to the team the sentence leaves unnamed."""
    candidates = analysis.candidates(number)
    if number.pair is not None and number.anchor is None:
        named = {mention.entity for mention in candidates}
        candidates += [Mention(-1, -1, team, TEAM, (), "implicit") for team in (game.home_name, game.vis_name)
                       if team not in named]
    for mention in candidates:
        for key in number.keys:
            entity_specific = entity_key(key, mention.entity_type)
            record = game.lookup(mention.entity, entity_specific) if entity_specific else None
            if record is not None and record.value == str(number.value):
                return record.id
    return None


def oracle_sentence_plans(
    game: Game, summary: str | Sequence[str] | None = None
) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each sentence of `summary` (the game's own by default) that has a record, as its tokens and its records' ids
    in order of mention: the (summary sentence, plan sentence) pairs a realizer trains on."""
    pairs = []
    date_id = f"{GAME_ENTITY}|{DATE_KEY}"
    for analysis in analyze_summary(game, summary):
        events = [(mention.start, index, record_id) for mention in analysis.mentions
                  for index, record_id in enumerate(mention.record_ids)]
        events += [(position, 0, date_id) for position in analysis.date_positions]
        for number in analysis.numbers:
            record_id = _match_number(game, analysis, number)
            if record_id is not None:
                events.append((number.position, 0, record_id))
        ordered = list(dict.fromkeys(record_id for _, _, record_id in sorted(events)))
        if ordered:
            pairs.append((analysis.tokens, ordered))
    return pairs


def oracle_plan(game: Game, summary: str | Sequence[str] | None = None) -> list[str]:
    """The oracle content plan of `summary` (the game's own by default): record ids in order of mention, ``<EOS>``
    between sentences, ``<EOT>`` at the end (just ``[<EOT>]`` when no sentence has a record)."""
    return _joined([sentence for _, sentence in oracle_sentence_plans(game, summary)])


def _joined(sentences: Sequence[Sequence[str]]) -> list[str]:
    """Sentences of record ids as a plan: ``<EOS>`` between them, ``<EOT>`` at the end."""
    plan = []
    for index, sentence in enumerate(sentences):
        if index:
            plan.append(EOS)
        plan.extend(sentence)
    return plan + [EOT]


# --- plans a planner can decode ----------------------------------------------------------------------------------

# Records a plan may name again (Narayan et al. 2020, section 7: no repeats except sentence breaks, team names and
# cities); a player's name is not among them, as in the paper: his statistics name him.
REPEATABLE_KEYS = frozenset({"TEAM-NAME", "TEAM-CITY"})


def is_repeatable(unit: str) -> bool:
    """Whether a planner may choose `unit` (a record id or ``<EOS>``) more than once in a plan."""
    return unit == EOS or unit.rpartition("|")[2] in REPEATABLE_KEYS


def decodable_plan(plan: Sequence[str]) -> list[str]:
    """`plan` as a planner under the no-repeat rule can produce it: a record that `is_repeatable` denies is kept at
    its first mention only, sentences left empty are dropped, and the plan ends with ``<EOT>`` (training targets)."""
    seen, sentences = set(), []
    for sentence in plan_sentences(plan):
        kept = [unit for unit in sentence if is_repeatable(unit) or unit not in seen]
        seen.update(kept)
        if kept:
            sentences.append(kept)
    return _joined(sentences)


# --- plans as text ----------------------------------------------------------------------------------------------


def plan_sentences(plan: Sequence[str]) -> list[list[str]]:
    """A plan's record ids per sentence: cut at ``<EOS>``, stopped at ``<EOT>``, ``<BEG>`` ignored; empty
    sentences dropped."""
    if isinstance(plan, str):
        raise ValueError("a plan is a list of record ids and units, not one string")
    sentences, current = [], []
    for unit in plan:
        if not isinstance(unit, str):
            raise ValueError(f"a plan holds record ids and units (strings), got {type(unit).__name__}")
        if unit in (EOS, EOT):
            if current:
                sentences.append(current)
            current = []
            if unit == EOT:
                break
        elif unit not in UNITS:
            current.append(unit)
    if current:
        sentences.append(current)
    return sentences


def plan_records(plan: Sequence[str]) -> list[str]:
    """A plan's record ids in order, units removed."""
    return [record_id for sentence in plan_sentences(plan) for record_id in sentence]


def plan_to_text(game: Game, plan: Sequence[str]) -> list[str]:
    """Per plan sentence, its records' template sentences joined by spaces: what a realizer reads after ``<BEG>``."""
    return [" ".join(game.record(record_id).sentence for record_id in sentence) for sentence in plan_sentences(plan)]


def record_roles(game: Game) -> dict[str, str]:
    """Record id -> its role and key: the date, the home or visiting team, or the k-th highest scorer (ties in
    box-score order; players without points after those with)."""
    points = {record.entity: int(record.value) for record in game.records if record.key == "PTS"}
    order = sorted((record.entity for record in game.players), key=lambda name: -points.get(name, -1))
    rank = {name: index + 1 for index, name in enumerate(order)}
    roles = {}
    for record in game.records:
        if record.entity_type == GAME:
            role = "game"
        elif record.entity_type == PLAYER:
            role = f"scorer {rank[record.entity]}"
        else:
            role = "home team" if record.entity == game.home_name else "visiting team"
        roles[record.id] = f"{role} | {record.key}"
    return roles


def learn_plan_template(games: Sequence[Game], plans: Sequence[Sequence[str]]) -> list[str]:
    """The template of `template_plan`: the roles (`record_roles`) the plans mention in most games, as many as a
    plan's median count of distinct records, in the mean relative position of their first mention."""
    counts, positions, sizes = Counter(), defaultdict(list), []
    for game, plan in zip(games, plans):
        roles = record_roles(game)
        records = list(dict.fromkeys(plan_records(plan)))
        sizes.append(len(records))
        for index, record_id in enumerate(records):
            counts[roles[record_id]] += 1
            positions[roles[record_id]].append(index / len(records))
    chosen = [role for role, _ in counts.most_common(int(statistics.median(sizes)))]
    return sorted(chosen, key=lambda role: statistics.mean(positions[role]))


def template_plan(game: Game, template: Sequence[str]) -> list[str]:
    """The game's records for the template's roles, one plan sentence per entity (entities in the order they first
    appear in the template), then the end of the plan."""
    by_role = {role: record_id for record_id, role in record_roles(game).items()}
    by_entity = {}
    for role in template:
        if role in by_role:
            by_entity.setdefault(role.split(" | ")[0], []).append(by_role[role])
    plan = []
    for records in by_entity.values():
        plan += [*records, EOS]
    return plan[:-1] + [EOT] if plan else [EOT]
