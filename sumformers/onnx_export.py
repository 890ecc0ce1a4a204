"""`sumformers export --onnx`: an extractive model as ONNX graphs for ONNX Runtime (`sumformers.onnx_runtime`).

The graphs come from `torch.onnx.export(..., dynamo=True)` (optimum-onnx has no transformers 5 support). What is
exported is what runs once per tensor batch; the search stays in Python, in the pipelines:
- a sentence-level model (`extractive-summarization`): `model.onnx`, the BERTSum-layout inputs to one logit per
  sentence (the model's own `forward`);
- a stepwise model (`stepwise-summarization`): `model.onnx`, the BERTSum-layout inputs to the sentence vectors
  (computed once per document), and `step_model.onnx`, the sentence vectors and partial summaries to the next-choice
  logits (run at every beam step); Stepwise ETCSum, which encodes the document together with each partial summary,
  has only `step_model.onnx`: the BERTSum-layout inputs and partial summaries to the next-choice logits.

ETCSum families are traced on their "eager" attention back end (`DENSE_ATTENTION`); HetFormer is refused with the
reason (`NOT_EXPORTABLE`). docs/onnx.md says why.

Batch, token, sentence, row and summary axes are dynamic. The wrappers here call the models' own submodules; the
stepwise ones leave out the forward's argument checks, which `torch.export` cannot trace (a check on tensor values)
and which the pipeline's search never trips.

`quantize="int8"` (opt-in, never the default) then rewrites each checked float32 graph with ONNX Runtime's dynamic
int8 quantization: faster on CPU, but its scores move by far more than the float32 graphs' 1e-4 (docs/onnx.md has
the measured drift and summary agreement); the graphs record it in their metadata (`QUANTIZATION_KEY`).
"""

import contextlib
import logging
import shutil
import warnings
from pathlib import Path

import onnx_ir
import torch
from onnxscript.rewriter.ort_fusions import optimize_for_ort
from torch import nn
from transformers import AutoConfig

from .hub import load_model, load_tokenizer, readable_by_all, resolve_model
from .modeling.sentence_scoring import next_choice_logits_and_loss
from .onnx_packed_encoder import PackedSentenceVectors, packs_sentence_encoder
from .onnx_runtime import DOCUMENT_GRAPH, QUANTIZATION_KEY, STEP_GRAPH

# Families whose graphs this module knows (config `model_type`).
SENTENCE_SCORERS = ("bertsum", "hibert", "etcsum")
STEPWISE_SCORERS = ("stepwise_hibert", "stepwise_etcsum")
EXPORTABLE = SENTENCE_SCORERS + STEPWISE_SCORERS
# Families the export refuses, and why (the CLI prints it).
NOT_EXPORTABLE = {
    "hetformer": "HetFormer's graph attention picks its patterns and mention positions from the input values, "
    "which torch.export cannot trace with dynamic axes, and its dense back end would need about 13 GB per "
    "attention score tensor on a 16k-token meeting",
}
# Families whose attention the export runs on the "eager" back end (dense mask and relative-position bias): their
# "blocked" default sizes its key blocks from tensor values and flex attention is a compiled kernel, neither of which
# `torch.export` traces. ETCSum documents are at most `max_document_tokens` (4,096) long.
DENSE_ATTENTION = ("etcsum", "stepwise_etcsum")
# The largest difference from PyTorch an export may show on its example before it is refused.
TOLERANCE = 1e-4
# `quantize` choices: int8 weights (per output channel) and int8 activations quantized at run time.
QUANTIZATIONS = ("int8",)

# Each graph's inputs and their dynamic axes.
_DOCUMENT_AXES = {
    "input_ids": {0: "batch", 1: "tokens"},
    "attention_mask": {0: "batch", 1: "tokens"},
    "token_type_ids": {0: "batch", 1: "tokens"},
    "cls_positions": {0: "batch", 1: "sentences"},
    "sentence_mask": {0: "batch", 1: "sentences"},
}
_STEP_AXES = {
    "sentence_vectors": {0: "batch", 1: "sentences"},
    "sentence_mask": {0: "batch", 1: "sentences"},
    "summary_indices": {0: "rows", 1: "summary"},
    "row_documents": {0: "rows"},
}
# Stepwise ETCSum's step graph re-encodes the document with each partial summary: the document inputs and the rows.
_ETCSUM_STEP_AXES = {**_DOCUMENT_AXES, **_STEP_AXES}
# Real prose, so that the example has several sentences of different lengths (a dynamic axis traced at size 1 would
# be fixed at 1).
_EXAMPLE_TEXT = (
    "The river rose three feet overnight after two days of heavy rain. Officials closed the old bridge at dawn. "
    "Residents of the lower town were told to move their cars to higher ground before the afternoon. "
    "The weather service expects the water to fall again by Sunday."
)


class SentenceScorer(nn.Module):
    """A sentence-level extractive model: BERTSum-layout inputs -> logits [batch, sentences]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids, cls_positions, sentence_mask):
        return self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            cls_positions=cls_positions,
            sentence_mask=sentence_mask,
        ).logits


class HiBertSentenceVectors(nn.Module):
    """Stepwise HiBERT's per-document part: BERTSum-layout inputs -> sentence vectors [batch, sentences, hidden]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids, cls_positions, sentence_mask):
        return self.model.sentence_vectors(input_ids, attention_mask, cls_positions, sentence_mask.bool())


class HiBertStepScorer(nn.Module):
    """Stepwise HiBERT's per-step part: `StepwiseHiBertForExtractiveSummarization.forward` from the sentence vectors,
    without its argument checks. Partial summaries are always given as at least one column (-1: none), so the graph
    has one path: a row whose summary is empty skips document-to-summary attention (the document layer's
    `has_summary`), which equals the forward without a summary."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, sentence_vectors, sentence_mask, summary_indices, row_documents):
        model = self.model
        row_vectors, row_mask = sentence_vectors[row_documents], sentence_mask.bool()[row_documents]
        rows, hidden = row_documents.shape[0], row_vectors.shape[-1]
        end = model.document_norm(model.end_embedding.weight).expand(rows, 1, hidden)
        states = torch.cat([model._embed_sentences(row_vectors, model.sentence_positions), end], dim=1)
        keys = nn.functional.pad(row_mask | ~row_mask.any(-1, keepdim=True), (0, 1), value=False)
        summary_mask = summary_indices >= 0
        picked = row_vectors.gather(1, summary_indices.clamp(min=0)[..., None].expand(-1, -1, hidden))
        summary = model._embed_sentences(picked, model.summary_positions, model.summary_position_ids(summary_mask))
        for layer in model.document_layers:
            states, summary = layer(states, keys, summary, summary_mask)
        logits, _ = next_choice_logits_and_loss(model.scorer(states).squeeze(-1), row_mask, summary_indices)
        return logits


class ETCSumStepScorer(nn.Module):
    """Stepwise ETCSum's per-step part: `StepwiseETCSumForExtractiveSummarization.forward` (document and partial
    summaries encoded together, as every step does) without its argument checks; summaries are given as in
    `HiBertStepScorer` (at least one column, -1: none). There is no per-document graph: nothing is computed from the
    document alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, cls_positions, sentence_mask, summary_indices, row_documents):
        document = {"input_ids": input_ids, "attention_mask": attention_mask, "cls_positions": cls_positions,
                    "sentence_mask": sentence_mask.bool()}
        logits, _ = self.model.row_logits(document, summary_indices, row_documents)
        logits, _ = next_choice_logits_and_loss(logits, document["sentence_mask"][row_documents], summary_indices)
        return logits


def example_inputs(model, tokenizer) -> dict:
    """The processor's inputs for two copies of the example text (batch axes of size 2, so they stay dynamic)."""
    processed = model.processor_class(tokenizer, model.config)(_EXAMPLE_TEXT)
    return {name: torch.cat([processed[name]] * 2) for name in _DOCUMENT_AXES}


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter's, optimizer's and quantizer's progress notes (skipped constant folds, unused axis names, absent
    torchvision, untyped outputs of fused kernels) are for their developers, not for someone exporting a model:
    errors still raise. ONNX Runtime's quantizer logs to the root logger."""
    loggers = [logging.getLogger(name) for name in ("onnxscript", "torch.onnx", None)]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


@contextlib.contextmanager
def _traceable_attention(model):
    """The model on the "eager" attention back end while it is traced, if its family needs it (`DENSE_ATTENTION`);
    its own back end again afterwards."""
    own = model.config._attn_implementation
    if model.config.model_type in DENSE_ATTENTION:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(own)


def _export(module, inputs: dict, dynamic_axes: dict, path: Path) -> None:
    dynamic_shapes = {name: dynamic_axes[name] for name in inputs}
    with _quiet_exporter():
        program = torch.onnx.export(
            module, (), kwargs=inputs, dynamic_shapes=dynamic_shapes, dynamo=True, external_data=False,
            input_names=list(inputs), output_names=["output"], verbose=False,
        )
        # ONNX Runtime's fused kernels (attention, skip layer norm, bias GELU): its own graph optimizer does not
        # match the dynamo exporter's patterns
        fused, _ = optimize_for_ort(program.model)
    onnx_ir.save(fused, path)


def _largest_difference(path: Path, inputs: dict, expected: torch.Tensor) -> float:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    wanted = {item.name for item in session.get_inputs()}
    (output,) = session.run(None, {name: value.numpy() for name, value in inputs.items() if name in wanted})
    real = expected > torch.finfo(expected.dtype).min  # masked slots hold the dtype's minimum in both
    return float((torch.from_numpy(output) - expected)[real].abs().max())


def _quantize_int8(path: Path) -> None:
    """Rewrite a float32 graph in place with dynamic int8 quantization (MatMul -> MatMulInteger): weights int8 per
    output channel, activations quantized per tensor at run time. ONNX Runtime's fused attention stays float32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = path.with_name(f"{path.stem}.int8.onnx")
    with _quiet_exporter():
        # the fused kernels (com.microsoft) give shape inference no output types: they are float32
        quantize_dynamic(path, quantized, weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    graph = onnx.load(quantized)
    onnx.helper.set_model_props(graph, {QUANTIZATION_KEY: "int8"})
    onnx.save(graph, path)
    quantized.unlink()


def _check_exportable(model_type: str) -> None:
    if model_type in NOT_EXPORTABLE:
        raise ValueError(f"ONNX export cannot cover {model_type!r}: {NOT_EXPORTABLE[model_type]}")
    if model_type not in EXPORTABLE:
        raise ValueError(f"ONNX export covers {', '.join(EXPORTABLE)}; {model_type!r} is not one of them")


def _check_quantization(quantize: str | None) -> None:
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize is one of {', '.join(QUANTIZATIONS)} (or None: float32), not {quantize!r}")


def export_graphs(model, tokenizer, output: Path, quantize: str | None = None) -> list[Path]:
    """Write the model's graphs into `output` and check each against PyTorch on the example (a ValueError past
    `TOLERANCE`); with `quantize="int8"` the checked graphs are then quantized (`_quantize_int8`). Returns the
    graph files."""
    model_type = model.config.model_type
    _check_exportable(model_type)
    _check_quantization(quantize)
    inputs = example_inputs(model, tokenizer)
    # three rows reading the two documents, partial summaries of one and two sentences (width 2: dynamic)
    rows = {"summary_indices": torch.tensor([[2, -1], [0, 3], [-1, -1]]), "row_documents": torch.tensor([0, 1, 1])}
    if model_type == "stepwise_etcsum":
        step_inputs = {name: inputs[name] for name in ("input_ids", "attention_mask", "cls_positions", "sentence_mask")}
        graphs = [(ETCSumStepScorer(model).eval(), {**step_inputs, **rows}, _ETCSUM_STEP_AXES, output / STEP_GRAPH)]
    elif model_type in STEPWISE_SCORERS:
        document_module = HiBertSentenceVectors(model).eval()
        with torch.no_grad():
            vectors = document_module(**inputs)
        step_inputs = {"sentence_vectors": vectors, "sentence_mask": inputs["sentence_mask"], **rows}
        # the sentence encoder without its padding where it can (`onnx_packed_encoder`), checked against the model's
        traced = PackedSentenceVectors(model).eval() if packs_sentence_encoder(model) else document_module
        graphs = [(document_module, inputs, _DOCUMENT_AXES, output / DOCUMENT_GRAPH, traced),
                  (HiBertStepScorer(model).eval(), step_inputs, _STEP_AXES, output / STEP_GRAPH)]
    else:
        graphs = [(SentenceScorer(model).eval(), inputs, _DOCUMENT_AXES, output / DOCUMENT_GRAPH)]
    for module, module_inputs, axes, path, *traced in graphs:
        with torch.no_grad():
            expected = module(**module_inputs)  # on the model's own attention back end
            with _traceable_attention(model):
                _export(traced[0] if traced else module, module_inputs, axes, path)
        difference = _largest_difference(path, module_inputs, expected)
        if difference > TOLERANCE:
            raise ValueError(f"{path.name} differs from PyTorch by {difference:.2e} (more than {TOLERANCE})")
        if quantize == "int8":
            _quantize_int8(path)
    return [graph[3] for graph in graphs]


def export_onnx(name_or_path: str | None, output_dir: str, quantize: str | None = None) -> Path:
    """Write an ONNX folder: `config.json`, the tokenizer and the model's graphs (`export_graphs`, float32, or
    int8 with `quantize="int8"`). It loads with `sumformers.load_pipeline(folder)` (or
    `sumformers.onnx_runtime.OnnxSummarizer.from_pretrained(folder)`)."""
    source = resolve_model(name_or_path)
    _check_exportable(AutoConfig.from_pretrained(source).model_type)
    _check_quantization(quantize)
    model = load_model(source)
    tokenizer = load_tokenizer(source)
    output = Path(output_dir)
    if output.exists() and any(output.iterdir()):
        raise FileExistsError(f"{output} exists and is not empty")
    output.mkdir(parents=True, exist_ok=True)
    try:
        export_graphs(model, tokenizer, output, quantize)
    except Exception:
        shutil.rmtree(output)  # no half-written folder that would load as a model
        raise
    model.config.save_pretrained(output)
    tokenizer.save_pretrained(output)
    readable_by_all(output)
    return output


__all__ = ["EXPORTABLE", "NOT_EXPORTABLE", "QUANTIZATIONS", "export_graphs", "export_onnx"]
