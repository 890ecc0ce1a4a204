"""sumformers: structured and long-document summarization models for the transformers ecosystem.

Importing the package registers every architecture with the Auto classes and every task with `pipeline()`.
"""

from .configuration.configuration_bertsum import BertSumConfig
from .modeling.modeling_bertsum import BertSumForExtractiveSummarization
from .pipelines.extractive_summarization import ExtractiveSummarizationPipeline
from .registry import ARCHITECTURES, register_all

__version__ = "0.1.0"

register_all()

from .hub import export_model, load_model, load_pipeline  # noqa: E402  (loading needs the registrations)

__all__ = [
    "ARCHITECTURES",
    "BertSumConfig",
    "BertSumForExtractiveSummarization",
    "ExtractiveSummarizationPipeline",
    "export_model",
    "load_model",
    "load_pipeline",
]
