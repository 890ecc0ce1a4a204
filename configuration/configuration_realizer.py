"""Configuration of the sentence-by-sentence realizer of table-to-text generation (Narayan et al. 2020, section 7 and
appendix A.3): a shared-weights encoder-decoder (`BertSumAbsConfig` with decoder_init="shared", the paper's
ROBERTASHARE idea) that writes one summary sentence from the previous sentence, the current plan sentence's records
and the game's context."""

from .configuration_bertsumabs import BertSumAbsConfig
from .summarizer_config import check_positive_integers

# What the context of a step holds (`RealizerProcessor.context_text`): "paper" (Narayan et al. 2020, appendix B.4:
# the date; each team's name, home or away, city, points, wins and losses; each named player's team and starting
# position) or "names" (the date, the teams' names and cities, the named players' teams: the context before issue #40).
REALIZER_CONTEXTS = ("paper", "names")


class RealizerConfig(BertSumAbsConfig):
    r"""
    The input (see `RealizerProcessor`) is `[CLS] previous sentence [SEP] <BEG> records [SEP] context [SEP]`; the
    output is one summary sentence ending in `eos_token`.

    Args:
        plan_start_token (`str`, *optional*, defaults to `"[unused3]"`): the word piece that stands for the plan's
            `<BEG>` marker (an unused WordPiece of the encoder's vocabulary, so the vocabulary and the word embeddings
            keep the pretrained encoder's size); its id is set from the tokenizer.
        max_previous_tokens (`int`, *optional*, defaults to 64): the previous sentence is cut to its last this many
            tokens (its end is what the next sentence continues).
        decoder_init (`str`, *optional*, defaults to `"shared"`): as in `BertSumAbsConfig`.
        no_repeat_word_ngram_size (`int`, *optional*, defaults to 0): off: one sentence legitimately repeats word
            trigrams ("7 - of - 12 ... 3 - of - 5").
        numbers_from_input (`bool`, *optional*, defaults to `False`): the `table-to-text` pipeline's default for its
            option of the same name: the realizer may write only the number tokens of its input
            (`generation.source_numbers`; not in the paper).
        context (`str`, *optional*, defaults to `"paper"`): what the input's context holds. `"paper"` (appendix
            B.4): the date; each team's name (home or away), city, points, wins and losses; the team and starting
            position of each player the plan sentence names. `"names"`: the date, the teams' names and cities and the
            named players' teams, without the numbers; a config saved without the field (a realizer trained before
            issue #40) keeps `"names"`, what it was trained on.
        plan_template (`list[str]`, *optional*): the roles of the template plan (`text.rotowire_plans.template_plan`)
            that the `table-to-text` pipeline realizes when it is given neither a plan nor a planner; learned from the
            training games' oracle plans (`learn_plan_template`, written by `train_realizer.py`). Without it, such a
            call is refused.
        (and every `BertSumAbsConfig` argument)
    """

    model_type = "realizer"

    plan_start_token: str = "[unused3]"
    plan_start_token_id: int | None = None
    max_previous_tokens: int = 64
    decoder_init: str = "shared"
    no_repeat_word_ngram_size: int = 0
    max_target_positions: int = 128
    numbers_from_input: bool = False
    context: str = "paper"
    plan_template: list[str] | None = None

    def __post_init__(self, **kwargs):
        check_positive_integers(max_previous_tokens=self.max_previous_tokens)
        if self.plan_template is not None and not (
            isinstance(self.plan_template, (list, tuple)) and all(" | " in role for role in self.plan_template)
        ):
            raise ValueError(f"plan_template must be a list of 'role | KEY' strings, got {self.plan_template!r}")
        if not isinstance(self.numbers_from_input, bool):
            raise ValueError(f"numbers_from_input must be True or False, got {self.numbers_from_input!r}")
        if self.context not in REALIZER_CONTEXTS:
            raise ValueError(f"context must be one of {', '.join(REALIZER_CONTEXTS)}, got {self.context!r}")
        super().__post_init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """`PretrainedConfig.from_dict`; a config saved before `context` existed reads the context it was trained
        on ("names")."""
        if "context" not in config_dict:
            config_dict = {**config_dict, "context": "names"}
        return super().from_dict(config_dict, **kwargs)

    def set_special_tokens(self, tokenizer) -> None:
        """BertSumAbs's summary tokens, and `plan_start_token` (a one-line error if the vocabulary lacks it)."""
        super().set_special_tokens(tokenizer)
        token_id = tokenizer.convert_tokens_to_ids(self.plan_start_token)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer has no plan_start_token {self.plan_start_token!r}: set plan_start_token "
                             "to a token of its vocabulary")
        self.plan_start_token_id = token_id


__all__ = ["REALIZER_CONTEXTS", "RealizerConfig"]
