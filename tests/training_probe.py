"""`python tests/training_probe.py SCRIPT ARGS...` runs `training_scripts/SCRIPT.py` with ARGS under any launcher, and
records what each of its processes did in $TRAINING_PROBE_DIR (the multi-process tests read it):

- `rank<R>.json`: the world size, the training documents of every batch this process trained on (the numbers the
  test corpus writes into each document: "story number N"), the eval documents it ran through the pipeline, and the
  step training ended at;
- `rank<R>-start.pt` / `rank<R>-end.pt`: its trainable weights when training began (after any resume) and ended.

Not a test module itself: a launcher starts it in fresh processes."""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback

from sumformers import training

PROBE_DIR = Path(os.environ["TRAINING_PROBE_DIR"])
SCRIPTS = Path(__file__).resolve().parents[1] / "training_scripts"
DOCUMENT_NUMBER = re.compile(r"story number (\d+)")
record = {"documents": [], "evaluated": []}


def trainable_weights(model) -> dict:
    return {name: value.detach().clone() for name, value in model.named_parameters() if value.requires_grad}


def save(trainer, **entries) -> None:
    record.update(entries, world_size=trainer.args.world_size, rank=trainer.args.process_index)
    (PROBE_DIR / f"rank{trainer.args.process_index}.json").write_text(json.dumps(record))


class RecordStart(TrainerCallback):
    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        torch.save(trainable_weights(model), PROBE_DIR / f"rank{args.process_index}-start.pt")
        save(self.trainer, started_at=state.global_step)


original_training_step = Trainer.training_step


def training_step(self, model, inputs, *args, **kwargs):
    for row in inputs["input_ids"]:
        record["documents"].append(int(DOCUMENT_NUMBER.search(self.processing_class.decode(row)).group(1)))
    return original_training_step(self, model, inputs, *args, **kwargs)


original_train_resuming = training.train_resuming


def train_resuming(trainer, training_args):
    trainer.add_callback(RecordStart(trainer))
    return original_train_resuming(trainer, training_args)


original_pipeline_rouge = training.pipeline_rouge


def pipeline_rouge(model, tokenizer, inputs, references, *args, **kwargs):
    record["evaluated"] += [int(DOCUMENT_NUMBER.search(text).group(1)) for text in inputs]
    return original_pipeline_rouge(model, tokenizer, inputs, references, *args, **kwargs)


original_finish_training = training.finish_training


def finish_training(trainer, *args, **kwargs):
    torch.save(trainable_weights(trainer.model), PROBE_DIR / f"rank{trainer.args.process_index}-end.pt")
    result = original_finish_training(trainer, *args, **kwargs)  # the evaluation, on the main process
    save(trainer, ended_at=trainer.state.global_step)
    return result


if __name__ == "__main__":
    Trainer.training_step = training_step
    training.train_resuming = train_resuming
    training.pipeline_rouge = pipeline_rouge
    name = sys.argv.pop(1)
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPTS))  # scripts import their siblings (train_content_planner: train_stepwise)
    spec.loader.exec_module(script)
    script.finish_training = finish_training  # imported by name into the script
    script.main()
