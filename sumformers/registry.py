"""Every architecture of the package in one table: its config, model, processor, pipeline task and the Auto class it
is registered under. Registration, loading, export and the package's own names (`sumformers.X`) all read it.

The table names its classes (`module.Class`, relative to the package) rather than importing them: `import
sumformers` stays as light as `import transformers`, and each class is imported when it is first used. Registration
with transformers' Auto classes, `AutoProcessor` and `pipeline()` happens once, when transformers' own Auto or
pipeline modules are first imported (`register_when_transformers_loads`) or a sumformers class is first used."""

import importlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


def _load(dotted: str):
    """`"modeling.modeling_bertsum.BertSumForExtractiveSummarization"` -> the class, imported from the package."""
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


@dataclass(frozen=True)
class Architecture:
    config: str
    model: str
    processor: str
    task: str
    pipeline: str
    auto_class_name: str = "AutoModel"

    @property
    def config_class(self) -> type:
        return _load(f"configuration.{self.config}")

    @property
    def model_class(self) -> type:
        return _load(f"modeling.{self.model}")

    @property
    def processor_class(self) -> type:
        return _load(f"processing.{self.processor}")

    @property
    def pipeline_class(self) -> type:
        return _load(f"pipelines.{self.pipeline}")

    @property
    def auto_class(self) -> type:
        import transformers

        return getattr(transformers, self.auto_class_name)

    @property
    def remote_code_classes(self) -> tuple[type, ...]:
        """The classes an exported repo names (`auto_map`, `custom_pipelines`): its code is theirs and their imports."""
        return self.config_class, self.model_class, self.processor_class, self.pipeline_class


_EXTRACTIVE = ("extractive-summarization", "extractive_summarization.ExtractiveSummarizationPipeline")
_STEPWISE = ("stepwise-summarization", "stepwise_summarization.StepwiseSummarizationPipeline")
_PLANNING = ("content-planning", "content_planning.ContentPlanningPipeline")
_ABSTRACTIVE = ("abstractive-summarization", "abstractive_summarization.AbstractiveSummarizationPipeline")

ARCHITECTURES = {
    "bertsum": Architecture(
        "configuration_bertsum.BertSumConfig",
        "modeling_bertsum.BertSumForExtractiveSummarization",
        "processing_bertsum.BertSumProcessor",
        *_EXTRACTIVE,
    ),
    "etcsum": Architecture(
        "configuration_etcsum.ETCSumConfig",
        "modeling_stepwise_etcsum.ETCSumForExtractiveSummarization",
        "processing_stepwise_etcsum.ETCSumProcessor",
        *_EXTRACTIVE,
    ),
    "stepwise_etcsum": Architecture(
        "configuration_stepwise_etcsum.StepwiseETCSumConfig",
        "modeling_stepwise_etcsum.StepwiseETCSumForExtractiveSummarization",
        "processing_stepwise_etcsum.ETCSumProcessor",
        *_STEPWISE,
    ),
    "hetformer": Architecture(
        "configuration_hetformer.HetFormerConfig",
        "modeling_hetformer.HetFormerForExtractiveSummarization",
        "processing_hetformer.HetFormerProcessor",
        *_EXTRACTIVE,
    ),
    "hibert": Architecture(
        "configuration_hibert.HiBertConfig",
        "modeling_stepwise_hibert.HiBertForExtractiveSummarization",
        "processing_stepwise_hibert.HiBertProcessor",
        *_EXTRACTIVE,
    ),
    "stepwise_hibert": Architecture(
        "configuration_stepwise_hibert.StepwiseHiBertConfig",
        "modeling_stepwise_hibert.StepwiseHiBertForExtractiveSummarization",
        "processing_stepwise_hibert.HiBertProcessor",
        *_STEPWISE,
    ),
    "stepwise_hibert_planner": Architecture(
        "configuration_stepwise_hibert.StepwiseHiBertPlannerConfig",
        "modeling_stepwise_hibert.StepwiseHiBertForContentPlanning",
        "processing_stepwise_hibert.HiBertPlannerProcessor",
        *_PLANNING,
    ),
    "stepwise_etcsum_planner": Architecture(
        "configuration_stepwise_etcsum.StepwiseETCSumPlannerConfig",
        "modeling_stepwise_etcsum.StepwiseETCSumForContentPlanning",
        "processing_stepwise_etcsum.ETCSumPlannerProcessor",
        *_PLANNING,
    ),
    "bertsumabs": Architecture(
        "configuration_bertsumabs.BertSumAbsConfig",
        "modeling_bertsumabs.BertSumAbsForConditionalGeneration",
        "processing_bertsumabs.BertSumAbsProcessor",
        *_ABSTRACTIVE,
        auto_class_name="AutoModelForSeq2SeqLM",
    ),
    "sentence_planner": Architecture(
        "configuration_sentence_planner.SentencePlannerConfig",
        "modeling_sentence_planner.SentencePlannerForConditionalGeneration",
        "processing_bertsumabs.BertSumAbsProcessor",
        *_ABSTRACTIVE,
        auto_class_name="AutoModelForSeq2SeqLM",
    ),
    "realizer": Architecture(
        "configuration_realizer.RealizerConfig",
        "modeling_realizer.RealizerForConditionalGeneration",
        "processing_realizer.RealizerProcessor",
        "table-to-text",
        "table_to_text.TableToTextPipeline",
        auto_class_name="AutoModelForSeq2SeqLM",
    ),
    "copy_transformer": Architecture(
        "configuration_copy_transformer.CopyTransformerConfig",
        "modeling_copy_transformer.CopyTransformerForConditionalGeneration",
        "processing_copy_transformer.CopyTransformerProcessor",
        *_ABSTRACTIVE,
        auto_class_name="AutoModelForSeq2SeqLM",
    ),
    "wikisum": Architecture(
        "configuration_wikisum.WikiSumConfig",
        "modeling_wikisum.WikiSumForCausalLM",
        "processing_wikisum.WikiSumProcessor",
        "wikisum",
        "wikisum.WikiSumPipeline",
        auto_class_name="AutoModelForCausalLM",
    ),
    "wikisum_llama": Architecture(
        "configuration_wikisum_llama.WikiSumLlamaConfig",
        "modeling_wikisum_llama.WikiSumLlamaForCausalLM",
        "processing_wikisum_llama.WikiSumLlamaProcessor",
        "wikisum-llama",
        "wikisum_llama.WikiSumLlamaPipeline",
        auto_class_name="AutoModelForCausalLM",
    ),
}

# Each task's default model: what `pipeline(task)` loads when no model is given (transformers' `default=` of
# `PIPELINE_REGISTRY.register_pipeline`), a checkpoint shipped in `checkpoints/`, so that it works offline. Where a task
# has several, the best held-out ROUGE-1 of their cards on the same CNN/DM documents (validation[:300]): HiBERT 30.29
# against ETCSum 29.78 and BertSum 29.54 (HetFormer's is on QMSum meetings); every other task ships one.
DEFAULT_CHECKPOINTS = {
    "extractive-summarization": "hibert-minilm-cnndm",
    "stepwise-summarization": "stepwise-hibert-minilm-cnndm",
    "content-planning": "stepwise-hibert-planner-minilm-rotowire",
    "abstractive-summarization": "copytransformer-circular2d-cnndm",
    "table-to-text": "realizer-minilm-rotowire",
    "wikisum": "wikisum-tdmca-copy-minilm-cnndm",
    "wikisum-llama": "wikisum-smollm2-td-cnndm",  # needs its base installed (modeling/pretrained_decoder.py)
}


def default_model(task: str) -> tuple[str, str] | None:
    """(folder, revision) of a task's shipped default, None where it is not installed. The revision is the package's
    version (`sumformers.__version__`): the checkpoints ship inside the package, so a version names one set of
    weights. (transformers passes a revision on to `from_pretrained`, which ignores it for a local folder: it is a
    label, shown in the "No model was supplied, defaulted to ..." warning, not a Hub commit.)"""
    from . import __version__
    from .checkpoints import shipped_checkpoints

    folder = shipped_checkpoints().get(DEFAULT_CHECKPOINTS[task])
    return (str(folder), __version__) if folder is not None else None


# The package's names (`sumformers.X`, `from sumformers import X`) -> the module (relative to the package) that
# defines each: every config, model and pipeline class of the table, plus what the face adds.
EXPORTS = {
    dotted.rsplit(".", 1)[1]: f"{folder}.{dotted.rsplit('.', 1)[0]}"
    for architecture in ARCHITECTURES.values()
    for folder, dotted in (
        ("configuration", architecture.config),
        ("modeling", architecture.model),
        ("pipelines", architecture.pipeline),
    )
} | {
    "HetFormerModel": "modeling.modeling_hetformer",
    "WikiSumCache": "modeling.modeling_wikisum",
    "export_model": "hub",
    "load_model": "hub",
    "load_pipeline": "hub",
}

_registration = threading.RLock()
_registered = False


def register_all() -> None:
    """Register configs, models and processors with the Auto classes and tasks with `transformers.pipeline` (once;
    later calls, and calls from the imports it makes, return at once)."""
    global _registered
    with _registration:
        if _registered:
            return
        _registered = True
        try:
            _register()
        except BaseException:
            _registered = False
            raise


def _register() -> None:
    from transformers import AutoConfig, AutoProcessor
    from transformers.pipelines import PIPELINE_REGISTRY

    tasks = {}
    for model_type, architecture in ARCHITECTURES.items():
        config_class = architecture.config_class
        AutoConfig.register(model_type, config_class, exist_ok=True)
        architecture.auto_class.register(config_class, architecture.model_class, exist_ok=True)
        AutoProcessor.register(config_class, architecture.processor_class, exist_ok=True)
        tasks.setdefault(architecture.task, (architecture.pipeline_class, []))[1].append(architecture.auto_class)
    for task, (pipeline_class, auto_classes) in tasks.items():
        default = default_model(task)
        PIPELINE_REGISTRY.register_pipeline(
            task,
            pipeline_class=pipeline_class,
            pt_model=tuple(dict.fromkeys(auto_classes)),
            default={"model": default} if default else None,
            type="text",
        )
    infer_the_tasks_of_model_folders()


# Imported by whatever reads transformers' Auto mappings or pipeline tasks: the first one to finish loading
# registers the package (see `register_when_transformers_loads`).
_TRANSFORMERS_ENTRY_MODULES = frozenset(
    {
        "transformers.models.auto.configuration_auto",
        "transformers.models.auto.modeling_auto",
        "transformers.models.auto.processing_auto",
        "transformers.pipelines",
    }
)


class _RegisterAfterTransformersLoads:
    """A `sys.meta_path` finder that registers the package once one of transformers' entry modules has loaded and
    no transformers or sumformers module is still half-loaded (registering imports `PreTrainedModel`, `Pipeline` and
    the package's own classes: from a half-loaded module that would fail). Until then it watches every import of
    either package; after, it is removed."""

    def __init__(self):
        self.loading = 0
        self.entry_loaded = False

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] not in ("transformers", __package__):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _WatchedLoader(spec.loader, self, name in _TRANSFORMERS_ENTRY_MODULES)
        return spec

    def loaded(self, entry: bool) -> None:
        self.entry_loaded |= entry
        if self.loading == 0 and self.entry_loaded:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            register_all()


class _WatchedLoader:
    def __init__(self, loader, watcher: _RegisterAfterTransformersLoads, entry: bool):
        self.loader, self.watcher, self.entry = loader, watcher, entry

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.watcher.loading += 1
        try:
            self.loader.exec_module(module)
        finally:
            self.watcher.loading -= 1
        self.watcher.loaded(self.entry)

    def __getattr__(self, name):  # get_source, is_package, ... as the wrapped loader has them
        return getattr(self.loader, name)


def register_when_transformers_loads() -> None:
    """What `import sumformers` does: register now if transformers' Auto or pipeline modules are loaded already,
    else as soon as the first of them is."""
    if _registered:
        return
    if any(name in sys.modules for name in _TRANSFORMERS_ENTRY_MODULES):
        register_all()
    elif not any(isinstance(finder, _RegisterAfterTransformersLoads) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterTransformersLoads())


def task_of_model_folder(model) -> str | None:
    """The pipeline task of a local sumformers model folder, named by its config's `model_type`; None for anything
    else (a Hub id, another library's folder, a folder without a readable config)."""
    if not isinstance(model, (str, os.PathLike)):
        return None
    try:
        model_type = json.loads(Path(model, "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    architecture = ARCHITECTURES.get(model_type)
    return architecture.task if architecture is not None else None


def infer_the_tasks_of_model_folders() -> None:
    """Let `pipeline(model=folder)` find a sumformers folder's task offline. Without a task, transformers takes the
    one of the config's `custom_pipelines` (remote code: it would make `pipeline(task, model=folder)` demand
    `trust_remote_code=True` too, so only exported repos carry it), else asks the Hub (`get_task`: refused under
    HF_HUB_OFFLINE=1, and no answer for a local folder). The Hub lookup is wrapped to answer first for folders
    whose config names a sumformers architecture; everything else still goes to the Hub."""
    import transformers.pipelines

    hub_lookup = transformers.pipelines.get_task
    if getattr(hub_lookup, "answers_sumformers_folders", False):
        return

    def get_task(model, token=None, **kwargs):
        return task_of_model_folder(model) or hub_lookup(model, token, **kwargs)

    get_task.answers_sumformers_folders = True
    transformers.pipelines.get_task = get_task


def architecture_for(config) -> Architecture:
    try:
        return ARCHITECTURES[config.model_type]
    except KeyError:
        raise ValueError(
            f"{config.model_type!r} is not a sumformers architecture (known: {', '.join(ARCHITECTURES)})"
        ) from None
