"""Every architecture of the package in one table: its config, model, pipeline task and the Auto class it is
registered under. Registration, loading and export all read this table."""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import transformers.pipelines
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM
from transformers.pipelines import PIPELINE_REGISTRY

from .configuration.configuration_bertsum import BertSumConfig
from .configuration.configuration_bertsumabs import BertSumAbsConfig, SentencePlannerConfig
from .configuration.configuration_copy_transformer import CopyTransformerConfig
from .configuration.configuration_hetformer import HetFormerConfig
from .configuration.configuration_realizer import RealizerConfig
from .configuration.configuration_stepwise_etcsum import (
    ETCSumConfig,
    StepwiseETCSumConfig,
    StepwiseETCSumPlannerConfig,
)
from .configuration.configuration_stepwise_hibert import (
    HiBertConfig,
    StepwiseHiBertConfig,
    StepwiseHiBertPlannerConfig,
)
from .configuration.configuration_wikisum import WikiSumConfig
from .modeling.modeling_bertsum import BertSumForExtractiveSummarization
from .modeling.modeling_bertsumabs import BertSumAbsForConditionalGeneration
from .modeling.modeling_copy_transformer import CopyTransformerForConditionalGeneration
from .modeling.modeling_hetformer import HetFormerForExtractiveSummarization
from .modeling.modeling_realizer import RealizerForConditionalGeneration
from .modeling.modeling_sentence_planner import SentencePlannerForConditionalGeneration
from .modeling.modeling_stepwise_etcsum import (
    ETCSumForExtractiveSummarization,
    StepwiseETCSumForContentPlanning,
    StepwiseETCSumForExtractiveSummarization,
)
from .modeling.modeling_stepwise_hibert import (
    HiBertForExtractiveSummarization,
    StepwiseHiBertForContentPlanning,
    StepwiseHiBertForExtractiveSummarization,
)
from .modeling.modeling_wikisum import WikiSumForCausalLM
from .pipelines.abstractive_summarization import AbstractiveSummarizationPipeline
from .pipelines.content_planning import ContentPlanningPipeline
from .pipelines.extractive_summarization import ExtractiveSummarizationPipeline
from .pipelines.stepwise_summarization import StepwiseSummarizationPipeline
from .pipelines.table_to_text import TableToTextPipeline
from .pipelines.wikisum import WikiSumPipeline


@dataclass(frozen=True)
class Architecture:
    config_class: type
    model_class: type
    task: str
    pipeline_class: type
    auto_class: type = AutoModel


ARCHITECTURES = {
    BertSumConfig.model_type: Architecture(
        BertSumConfig, BertSumForExtractiveSummarization, "extractive-summarization", ExtractiveSummarizationPipeline
    ),
    ETCSumConfig.model_type: Architecture(
        ETCSumConfig, ETCSumForExtractiveSummarization, "extractive-summarization", ExtractiveSummarizationPipeline
    ),
    StepwiseETCSumConfig.model_type: Architecture(
        StepwiseETCSumConfig,
        StepwiseETCSumForExtractiveSummarization,
        "stepwise-summarization",
        StepwiseSummarizationPipeline,
    ),
    HetFormerConfig.model_type: Architecture(
        HetFormerConfig,
        HetFormerForExtractiveSummarization,
        "extractive-summarization",
        ExtractiveSummarizationPipeline,
    ),
    HiBertConfig.model_type: Architecture(
        HiBertConfig, HiBertForExtractiveSummarization, "extractive-summarization", ExtractiveSummarizationPipeline
    ),
    StepwiseHiBertConfig.model_type: Architecture(
        StepwiseHiBertConfig,
        StepwiseHiBertForExtractiveSummarization,
        "stepwise-summarization",
        StepwiseSummarizationPipeline,
    ),
    StepwiseHiBertPlannerConfig.model_type: Architecture(
        StepwiseHiBertPlannerConfig, StepwiseHiBertForContentPlanning, "content-planning", ContentPlanningPipeline
    ),
    StepwiseETCSumPlannerConfig.model_type: Architecture(
        StepwiseETCSumPlannerConfig, StepwiseETCSumForContentPlanning, "content-planning", ContentPlanningPipeline
    ),
    BertSumAbsConfig.model_type: Architecture(
        BertSumAbsConfig,
        BertSumAbsForConditionalGeneration,
        "abstractive-summarization",
        AbstractiveSummarizationPipeline,
        auto_class=AutoModelForSeq2SeqLM,
    ),
    SentencePlannerConfig.model_type: Architecture(
        SentencePlannerConfig,
        SentencePlannerForConditionalGeneration,
        "abstractive-summarization",
        AbstractiveSummarizationPipeline,
        auto_class=AutoModelForSeq2SeqLM,
    ),
    RealizerConfig.model_type: Architecture(
        RealizerConfig,
        RealizerForConditionalGeneration,
        "table-to-text",
        TableToTextPipeline,
        auto_class=AutoModelForSeq2SeqLM,
    ),
    CopyTransformerConfig.model_type: Architecture(
        CopyTransformerConfig,
        CopyTransformerForConditionalGeneration,
        "abstractive-summarization",
        AbstractiveSummarizationPipeline,
        auto_class=AutoModelForSeq2SeqLM,
    ),
    WikiSumConfig.model_type: Architecture(
        WikiSumConfig, WikiSumForCausalLM, "wikisum", WikiSumPipeline, auto_class=AutoModelForCausalLM
    ),
}


def register_all() -> None:
    """Register configs and models with the Auto classes and tasks with `transformers.pipeline`."""
    tasks = {}
    for model_type, architecture in ARCHITECTURES.items():
        AutoConfig.register(model_type, architecture.config_class, exist_ok=True)
        architecture.auto_class.register(architecture.config_class, architecture.model_class, exist_ok=True)
        tasks.setdefault(architecture.task, (architecture.pipeline_class, []))[1].append(architecture.auto_class)
    for task, (pipeline_class, auto_classes) in tasks.items():
        PIPELINE_REGISTRY.register_pipeline(
            task, pipeline_class=pipeline_class, pt_model=tuple(dict.fromkeys(auto_classes)), type="text"
        )
    infer_the_tasks_of_model_folders()


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
