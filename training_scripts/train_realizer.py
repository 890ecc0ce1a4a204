"""Train the sentence-by-sentence realizer of table-to-text generation (Narayan et al. 2020, section 7, appendix A.3)
on the Rotowire games with the Trainer.

    python training_scripts/train_realizer.py --train_file ../shared/data/rotowire/games.jsonl \
        --output_dir runs/realizer --do_train --do_eval --max_steps 300

One training pair per sentence of a game's oracle plan (`RealizerProcessor.training_features`: the previous paired
sentence, `<BEG>`, the plan sentence's records and the game's context in, the summary sentence out), from the games
of --train_split under the shared rule `ROTOWIRE_SPLITS` (sorted ids: 60 train, 5 dev, 15 test). The model is
BertSumAbs with a shared-weights decoder over the encoder (default: the bundled MiniLM): the decoder's self-attention
and feed-forward are the encoder's layers, so LoRA on them adapts both and one learning rate serves both; the
cross-attention and the word generator train in full. Evaluation realizes the --eval_split games from their oracle
plans with the `table-to-text` pipeline and reports BLEU and ROUGE against the human summaries. Resumes from the
newest checkpoint in --output_dir.
"""

import logging
from dataclasses import dataclass, field

from sumformers import RealizerForConditionalGeneration
from sumformers.text.rotowire_plans import learn_plan_template, oracle_plan
from sumformers.text.rotowire_records import ROTOWIRE_SPLITS, read_games, split_games
from sumformers.training import (
    apply_lora,
    final_training_loss,
    finish_training,
    lora_summary,
    model_and_tokenizer,
    new_card_info,
    parse_arguments,
    portable_data_files,
    take_push_to_hub,
    train,
    trained_length,
)

logger = logging.getLogger("train_realizer")


@dataclass
class RealizerArguments:
    decoder_layers: int = field(default=6, metadata={"help": "at most the encoder's layers (each shares one)"})
    max_length: int = field(default=512, metadata={"help": "input tokens of one step"})
    max_target_length: int = field(default=96, metadata={"help": "sentence tokens in training"})
    num_beams: int = field(default=4, metadata={"help": "evaluation: beam size"})
    context: str = field(default="paper", metadata={
        "help": "what a step's context holds: paper (appendix B.4) or names (the shipped realizer's, before #40)"})


def realizer_features(processor, games, max_length: int, max_target_length: int) -> list[dict]:
    """Every (plan sentence, summary sentence) pair of `games` as a training example."""
    return [feature for game in games for feature in processor.training_features(game, max_length, max_target_length)]


def oracle_plan_evaluation(tokenizer, games, split: str, num_beams: int):
    """The `evaluate` of `finish_training`: BLEU and ROUGE of the games realized from their oracle plans."""

    def evaluate(model):
        from transformers import pipeline

        from sumformers.text.scoring import rouge_scores
        from sumformers.text.table_to_text_metrics import bleu

        realizer = pipeline("table-to-text", model=model, tokenizer=tokenizer, plan="oracle")
        outputs = realizer(list(games), num_beams=num_beams)
        predictions = [" ".join(output["sentences"]) for output in outputs]
        references = [" ".join(game.summary) for game in games]
        scores = {**rouge_scores(predictions, references), "bleu": bleu(predictions, references)}
        setting = f"{len(games)} `{split}` games from their oracle plans, beam {num_beams}, BLEU {scores['bleu']:.2f}"
        return scores, setting

    return evaluate


def main():
    model_args, data_args, training_args, realizer_args = parse_arguments(RealizerArguments, eval_split="dev")
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    push = take_push_to_hub(training_args)
    for split in (data_args.train_split, data_args.eval_split):
        if split not in ROTOWIRE_SPLITS:
            raise ValueError(f"--train_split and --eval_split are among {', '.join(ROTOWIRE_SPLITS)}, got {split!r}")
    if not data_args.train_file:
        raise ValueError("give --train_file, the Rotowire games JSONL (the splits are taken from it)")
    games = read_games(data_args.train_file)

    source = model_args.model_name_or_path
    settings = dict(encoder_name_or_path=source, decoder_layers=realizer_args.decoder_layers,
                    context=realizer_args.context)
    model, tokenizer = model_and_tokenizer(
        source,
        lambda encoder, tokenizer: RealizerForConditionalGeneration.from_encoder(encoder, tokenizer=tokenizer,
                                                                                 **settings),
    )
    processor = model.processor_class(tokenizer, model.config)
    max_length = min(realizer_args.max_length, model.config.max_position_embeddings)
    model = apply_lora(model, model_args)

    card_info = new_card_info(training_args, data_args, ["rotowire"])
    card_info["split"] = data_args.eval_split
    features = None
    if training_args.do_train:
        train_games = split_games(games, data_args.train_split)
        # what the pipeline realizes when it is given no plan: the template plan of these games' oracle plans
        model.config.plan_template = learn_plan_template(train_games, [oracle_plan(game) for game in train_games])
        features = realizer_features(processor, train_games, max_length, realizer_args.max_target_length)
    trainer, result = train(model, training_args, features, processor.collate, tokenizer=tokenizer)
    if result is not None:
        card_info["training"] = (
            f"{len(features)} plan sentences of the {len(train_games)} `{data_args.train_split}` games of "
            f"{portable_data_files(data_args.train_file)} (oracle plans of the human summaries; split by "
            "`ROTOWIRE_SPLITS`), "
            f"{trained_length(trainer)}, batch {training_args.per_device_train_batch_size} x "
            f"{training_args.world_size} processes x {training_args.gradient_accumulation_steps} accumulation, "
            f"learning rate {training_args.learning_rate}, {lora_summary(model_args)}, "
            f"decoder_init=shared, "
            f"{realizer_args.decoder_layers} decoder layers, max {max_length} input / "
            f"{realizer_args.max_target_length} sentence tokens, context {model.config.context}, label smoothing "
            f"{model.config.label_smoothing}; "
            f"{final_training_loss(trainer, result)}."
        )
    evaluate = oracle_plan_evaluation(
        tokenizer, split_games(games, data_args.eval_split), data_args.eval_split, realizer_args.num_beams
    )
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


if __name__ == "__main__":
    main()
