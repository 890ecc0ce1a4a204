"""sumformers: structured and long-document summarization models for the transformers ecosystem.

Importing the package registers every architecture with the Auto classes and every task with `pipeline()`.
"""

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
from .modeling.modeling_hetformer import HetFormerForExtractiveSummarization, HetFormerModel
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
from .modeling.modeling_wikisum import WikiSumCache, WikiSumForCausalLM
from .pipelines.abstractive_summarization import AbstractiveSummarizationPipeline
from .pipelines.content_planning import ContentPlanningPipeline
from .pipelines.extractive_summarization import ExtractiveSummarizationPipeline
from .pipelines.stepwise_summarization import StepwiseSummarizationPipeline
from .pipelines.table_to_text import TableToTextPipeline
from .pipelines.wikisum import WikiSumPipeline
from .registry import ARCHITECTURES, register_all

__version__ = "0.1.0"

register_all()

from .hub import export_model, load_model, load_pipeline  # noqa: E402  (loading needs the registrations)

__all__ = [
    "ARCHITECTURES",
    "AbstractiveSummarizationPipeline",
    "BertSumAbsConfig",
    "BertSumAbsForConditionalGeneration",
    "BertSumConfig",
    "BertSumForExtractiveSummarization",
    "ContentPlanningPipeline",
    "CopyTransformerConfig",
    "CopyTransformerForConditionalGeneration",
    "ETCSumConfig",
    "ETCSumForExtractiveSummarization",
    "ExtractiveSummarizationPipeline",
    "WikiSumCache",
    "WikiSumConfig",
    "WikiSumForCausalLM",
    "WikiSumPipeline",
    "HetFormerConfig",
    "HetFormerForExtractiveSummarization",
    "HetFormerModel",
    "HiBertConfig",
    "HiBertForExtractiveSummarization",
    "StepwiseETCSumConfig",
    "StepwiseETCSumForContentPlanning",
    "StepwiseETCSumForExtractiveSummarization",
    "StepwiseETCSumPlannerConfig",
    "StepwiseHiBertConfig",
    "StepwiseHiBertForContentPlanning",
    "StepwiseHiBertForExtractiveSummarization",
    "RealizerConfig",
    "RealizerForConditionalGeneration",
    "StepwiseHiBertPlannerConfig",
    "SentencePlannerConfig",
    "SentencePlannerForConditionalGeneration",
    "StepwiseSummarizationPipeline",
    "TableToTextPipeline",
    "export_model",
    "load_model",
    "load_pipeline",
]
