"""Loading, saving and exporting models.

Two on-disk forms:
- a *checkpoint* (what ships in `checkpoints/` and what training writes): `config.json`, the tokenizer (a generating
  model: `generation_config.json`) and a PEFT adapter (`adapter_config.json`, `adapter_model.safetensors`: LoRA and
  the new modules, fp16) over a pretrained encoder that is installed separately (default: the bundled MiniLM). Small
  enough to ship in the package; it loads the standard way (`AutoModel.from_pretrained`, `pipeline(task, model=...)`:
  see `modeling.summarizer_mixin`).
- an *exported repo* (what `sumformers export` writes and what goes to the Hub): self-contained, with the LoRA merged
  into `model.safetensors`, the tokenizer, a model card, and the remote code as flat files so that
  `AutoModel.from_pretrained(repo, trust_remote_code=True)` works with only transformers and torch installed.
"""

import difflib
import inspect
import json
import os
import shutil
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel
from transformers import pipeline as transformers_pipeline

from sumformers_model_names import model_path_problem

from .cards import build_model_card, eval_results_files
from .checkpoints import shipped_checkpoints
from .modeling.pretrained_encoder import portable_encoder_name
from .onnx_runtime import is_onnx_folder, load_onnx_pipeline
from .registry import DEFAULT_CHECKPOINTS, architecture_for
from .remote_code import collect_remote_code, name_required_packages

# The package's default (`load_pipeline()`, `sumformers summarize` without --model): the stepwise task's
DEFAULT_MODEL = DEFAULT_CHECKPOINTS["stepwise-summarization"]
CARD_INFO_FILE = "sumformers_card.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def resolve_model(name_or_path: str | None) -> str:
    """A shipped checkpoint's name (or None for the default) -> its folder; a model folder or Hub repo id
    (`namespace/name`: every sumformers repo has a namespace) as it is; anything else a one-line ValueError, a name
    without namespace answered with the shipped names, closest first (not "couldn't connect to huggingface.co")."""
    shipped = shipped_checkpoints()
    name = name_or_path or DEFAULT_MODEL
    if name in shipped:
        return str(shipped[name])
    if name_or_path is None:
        raise FileNotFoundError(f"the default model {DEFAULT_MODEL!r} is missing from {list(shipped)}")
    name = str(name_or_path)
    problem = model_path_problem(name)
    if problem is not None:
        raise ValueError(problem)
    if not Path(name).expanduser().is_dir() and "/" not in name:
        closest = difflib.get_close_matches(name, shipped, n=len(shipped), cutoff=0)
        raise ValueError(f"{name!r} is not a shipped model nor a folder here (a Hub repo id is namespace/name); "
                         f"shipped, closest first: {', '.join(closest)}")
    return name


def is_sumformers_model(path: str) -> bool:
    """Whether a local folder holds a sumformers model (rather than, say, a plain BERT encoder)."""
    from .registry import ARCHITECTURES

    config_file = Path(path) / "config.json"
    return config_file.is_file() and json.loads(config_file.read_text()).get("model_type") in ARCHITECTURES


def load_model(name_or_path: str | None = None, **kwargs) -> PreTrainedModel:
    """A sumformers model for inference (a shipped checkpoint's name, a folder or a Hub id), through the Auto class
    it is registered with; `from_pretrained` keyword arguments (`dtype=`, `attn_implementation=`, ...) pass on."""
    path = resolve_model(name_or_path)
    config = AutoConfig.from_pretrained(path)
    model = architecture_for(config).auto_class.from_pretrained(path, **kwargs).eval()
    quality_note = read_card_info(path).get("quality_note") if Path(path).is_dir() else None
    if quality_note:  # a demonstration model says so each time it is loaded, not only on its card
        warnings.warn(f"{Path(path).name}: {quality_note}", stacklevel=2)
    return model


def load_tokenizer(name_or_path: str | None = None):
    """The tokenizer saved with a model."""
    return AutoTokenizer.from_pretrained(resolve_model(name_or_path))


# `pipeline()` arguments that are about loading the model, which `load_pipeline` does itself.
MODEL_LOADING_ARGUMENTS = ("dtype", "device_map", "revision", "token", "trust_remote_code")


def load_pipeline(name_or_path: str | None = None, task: str | None = None, **pipeline_kwargs):
    """`transformers.pipeline(task, model=...)` for a sumformers model, where the model may also be a shipped
    checkpoint's name (default: the bundled default model) and the task defaults to the model's.

    The model is loaded first (`load_model`, with the loading arguments among `pipeline_kwargs`), so that a model that
    cannot be loaded raises its own error: `pipeline()` puts the errors of its loading attempts into one message as
    tracebacks ("See the original errors: ...").

    A folder written by `sumformers export --onnx` (it holds `model.onnx` or `step_model.onnx`) runs on ONNX Runtime
    instead (`onnx_runtime.load_onnx_pipeline`: `num_threads=`, `session_options=` and `providers=` pass on to it)."""
    path = resolve_model(name_or_path)
    if is_onnx_folder(path):

        pipe = load_onnx_pipeline(path, **pipeline_kwargs)
        if task is not None and task != pipe.task:
            raise ValueError(f"{path} is a {pipe.task} model, not {task}")
        return pipe
    task = task or architecture_for(AutoConfig.from_pretrained(path)).task
    loading = pipeline_kwargs.pop("model_kwargs", None) or {}
    loading.update({name: pipeline_kwargs.pop(name) for name in MODEL_LOADING_ARGUMENTS if name in pipeline_kwargs})
    model = load_model(path, **loading)
    return transformers_pipeline(task, model=model, tokenizer=load_tokenizer(path), **pipeline_kwargs)


def save_base_config(base, output: Path) -> None:
    """Write the config of an adapter's base model (its encoder named portably), from which loading rebuilds it, and
    the decoding settings (beam, length penalty, ...) a generating model was trained to ship with."""
    base.config.encoder_name_or_path = portable_encoder_name(base.config.encoder_name_or_path)
    base.config.save_pretrained(output)
    if base.can_generate():
        base.generation_config.save_pretrained(output)


def save_adapter_checkpoint(peft_model, output_dir: str, tokenizer, card_info: dict | None = None) -> Path:
    """Save a PEFT-wrapped sumformers model as a small checkpoint: config, tokenizer, adapter in fp16, card info."""
    # The checkpoint rebuilds the base with `from_encoder` (which loads the model's `pretrained_modules` from the
    # pretrained encoder): every other top-level module must be in the adapter.
    base = peft_model.get_base_model()
    saved_modules = set(peft_model.peft_config["default"].modules_to_save or [])
    unsaved = {
        name.split(".")[0]
        for name, _ in base.named_parameters()
        if name.split(".")[0] not in set(base.pretrained_modules) | saved_modules
    }
    if unsaved:
        raise ValueError(f"modules_to_save must include {sorted(unsaved)}: they are not part of the pretrained encoder")
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(output, safe_serialization=True)
    save_base_config(base, output)
    tokenizer.save_pretrained(output)
    # PEFT records the absolute base-model path; a portable name keeps the checkpoint movable.
    adapter_config_path = output / "adapter_config.json"
    adapter_config = json.loads(adapter_config_path.read_text())
    adapter_config["base_model_name_or_path"] = base.config.encoder_name_or_path
    adapter_config_path.write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    weights = load_file(output / ADAPTER_WEIGHTS)
    save_file(
        {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()}, output / ADAPTER_WEIGHTS
    )
    write_card(output, base.config, card_info)
    return output


def save_fp16_copy(source: Path, target: Path) -> Path:
    """A saved model's folder copied to `target` with its weights stored in fp16 (they load back as the config's
    dtype, float32), to ship a small checkpoint; an adapter checkpoint is copied as it is (fp16 already)."""
    source, target = Path(source), Path(target)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("training_args.bin"))
    weights = target / "model.safetensors"
    if weights.is_file():
        tensors = load_file(weights)
        save_file({k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}, weights,
                  metadata={"format": "pt"})
    readable_by_all(target)
    return target


def readable_by_all(folder: Path) -> None:
    """Make every file of a model folder that is shared (an exported repo, a shipped checkpoint) mode 0644:
    transformers writes `model.safetensors` through a private temporary file, mode 0600, which other users of a
    shared install or a served copy of the folder could not read."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            os.chmod(path, 0o644)


def read_card_info(folder: str | Path) -> dict:
    """The card info (training, data, scores) saved in a model folder; empty when it has none."""
    path = Path(folder) / CARD_INFO_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write_card(folder: Path, config, card_info: dict | None) -> None:
    """A model folder's card: the card info (training, data, scores) as JSON beside the model card built from it."""
    if card_info is not None:
        (folder / CARD_INFO_FILE).write_text(json.dumps(card_info, indent=2) + "\n")
    (folder / "README.md").write_text(str(build_model_card(config, card_info or {})))


def export_model(name_or_path: str | None, output_dir: str, card_info: dict | None = None) -> Path:
    """Write a self-contained Hub repo: config with `auto_map` and `custom_pipelines`, merged safetensors weights,
    tokenizer, model card, its scores as `.eval_results/*.yaml` and flat remote code."""
    source = resolve_model(name_or_path)
    model = load_model(source)
    tokenizer = load_tokenizer(source)
    architecture = architecture_for(model.config)
    if card_info is None:
        card_info = read_card_info(source) or None
    output = Path(output_dir)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"{output} exists and is not empty")
    output.mkdir(parents=True, exist_ok=True)

    entry_classes = architecture.remote_code_classes
    code = name_required_packages(collect_remote_code(*entry_classes), entry_classes)
    for file_name, text in code.items():
        (output / file_name).write_text(text, encoding="utf-8")
    config = model.config
    # the processor is saved with the model: `AutoProcessor.from_pretrained(repo, trust_remote_code=True)` and the
    # pipeline's `model.processor_class` find it here
    config.auto_map = {
        "AutoConfig": remote_code_name(architecture.config_class),
        architecture.auto_class.__name__: remote_code_name(architecture.model_class),
        "AutoProcessor": remote_code_name(architecture.processor_class),
    }
    config.custom_pipelines = {
        architecture.task: {
            "impl": remote_code_name(architecture.pipeline_class),
            "pt": [architecture.auto_class.__name__],
            "type": "text",
        }
    }
    config.architectures = [architecture.model_class.__name__]
    model.save_pretrained(output, safe_serialization=True)
    tokenizer.save_pretrained(output)
    write_card(output, config, card_info)
    write_eval_results(output, card_info or {})
    readable_by_all(output)
    return output


EVAL_RESULTS_FOLDER = ".eval_results"


def write_eval_results(folder: Path, card_info: dict) -> None:
    """The card's measured figures as the Hub's `.eval_results/*.yaml`, beside the model-index (the same numbers)."""
    files = eval_results_files(card_info)
    if files:
        (folder / EVAL_RESULTS_FOLDER).mkdir(exist_ok=True)
    for file_name, text in files.items():
        (folder / EVAL_RESULTS_FOLDER / file_name).write_text(text, encoding="utf-8")


def remote_code_name(cls) -> str:
    """`module.Class` of a class in an exported repo, whose code files sit side by side."""
    return f"{Path(inspect.getsourcefile(cls)).stem}.{cls.__name__}"


def push_to_hub(folder: str, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Upload an exported repo folder (needs network and a token)."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    return api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message="Upload sumformers model").commit_url
