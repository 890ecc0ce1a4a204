"""An ONNX folder (`sumformers export --onnx`) run through ONNX Runtime, as the model of the usual pipelines.

`OnnxSummarizer` stands where a PyTorch model stands in `extractive-summarization` and `stepwise-summarization`
(as optimum's `ORTModel` classes do for transformers' pipelines): it has the model's `config`, `processor_class`
and `is_stepwise`, and its calls (`__call__`, and `prepare_document` for a stepwise model) run the graphs. The
pipelines' sentence splitting, processors and search are the same code for both back ends.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig, AutoTokenizer
from transformers.utils import ModelOutput

from .registry import architecture_for

# The graphs of an ONNX folder (`onnx_export`): what runs once per document, and a stepwise model's per-step scorer.
# A stepwise model that computes nothing from the document alone (Stepwise ETCSum, which re-encodes the document with
# every partial summary) has only the step graph.
DOCUMENT_GRAPH = "model.onnx"
STEP_GRAPH = "step_model.onnx"
# The graphs' metadata entry naming their quantization (`sumformers export --onnx --quantize int8`); absent: float32.
QUANTIZATION_KEY = "sumformers.quantization"


def is_onnx_folder(path) -> bool:
    return any((Path(path) / graph).is_file() for graph in (DOCUMENT_GRAPH, STEP_GRAPH))


@dataclass
class OnnxSummarizerOutput(ModelOutput):
    """
    Args:
        logits (`torch.FloatTensor`): as the PyTorch model's: `(batch_size, num_sentences)` sentence scores, or for a
            stepwise model `(num_rows, num_sentences + 1)` next-choice scores (the end-of-summary unit last).
    """

    logits: torch.FloatTensor | None = None


def default_session_options(num_threads: int | None = None):
    """All of ONNX Runtime's graph optimizations; `num_threads` intra-op threads (None: ONNX Runtime's default, one
    per physical core), one inter-op thread (the graphs are a chain of layers); idle intra-op threads sleep instead
    of spinning (at two threads on a shared 2-core machine, 12 articles took 2.44 s of CPU time and 4.35 s of
    wall-clock time so, against 4.02 s and 8.15 s spinning: a spinning thread holds a core the other thread or
    another process needs)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if num_threads is not None:
        options.intra_op_num_threads = num_threads
    return options


class _Graph:
    """One ONNX Runtime session, fed the named torch tensors it declares as inputs."""

    def __init__(self, path: Path, session_options, providers):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(path), sess_options=session_options, providers=providers)
        self.input_names = [item.name for item in self.session.get_inputs()]
        self.quantization = self.session.get_modelmeta().custom_metadata_map.get(QUANTIZATION_KEY)

    def __call__(self, **tensors) -> torch.Tensor:
        feed = {name: np.ascontiguousarray(tensors[name].cpu().numpy()) for name in self.input_names}
        (output,) = self.session.run(None, feed)
        return torch.from_numpy(output)


class OnnxSummarizer:
    """An exported extractive model on ONNX Runtime (CPU by default; `providers` as for `InferenceSession`)."""

    main_input_name = "input_ids"
    hf_device_map = None
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self, folder: str | Path, session_options=None, providers=None, num_threads: int | None = None):
        folder = Path(folder)
        if not is_onnx_folder(folder):
            raise FileNotFoundError(
                f"{folder} holds no {DOCUMENT_GRAPH} or {STEP_GRAPH} (write them with `sumformers export --onnx`)"
            )
        self.name_or_path = str(folder)
        self.config = AutoConfig.from_pretrained(folder)
        architecture = architecture_for(self.config)
        self.task = architecture.task
        self.pipeline_class = architecture.pipeline_class
        self.processor_class = architecture.processor_class
        self.is_stepwise = architecture.model_class.is_stepwise
        self.reads_multiple_documents = architecture.model_class.reads_multiple_documents
        session_options = session_options or default_session_options(num_threads)
        providers = providers or ["CPUExecutionProvider"]
        graphs = [_Graph(folder / name, session_options, providers) if (folder / name).is_file() else None
                  for name in (DOCUMENT_GRAPH, STEP_GRAPH)]
        self.document_graph, self.step_graph = graphs
        # None (float32, the graphs checked against PyTorch within 1e-4) or "int8"
        self.quantization = next(graph for graph in graphs if graph is not None).quantization

    @classmethod
    def from_pretrained(cls, folder: str | Path, **kwargs) -> "OnnxSummarizer":
        return cls(folder, **kwargs)

    # What transformers' Pipeline asks of a model.
    def to(self, device):
        if torch.device(device).type != "cpu":
            raise ValueError("an ONNX model runs where its execution providers do: give `providers`, not a device")
        return self

    def eval(self):
        return self

    def can_generate(self) -> bool:
        return False

    def prepare_document(self, repeatable_mask=None, **inputs) -> dict:
        """A stepwise model's per-document part: the sentence vectors (`StepwiseHiBert...prepare_document`), or
        without a document graph the document's inputs, which the step graph encodes with each partial summary
        (`StepwiseETCSum...prepare_document`)."""
        if repeatable_mask is not None:
            raise ValueError("the ONNX export covers summarizers; a content planner's repeatable units need PyTorch")
        if self.document_graph is None:
            if inputs.get("attention_mask") is None:
                inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
            return inputs
        return {"sentence_vectors": self.document_graph(**inputs), "sentence_mask": inputs["sentence_mask"]}

    def __call__(self, summary_indices=None, row_documents=None, **inputs) -> OnnxSummarizerOutput:
        if not self.is_stepwise:
            return OnnxSummarizerOutput(logits=self.document_graph(**inputs))
        if "sentence_vectors" not in inputs:  # the processor's tensors (a stepwise ETCSum's document always)
            inputs = self.prepare_document(**inputs)
        documents = inputs["sentence_mask"].shape[0]
        if row_documents is None:
            row_documents = torch.arange(documents)
        if summary_indices is None or summary_indices.shape[1] == 0:
            # the graph takes one summary column at least; -1 is no sentence (see `onnx_export.HiBertStepScorer`)
            summary_indices = torch.full((row_documents.shape[0], 1), -1, dtype=torch.long)
        logits = self.step_graph(summary_indices=summary_indices, row_documents=row_documents, **inputs)
        return OnnxSummarizerOutput(logits=logits)


def load_onnx_pipeline(folder: str | Path, session_options=None, providers=None, num_threads: int | None = None,
                       **pipeline_kwargs):
    """The model's pipeline (its task's: `extractive-summarization` or `stepwise-summarization`) over an ONNX
    folder; the options of that pipeline pass on."""
    model = OnnxSummarizer(folder, session_options=session_options, providers=providers, num_threads=num_threads)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model.pipeline_class(model=model, tokenizer=tokenizer, task=model.task, **pipeline_kwargs)


__all__ = [
    "DOCUMENT_GRAPH",
    "STEP_GRAPH",
    "OnnxSummarizer",
    "OnnxSummarizerOutput",
    "QUANTIZATION_KEY",
    "default_session_options",
    "is_onnx_folder",
    "load_onnx_pipeline",
]
