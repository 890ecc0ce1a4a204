"""Train a Rotowire content planner (Narayan et al. 2020, section 7): Stepwise HiBERT or Stepwise ETCSum over a
game's records, with the Trainer.

    python training_scripts/train_content_planner.py --model_type stepwise_hibert_planner \
        --train_file ../shared/data/rotowire/games.jsonl --output_dir runs/planner-hibert --do_train --do_eval

Data: the games of `--train_file` split by `rotowire_records.ROTOWIRE_SPLITS` (sorted ids: 60 train, 5 dev, 15 test);
training reads the train games, `--do_eval` plans the dev games (the test games are the benchmark's,
`benchmarks/quality_rotowire.py`). Targets: each game's oracle plan (`oracle_plan` of its human summary, less the
repeats the decoder forbids: `decodable_plan`), one row per step (the plan prefix, the next unit; the end of plan
last), cross-entropy, as `train_stepwise.py` trains the stepwise summarizers (its collator and, for HiBERT, its
frozen precomputed sentence vectors). Evaluation: greedy plans of the `content-planning` pipeline, CS P/R/F1 and CO
x 100 against the oracle plans.
"""

import json
import logging
from dataclasses import dataclass, field

from train_stepwise import StepwiseCollator, add_sentence_vectors
from transformers import pipeline

from sumformers import ARCHITECTURES
from sumformers.configuration.summarizer_config import DEFAULT_SUMMARY_SENTENCES
from sumformers.modeling.modeling_stepwise_hibert import HiBertPreTrainedModel
from sumformers.text.evaluation import read_jsonl
from sumformers.text.rotowire_plans import oracle_plan
from sumformers.text.rotowire_records import ROTOWIRE_SPLITS, parse_game, split_games
from sumformers.text.table_to_text_metrics import plan_scores
from sumformers.training import (
    TimeBudgetArguments,
    apply_lora,
    final_training_loss,
    finish_training,
    lora_summary,
    model_and_tokenizer,
    new_card_info,
    parse_arguments,
    take_push_to_hub,
    train,
    trained_length,
)

logger = logging.getLogger("train_content_planner")
PLANNERS = ("stepwise_hibert_planner", "stepwise_etcsum_planner")


@dataclass
class PlannerArguments(TimeBudgetArguments):
    model_type: str = field(default="stepwise_hibert_planner", metadata={"help": " or ".join(PLANNERS)})
    num_sentences: int = field(
        default=DEFAULT_SUMMARY_SENTENCES["content_plan"],
        metadata={"help": "Most units of a plan before its end (its length)."},
    )
    precompute_sentence_vectors: bool = field(
        default=True, metadata={"help": "HiBERT: freeze the sentence encoder and encode every record once."}
    )
    sentence_vector_cache: str | None = field(
        default=None,
        metadata={"help": "HiBERT: a file keeping the records' vectors between runs (a resumed run skips encoding)."},
    )
    steps_per_game: int | None = field(
        default=None,
        metadata={
            "help": "Plan steps drawn at random from each game per batch (default: all of them, about 70; each step "
            "re-reads the whole table)."
        },
    )
    config_overrides: str | None = field(default=None, metadata={"help": "JSON object of model config settings."})


def planning_evaluation(tokenizer, games: list[dict], num_sentences: int):
    """The `evaluate` of `finish_training`: greedy plans of `games` against their oracle plans."""

    def evaluate(model):
        planner = pipeline("content-planning", model=model, tokenizer=tokenizer)
        plans = [output["plan"] for output in planner(games, num_sentences=num_sentences)]
        scores = plan_scores(plans, [oracle_plan(parse_game(game)) for game in games])
        scores.pop("per_game")
        return scores, (f"{len(games)} dev games, greedy plans of at most {num_sentences} units, CS (micro-averaged, "
                        "the paper's) and CO (this package's extension for plans) over the records that state a "
                        "number (not the names, the date or the starting positions)")

    return evaluate


def main():
    model_args, data_args, training_args, planner_args = parse_arguments(PlannerArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    if planner_args.model_type not in PLANNERS:
        raise ValueError(f"--model_type must be one of {', '.join(PLANNERS)}, got {planner_args.model_type!r}")
    if not data_args.train_file:
        raise ValueError("--train_file (rotowire/games.jsonl) is required")
    push = take_push_to_hub(training_args)
    rows = read_jsonl(data_args.train_file)
    split = {name: split_games(rows, name) for name in ROTOWIRE_SPLITS}

    source = model_args.model_name_or_path
    overrides = json.loads(planner_args.config_overrides or "{}")
    model_class = ARCHITECTURES[planner_args.model_type].model_class
    model, tokenizer = model_and_tokenizer(
        source,
        lambda encoder, _: model_class.from_encoder(
            encoder, encoder_name_or_path=source, num_sentences=planner_args.num_sentences, **overrides
        ),
    )
    processor = model.processor_class(tokenizer, model.config)
    card_info = new_card_info(training_args, data_args, datasets=["rotowire"])
    features = None
    precomputed = False
    if training_args.do_train:
        features = [processor.training_features(game) for game in split["train"]]
        features = [feature for feature in features if feature["oracle"]]
        precomputed = planner_args.precompute_sentence_vectors and isinstance(model, HiBertPreTrainedModel)
        if precomputed:
            model.sentence_encoder.requires_grad_(False)
            with training_args.main_process_first(desc="sentence vectors"):  # the others then read its cache file
                add_sentence_vectors(model, features, processor.collate, planner_args.sentence_vector_cache)
            for feature in features:  # the token inputs are not needed any more
                for key in ("input_ids", "token_type_ids", "attention_mask", "cls_positions"):
                    feature.pop(key)
        model = apply_lora(model, model_args)
    collate = StepwiseCollator(processor.collate, True, planner_args.steps_per_game, training_args.seed)
    trainer, result = train(
        model, training_args, features, collate, tokenizer=tokenizer, max_seconds=planner_args.max_train_seconds
    )
    if result is not None:
        rows = sum(len(feature["oracle"]) + 1 for feature in features)
        sampled = f" ({planner_args.steps_per_game} random plan steps each)" if planner_args.steps_per_game else ""
        card_info["training"] = (
            f"{len(features)} Rotowire training games ({rows} plan steps), {trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} games{sampled} x {training_args.gradient_accumulation_steps} "
            f"accumulation, learning rate {training_args.learning_rate}, {lora_summary(model_args)} (new layers "
            f"trained in full{', sentence encoder frozen' if precomputed else ''}); oracle plans from the human "
            f"summaries; {final_training_loss(trainer, result)}."
        )
    evaluate = planning_evaluation(tokenizer, split["dev"], planner_args.num_sentences)
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


if __name__ == "__main__":
    main()
