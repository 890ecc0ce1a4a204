"""On a CUDA GPU (skipped without one, as in CI): the paths a GPU run of the benchmarks takes compute what they
compute on CPU. The CopyTransformer variants that `benchmarks/run_on_gpu.sh` trains (fp32 logits, a bf16-autocast
training step, the pipeline's batched beam search) and the WikiSum layouts of the memory part (a training step's loss;
the allocator cap that decides what fits). `run_on_gpu.sh` runs this file first, so that a tensor left on the wrong
device stops the run before any training. SUMFORMERS_GPU_TEST_DEVICE=cpu runs the comparisons with the CPU standing
in for the GPU: a check of the tests themselves on a machine without one."""

import json
import os
import warnings

import pytest
import torch

from conftest import imported_benchmark, tiny_copy_transformer_config, tiny_wikisum_config
from sumformers import CopyTransformerForConditionalGeneration, WikiSumForCausalLM

DEVICE = os.environ.get("SUMFORMERS_GPU_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA GPU")

quality_windowed = imported_benchmark("quality_windowed", "quality_windowed")
wikisum = imported_benchmark("wikisum", "wikisum")
GPU_VARIANTS = ("transformer_full", "copy_transformer_full", "bert_decoder_full", "bert_stacked_full",
                "bert_stacked_bert_decoder_full", "bert_concat_full", "bert_concat_paper_full",
                "bert_concat_paper_bert_decoder_full", "copy_transformer", "conv_circular_2d")
DOCUMENTS = [
    "The council approved the new budget on Monday. It includes money for schools and roads. Critics said the plan "
    "raises taxes too quickly.",
    # "zorblax✓" is one [UNK] word: the copy mechanism extends the vocabulary with it
    "The zorblax✓ fund pays for the bridge. The mayor will sign it next week.",
]
SUMMARIES = ["the council approved the budget .", "the zorblax✓ fund pays ."]


def tiny_variant(quality_windowed, variant: str, bert_path: str):
    """The variant's settings (its length aside) on the tiny CopyTransformer, new weights noised off their init (so
    that greedy choices are far from ties); the BERT variants over the tiny saved BERT."""
    overrides = {key: value for key, value in quality_windowed.VARIANTS[variant][1].items()
                 if key != "max_source_positions"}
    if overrides.get("convolution"):
        overrides["convolution_window"] = 3
    settings = tiny_copy_transformer_config(**overrides).to_diff_dict()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if settings.get("encoder_input", "tokens") != "tokens":
            model = CopyTransformerForConditionalGeneration.from_encoder(bert_path, **settings)
        else:
            model = CopyTransformerForConditionalGeneration(tiny_copy_transformer_config(**overrides))
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


@pytest.mark.parametrize("variant", GPU_VARIANTS)
def test_a_copy_transformer_variant_computes_on_the_gpu_what_it_computes_on_cpu(quality_windowed, variant,
                                                                               tiny_bert_path, minilm_tokenizer,
                                                                               tmp_path):
    from transformers import pipeline

    import sumformers  # noqa: F401 (registers the pipeline task)

    model = tiny_variant(quality_windowed, variant, tiny_bert_path)
    processor = model.processor_class(minilm_tokenizer, model.config)
    batch = processor.collate([processor.training_features(document, summary, max_length=128, max_target_length=16)
                               for document, summary in zip(DOCUMENTS, SUMMARIES)])
    with torch.no_grad():
        on_cpu = model(**batch).logits
        model.to(DEVICE)
        on_gpu = model(**{key: value.to(DEVICE) for key, value in batch.items()}).logits
    assert on_gpu.device.type == DEVICE
    torch.testing.assert_close(on_gpu.cpu(), on_cpu, atol=2e-4, rtol=2e-4)

    # a training step as the Trainer's --bf16 takes it: finite loss, a finite gradient on every trainable weight
    model.train()
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        loss = model(**{key: value.to(DEVICE) for key, value in batch.items()}).loss
    loss.backward()
    assert torch.isfinite(loss)
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    assert all(parameter.grad is not None and torch.isfinite(parameter.grad).all() for parameter in trainable)

    # the benchmark's decoding: the pipeline on the GPU, a batch, beam search, the same summaries as on CPU
    model.zero_grad()
    model.eval().cpu().save_pretrained(tmp_path)
    minilm_tokenizer.save_pretrained(tmp_path)
    options = dict(num_beams=4, max_length=12, min_length=2, batch_size=2)
    summaries = {}
    for device in ("cpu", DEVICE):
        summarizer = pipeline("abstractive-summarization", model=str(tmp_path), device=device)
        summaries[device] = [output["summary"] for output in summarizer(DOCUMENTS, **options)]
    assert summaries[DEVICE] == summaries["cpu"] and all(summaries[DEVICE])


@pytest.mark.parametrize("layout, implementation", [("full", "eager"), ("full", "sdpa"), ("tdmca", "blocked")])
def test_a_wikisum_layout_gives_the_same_training_loss_on_the_gpu(wikisum, layout, implementation):
    assert (layout, implementation) in wikisum.VARIANTS.values()  # the memory part's layouts
    layers = ["full"] * 3 if layout == "full" else ["local", "compressed", "local"]
    torch.manual_seed(0)
    model = WikiSumForCausalLM._from_config(tiny_wikisum_config(attention_layers=layers),
                                            attn_implementation=implementation).eval()
    ids = torch.randint(4, 64, (2, 37), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        on_cpu = model(ids, labels=ids).loss
        on_gpu = model.to(DEVICE)(ids.to(DEVICE), labels=ids.to(DEVICE)).loss
    torch.testing.assert_close(on_gpu.cpu(), on_cpu, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(DEVICE != "cuda", reason="the cap is the CUDA allocator's")
def test_the_memory_parts_gpu_cap_decides_what_fits(wikisum):
    """One step of the memory part's model in a capped process: T-DMCA at L = 1,024 fits in 4 GB (about 1 GB on CPU);
    T-D with materialized scores at L = 16,384 (4 heads x 16,384^2 fp32 scores = 4 GiB per layer) does not."""
    fits = wikisum._run_case("tdmca", "blocked", 1024, 4.0)
    assert fits["status"] == "ok" and 0 < fits["peak_mb"] < 4096, json.dumps(fits)
    assert wikisum._run_case("full", "eager", 16384, 4.0)["status"] == "out of memory"
