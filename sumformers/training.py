"""What every training script shares: argument dataclasses, data loading (local JSONL or a Hub dataset), the model
(continued from a sumformers model or started from an encoder), a dataset's text as the model's processor takes it,
LoRA, training with resuming, ROUGE through the model's own pipeline, and the common end (`finish_training`):
evaluate, record the evaluation on the model card, save the final model and optionally push it."""

import json
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from transformers import HfArgumentParser, TrainerCallback, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint

logger = logging.getLogger("sumformers.training")


@dataclass
class ModelArguments:
    model_name_or_path: str = field(
        default="minilm",
        metadata={"help": "Encoder to start from (BERT/RoBERTa folder or Hub id; 'minilm' = the bundled MiniLM)."},
    )
    use_lora: bool = field(default=True, metadata={"help": "Train LoRA adapters on the encoder instead of all of it."})
    lora_r: int = field(default=8)
    lora_alpha: int = field(default=16)
    lora_dropout: float = field(default=0.1)
    lora_target_modules: str = field(default="query,value", metadata={"help": "Comma-separated module names."})
    lora_layers: str | None = field(
        default=None,
        metadata={
            "help": "Comma-separated encoder layer indices to adapt (default all). Adapting only the top layers "
            "also stops backpropagation below them, which makes CPU training several times cheaper."
        },
    )


@dataclass
class DataArguments:
    train_file: str | None = field(default=None, metadata={"help": "Local JSONL with document and summary fields."})
    validation_file: str | None = field(default=None, metadata={"help": "Local JSONL for evaluation."})
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub dataset instead of local files."})
    dataset_config_name: str | None = field(default=None)
    train_split: str = field(
        default="train", metadata={"help": "datasets split expression, e.g. train+validation[300:]"}
    )
    eval_split: str = field(default="validation", metadata={"help": "datasets split expression, e.g. validation[:300]"})
    text_column: str = field(default="document", metadata={"help": "A string, or a list of strings (multi-document)."})
    summary_column: str = field(default="summary")
    oracle: str = field(
        default="greedy",
        metadata={
            "help": "Training targets. greedy: PreSumm's greedy oracle (ROUGE-1 F + ROUGE-2 F) over the sentences "
            "the model reads; full: the paper's Oracle (Full), greedy on the mean of ROUGE-1/2/Lsum F over the whole "
            "document (its sentences past the model's input are then dropped from the targets).",
            "choices": ["greedy", "full"],
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep this many training documents."})
    train_subset_seed: int | None = field(
        default=None,
        metadata={"help": "With --max_train_samples: a random subset (the split shuffled with this seed) instead of "
                          "its first documents, e.g. when a split is ordered by source."},
    )
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for sentence splitting and oracle labels (datasets' num_proc)."}
    )
    max_eval_samples: int | None = field(default=None)


@dataclass
class TimeBudgetArguments:
    """For a script that may run on a machine lent for a fixed time."""

    max_train_seconds: float | None = field(
        default=None,
        metadata={"help": "End training after the step that passes this many seconds (then save and evaluate as "
                          "after --max_steps); the learning-rate schedule still spans the planned steps."},
    )


@dataclass
class FeatureFileArguments(TimeBudgetArguments):
    """For a script that can train on features prepared elsewhere (`train_stepwise.py --save_features`)."""

    features_file: str | None = field(
        default=None,
        metadata={"help": "Train on the features of this file (written by train_stepwise.py --save_features) "
                          "instead of --train_file; they are checked against this model's settings and cut to "
                          "--max_length."},
    )


# Defaults that suit these scripts (CPU-friendly, no online loggers); any of them can be overridden on the command line.
TRAINING_DEFAULTS = {
    "report_to": "none",
    "remove_unused_columns": False,
    "per_device_train_batch_size": 8,
    "learning_rate": 2e-4,
    "num_train_epochs": 2,
    "warmup_steps": 0.05,  # a float below 1 is a share of the total steps
    "logging_steps": 10,
    "save_strategy": "steps",
    "save_steps": 50,
    "save_total_limit": 2,
    "dataloader_num_workers": 0,
}


def parse_arguments(*extra_dataclasses, **defaults):
    """The shared arguments and `extra_dataclasses`, parsed from the command line; `defaults` are the script's own
    defaults of any of them (on top of `TRAINING_DEFAULTS`). Seeds the random generators with `--seed` before
    any model is built, so that a new model's initial weights (new layers, LoRA) follow it and runs compare."""
    from transformers import set_seed

    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments, *extra_dataclasses))
    parser.set_defaults(**{**TRAINING_DEFAULTS, **defaults, **launch_defaults()})
    arguments = parser.parse_args_into_dataclasses()
    set_seed(arguments[2].seed)
    return arguments


# What a launcher sets in each process's environment: torchrun (and `accelerate launch` through it) the world size,
# mpirun (accelerate's MULTI_CPU with a hostfile) one of the others.
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launch_defaults(environ=None) -> dict:
    """The defaults the launch decides. Processes that torchrun started (or `accelerate launch` with a MULTI_GPU
    config, which runs torchrun) on a machine without an accelerator train on the CPU over gloo (`use_cpu`): without
    it accelerate makes each of them rank 0 of 1, and each trains alone on all the data into the same checkpoints.
    `accelerate launch --cpu --num_processes N` (or a MULTI_CPU config without an MPI hostfile) starts one process
    whatever N says (accelerate 1.x), which would train alone without a word: it stops with an error naming the
    commands that start N."""
    import torch

    environ = os.environ if environ is None else environ
    world_size = max(int(environ.get(name, 1)) for name in WORLD_SIZE_VARIABLES)
    # accelerate's single-process launcher sets MASTER_ADDR only when asked for several processes or machines
    if environ.get("ACCELERATE_USE_CPU", "").lower() == "true" and "MASTER_ADDR" in environ and world_size == 1:
        raise ValueError(
            "`accelerate launch` on the CPU (--cpu, or a MULTI_CPU config without an MPI hostfile) starts one process "
            "whatever --num_processes says: for several CPU processes launch with --config_file "
            "training_scripts/accelerate/multi_cpu.yaml, or torchrun --nproc_per_node N"
        )
    if world_size > 1 and not torch.accelerator.is_available():
        return {"use_cpu": True}
    return {}


def load_splits(data_args: DataArguments):
    """(train, eval) `datasets.Dataset`s from local JSON lines files or a Hub dataset; either may be None."""
    from datasets import load_dataset

    if data_args.dataset_name:
        source = {"path": data_args.dataset_name, "name": data_args.dataset_config_name}
    else:
        data_files = {
            name: path
            for name, path in (("train", data_args.train_file), ("validation", data_args.validation_file))
            if path
        }
        if not data_files:
            raise ValueError("give --train_file/--validation_file (local JSONL) or --dataset_name (Hub dataset)")
        for path in data_files.values():
            if not Path(path).is_file():
                raise FileNotFoundError(f"data file not found: {path}")
        source = {"path": "json", "data_files": data_files}

    def split(expression, limit, subset_seed=None):
        if not expression:
            return None
        dataset = load_dataset(**source, split=expression)
        if limit and subset_seed is not None:
            dataset = dataset.shuffle(seed=subset_seed)
        return dataset.select(range(min(limit, len(dataset)))) if limit else dataset

    check_subset_arguments(data_args)
    train = split(data_args.train_split, data_args.max_train_samples, data_args.train_subset_seed) if (
        data_args.dataset_name or data_args.train_file
    ) else None
    evaluation = split(data_args.eval_split, data_args.max_eval_samples) if (
        data_args.dataset_name or data_args.validation_file
    ) else None
    return train, evaluation


def training_source(data_args: DataArguments) -> str:
    """Where the training documents came from, for cards: the split of the file or dataset, and which subset."""
    source = data_args.dataset_name or portable_data_files(data_args.train_file)
    return f"`{data_args.train_split}`{subset_description(data_args)} of {source}"


def subset_description(data_args: DataArguments) -> str:
    """Which of the split's documents --max_train_samples kept, for cards ("" when all)."""
    if not data_args.max_train_samples:
        return ""
    seed = data_args.train_subset_seed
    return f" (a random subset, seed {seed})" if seed is not None else " (its first documents)"


def check_subset_arguments(data_args: DataArguments) -> None:
    if data_args.train_subset_seed is not None and not data_args.max_train_samples:
        raise ValueError("--train_subset_seed picks a random subset of --max_train_samples documents: give both")


def training_subset(documents: list, data_args: DataArguments) -> list:
    """The --max_train_samples of a features file's documents, chosen as `load_splits` chooses them from the
    split: its first ones, or with --train_subset_seed the first after the permutation `Dataset.shuffle` draws with
    that seed, so a run over the file trains on the same documents as one over the split."""
    import numpy as np

    check_subset_arguments(data_args)
    limit = data_args.max_train_samples
    if not limit:
        return documents
    if data_args.train_subset_seed is None:
        return documents[:limit]
    order = np.random.default_rng(data_args.train_subset_seed).permutation(len(documents))
    return [documents[index] for index in order[:limit]]


def portable_data_files(files: str) -> str:
    """Comma-separated data files as a card names them: a file in the shared data folder by its place there (an
    absolute path of this machine means nothing on the Hub), any other as given."""
    from .text.evaluation import data_dir

    shared = data_dir().resolve()
    named = []
    for name in files.split(","):
        path = Path(name).resolve()
        named.append(str(path.relative_to(shared)) if path.is_relative_to(shared) else name)
    return ",".join(named)


def document_text(value) -> str:
    """A document field as text: multi-document lists are joined one document per paragraph."""
    return "\n\n".join(value) if isinstance(value, (list, tuple)) else (value or "")


def model_input(value, reads_multiple_documents: bool):
    """A dataset's text field as the model's processor and pipeline take it: a list of documents stays several
    documents (`{"documents": [...]}`) for a model that reads several (its `reads_multiple_documents`), and is
    otherwise one text, one document a paragraph (`document_text`; an empty list or None: an empty text)."""
    if isinstance(value, (list, tuple)) and value and reads_multiple_documents:
        return {"documents": list(value)}
    return document_text(value)


@dataclass(frozen=True)
class FeatureColumns:
    """The data settings training features depend on: `DataArguments` without its splits, limits and workers, so
    that the datasets cache of `map_training_features` survives a change of those."""

    text_column: str
    summary_column: str
    oracle: str


def map_training_features(
    train_dataset, build_features, training_args, data_args: DataArguments, processor, multiple_documents, **settings
):
    """`build_features(example, processor, multiple_documents, columns, **settings)` for every training document with
    datasets' `map` (`columns`: the `FeatureColumns` of `data_args`; `settings`: the script's values the features
    depend on, and only those). Cached on disk, keyed on exactly these arguments, so a later run on the same documents
    skips the sentence splitting and oracle search (about 0.1 s a CNN/DM article) whatever its evaluation or
    optimizer flags; --preprocessing_num_workers processes; the main process first under distributed training."""
    columns = FeatureColumns(data_args.text_column, data_args.summary_column, data_args.oracle)
    fn_kwargs = {"processor": processor, "multiple_documents": multiple_documents, "columns": columns, **settings}
    with training_args.main_process_first(desc="training features"):
        return train_dataset.map(
            build_features,
            fn_kwargs=fn_kwargs,
            remove_columns=train_dataset.column_names,
            num_proc=data_args.preprocessing_num_workers,
            desc="training features",
        )


def model_and_tokenizer(source: str, create):
    """The model to train and its tokenizer: the sumformers model saved at `source` (training continues from it), or
    a new one, `create(encoder, tokenizer)`, over the encoder `source` names (a folder or Hub id; `minilm`: the bundled
    MiniLM) and that encoder's tokenizer."""
    from transformers import AutoTokenizer

    from .hub import is_sumformers_model, load_model, load_tokenizer
    from .modeling.pretrained_encoder import resolve_encoder

    if is_sumformers_model(source):
        return load_model(source), load_tokenizer(source)
    encoder = resolve_encoder(source)
    tokenizer = AutoTokenizer.from_pretrained(encoder)
    return create(encoder, tokenizer), tokenizer


def pipeline_rouge(model, tokenizer, inputs: list, references: list[str], batch_size: int = 1, **options) -> dict:
    """ROUGE of the summaries the model's own pipeline (its registered task) gives for `inputs` with `options`."""
    from transformers import pipeline

    from .registry import architecture_for
    from .text.scoring import rouge_scores

    task = architecture_for(model.config).task
    summarizer = pipeline(task, model=model, tokenizer=tokenizer, batch_size=batch_size)
    outputs = summarizer(inputs, **options)
    return rouge_scores([output["summary"] for output in outputs], list(references))


def dataset_evaluation(
    tokenizer, dataset, data_args: DataArguments, decoding: str, unit: str = "documents", batch_size: int = 1, **options
):
    """The `evaluate` that `finish_training` takes for a `datasets` eval split (None without one): `pipeline_rouge`
    with the pipeline `options` on its `--text_column` (as `model_input` gives it to the model) against its
    `--summary_column`, described as "<count> <unit> of `<--eval_split>`, <decoding>"."""
    if dataset is None:
        return None

    def evaluate(model):
        inputs = [model_input(value, model.reads_multiple_documents) for value in dataset[data_args.text_column]]
        scores = pipeline_rouge(model, tokenizer, inputs, dataset[data_args.summary_column], batch_size, **options)
        return scores, f"{len(dataset)} {unit} of `{data_args.eval_split}`, {decoding}"

    return evaluate


def lora_summary(model_args: ModelArguments) -> str:
    """How the pretrained layers trained, for cards: under LoRA (its rank, modules and layers) or in full."""
    if not model_args.use_lora:
        return "the pretrained layers trained in full (no LoRA)"
    layers = f" of layers {model_args.lora_layers}" if model_args.lora_layers else ""
    return f"LoRA r={model_args.lora_r} on {model_args.lora_target_modules}{layers}"


def apply_lora(model, model_args: ModelArguments, full_modules: tuple[str, ...] = (), also_adapt: tuple[str, ...] = ()):
    """Wrap `model` with LoRA on the pretrained linear layers its contract names (`model.lora_layers`, one dotted
    path or several) and those under the `also_adapt` paths (say, HiBERT's sentence encoder when it trains too),
    restricted to --lora_target_modules names and --lora_layers indices (of the first path, the encoder's layers); its
    `new_modules` and `full_modules` (say, a decoder trained from scratch) train in full.
    Adapting only the top layers also stops backpropagation below them, which makes CPU training several times
    cheaper."""
    if not model_args.use_lora:
        return model
    from peft import LoraConfig, get_peft_model
    from torch import nn

    from .hub import is_sumformers_model
    from .modeling.pretrained_encoder import quiet_loading

    source = model_args.model_name_or_path
    if source and is_sumformers_model(source):
        # an adapter checkpoint reloads over the pretrained encoder: the saved model's own training would be lost
        raise ValueError(f"--use_lora starts from the encoder (--model_name_or_path), not from the saved model "
                         f"{source}: continue it in full (--use_lora False)")

    if model.lora_layers is None:
        raise ValueError(f"{type(model).__name__} has no pretrained layers for LoRA to adapt: train it in full")
    names = {name.strip() for name in model_args.lora_target_modules.split(",") if name.strip()}
    layers = {int(index) for index in model_args.lora_layers.split(",")} if model_args.lora_layers else None
    paths = (model.lora_layers,) if isinstance(model.lora_layers, str) else tuple(model.lora_layers)
    paths += tuple(also_adapt)
    new_modules = model.new_modules
    targets = []
    for name, module in model.named_modules():
        path = next((path for path in paths if name.startswith(path + ".")), None)
        if not isinstance(module, nn.Linear) or path is None:
            continue
        if any(name == full or name.startswith(full + ".") for full in full_modules):
            continue
        parts = name[len(path) + 1 :].split(".")
        new = any(part in new_modules for part in parts)  # trained in full, not adapted
        chosen = layers is None or path != paths[0] or int(parts[0]) in layers
        if parts[-1] in names and not new and chosen:
            targets.append(name)
    if not targets:
        raise ValueError(f"no linear layer of {'/'.join(paths)} matches --lora_target_modules {sorted(names)}")
    # a new module inside another one trained in full is saved with it (PEFT would wrap it twice)
    outer = (*full_modules, *new_modules)
    modules_to_save = [
        *full_modules, *(m for m in new_modules if not _inside(model, m, tuple(o for o in outer if o != m)))
    ]
    config = LoraConfig(
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=targets,
        modules_to_save=modules_to_save,
    )
    with quiet_loading():  # PEFT reads a deprecated transformers property while wrapping
        peft_model = get_peft_model(model, config)
    trainable, total = peft_model.get_nb_trainable_parameters()
    logger.info("LoRA on %d layers: %d trainable of %d parameters", len(targets), trainable, total)
    return peft_model


def _inside(model, module_name: str, outer_modules: tuple[str, ...]) -> bool:
    """Whether every module called `module_name` lies inside one of `outer_modules` (and so is saved with it)."""
    paths = [name for name, _ in model.named_modules() if name.split(".")[-1] == module_name]
    return bool(paths) and all(any(path.startswith(outer + ".") for outer in outer_modules) for path in paths)


def last_checkpoint(training_args: TrainingArguments) -> str | None:
    """The checkpoint to resume from: `--resume_from_checkpoint`, else the newest one in `--output_dir`."""
    if training_args.resume_from_checkpoint:
        return training_args.resume_from_checkpoint
    if os.path.isdir(training_args.output_dir):
        return get_last_checkpoint(training_args.output_dir)
    return None


class AdapterCheckpointConfig(TrainerCallback):
    """The Trainer saves only a PEFT model's adapter into `checkpoint-N`; this adds the base model's config (and
    generation config), from which loading rebuilds the base, as the final adapter checkpoint has them."""

    def on_save(self, args, state, control, model=None, **kwargs):
        from peft import PeftModel

        from .hub import save_base_config

        if isinstance(model, PeftModel) and state.is_world_process_zero:
            checkpoint = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            save_base_config(model.get_base_model(), checkpoint)


SPECIAL_TOKENS = ("pad_token_id", "bos_token_id", "eos_token_id")


class KeepSpecialTokens(TrainerCallback):
    """Puts back the model's special token ids after the Trainer aligns them with the tokenizer. transformers before
    5.23 (5.17, say) also copies the ids the tokenizer lacks, as None: a BERT tokenizer has no EOS, so a summarizer's
    `eos_token_id` (its end-of-summary token) became None, and the saved config no longer loaded. The ids are the
    model's own: its tokenizer's vocabulary holds them, under other names."""

    def __init__(self, model):
        self.model = model
        self.config_ids = {name: getattr(model.config, name, None) for name in SPECIAL_TOKENS}
        generation = getattr(model, "generation_config", None)
        self.generation_ids = {name: getattr(generation, name, None) for name in SPECIAL_TOKENS} if generation else {}

    def on_train_begin(self, args, state, control, **kwargs):
        for name, value in self.config_ids.items():
            setattr(self.model.config, name, value)
        for name, value in self.generation_ids.items():
            setattr(self.model.generation_config, name, value)


class StopAfterSeconds(TrainerCallback):
    """Ends training after the first optimizer step that finishes `seconds` after training began, as if `max_steps`
    had been reached there: the script then saves its final model and evaluates it. For a machine lent for a fixed
    time, where a run killed by its deadline would leave only the last `checkpoint-N` and no evaluation."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self.seconds, self.clock, self.started = seconds, clock, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        if self.spent(args):
            logger.info("stopping at step %d: the %.0f s training budget is spent", state.global_step, self.seconds)
            control.should_training_stop = True

    def spent(self, args) -> bool:
        """Whether the budget is spent, in any process: every process must stop at the same step (their clocks
        differ), or the others would wait forever for its gradients in the next step."""
        import torch
        from torch import distributed

        spent = self.clock() - self.started >= self.seconds
        if not (distributed.is_available() and distributed.is_initialized()):
            return spent
        flag = torch.tensor([float(spent)], device=args.device)
        distributed.all_reduce(flag, op=distributed.ReduceOp.MAX)
        return bool(flag.item())


def near_duplicate_feature(feature: dict, is_continuation, seed: int) -> dict:
    """A HiBERT token feature of near-duplicates of `feature`'s oracle sentences, one each in oracle order: a
    paraphrase made by dropping about one word in seven (at least one from four words on) and swapping two adjacent
    words (from three words on). Words are word pieces with their continuations (`is_continuation(token_id)`: the
    tokenizer's "##" pieces), so no word is cut. The same `seed` gives the same near-duplicates (their sentence
    vectors are cached by their tokens)."""
    rng = random.Random(seed)
    input_ids, starts = feature["input_ids"], feature["cls_positions"]
    ends = [*starts[1:], len(input_ids)]
    rebuilt, cls_positions, token_type_ids = [], [], []
    for index in feature["oracle"]:
        cls, *body, sep = input_ids[starts[index] : ends[index]]
        words = []
        for token in body:
            if words and is_continuation(token):
                words[-1].append(token)
            else:
                words.append([token])
        if len(words) >= 4:
            for position in sorted(rng.sample(range(len(words)), max(1, round(len(words) / 7))), reverse=True):
                del words[position]
        if len(words) >= 3:
            swap = rng.randrange(len(words) - 1)
            words[swap], words[swap + 1] = words[swap + 1], words[swap]
        sentence = [cls, *(token for word in words for token in word), sep]
        token_type_ids += [len(cls_positions) % 2] * len(sentence)  # BERTSum's interval segments
        cls_positions.append(len(rebuilt))
        rebuilt += sentence
    return {"input_ids": rebuilt, "token_type_ids": token_type_ids, "attention_mask": [1] * len(rebuilt),
            "cls_positions": cls_positions, "labels": [0.0] * len(cls_positions)}


class StepwiseCollator:
    """Pads documents (token inputs with `collate`, the processor's, or precomputed `sentence_vectors`) and, for
    stepwise models, lays out one row per (document, step): `summary_indices` (oracle prefix, -1 padding),
    `row_documents`, `labels` (the next oracle sentence, or the sentence axis' width for the end of the summary).

    With `steps_per_document`, each document gives that many of its steps drawn at random (all of them when it has
    fewer): a content plan has about 70 steps over 400 records, and every step re-reads the whole table, so a game's
    full set of rows is slow and holds gigabytes; a sample of them gives more updates for the same compute.

    Training signals that need the partial summary (issue 57; off by default; both give set `labels` [rows,
    sentences + 1], see `modeling.sentence_scoring.next_choice_logits_and_loss`):
    - `duplicate_probability` p: each document of a batch, with probability p, gets an exact copy of one of its
      oracle sentences (drawn at random) inserted right after it (over precomputed vectors: the vector repeated;
      not past `max_sentences`). Before either twin is chosen both are right wherever the oracle takes that
      sentence; once one is in the summary (which one is drawn per document) the other is never a target and, with
      `duplicate_negative_weight` w > 0, an explicit negative (unlikelihood weight w). With `near_duplicate_share` s,
      a share s of the copies are near-duplicates instead (`near_duplicate_feature`'s paraphrase, whose vectors a
      feature holds as `near_duplicate_vectors`, one per oracle sentence), labelled as exact copies are.
    - `prefix_orders` K: K more random orders of each document's oracle set, with a row for every proper, non-empty
      prefix of each; the right choices are all the oracle sentences not yet chosen. A set target rather than the
      one with the best marginal ROUGE gain given the prefix: the features hold no reference to score the gains
      with, and the beam search needs only that some sentence the oracle wants ranks first, not which one; the
      oracle-order rows still teach the greedy order.
    - `end_negative_weight` w: on every row whose right choice is a sentence, the end-of-summary unit is an explicit
      negative (unlikelihood weight w). Its gradient on such rows grows from p to (1 + w) p against (1 - p) on the
      rows that end, so at equilibrium the end unit's log-odds drop by log(1 + w) on every row: the length
      calibration of a decoding `end_bias` of -log(1 + w), learned. Trained on the oracle-order rows alone, the end
      unit's probability after one sentence (0.24 on development articles) beats the spread-out sentence
      probabilities (the best about 0.07), so beam search ends nearly every summary after one sentence.

    With `anchor`, the batch also holds `anchor_choices` [rows, sentences + 1] (bool), where `AnchoredTrainer` keeps
    the starting model's distribution: on the oracle-order rows (those the starting model was trained on) every
    choice but an inserted copy and its twin; nothing on the other rows."""

    def __init__(
        self,
        collate,
        stepwise: bool,
        steps_per_document: int | None = None,
        seed: int = 0,
        duplicate_probability: float = 0.0,
        duplicate_negative_weight: float = 0.0,
        prefix_orders: int = 0,
        max_sentences: int | None = None,
        near_duplicate_share: float = 0.0,
        anchor: bool = False,
        end_negative_weight: float = 0.0,
    ):
        if steps_per_document is not None and steps_per_document < 1:
            raise ValueError(f"steps_per_document must be at least 1, got {steps_per_document}")
        if not 0.0 <= duplicate_probability <= 1.0:
            raise ValueError(f"duplicate_probability must lie in [0, 1], got {duplicate_probability}")
        if not 0.0 <= near_duplicate_share <= 1.0:
            raise ValueError(f"near_duplicate_share must lie in [0, 1], got {near_duplicate_share}")
        if duplicate_negative_weight < 0 or prefix_orders < 0 or end_negative_weight < 0:
            raise ValueError("duplicate_negative_weight, prefix_orders and end_negative_weight must not be negative")
        self.collate = collate
        self.stepwise = stepwise
        self.steps_per_document = steps_per_document
        self.random = random.Random(seed)
        self.duplicate_probability = duplicate_probability
        self.duplicate_negative_weight = duplicate_negative_weight
        self.prefix_orders = prefix_orders
        self.max_sentences = max_sentences
        self.near_duplicate_share = near_duplicate_share
        self.anchor = anchor
        self.end_negative_weight = end_negative_weight

    @property
    def set_labels(self) -> bool:
        return self.stepwise and (self.duplicate_probability > 0 or self.prefix_orders > 0
                                  or self.end_negative_weight > 0)

    def with_duplicate(self, feature: dict) -> tuple[dict, tuple[int, int] | None]:
        """`feature`, or with probability `duplicate_probability` a copy of it whose oracle sentence t (drawn at
        random) is repeated right after itself (with `near_duplicate_share`, that share of the time its
        near-duplicate); returns it and the twins (t, t + 1), or None."""
        oracle = feature["oracle"]
        count = len(feature["labels"])
        room = self.max_sentences is None or count < self.max_sentences
        if not oracle or not room or self.random.random() >= self.duplicate_probability:
            return feature, None
        if "sentence_vectors" not in feature:
            raise ValueError("duplicate sentences need precomputed sentence vectors (--precompute_sentence_vectors)")
        import torch

        twin = self.random.choice(oracle)
        vectors = feature["sentence_vectors"]
        copy = vectors[twin : twin + 1]
        if self.near_duplicate_share and self.random.random() < self.near_duplicate_share:
            if "near_duplicate_vectors" not in feature:
                raise ValueError("near duplicates need their vectors (train_stepwise --near_duplicate_share)")
            copy = feature["near_duplicate_vectors"][oracle.index(twin)][None]
        labels = list(feature["labels"])
        doubled = dict(
            feature,
            sentence_vectors=torch.cat([vectors[: twin + 1], copy.to(vectors.dtype), vectors[twin + 1 : count]]),
            labels=[*labels[: twin + 1], labels[twin], *labels[twin + 1 :]],
            oracle=[index + (index > twin) for index in oracle],
        )
        return doubled, (twin, twin + 1)

    def rows(
        self, oracle: list[int], width: int, twins: tuple[int, int] | None
    ) -> list[tuple[list[int], list, bool]]:
        """The (prefix, label, in oracle order) rows of one document: its oracle order (sampled with
        `steps_per_document`), then its random orders. A label is an index (the paper's rows) or, with set labels, a
        list of width + 1 entries."""
        steps = range(len(oracle) + 1)
        if self.steps_per_document is not None and self.steps_per_document < len(steps):
            steps = sorted(self.random.sample(steps, self.steps_per_document))
        if not self.set_labels:
            return [(oracle[:step], oracle[step] if step < len(oracle) else width, True) for step in steps]
        chosen_twin = self.random.choice(twins) if twins else None
        orders = [(oracle, steps)]
        for _ in range(self.prefix_orders):
            orders.append((self.random.sample(oracle, len(oracle)), range(1, len(oracle))))
        rows = []
        for order, order_steps in orders:
            for step in order_steps:
                prefix = order[:step]
                if order is oracle:
                    right = [oracle[step]] if step < len(oracle) else []
                else:
                    right = [index for index in oracle if index not in prefix]
                rows.append((*self.set_row(prefix, right, width, twins, chosen_twin), order is oracle))
        return rows

    def set_row(self, prefix, right, width, twins, chosen_twin) -> tuple[list[int], list[float]]:
        """One row with set labels: `right` (sentence indices; empty: the end of the summary), the twins (the first
        stands for both in `prefix` and `right`) resolved."""
        label = [0.0] * (width + 1)
        if twins and twins[0] in prefix:
            prefix = [chosen_twin if index == twins[0] else index for index in prefix]
            other = twins[1] if chosen_twin == twins[0] else twins[0]
            label[other] = -self.duplicate_negative_weight
        for index in right:
            label[index] = 1.0
            if twins and index == twins[0]:
                label[twins[1]] = 1.0
        label[width] = -self.end_negative_weight if right else 1.0
        return prefix, label

    def __call__(self, features: list[dict]) -> dict:
        import torch
        from torch.nn import functional as F

        from .processing.planner_inputs import repeatable_mask

        twins = [None] * len(features)
        if self.stepwise and self.duplicate_probability > 0:
            features, twins = map(list, zip(*(self.with_duplicate(feature) for feature in features)))
        if "sentence_vectors" in features[0]:
            width = max(len(feature["labels"]) for feature in features)
            batch = {
                "sentence_vectors": torch.stack(
                    [F.pad(f["sentence_vectors"], (0, 0, 0, width - len(f["labels"]))) for f in features]
                ),
                "sentence_mask": torch.tensor([[i < len(f["labels"]) for i in range(width)] for f in features]),
                "labels": torch.tensor([f["labels"] + [-100.0] * (width - len(f["labels"])) for f in features]),
            }
            if "repeatable" in features[0]:  # a content planner's repeatable units
                batch["repeatable_mask"] = repeatable_mask(features, width)
        else:
            batch = self.collate(features)
        if not self.stepwise:
            return batch
        width = batch["sentence_mask"].shape[1]
        prefixes, targets, documents, anchored = [], [], [], []
        for document, (feature, twin) in enumerate(zip(features, twins)):
            for prefix, target, in_oracle_order in self.rows(feature["oracle"], width, twin):
                prefixes.append(prefix)
                targets.append(target)
                documents.append(document)
                choices = [in_oracle_order] * (width + 1)
                for index in twin or ():
                    choices[index] = False
                anchored.append(choices)
        longest = max(len(prefix) for prefix in prefixes)
        batch["summary_indices"] = torch.tensor([prefix + [-1] * (longest - len(prefix)) for prefix in prefixes])
        batch["row_documents"] = torch.tensor(documents)
        batch["labels"] = torch.tensor(targets)
        if self.anchor:
            batch["anchor_choices"] = torch.tensor(anchored)
        return batch


def anchored_trainer_class():
    """`AnchoredTrainer`, defined on first use so that importing this module does not import torch."""
    import torch
    from transformers import Trainer

    class AnchoredTrainer(Trainer):
        """Continued training that keeps the starting model's (`teacher`, frozen) next-choice distribution over the
        batch's `anchor_choices` (`StepwiseCollator(anchor=True)`): the loss adds `anchor_weight` x
        `anchor_divergence`. Continuing the shipped Stepwise HiBERT on a few thousand documents with
        the oracle targets alone drifts from what its 39k-document run learned (ROUGE-1 -0.6 to -1.3 on development
        articles, issue 57); the anchor lets the new signals change what needs the summary and little else."""

        def __init__(self, *args, teacher, anchor_weight: float, **kwargs):
            super().__init__(*args, **kwargs)
            self.teacher = teacher.eval().requires_grad_(False).to(self.args.device)  # once, not every step
            self.anchor_weight = anchor_weight

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            anchor_choices = inputs.pop("anchor_choices")
            outputs = model(**inputs)
            loss = outputs.loss
            if bool(anchor_choices.any()):
                unlabelled = {key: value for key, value in inputs.items() if key != "labels"}
                with torch.no_grad():
                    teacher_logits = self.teacher(**unlabelled).logits
                loss = loss + self.anchor_weight * anchor_divergence(outputs.logits, teacher_logits, anchor_choices)
            return (loss, outputs) if return_outputs else loss

    return AnchoredTrainer


def anchor_divergence(logits, teacher_logits, anchor_choices):
    """KL(teacher || model) of the next-choice distributions [rows, choices], both renormalized over a row's
    `anchor_choices`, the mean over the rows with any; choices closed in both (the dtype's minimum) add nothing."""
    import torch
    from torch.nn import functional as F

    rows = anchor_choices.any(-1)
    left_out = ~anchor_choices[rows]
    lowest = torch.finfo(torch.float32).min
    return F.kl_div(
        torch.log_softmax(logits[rows].float().masked_fill(left_out, lowest), -1),
        torch.log_softmax(teacher_logits[rows].float().masked_fill(left_out, lowest), -1),
        log_target=True,
        reduction="none",
    ).sum(-1).mean()


def train(
    model,
    training_args: TrainingArguments,
    features=None,
    data_collator=None,
    optimizer=None,
    tokenizer=None,
    max_seconds: float | None = None,
    teacher=None,
    anchor_weight: float = 0.0,
):
    """A `Trainer` for `model` and, given training `features` (what --do_train prepared), its training, resumed as
    `train_resuming` resumes. Returns the trainer and the `TrainOutput` (None without features). `optimizer` (with
    parameter groups of their own rates) replaces the Trainer's AdamW; the Trainer still makes the schedule.
    `tokenizer` is saved into every `checkpoint-N`, and with LoRA the base model's config (`AdapterCheckpointConfig`),
    so that a checkpoint loads in the pipelines as the final model does. `max_seconds` ends training early
    (`StopAfterSeconds`). With a `teacher` (the model training started from), an `AnchoredTrainer` with
    `anchor_weight`."""
    from transformers import Trainer

    if training_args.bf16 and training_args.device.type == "cpu" and not cpu_bfloat16_is_native():
        logger.warning("--bf16 on a CPU without native bfloat16 (AVX512-BF16 or AMX) is emulated and several times "
                       "slower than float32: leave it out here")
    callbacks = [AdapterCheckpointConfig(), KeepSpecialTokens(model)]
    if max_seconds is not None:
        callbacks.append(StopAfterSeconds(max_seconds))
    anchor = {} if teacher is None else {"teacher": teacher, "anchor_weight": anchor_weight}
    trainer = (Trainer if teacher is None else anchored_trainer_class())(
        model=model,
        args=training_args,
        train_dataset=features,
        data_collator=data_collator,
        optimizers=(optimizer, None),
        processing_class=tokenizer,
        callbacks=callbacks,
        **anchor,
    )
    if features is None:
        return trainer, None
    result = train_resuming(trainer, training_args)
    # <output_dir>/train_results.json: runtime and documents per second, as the transformers example scripts keep them
    trainer.save_metrics("train", result.metrics)
    return trainer, result


def cpu_bfloat16_is_native() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX). Elsewhere bf16 autocast is emulated: on an
    AVX2-only AMD EPYC a realizer training step took 92 s under it against 8 s in float32."""
    import torch

    return torch.ops.mkldnn._is_mkldnn_bf16_supported()


def train_resuming(trainer, training_args: TrainingArguments):
    """`trainer.train()`, resumed from `last_checkpoint` when there is one; returns the `TrainOutput`, whose metrics
    (saved as train_results.json, read by the cards) then name the step the run resumed at: its runtime and data
    describe only the steps after it."""
    from transformers import TrainerState
    from transformers.trainer import TRAINER_STATE_NAME

    checkpoint = last_checkpoint(training_args)
    if not checkpoint:
        return trainer.train()
    logger.info("resuming from %s", checkpoint)
    resumed_at = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_NAME)).global_step
    result = trainer.train(resume_from_checkpoint=checkpoint)
    result.metrics["resumed_from_step"] = resumed_at
    return result


def trained_length(trainer) -> str:
    """How long the run trained, from the Trainer's state (so also right for --max_steps, resumed runs and runs a
    `StopAfterSeconds` ended), on what hardware, and how batches were drawn when not at random (length-grouped
    batches pad less, so they are faster, but they are a different recipe)."""
    state = trainer.state
    short = f"; a time budget stopped it short of {state.max_steps}" if state.global_step < state.max_steps else ""
    sampling = trainer.args.train_sampling_strategy
    return (f"{state.global_step} optimizer steps ({state.epoch:.2f} epochs{short}) on "
            f"{hardware_name(trainer.args.device)}{'' if sampling == 'random' else f', {sampling} sampling'}")


def hardware_name(device) -> str:
    """"CPU", or the GPU's name (say "NVIDIA H200") for a CUDA device: what a card says a model trained on."""
    import torch

    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type.upper()


def final_training_loss(trainer, result) -> str:
    """"final training loss X, T s" for a card: X is the last logged loss (`result.training_loss` is the mean over
    this process's steps, 0 for a resumed run with no step left), T this process's training time, which for a resumed
    run is said to count only the steps after the one it resumed at."""
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    loss = f"{losses[-1]:.4f}" if losses else "not logged"
    text = f"final training loss {loss}, {result.metrics.get('train_runtime', 0):.0f} s"
    resumed_at = result.metrics.get("resumed_from_step")
    return text if resumed_at is None else f"{text} (the steps after {resumed_at}: the run resumed there)"


def new_card_info(training_args: TrainingArguments, data_args: DataArguments, datasets: list[str]) -> dict:
    """The model card's facts known before training: the model's name (the output folder's), its datasets, and the
    evaluation data (dataset name, or the local files' folder, and split)."""
    local_files = Path(data_args.validation_file or data_args.train_file or "")
    return {
        "model_name": Path(training_args.output_dir).name,
        "datasets": datasets,
        "dataset_name": data_args.dataset_name or local_files.parent.name,
        "split": data_args.eval_split,
    }


def record_evaluation(
    card_info: dict, training_args: TrainingArguments, scores: dict, setting: str, results: dict | None = None
) -> None:
    """Put `scores` (ROUGE, BLEU or plan scores: `cards.METRIC_NAMES`) on the model card, after `setting` (what was
    evaluated, how), and write `results` (default: the scores) to `<output_dir>/eval_results.json`."""
    from .cards import scores_text

    card_info["results"] = scores
    card_info["evaluation"] = f"{setting}: {scores_text(scores)}."
    output = Path(training_args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    (output / "eval_results.json").write_text(json.dumps(scores if results is None else results, indent=2) + "\n")


def take_push_to_hub(training_args: TrainingArguments) -> bool:
    """Keep Trainer from pushing its own raw checkpoints: the scripts push one exported repo at the end instead."""
    push = training_args.push_to_hub
    training_args.push_to_hub = False
    return push


def save_final_model(trainer, tokenizer, training_args: TrainingArguments, card_info: dict, push: bool = False) -> Path:
    """Save the trained model into `<output_dir>/final` (adapter checkpoint with LoRA, else a full model), write its
    model card and, with `push` (`--push_to_hub`), export a self-contained repo and upload it."""
    from peft import PeftModel

    from .hub import export_model, push_to_hub, save_adapter_checkpoint, write_card

    final = Path(training_args.output_dir) / "final"
    model = trainer.model
    if isinstance(model, PeftModel):
        save_adapter_checkpoint(model, final, tokenizer, card_info)
    else:
        model.save_pretrained(final, safe_serialization=True)
        tokenizer.save_pretrained(final)
        write_card(final, model.config, card_info)
    logger.info("saved the final model to %s", final)
    if push:
        repo_id = training_args.hub_model_id or Path(training_args.output_dir).name
        export_dir = Path(training_args.output_dir) / "hub_export"
        export_model(str(final), str(export_dir), card_info=dict(card_info, repo_id=repo_id))
        logger.info("pushed to %s", push_to_hub(str(export_dir), repo_id, token=training_args.hub_token))
    return final


def finish_training(
    trainer, tokenizer, training_args: TrainingArguments, card_info: dict, push: bool = False, evaluate=None
) -> Path | None:
    """The end every training script shares, on the main process only: with `--do_eval` and an `evaluate`, the
    trained model (in eval mode) is evaluated by `evaluate(model)`, which returns `(scores, setting)` or `(scores,
    setting, results)`, logged and recorded on the card and in `eval_results.json` (`record_evaluation`); with
    `--do_train` the final model is saved and, with `push`, pushed (`save_final_model`). Returns the final model's
    folder, or None where this process saved none."""
    if not trainer.is_world_process_zero():
        return None
    if training_args.do_eval and evaluate is not None:
        trainer.model.eval()
        scores, setting, *results = evaluate(trainer.model)
        logger.info("eval ROUGE: %s (%s)", results[0] if results else scores, setting)
        record_evaluation(card_info, training_args, scores, setting, *results)
    if not training_args.do_train:
        return None
    return save_final_model(trainer, tokenizer, training_args, card_info, push=push)
