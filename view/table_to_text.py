"""The view of a table-to-text (Rotowire) summary: each realized sentence beside the records of its plan sentence,
every number the project's relation extractor (`text.table_to_text_metrics.number_relations`) ties to a statistic
marked supported or not by the box score (numbers it ties to nothing marked unchecked), and the box score itself."""

from ..text.rotowire_plans import plan_sentences, tokenize
from ..text.rotowire_records import Game
from ..text.table_to_text_metrics import Relation, is_supported, number_relations
from .page import text

PLAYER_COLUMNS = ("MIN", "PTS", "REB", "AST", "STL", "BLK", "TO", "FGM", "FGA", "FG3M", "FG3A", "FTM", "FTA", "PF")
TEAM_COLUMNS = ("TEAM-PTS", "TEAM-PTS_QTR1", "TEAM-PTS_QTR2", "TEAM-PTS_QTR3", "TEAM-PTS_QTR4", "TEAM-WINS",
                "TEAM-LOSSES", "TEAM-FG_PCT", "TEAM-FG3_PCT", "TEAM-FT_PCT", "TEAM-REB", "TEAM-AST", "TEAM-TOV")


def number_marks(game: Game, sentences: list[str]) -> list[list[tuple[str, tuple[Relation, bool] | None | str]]]:
    """Per realized sentence, its tokens, each with its mark: (relation, supported) for a number the extractor ties
    to a statistic, "unchecked" for a number it ties to nothing, None for any other token.

    The sentences are analysed together (a pronoun refers back across them) and the analysed tokens are given back
    to the sentences by their token counts; where the extractor's sentence split does not add up to them, each
    sentence is analysed on its own."""
    def marked(analyses):
        tokens = []
        for analysis, numbers in analyses:
            marks = {number.position: ((relation, is_supported(game, relation)) if relation else "unchecked")
                     for number, relation in numbers}
            tokens.extend((token, marks.get(position)) for position, token in enumerate(analysis.tokens))
        return tokens

    counts = [len(tokenize(sentence)) for sentence in sentences]
    flat = marked(number_relations(game, sentences))
    if len(flat) != sum(counts):
        return [marked(number_relations(game, sentence)) for sentence in sentences]
    grouped, start = [], 0
    for count in counts:
        grouped.append(flat[start : start + count])
        start += count
    return grouped


def _token_html(game: Game, token: str, mark) -> str:
    if mark is None:
        return text(token)
    if mark == "unchecked":
        title = "the extractor ties this number to no statistic"
        return f'<mark class="number unchecked" title="{title}">{text(token)}</mark>'
    relation, supported = mark
    table = game.table.get((relation.entity, relation.key))
    verdict = "supported" if supported else "unsupported"
    title = f"{relation.entity} {relation.key} = {relation.value}: box score says {table if table else 'nothing'}"
    return (
        f'<mark class="number {verdict}" data-entity="{text(relation.entity)}" data-key="{text(relation.key)}" '
        f'data-value="{text(relation.value)}" title="{text(title)}">{text(token)}</mark>'
    )


def _records_html(game: Game, record_ids: list[str]) -> str:
    rows = "".join(
        f"<tr><td>{text(record.entity)}</td><td>{text(record.key)}</td><td>{text(record.value)}</td></tr>"
        for record in (game.record(record_id) for record_id in record_ids)
    )
    return f'<table class="records"><tr><th>entity</th><th>key</th><th>value</th></tr>{rows}</table>'


def box_score_html(game: Game) -> str:
    """The teams' line scores and the players' box score, as the table the numbers are checked against."""
    def table(entities, columns, short):
        header = "".join(f"<th>{text(short(column))}</th>" for column in columns)
        rows = "".join(
            f"<tr><th>{text(entity)}</th>"
            + "".join(f"<td>{text(game.table.get((entity, column), ''))}</td>" for column in columns)
            + "</tr>"
            for entity in entities
        )
        return f'<table class="box-score"><tr><th></th>{header}</tr>{rows}</table>'

    teams = table((game.home_name, game.vis_name), TEAM_COLUMNS, lambda column: column.removeprefix("TEAM-"))
    players = table([record.entity for record in game.players], PLAYER_COLUMNS, lambda column: column)
    return f"<h2>Box score</h2><h3>Teams</h3>{teams}<h3>Players</h3>{players}"


def table_to_text_body(output: dict, game: Game) -> str:
    """The realized summary sentence by sentence beside its plan's records, the numbers' marks, then the box score."""
    sentences = list(output["sentences"])
    plans = plan_sentences(output["plan"])
    marks = number_marks(game, sentences) if sentences else []
    rows, counts = [], {"supported": 0, "unsupported": 0, "unchecked": 0}
    for number, (sentence_marks, record_ids) in enumerate(zip(marks, plans), start=1):
        for _, mark in sentence_marks:
            if mark is not None:
                counts["unchecked" if mark == "unchecked" else ("supported" if mark[1] else "unsupported")] += 1
        realized = " ".join(_token_html(game, token, mark) for token, mark in sentence_marks)
        rows.append(
            f'<tr class="realized" data-sentence="{number}"><td>{number}</td><td>{realized}</td>'
            f"<td>{_records_html(game, record_ids)}</td></tr>"
        )
    legend = (
        f'<p class="legend">Numbers: <mark class="supported">supported by the box score</mark> '
        f'({counts["supported"]}), <mark class="unsupported">not supported</mark> ({counts["unsupported"]}), '
        f'<mark class="unchecked">not tied to a statistic</mark> ({counts["unchecked"]}) by the project\'s rule-based '
        "relation extractor (text.table_to_text_metrics); hover a number for the statistic it was read as.</p>"
    )
    matchup = f"{game.vis_city} {game.vis_name} at {game.home_city} {game.home_name}, {game.date:%B %d, %Y}"
    return (
        f'<p class="meta">{text(matchup)}</p><h2>Summary</h2>{legend}'
        '<table class="summary realized-sentences"><tr><th>#</th><th>realized sentence</th><th>its plan\'s records'
        f"</th></tr>{''.join(rows)}</table>{box_score_html(game)}"
    )


__all__ = ["box_score_html", "number_marks", "table_to_text_body"]
