"""A Rotowire game as the document of a stepwise content planner (Narayan et al. 2020, section 7), which the Stepwise
HiBERT and Stepwise ETCSum planner processors share.

The document's sentences are the sentence-break unit ``<EOS>`` (sentence 0, text `SENTENCE_BREAK_TEXT`) followed by
the game's records in `parse_game` order, each as its template sentence, in the BERTSum layout. The planner picks one
of them per step; its end-of-summary unit is ``<EOT>``. ``<EOS>`` and the team name and city records are repeatable
(`rotowire_plans.is_repeatable`): `repeatable_mask` marks them, so the model keeps them choosable once in the plan
and training can teach a second team name. A plan is never built over part of a table: a game whose records do not all
fit the model's limits is a one-line ValueError.
"""

import torch

from ..text.rotowire_plans import decodable_plan, is_repeatable, oracle_plan
from ..text.rotowire_records import EOS, EOT, Game, parse_game
from .sentence_layout import SentenceLayoutProcessor, collate_sentence_batch

# What the encoders read for the sentence-break unit: a short sentence rather than the markup "<EOS>".
SENTENCE_BREAK_TEXT = "Sentence break."


def planning_units(game: Game) -> tuple[list[str], list[str]]:
    """The units a planner chooses from, in document order: ids (``<EOS>`` first, then the record ids) and the
    sentences the model reads for them."""
    ids = [EOS] + [record.id for record in game.records]
    sentences = [SENTENCE_BREAK_TEXT] + [record.sentence for record in game.records]
    return ids, sentences


def oracle_steps(game: Game, unit_ids: list[str]) -> list[int]:
    """The game's oracle plan as the planner learns it (`decodable_plan`: no repeats the decoder forbids) in unit
    indices, without the final ``<EOT>`` (the end-of-summary target comes after the last step)."""
    index = {unit: position for position, unit in enumerate(unit_ids)}
    return [index[unit] for unit in decodable_plan(oracle_plan(game)) if unit != EOT]


class ContentPlanningProcessor(SentenceLayoutProcessor):
    """A game (a dict as in ``rotowire/games.jsonl``, one JSON line of it, or a parsed `Game`) in; the BERTSum-layout
    tensors of its units out, with `repeatable_mask`, the unit texts (`sentences`), their ids (`units`) and the
    parsed `game`."""

    has_sentence_limit = True

    def check_input(self, game) -> None:
        self.game(game)

    @staticmethod
    def game(game) -> Game:
        """The parsed game (a one-line ValueError for a malformed one)."""
        return game if isinstance(game, Game) else parse_game(game)

    def encode_units(self, game: Game, max_length: int | None = None) -> tuple[dict, list[str], list[str]]:
        """The encoded units (lists) with `repeatable`, and the unit ids and sentences."""
        ids, sentences = planning_units(game)
        limit = self.config.max_document_sentences
        encoded = self.encode(sentences, max_length, warn_on_truncation=False)
        if len(sentences) > limit or encoded["num_document_sentences"] < len(sentences):
            raise ValueError(
                f"game {game.id!r} has {len(sentences)} planning units; the model reads {limit} sentences and "
                f"{self.token_limit(max_length)} tokens and kept {min(limit, encoded['num_document_sentences'])}"
            )
        encoded["repeatable"] = [is_repeatable(unit) for unit in ids]
        return encoded, ids, sentences

    def training_features(self, game, max_length: int | None = None) -> dict:
        """One training game as lists (what `collate` pads): its encoded units, `oracle` (`oracle_steps`) and
        `labels`, 1.0 for the units the oracle plan names."""
        game = self.game(game)
        encoded, ids, _ = self.encode_units(game, max_length)
        oracle = oracle_steps(game, ids)
        chosen = set(oracle)
        return dict(encoded, oracle=oracle, labels=[float(index in chosen) for index in range(len(ids))])

    def __call__(self, game, max_length: int | None = None) -> dict:
        game = self.game(game)
        encoded, ids, sentences = self.encode_units(game, max_length)
        # Tuples (not lists) so that a pipeline batch of them can be told apart from one game.
        return {**self.collate([encoded]), "sentences": tuple(sentences), "units": tuple(ids), "game": game}

    def collate(self, features: list[dict]) -> dict:
        batch = collate_sentence_batch(features, self.tokenizer.pad_token_id)
        batch["repeatable_mask"] = repeatable_mask(features, batch["sentence_mask"].shape[1])
        return batch


def repeatable_mask(features: list[dict], width: int) -> torch.Tensor:
    """[documents, width]: the features' `repeatable` lists, padded with False."""
    mask = torch.zeros((len(features), width), dtype=torch.bool)
    for row, feature in enumerate(features):
        mask[row, : len(feature["repeatable"])] = torch.tensor(feature["repeatable"], dtype=torch.bool)
    return mask


__all__ = ["SENTENCE_BREAK_TEXT", "ContentPlanningProcessor", "oracle_steps", "planning_units", "repeatable_mask"]
