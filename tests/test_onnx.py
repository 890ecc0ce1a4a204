"""`sumformers export --onnx` and the pipelines on ONNX Runtime: the same scores as PyTorch (within 1e-4) on the
bundled CNN articles for every exported checkpoint, and the default model's summaries identical on 50 development
articles (ETCSum's and Stepwise ETCSum's on 20 and 5); HetFormer refused with its reason; the opt-in int8 graphs
(`--quantize int8`) within their measured drift. Skipped where the `onnx` extra (onnxruntime, onnxscript) is not
installed; CI installs it with `dev`."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from sumformers.hub import DEFAULT_MODEL, load_pipeline  # noqa: E402
from sumformers.onnx_export import EXPORTABLE, NOT_EXPORTABLE, _quantize_int8, export_onnx  # noqa: E402
from sumformers.onnx_runtime import QUANTIZATION_KEY, OnnxSummarizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TOLERANCE = 1e-4
# int8 graphs: the largest next-choice probability difference from PyTorch measured on the bundled articles was
# 0.0104 (docs/onnx.md); the bound leaves room for other CPUs' integer kernels, and stays far under the top choices'
# probabilities (0.23-0.31 there).
INT8_TOLERANCE = 0.03
# Every shipped extractive checkpoint the export covers (config `model_type` in EXPORTABLE). The ETCSum families
# export and compare in 50-75 s (their step-by-step re-encoding on dense attention): `slow`.
ETCSUM_CHECKPOINTS = ("etcsum-minilm-cnndm", "stepwise-etcsum-minilm-cnndm")
EXPORTED_CHECKPOINTS = ("bertsum-minilm-cnndm", "hibert-minilm-cnndm", DEFAULT_MODEL) + ETCSUM_CHECKPOINTS
# Shipped extractive checkpoints the export refuses (config `model_type` in NOT_EXPORTABLE).
REFUSED_CHECKPOINTS = ("hetformer-minilm-qmsum",)


def checkpoint_params(names):
    return [pytest.param(name, marks=pytest.mark.slow) if name in ETCSUM_CHECKPOINTS else name for name in names]


def bundled_articles() -> list[str]:
    rows = [json.loads(line) for line in (EXAMPLES / "cnn_three_articles.jsonl").read_text().splitlines()]
    return [row["document"] for row in rows]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each checkpoint exported once for the module: name -> ONNX folder."""
    folders = {}

    def export(name: str) -> Path:
        if name not in folders:
            folders[name] = export_onnx(name, tmp_path_factory.mktemp("onnx") / name)
        return folders[name]

    return export


def test_the_exported_checkpoints_are_every_shipped_extractive_model_but_hetformer():
    from sumformers.checkpoints import shipped_checkpoints

    types = {name: json.loads((folder / "config.json").read_text())["model_type"]
             for name, folder in shipped_checkpoints().items()}
    assert sorted(name for name, kind in types.items() if kind in EXPORTABLE) == sorted(EXPORTED_CHECKPOINTS)
    assert sorted(name for name, kind in types.items() if kind in NOT_EXPORTABLE) == sorted(REFUSED_CHECKPOINTS)


@pytest.mark.parametrize("name", checkpoint_params(EXPORTED_CHECKPOINTS))
def test_onnx_scores_equal_pytorch_on_the_bundled_articles(name, exported):
    folder = exported(name)
    onnx_pipe, torch_pipe = load_pipeline(str(folder), num_threads=1), load_pipeline(name)
    assert isinstance(onnx_pipe.model, OnnxSummarizer) and onnx_pipe.task == torch_pipe.task
    stepwise = torch_pipe.model.is_stepwise
    options = {"return_steps": True} if stepwise else {"return_sentences": True}
    for article in bundled_articles():
        expected, got = torch_pipe(article, **options), onnx_pipe(article, **options)
        assert got["sentences"] == expected["sentences"] and got["summary"] == expected["summary"]
        if stepwise:  # every step's whole distribution over the sentences and the end unit
            pairs = [(a, b) for want, have in zip(expected["steps"], got["steps"])
                     for a, b in zip(want["distribution"], have["distribution"])]
            assert len(pairs) > 10 * len(expected["steps"])
        else:
            pairs = list(zip(expected["sentence_scores"], got["sentence_scores"]))
            assert len(pairs) > 10
        assert max(abs(a - b) for a, b in pairs) < TOLERANCE


def document_batch(preprocessed: list[dict]) -> dict:
    """Processed documents as one batch, padded as the pipeline's collation pads them (token and sentence axes)."""
    def padded(name):
        length = max(item[name].shape[1] for item in preprocessed)
        return torch.cat([torch.nn.functional.pad(item[name], (0, length - item[name].shape[1]))
                          for item in preprocessed])

    return {name: padded(name) for name in ("input_ids", "attention_mask", "token_type_ids", "cls_positions",
                                            "sentence_mask")}


@pytest.mark.parametrize("name", checkpoint_params([DEFAULT_MODEL, "stepwise-etcsum-minilm-cnndm"]))
def test_the_step_graph_gives_the_models_logits_for_partial_summaries(name, exported):
    """Rows of several documents and partial summaries of different lengths, padded with -1, as beam search asks."""
    folder = exported(name)
    torch_pipe = load_pipeline(name)
    onnx_model = OnnxSummarizer.from_pretrained(folder, num_threads=1)
    batch = document_batch([torch_pipe.preprocess(article) for article in bundled_articles()[:2]])
    rows = {"summary_indices": torch.tensor([[-1, -1, -1], [4, -1, -1], [0, 7, 2], [3, 1, -1]]),
            "row_documents": torch.tensor([0, 0, 1, 1])}
    with torch.no_grad():
        expected = torch_pipe.model(**batch, **rows).logits
    got = onnx_model(**batch, **rows).logits
    real = expected > torch.finfo(expected.dtype).min
    assert torch.equal(real, got > torch.finfo(got.dtype).min)
    assert real.sum() > 4 * 15
    assert (got - expected)[real].abs().max() < TOLERANCE


def assert_packed_sentence_vectors_equal_the_models(folder: Path, articles: list[str]):
    """The default model's document graph, whose sentence encoder runs on the real tokens only
    (`onnx_packed_encoder`), against `sentence_vectors`: each article alone, and all of them as one padded batch
    (padding sentence slots, whose vectors are 0)."""
    import onnx

    graph = onnx.load(folder / "model.onnx")
    attention = [node for node in graph.graph.node if node.op_type == "MultiHeadAttention"]
    # the packed encoder's attention runs with no mask or bias input (and there is one per encoder layer)
    assert len(attention) == 6 and all(len([name for name in node.input if name]) == 3 for node in attention)
    torch_pipe = load_pipeline(DEFAULT_MODEL)
    onnx_model = OnnxSummarizer.from_pretrained(folder, num_threads=1)
    preprocessed = [torch_pipe.preprocess(article) for article in articles]
    for inputs in [document_batch([item]) for item in preprocessed] + [document_batch(preprocessed)]:
        with torch.no_grad():
            expected = torch_pipe.model.sentence_vectors(inputs["input_ids"], inputs["attention_mask"],
                                                    inputs["cls_positions"], inputs["sentence_mask"])
        got = onnx_model.prepare_document(**inputs)["sentence_vectors"]
        assert got.shape == expected.shape
        assert (got - expected).abs().max() < TOLERANCE
        assert torch.equal(got[~inputs["sentence_mask"].bool()], expected[~inputs["sentence_mask"].bool()])
    assert not document_batch(preprocessed)["sentence_mask"].bool().all()  # the batch has padding slots


def test_the_packed_sentence_encoder_gives_the_models_sentence_vectors(exported):
    assert_packed_sentence_vectors_equal_the_models(exported(DEFAULT_MODEL), bundled_articles())


@pytest.mark.data
def test_the_packed_sentence_encoder_gives_the_models_sentence_vectors_on_development_articles(exported, data_dir):
    lines = (data_dir / "cnn_dailymail" / "validation.jsonl").read_text().splitlines()[:12]
    assert_packed_sentence_vectors_equal_the_models(exported(DEFAULT_MODEL),
                                                    [json.loads(line)["document"] for line in lines])


def test_transformers_pipeline_takes_the_onnx_model_as_it_takes_an_ort_model(exported):
    """optimum's way: the ONNX model object handed to `transformers.pipeline` with the folder's tokenizer."""
    from transformers import AutoTokenizer, pipeline

    folder = exported(DEFAULT_MODEL)
    onnx_pipe = pipeline("stepwise-summarization", model=OnnxSummarizer.from_pretrained(folder, num_threads=1),
                         tokenizer=AutoTokenizer.from_pretrained(folder))
    article = bundled_articles()[0]
    expected, got = load_pipeline(DEFAULT_MODEL)(article), onnx_pipe(article)
    assert got["selection_order"] == expected["selection_order"]
    assert abs(got["score"] - expected["score"]) < TOLERANCE


@pytest.mark.slow
@pytest.mark.data
def test_the_default_models_summaries_are_identical_on_50_development_articles(exported, data_dir):
    folder = exported(DEFAULT_MODEL)
    lines = (data_dir / "cnn_dailymail" / "validation.jsonl").read_text().splitlines()[:50]
    articles = [json.loads(line)["document"] for line in lines]
    onnx_pipe, torch_pipe = load_pipeline(str(folder), num_threads=1), load_pipeline(DEFAULT_MODEL)
    differing = [index for index, article in enumerate(articles)
                 if onnx_pipe(article)["summary"] != torch_pipe(article)["summary"]]
    assert differing == []


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize("name, count", [("etcsum-minilm-cnndm", 20), ("stepwise-etcsum-minilm-cnndm", 5)])
def test_the_etcsum_summaries_are_identical_on_development_articles(name, count, exported, data_dir):
    folder = exported(name)
    lines = (data_dir / "cnn_dailymail" / "validation.jsonl").read_text().splitlines()[:count]
    articles = [json.loads(line)["document"] for line in lines]
    onnx_pipe, torch_pipe = load_pipeline(str(folder), num_threads=1), load_pipeline(name)
    differing = [index for index, article in enumerate(articles)
                 if onnx_pipe(article)["summary"] != torch_pipe(article)["summary"]]
    assert differing == []


def test_export_onnx_refuses_hetformer_saying_why_in_one_line(tmp_path, capsys):
    from sumformers_cli import ERROR_EXIT
    from sumformers_cli import main as command_line

    with pytest.raises(ValueError, match="ONNX export cannot cover 'hetformer': HetFormer's graph attention"):
        export_onnx("hetformer-minilm-qmsum", tmp_path / "out")
    with pytest.raises(SystemExit) as exit:
        command_line(["export", "--onnx", "hetformer-minilm-qmsum", str(tmp_path / "out")])
    assert exit.value.code == ERROR_EXIT and not (tmp_path / "out").exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("sumformers: error: could not export model hetformer-minilm-qmsum: ONNX export cannot")


def test_export_onnx_refuses_a_model_it_does_not_cover(tmp_path):
    with pytest.raises(ValueError, match="ONNX export covers"):
        export_onnx("copytransformer-circular2d-cnndm", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_folder_without_graphs_is_refused_with_the_export_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="sumformers export --onnx"):
        OnnxSummarizer(tmp_path)


def test_export_onnx_refuses_an_unknown_quantization(tmp_path):
    with pytest.raises(ValueError, match="quantize is one of int8"):
        export_onnx(DEFAULT_MODEL, tmp_path / "out", quantize="int4")
    assert not (tmp_path / "out").exists()


def test_int8_quantization_rewrites_matmuls_to_integer_kernels_within_the_quantization_error(tmp_path):
    """A float32 MatMul graph quantized as the export quantizes: its product runs as MatMulInteger, the graph says
    it is int8, and the result moves by no more than the rounding of weights (per column) and inputs allows."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    generator = np.random.default_rng(0)
    weight = generator.normal(size=(64, 32)).astype(np.float32)
    inputs = generator.normal(size=(5, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weight"], ["y"])], "product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 32])],
        [numpy_helper.from_array(weight, "weight")],
    )
    path = tmp_path / "product.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    _quantize_int8(path)

    quantized = onnx.load(path)
    assert {node.op_type for node in quantized.graph.node} >= {"DynamicQuantizeLinear", "MatMulInteger"}
    assert "MatMul" not in {node.op_type for node in quantized.graph.node}
    assert {prop.key: prop.value for prop in quantized.metadata_props}[QUANTIZATION_KEY] == "int8"
    (got,) = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": inputs})
    expected = inputs @ weight
    # each factor rounded by at most half its step (inputs: uint8 over their range and 0; weights: int8 symmetric
    # per column), so x'w' - xw is at most |x| step_w/2 + step_x/2 |w| + step_x/2 step_w/2 summed over the products
    input_step = (max(inputs.max(), 0) - min(inputs.min(), 0)) / 255
    weight_step = np.abs(weight).max(0) / 127
    bound = (np.abs(inputs).sum(1, keepdims=True) * weight_step / 2 + input_step / 2 * np.abs(weight).sum(0)
             + weight.shape[0] * input_step * weight_step / 4)
    assert np.all(np.abs(got - expected) <= bound + 1e-5)
    assert np.abs(got - expected).max() > 1e-4  # integer arithmetic, not the float product


@pytest.mark.slow
def test_the_int8_export_scores_within_its_measured_drift_and_says_it_is_int8(exported, tmp_path):
    folder = export_onnx(DEFAULT_MODEL, tmp_path / "int8", quantize="int8")
    float_folder = exported(DEFAULT_MODEL)
    onnx_pipe, torch_pipe = load_pipeline(str(folder), num_threads=1), load_pipeline(DEFAULT_MODEL)
    assert onnx_pipe.model.quantization == "int8"
    assert OnnxSummarizer(float_folder).quantization is None
    for graph in ("model.onnx", "step_model.onnx"):  # int8 weights: about a quarter of the float32 bytes
        assert (folder / graph).stat().st_size < 0.4 * (float_folder / graph).stat().st_size
    differences = []
    for article in bundled_articles():
        expected, got = torch_pipe(article, return_steps=True), onnx_pipe(article, return_steps=True)
        assert got["summary"] == expected["summary"]
        differences += [abs(a - b) for want, have in zip(expected["steps"], got["steps"])
                        for a, b in zip(want["distribution"], have["distribution"])]
    assert TOLERANCE < max(differences) < INT8_TOLERANCE  # quantized (past the float32 bound), within its own
