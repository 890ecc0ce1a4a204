"""Rotowire games as records: the box score (one record per player and column) and both line scores (one per team and
column), each rendered as a short sentence after the templates of Narayan et al. (2020, appendix B.3, table 5), so
that an extractive model can select and order them like document sentences.

A record keeps its structured fields (entity, entity type, key, value, rank) for the metrics, and its template
sentence for the models. Its id, ``"<entity>|<key>"``, is unique within a game: a plan is a list of such ids and of
the special units ``<BEG>``, ``<EOS>`` (sentence break) and ``<EOT>`` (end of plan).

Choices where the paper gives no detail (the templates are the paper's style, not its verbatim table):

- Ranks: a numeric value carries its rank among the game's players (player records) or between the two teams (team
  records, except the season's wins and losses), ``", which is the 2nd best"``; ``"the best"`` for rank 1, equal
  values share a rank (1, 2, 2, 4); turnovers and fouls rank the most first and say ``"most"``. Percentages rank
  only the players who attempted such a shot.
- Filtering: ``N/A`` cells (players who did not play, percentages without attempts in some games) are dropped, and so
  are the surplus zeros: a zero is kept only where it tells something, a team's wins or losses ("have 0 wins": 4 of
  the 320 in the 80 shared games), made shots or a percentage with attempts ("0 of 5 from three"); zero steals, the
  box score's 0 percent of 0 attempts and the like are dropped. That leaves 316 to 421 records a game (359 on average
  over the 80 shared games) of about 615 box-score and line-score cells.
- A player's name, team and city make one ``PLAYER_NAME`` record (so a plan can name a player without a number); the
  box score's ``FIRST_NAME``, ``SECOND_NAME`` and ``TEAM_CITY`` columns are not records of their own. Each team has a
  ``TEAM-NAME`` (home or visiting) and a ``TEAM-CITY`` record; the game has one date record (``DAY``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .jsonl import read_jsonl

BEG, EOS, EOT = "<BEG>", "<EOS>", "<EOT>"
# The one split of the shared games every Rotowire model uses: sorted by id, the first 60 train, the next 5 dev, the
# last 15 test (as (start, stop) slices of the sorted games).
ROTOWIRE_SPLITS = {"train": (0, 60), "dev": (60, 65), "test": (65, 80)}
UNITS = (BEG, EOS, EOT)

PLAYER, TEAM, GAME = "player", "team", "game"
NOT_AVAILABLE = "N/A"
GAME_ENTITY = "game"
DATE_KEY = "DAY"

# Box-score columns rendered as player records, in record order.
PLAYER_STATS = (
    "START_POSITION", "MIN", "PTS", "FGM", "FGA", "FG_PCT", "FG3M", "FG3A", "FG3_PCT", "FTM", "FTA", "FT_PCT",
    "REB", "OREB", "DREB", "AST", "STL", "BLK", "TO", "PF",
)
# Line-score columns rendered as team records, in record order (TEAM-NAME and TEAM-CITY come first).
TEAM_STATS = (
    "TEAM-PTS", "TEAM-PTS_QTR1", "TEAM-PTS_QTR2", "TEAM-PTS_QTR3", "TEAM-PTS_QTR4", "TEAM-WINS", "TEAM-LOSSES",
    "TEAM-AST", "TEAM-REB", "TEAM-TOV", "TEAM-FG_PCT", "TEAM-FG3_PCT", "TEAM-FT_PCT",
)
_BOX_SCORE_COLUMNS = ("PLAYER_NAME", "TEAM_CITY") + PLAYER_STATS
_LINE_SCORE_COLUMNS = ("TEAM-NAME", "TEAM-CITY") + TEAM_STATS
_GAME_FIELDS = ("home_name", "home_city", "vis_name", "vis_city", "day", "home_line", "vis_line", "box_score")

# Made shots and percentages: a zero is news only when there were attempts.
_ATTEMPTS = {
    "FGM": "FGA", "FG_PCT": "FGA", "FG3M": "FG3A", "FG3_PCT": "FG3A", "FTM": "FTA", "FT_PCT": "FTA",
}
# Season totals, not ranked within a game.
_UNRANKED = frozenset({"TEAM-WINS", "TEAM-LOSSES"})
# More is worse: ranked "most", not "best".
_MOST = frozenset({"TO", "PF", "TEAM-TOV"})
_POSITIONS = {"F": "forward", "G": "guard", "C": "center"}

# Template per key: (phrase after the subject, singular noun, plural noun); "{n}" is the value.
_STAT_PHRASES = {
    "MIN": ("played {n}", "minute", "minutes"),
    "PTS": ("scored {n}", "point", "points"),
    "FGM": ("made {n}", "field goal", "field goals"),
    "FGA": ("attempted {n}", "field goal", "field goals"),
    "FG_PCT": ("shot {n} percent from the field", "", ""),
    "FG3M": ("made {n}", "three-pointer", "three-pointers"),
    "FG3A": ("attempted {n}", "three-pointer", "three-pointers"),
    "FG3_PCT": ("shot {n} percent from three-point range", "", ""),
    "FTM": ("made {n}", "free throw", "free throws"),
    "FTA": ("attempted {n}", "free throw", "free throws"),
    "FT_PCT": ("shot {n} percent from the free-throw line", "", ""),
    "REB": ("grabbed {n}", "rebound", "rebounds"),
    "OREB": ("grabbed {n}", "offensive rebound", "offensive rebounds"),
    "DREB": ("grabbed {n}", "defensive rebound", "defensive rebounds"),
    "AST": ("had {n}", "assist", "assists"),
    "STL": ("had {n}", "steal", "steals"),
    "BLK": ("had {n}", "block", "blocks"),
    "TO": ("committed {n}", "turnover", "turnovers"),
    "PF": ("committed {n}", "personal foul", "personal fouls"),
    "TEAM-PTS": ("scored {n}", "point", "points"),
    "TEAM-WINS": ("have {n}", "win", "wins"),
    "TEAM-LOSSES": ("have {n}", "loss", "losses"),
    "TEAM-AST": ("had {n}", "assist", "assists"),
    "TEAM-REB": ("grabbed {n}", "rebound", "rebounds"),
    "TEAM-TOV": ("committed {n}", "turnover", "turnovers"),
    "TEAM-FG_PCT": ("shot {n} percent from the field", "", ""),
    "TEAM-FG3_PCT": ("shot {n} percent from three-point range", "", ""),
    "TEAM-FT_PCT": ("shot {n} percent from the free-throw line", "", ""),
}
for _quarter, _ordinal in enumerate(("1st", "2nd", "3rd", "4th"), start=1):
    _STAT_PHRASES[f"TEAM-PTS_QTR{_quarter}"] = (f"scored {{n}} in the {_ordinal} quarter", "point", "points")


@dataclass(frozen=True)
class Record:
    """One table cell of a game as a unit a planner selects: `entity` is a player's full name, a team's name or
    ``"game"``; `key` the Rotowire column (``"PTS"``, ``"TEAM-PTS_QTR1"``, ``"PLAYER_NAME"``, ``"DAY"``); `value`
    the cell as in the data; `rank` 1 for the best value (None where values are not ranked); `team` the team name of
    a player or team record; `sentence` the templated text."""

    entity: str
    entity_type: str
    key: str
    value: str
    rank: int | None
    team: str
    sentence: str

    @property
    def id(self) -> str:
        return f"{self.entity}|{self.key}"


@dataclass(frozen=True)
class Game:
    """A parsed game: its teams, date, records in a fixed order (date, home team, visiting team, then players in
    box-score order), the human summary's tokens (empty when the game has none) and the unfiltered table."""

    id: str
    home_name: str
    home_city: str
    vis_name: str
    vis_city: str
    date: datetime.date
    records: tuple[Record, ...]
    summary: tuple[str, ...]
    # Every cell with a value, zeros included, keyed by (entity, key): what a relation is checked against.
    table: Mapping[tuple[str, str], str]

    def __post_init__(self):
        object.__setattr__(self, "_by_id", {record.id: record for record in self.records})

    def record(self, record_id: str) -> Record:
        """The record with id `record_id` (a one-line ValueError when the game has none)."""
        if record_id not in self._by_id:
            raise ValueError(f"game {self.id!r} has no record {record_id!r}")
        return self._by_id[record_id]

    @property
    def players(self) -> tuple[Record, ...]:
        """The players' PLAYER_NAME records, in box-score order."""
        return tuple(record for record in self.records if record.key == "PLAYER_NAME")

    def lookup(self, entity: str, key: str) -> Record | None:
        """The record of `entity` and `key`, None when the table has none (or it was filtered)."""
        return self._by_id.get(f"{entity}|{key}")


def ordinal(number: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def game_date(day: str) -> datetime.date:
    """Rotowire's ``"MM_DD_YY"`` as a date (a one-line ValueError otherwise)."""
    try:
        month, day_of_month, year = (int(part) for part in day.split("_"))
        return datetime.date(2000 + year, month, day_of_month)
    except (ValueError, TypeError):
        raise ValueError(f"a Rotowire day is MM_DD_YY, got {day!r}") from None


def _rank_phrase(key: str, rank: int | None) -> str:
    if rank is None:
        return ""
    word = "most" if key in _MOST else "best"
    return f", which is the {word}" if rank == 1 else f", which is the {ordinal(rank)} {word}"


def _stat_sentence(subject: str, key: str, value: str, rank: int | None) -> str:
    phrase, singular, plural = _STAT_PHRASES[key]
    noun = singular if value == "1" else plural
    text = phrase.format(n=f"{value} {noun}" if noun else value)
    return f"{subject} {text}{_rank_phrase(key, rank)}."


def _competition_ranks(values: Mapping[str, int]) -> dict[str, int]:
    # Standard competition ranking (1, 2, 2, 4): one more than the number of strictly better values.
    return {name: 1 + sum(other > value for other in values.values()) for name, value in values.items()}


def _kept(key: str, value: str, row: Mapping[str, str]) -> bool:
    """N/A is never kept; a zero only for a team's wins or losses (a 0-5 record is news), or for made shots or a
    percentage with attempts (the surplus zeros go)."""
    if value == NOT_AVAILABLE or value == "":
        return False
    if value != "0" or key in ("TEAM-WINS", "TEAM-LOSSES"):
        return True
    attempts = _ATTEMPTS.get(key.removeprefix("TEAM-"))
    return attempts is not None and row.get(attempts, "0") not in ("0", NOT_AVAILABLE)


def _rankable(key: str, value: str, row: Mapping[str, str]) -> bool:
    if not value.isdigit() or key in _UNRANKED or key == "START_POSITION":
        return False
    # A percentage without attempts is the box score's 0 of 0, not a value to rank.
    attempts = _ATTEMPTS.get(key.removeprefix("TEAM-"))
    return not (key.endswith("_PCT") and attempts and row.get(attempts) in ("0", NOT_AVAILABLE))


def _ranks(rows: Mapping[str, Mapping[str, str]], keys: Sequence[str]) -> dict[tuple[str, str], int]:
    ranks = {}
    for key in keys:
        values = {name: int(row[key]) for name, row in rows.items() if _rankable(key, row.get(key, ""), row)}
        ranks.update({(name, key): rank for name, rank in _competition_ranks(values).items()})
    return ranks


def _check_game(game: Mapping) -> None:
    missing = [name for name in _GAME_FIELDS if name not in game]
    if missing:
        raise ValueError(f"a Rotowire game needs the fields {', '.join(_GAME_FIELDS)}; missing {', '.join(missing)}")
    for side in ("home_line", "vis_line"):
        absent = [column for column in _LINE_SCORE_COLUMNS if column not in game[side]]
        if absent:
            raise ValueError(f"{side} lacks the line-score columns {', '.join(absent)}")
    absent = [column for column in _BOX_SCORE_COLUMNS if column not in game["box_score"]]
    if absent:
        raise ValueError(f"box_score lacks the columns {', '.join(absent)}")


def _player_rows(game: Mapping) -> dict[str, dict[str, str]]:
    box = game["box_score"]
    rows = {}
    for index in sorted(box["PLAYER_NAME"], key=int):
        name = box["PLAYER_NAME"][index]
        if name in rows:
            raise ValueError(f"player {name!r} appears twice in the box score")
        rows[name] = {column: cells.get(index, NOT_AVAILABLE) for column, cells in box.items()}
    return rows


def parse_game(game: Mapping | str) -> Game:
    """A game (a dict, or one JSON line as in ``rotowire/games.jsonl``) as a `Game` with its records."""
    if isinstance(game, str):
        try:
            game = json.loads(game)
        except json.JSONDecodeError as error:
            raise ValueError(f"a Rotowire game line is one JSON object: {error}") from None
    if not isinstance(game, Mapping):
        raise ValueError(f"a Rotowire game is a JSON object, got {type(game).__name__}")
    _check_game(game)
    date = game_date(game["day"])
    teams = {line["TEAM-NAME"]: line for line in (game["home_line"], game["vis_line"])}
    if len(teams) != 2:
        raise ValueError("the two teams of a Rotowire game have the same name")
    city_to_team = {line["TEAM-CITY"]: line["TEAM-NAME"] for line in teams.values()}
    players = _player_rows(game)

    records = [Record(GAME_ENTITY, GAME, DATE_KEY, game["day"], None, "",
                      f"The game was played on {date:%A}, {date:%B} {date.day}, {date.year}.")]
    team_ranks = _ranks(teams, TEAM_STATS)
    for side, (name, line) in zip(("home", "visiting"), teams.items()):
        records.append(Record(name, TEAM, "TEAM-NAME", name, None, name, f"The {name} were the {side} team."))
        records.append(Record(name, TEAM, "TEAM-CITY", line["TEAM-CITY"], None, name,
                              f"The {name} are from {line['TEAM-CITY']}."))
        for key in TEAM_STATS:
            if _kept(key, line[key], line):
                rank = team_ranks.get((name, key))
                records.append(Record(name, TEAM, key, line[key], rank, name,
                                      _stat_sentence(f"The {name}", key, line[key], rank)))
    player_ranks = _ranks(players, PLAYER_STATS)
    for name, row in players.items():
        team = city_to_team.get(row["TEAM_CITY"])
        if team is None:
            raise ValueError(f"player {name!r} plays for {row['TEAM_CITY']!r}, neither team's city")
        city = teams[team]["TEAM-CITY"]
        records.append(Record(name, PLAYER, "PLAYER_NAME", name, None, team,
                              f"{name} played for the {city} {team}."))
        for key in PLAYER_STATS:
            value = row[key]
            if not _kept(key, value, row):
                continue
            if key == "START_POSITION":
                sentence = f"{name} started at {_POSITIONS.get(value, value)}."
            else:
                sentence = _stat_sentence(name, key, value, player_ranks.get((name, key)))
            records.append(Record(name, PLAYER, key, value, player_ranks.get((name, key)), team, sentence))
    table = {(name, key): line[key] for name, line in teams.items() for key in TEAM_STATS}
    table.update({(name, key): row[key] for name, row in players.items() for key in PLAYER_STATS})
    summary = game.get("summary") or ()
    if isinstance(summary, str):
        summary = summary.split()
    return Game(
        id=str(game.get("id", "")), home_name=game["home_line"]["TEAM-NAME"], home_city=game["home_line"]["TEAM-CITY"],
        vis_name=game["vis_line"]["TEAM-NAME"], vis_city=game["vis_line"]["TEAM-CITY"], date=date,
        records=tuple(records), summary=tuple(summary),
        table={cell: value for cell, value in table.items() if value not in (NOT_AVAILABLE, "")},
    )


def read_games(path) -> list[Game]:
    """Every game of a Rotowire JSONL file (one game a line)."""
    return [parse_game(row) for row in read_jsonl(path)]


def split_games(games: Sequence[Game], split: str) -> list[Game]:
    """The games of `split` ("train", "dev" or "test") by `ROTOWIRE_SPLITS`, in id order (parsed `Game`s or game
    dicts with an ``id``)."""
    if split not in ROTOWIRE_SPLITS:
        raise ValueError(f"split must be one of {', '.join(ROTOWIRE_SPLITS)}, got {split!r}")
    start, stop = ROTOWIRE_SPLITS[split]
    return sorted(games, key=lambda game: game.id if isinstance(game, Game) else str(game.get("id", "")))[start:stop]
