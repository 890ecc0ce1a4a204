"""What the Stepwise HiBERT and Stepwise ETCSum tests share beyond the model tester (`test_modeling_common`, which
also holds the shared documents and batches): a tiny pretrained-like encoder, an adapter checkpoint trained-like with
LoRA, and the stepwise pipeline of an exported repo run without sumformers."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import torch
from transformers import AutoTokenizer, BertModel

from conftest import tiny_bert_config
from sumformers.hub import load_model, load_pipeline, save_adapter_checkpoint
from sumformers.modeling.pretrained_encoder import bundled_encoder_path
from test_modeling_common import ARTICLE, SENTENCES, document_batch, random_lora, step_inputs

# Beam settings of the exported-repo comparison.
BEAM = dict(beam_size=2, num_sentences=3)


def save_tiny_encoder(folder, tokenizer, **config_overrides):
    """A tiny random BERT (seed 1) saved like a pretrained encoder, with MiniLM's tokenizer; returns the folder."""
    torch.manual_seed(1)
    BertModel(tiny_bert_config(**config_overrides), add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def lora_checkpoint(base, noise: float, folder):
    """`base` with random LoRA on the query/value projections of its `lora_layers`, as the training script sets it
    up (`random_lora`), its new modules moved by `noise` (they start from a fixed init, so a load that skipped them
    would show). Returns the PEFT model and the saved adapter checkpoint."""
    peft_model = random_lora(base, "query,value", module_noise=noise, seed=3).eval()
    tokenizer = AutoTokenizer.from_pretrained(bundled_encoder_path())
    return peft_model, save_adapter_checkpoint(peft_model, str(folder), tokenizer, {"results": {"rouge1": 1.0}})


def trained_and_reloaded_logits(peft_model, checkpoint, tokenizer):
    """Step logits of `peft_model` and of its saved `checkpoint` loaded back, for SENTENCES with an empty and with
    a one-sentence partial summary."""
    batch = document_batch(tokenizer, [SENTENCES])
    rows = step_inputs([(0, ()), (0, (3,))])
    with torch.no_grad():
        expected = peft_model(**batch, **rows).logits
        return expected, load_model(str(checkpoint))(**batch, **rows).logits


REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.modules["sumformers"] = None  # make `import sumformers` fail
    from transformers import pipeline
    summarizer = pipeline(model=sys.argv[1], trust_remote_code=True)
    result = summarizer(sys.argv[2], **json.loads(sys.argv[3]))
    print(json.dumps({"task": summarizer.task, "model": type(summarizer.model).__name__, "result": result}))
    """
)


def beam_without_sumformers(repo) -> dict:
    """The `stepwise-summarization` pipeline of an exported repo on ARTICLE, in a fresh interpreter where `import
    sumformers` fails: {"task", "model" (class name), "result"}."""
    completed = subprocess.run(
        [sys.executable, "-c", REMOTE_SCRIPT, str(repo), ARTICLE, json.dumps(BEAM)],
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def beam_in_package(checkpoint) -> dict:
    """The same pipeline run from the checkpoint with sumformers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_pipeline(str(checkpoint))(ARTICLE, **BEAM)
