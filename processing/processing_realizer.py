"""Processor of the sentence-by-sentence realizer (Narayan et al. 2020, section 7 and appendix A.3): one plan sentence
of a Rotowire game in, the input of one realization step out, and the realized sentence's ids back to text.

The input of a step is

    [CLS] previous sentence [SEP] <BEG> records [SEP] context [SEP]

- previous sentence: the summary sentence realized before this one (empty for the first), cut to its last
  `max_previous_tokens` word pieces;
- `<BEG>`: the plan's begin marker, the unused word piece `plan_start_token` (`[unused3]`), inserted by id (the text
  "<BEG>" is never tokenized, and the vocabulary keeps the encoder's size);
- records: the template sentences of the plan sentence's records (`rotowire_plans.plan_to_text`), cut to fit;
- context (`RealizerConfig.context`): with "paper" (Narayan et al. 2020, appendix B.4), the game's date, each team
  (home first) with its home or away role, city, points, wins and losses, and the team and starting position of
  every player the plan sentence names (the DAY, TEAM-NAME, TEAM-CITY, TEAM-PTS, TEAM-WINS, TEAM-LOSSES,
  PLAYER_NAME and START_POSITION template sentences; a bench player has no START_POSITION record); with "names"
  (realizers trained before issue #40), the date, the teams' names and cities and the named players' teams only. So
  a sentence can name the date, the score, the teams' records, the opponent and a player's team although its
  records do not hold them (and with `numbers_from_input`, write those numbers).

All tokens have segment 0. Training pairs come from the oracle plan of each game's human summary: every summary
sentence with at least one record is the target of its plan sentence, with the previous such sentence (not the
previous sentence of the summary, which may have no plan sentence) as previous sentence, as at inference. The
uncased encoder writes lowercase: `decode` gives the game's names, cities, weekday and month their case back.
"""

import re
from collections.abc import Mapping, Sequence

import torch

from ..text.rotowire_plans import oracle_plan, oracle_sentence_plans, plan_to_text
from ..text.rotowire_records import DATE_KEY, GAME_ENTITY, Game, parse_game
from .processing_utils import SummarizationProcessor, padded_rows

INPUT_KEYS = ("input_ids", "token_type_ids", "attention_mask")
# A team's records in the paper's context, in this order; the "names" context keeps the first two.
CONTEXT_TEAM_KEYS = ("TEAM-NAME", "TEAM-CITY", "TEAM-PTS", "TEAM-WINS", "TEAM-LOSSES")
_WORD = re.compile(r"[A-Za-z]{2,}")  # single letters (initials) stay as written: "a" is no "A.J."


def as_game(game) -> Game:
    """A `Game` from a parsed game, a dict or one JSON line (a one-line ValueError for anything else)."""
    return game if isinstance(game, Game) else parse_game(game)


class RealizerProcessor(SummarizationProcessor):
    """`__call__(step)` encodes one realization step, `{"game", "records", "previous"}`, as tensors (a batch of
    one); `training_features(game)` gives every (plan sentence, summary sentence) pair of a game as lists;
    `collate` pads them; `decode(ids, game)` gives the sentence back as text."""

    def check_input(self, game) -> None:
        """A game as the `table-to-text` pipeline takes it: a game (dict, JSON string or `Game`), or
        `{"game": game, "plan": [...]}` with its own plan."""
        if isinstance(game, Mapping) and "game" in game:
            if not isinstance(game.get("plan"), list):
                raise ValueError("an input with a `game` needs its `plan`, a list of record ids and units")
            game = game["game"]
        if not isinstance(game, (Game, Mapping, str)):
            raise TypeError(f"a Rotowire game is a dict, a JSON string or a parsed Game, got {type(game).__name__}")
        as_game(game)

    @staticmethod
    def game(game) -> Game:
        """The parsed game (`as_game`). The `table-to-text` pipeline parses through the model's processor: in an
        exported repo the pipeline's code and the model's are separate copies of the modules, and a `Game` of the
        pipeline's copy is no `Game` to the processor's."""
        return as_game(game)

    @staticmethod
    def oracle_plan(game: Game) -> list[str]:
        """The oracle plan of the game's human summary (`rotowire_plans.oracle_plan`), for a `game` this processor
        parsed."""
        return oracle_plan(game)

    def context_text(self, game: Game, record_ids: Sequence[str]) -> str:
        """The context of the config's `context` as template sentences (see the module docstring); a record the game
        lacks (filtered, or a bench player's starting position) is left out."""
        paper = self.config.context == "paper"
        team_keys = CONTEXT_TEAM_KEYS if paper else CONTEXT_TEAM_KEYS[:2]
        player_keys = ("PLAYER_NAME", "START_POSITION") if paper else ("PLAYER_NAME",)
        players = dict.fromkeys(game.record(record_id).entity for record_id in record_ids)
        keys = [(GAME_ENTITY, DATE_KEY)]
        keys += [(team, key) for team in (game.home_name, game.vis_name) for key in team_keys]
        keys += [(name, key) for name in players if game.lookup(name, "PLAYER_NAME") for key in player_keys]
        records = (game.lookup(entity, key) for entity, key in keys)
        return " ".join(record.sentence for record in records if record is not None)

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] if text else []

    def encode_step(self, game: Game, record_ids: Sequence[str], previous: str = "", max_length=None) -> dict:
        """One step's input as lists (`input_ids`, `token_type_ids`, `attention_mask`); the records are cut where the
        input would pass `max_length` tokens (default and most: the encoder's limit)."""
        if not record_ids:
            raise ValueError("a plan sentence needs at least one record id")
        config, tokenizer = self.config, self.tokenizer
        previous_ids = self._ids(previous)[-config.max_previous_tokens :] if config.max_previous_tokens else []
        records = self._ids(plan_to_text(game, list(record_ids))[0])
        context = self._ids(self.context_text(game, record_ids))
        cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
        room = self.token_limit(max_length) - 5 - len(previous_ids) - len(context)  # 5: [CLS] [SEP] <BEG> [SEP] [SEP]
        ids = [cls, *previous_ids, sep, config.plan_start_token_id, *records[: max(room, 0)], sep, *context, sep]
        ids = ids[: self.token_limit(max_length)]
        return {"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids)}

    def __call__(self, step: dict, max_length: int | None = None) -> dict:
        """`step`: `{"game": game, "records": [record ids of one plan sentence], "previous": "text"}`."""
        encoded = self.encode_step(as_game(step["game"]), step["records"], step.get("previous", ""), max_length)
        return {key: torch.tensor([encoded[key]], dtype=torch.long) for key in INPUT_KEYS}

    def target_ids(self, sentence: str, max_target_length: int | None = None) -> list[int]:
        """The sentence's word pieces and the end token, within `max_target_length` (and the decoder's positions)
        less the begin token."""
        config = self.config
        limit = min(max_target_length or config.max_target_positions, config.max_target_positions) - 1
        return [*self._ids(sentence), config.eos_token_id][:limit]

    def training_features(self, game, max_length: int | None = None, max_target_length: int | None = None) -> list:
        """Every (plan sentence, summary sentence) pair of the game's oracle plan as a training example (lists with
        `labels`); a game without summary has none."""
        game = as_game(game)
        features, previous = [], ""
        for tokens, record_ids in oracle_sentence_plans(game):
            sentence = " ".join(tokens)
            features.append({**self.encode_step(game, record_ids, previous, max_length),
                             "labels": self.target_ids(sentence, max_target_length)})
            previous = sentence
        return features

    def collate(self, features: list[dict]) -> dict:
        """Inputs padded with the pad id (mask 0), `labels` with -100."""
        padding = {"input_ids": self.tokenizer.pad_token_id, "token_type_ids": 0, "attention_mask": 0}
        batch = {key: padded_rows([feature[key] for feature in features], padding[key]) for key in INPUT_KEYS}
        if "labels" in features[0]:
            batch["labels"] = padded_rows([feature["labels"] for feature in features], -100)
        return batch

    @staticmethod
    def case_forms(game: Game) -> dict[str, str]:
        """Lowercase word -> its cased form, for the game's team names, cities, player names, weekday and month."""
        names = [game.home_name, game.home_city, game.vis_name, game.vis_city, f"{game.date:%A %B}"]
        names += [record.entity for record in game.players]
        return {word.lower(): word for name in names for word in _WORD.findall(name)}

    def decode(self, token_ids, game: Game | None = None) -> str:
        """Generated ids to the sentence: stopped at the end token, special tokens dropped; with `game`, its names
        recased and the first letter capitalized."""
        config = self.config
        ids = [int(token) for token in token_ids]
        if config.eos_token_id in ids:
            ids = ids[: ids.index(config.eos_token_id)]
        ids = [token for token in ids if token not in (config.decoder_start_token_id, config.pad_token_id)]
        text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
        if game is None or not text:
            return text
        forms = self.case_forms(game)
        text = _WORD.sub(lambda match: forms.get(match.group().lower(), match.group()), text)
        return text[0].upper() + text[1:]


__all__ = ["RealizerProcessor", "as_game"]
