"""`sumformers export --onnx` and the pipelines on ONNX Runtime: the same scores as PyTorch (within 1e-4) on the
bundled CNN articles for every exported checkpoint, and the default model's summaries identical on 50 development
articles. Skipped where the `onnx` extra (onnxruntime, onnxscript) is not installed; CI installs it with `dev`."""

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from sumformers.hub import DEFAULT_MODEL, load_pipeline  # noqa: E402
from sumformers.onnx_export import EXPORTABLE, export_onnx  # noqa: E402
from sumformers.onnx_runtime import OnnxSummarizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TOLERANCE = 1e-4
# Every shipped extractive checkpoint the export covers (config `model_type` in EXPORTABLE).
EXPORTED_CHECKPOINTS = ("bertsum-minilm-cnndm", "hibert-minilm-cnndm", DEFAULT_MODEL)


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


def test_the_exported_checkpoints_are_every_shipped_sentence_and_stepwise_hibert_or_bertsum_model():
    from sumformers.checkpoints import shipped_checkpoints

    covered = [name for name, folder in shipped_checkpoints().items()
               if json.loads((folder / "config.json").read_text())["model_type"] in EXPORTABLE]
    assert sorted(covered) == sorted(EXPORTED_CHECKPOINTS)


@pytest.mark.parametrize("name", EXPORTED_CHECKPOINTS)
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


def test_the_step_graph_gives_the_models_logits_for_partial_summaries(exported):
    """Rows of several documents and partial summaries of different lengths, padded with -1, as beam search asks."""
    folder = exported(DEFAULT_MODEL)
    torch_pipe = load_pipeline(DEFAULT_MODEL)
    onnx_model = OnnxSummarizer.from_pretrained(folder, num_threads=1)
    first, second = (torch_pipe.preprocess(article) for article in bundled_articles()[:2])
    width = max(first["input_ids"].shape[1], second["input_ids"].shape[1])
    sentences = max(first["cls_positions"].shape[1], second["cls_positions"].shape[1])

    def padded(name, length):  # the two documents as one batch, padded as the pipeline's collation pads them
        pads = [torch.nn.functional.pad(item[name], (0, length - item[name].shape[1])) for item in (first, second)]
        return torch.cat(pads)

    batch = {name: padded(name, width) for name in ("input_ids", "attention_mask", "token_type_ids")}
    batch.update({name: padded(name, sentences) for name in ("cls_positions", "sentence_mask")})
    rows = {"summary_indices": torch.tensor([[-1, -1, -1], [4, -1, -1], [0, 7, 2], [3, 1, -1]]),
            "row_documents": torch.tensor([0, 0, 1, 1])}
    with torch.no_grad():
        expected = torch_pipe.model(**batch, **rows).logits
    got = onnx_model(**batch, **rows).logits
    real = expected > torch.finfo(expected.dtype).min
    assert torch.equal(real, got > torch.finfo(got.dtype).min)
    assert real.sum() > 4 * 15
    assert (got - expected)[real].abs().max() < TOLERANCE


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


def test_export_onnx_refuses_a_model_it_does_not_cover(tmp_path):
    with pytest.raises(ValueError, match="ONNX export covers"):
        export_onnx("copytransformer-circular2d-cnndm", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_folder_without_graphs_is_refused_with_the_export_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="sumformers export --onnx"):
        OnnxSummarizer(tmp_path)
