"""The checks every sumformers model class runs with a tiny config (the transformers `ModelTesterMixin` idea), and
the inputs the model tests share.

A test class per architecture (in `test_<arch>.py`) mixes in `ModelTesterMixin` and gives a tiny config factory
(`get_config`) and, where the input is not a list of sentences in the BERTSum layout, an input factory (`examples`,
`encode`, `collate`). What differs between the kinds of model is read from the model contract and the registry:
extractive models score the real sentences of each document, stepwise models (`is_stepwise`) score the open
sentences and the end unit of each (document, partial summary) row (a content planner likewise, over a game's
units), the encoder-decoders (the table-to-text realizer too) give word logits at the labelled positions, and the
WikiSum decoder gives next-token logits at the real positions.

Run them for every architecture: `pytest tests/models -m "model_tester and not slow"` (`-m model_tester` adds the
flex_attention cases, which compile for half a minute or more each).
"""

import copy
import json
import os
import warnings
from types import SimpleNamespace

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from transformers import AutoConfig, PreTrainedModel, pipeline  # noqa: E402
from transformers.dynamic_module_utils import get_class_from_dynamic_module  # noqa: E402
from transformers.modeling_layers import GradientCheckpointingLayer  # noqa: E402

from conftest import ARTICLE, SENTENCES
from sumformers import ARCHITECTURES  # noqa: E402
from sumformers.hub import export_model  # noqa: E402
from sumformers.modeling.attention import ATTENTION_IMPLEMENTATIONS  # noqa: E402
from sumformers.modeling.modeling_bertsumabs import decoder_inputs_from_labels  # noqa: E402
from sumformers.modeling.summarizer_mixin import SummarizerMixin  # noqa: E402
from sumformers.processing.sentence_layout import collate_sentence_batch, encode_sentences  # noqa: E402
from sumformers.training import ModelArguments, apply_lora  # noqa: E402

# ----------------------------------------------------------------------------------------------------------------
# Shared inputs
# ----------------------------------------------------------------------------------------------------------------

# Documents of different lengths (5, 2 and 4 sentences), so that a batch of them is padded.
DOCUMENTS = (SENTENCES, SENTENCES[1:3], SENTENCES[:4])

EXTRACTIVE, STEPWISE, WIKISUM = "extractive-summarization", "stepwise-summarization", "wikisum"
ABSTRACTIVE = "abstractive-summarization"
# Tasks whose models give the outputs of another task's: a content planner scores the next unit as a stepwise
# summarizer scores the next sentence; the table-to-text realizer is an encoder-decoder with teacher forcing.
KIND_OF_TASK = {"content-planning": STEPWISE, "table-to-text": ABSTRACTIVE}


def document_batch(tokenizer, documents, max_tokens=10):
    """A BERTSum-layout batch of `documents` (each a list of sentences, each cut to `max_tokens` word pieces)."""
    features = [encode_sentences(tokenizer, document, max_sentence_tokens=max_tokens) for document in documents]
    return collate_sentence_batch(features, tokenizer.pad_token_id)


def step_inputs(rows) -> dict:
    """`summary_indices` and `row_documents` of stepwise rows given as (document index, partial summary) pairs."""
    width = max(len(prefix) for _, prefix in rows)
    summary = torch.full((len(rows), width), -1, dtype=torch.long)
    for row, (_, prefix) in enumerate(rows):
        summary[row, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
    return {"summary_indices": summary, "row_documents": torch.tensor([document for document, _ in rows])}


def random_lora(model, target_modules="query,value", lora_std=0.1, module_noise=0.0, seed=1):
    """`model` wrapped with LoRA the way the training scripts do it (`sumformers.training.apply_lora`: the contract's
    `lora_layers` and `new_modules`), no LoRA dropout, with random LoRA B weights (`lora_std`) so that LoRA changes the
    outputs, and the new modules moved by `module_noise`."""
    torch.manual_seed(seed)
    arguments = ModelArguments(lora_target_modules=target_modules, lora_r=4, lora_alpha=8, lora_dropout=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peft_model = apply_lora(model, arguments)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0.0, lora_std)
            elif parameter.requires_grad and module_noise:
                parameter.add_(module_noise * torch.randn_like(parameter))
    return peft_model


# ----------------------------------------------------------------------------------------------------------------
# The mixin
# ----------------------------------------------------------------------------------------------------------------

# Every back end a model might be asked for: transformers' names and sumformers' sparse "blocked".
ALL_BACKENDS = (*ATTENTION_IMPLEMENTATIONS, "flash_attention_2")
FLOAT32 = dict(atol=1e-5, rtol=1e-5)  # one computation against another in float32
# The same computation on the same weights: equal up to a few float32 ulps (CPU kernels may round differently for
# weights at other memory addresses, e.g. memory-mapped from safetensors).
SAME = dict(atol=1e-6, rtol=1e-6)


class ModelTesterMixin:
    """Checks for `model_class`; a subclass sets `model_class` and `get_config`, and may override the input factory
    (`examples`, `encode`, `collate`, `pipeline_input`, `pipeline_model_inputs`), `new_model`, `lora_target_modules`
    and `bf16_atol`; a task the mixin has no pipeline check for gets one as `check_<task>_pipeline` in the subclass."""

    pytestmark = [pytest.mark.model_tester]

    model_class = None
    examples = DOCUMENTS
    pipeline_input = ARTICLE
    lora_target_modules = "query,value"
    # Largest |bf16 - fp32| allowed in scores and loss: a few times the largest difference measured on the tiny models
    # (0.008 in the scores over five seeds, 0.005 in the loss).
    bf16_atol = 0.02
    # Noise added to every weight of the tiny model, so that parts that start at zero or as copies (biases,
    # relative-position biases, HetFormer's node projections) take part in every comparison.
    weight_noise = 0.05
    # Runs of the last checkpointed layer in one checkpointed training step: its forward, then its recomputation.
    checkpointed_runs = 2

    # -- per-architecture factories ---------------------------------------------------------------------------

    def get_config(self):
        raise NotImplementedError

    def new_model(self, config):
        """The tiny reference model before its weight noise: new weights from `config`. A model whose checkpoints
        leave weights out (reloaded from elsewhere, as the CopyTransformer's frozen BERT) loads them here."""
        return self.model_class._from_config(config)

    def encode(self, processor, example):
        """One example's features (lists), as `collate` takes them: a document's sentences in the BERTSum layout."""
        return processor.encode(example)

    def collate(self, processor, features):
        return processor.collate(features)

    def pipeline_model_inputs(self, processor):
        """The model inputs of `pipeline_input` (tensors, a batch of one) that the pipeline check reproduces the
        pipeline's result from; the processor's own where one call of it gives them."""
        return processor(self.pipeline_input)

    # -- what the contract and registry say ------------------------------------------------------------------

    @property
    def task(self):
        return ARCHITECTURES[self.model_class.config_class.model_type].task

    @property
    def kind(self):
        """What the outputs are (`EXTRACTIVE`, `STEPWISE`, `ABSTRACTIVE` or `WIKISUM`): the task's, or for a task
        of `KIND_OF_TASK` the kind its models share."""
        return KIND_OF_TASK.get(self.task, self.task)

    @property
    def auto_class(self):
        return ARCHITECTURES[self.model_class.config_class.model_type].auto_class

    def attn_implementations(self):
        """The attention back ends the class declares it runs (`attention_backends`)."""
        return list(self.model_class.attention_backends)

    # -- rows, inputs and the outputs that matter ----------------------------------------------------------------

    def rows(self, batch):
        """One row per document; stepwise two: an empty summary and (two sentences or more) the summary last, first."""
        if self.kind != STEPWISE:
            return [(document, ()) for document in range(batch["input_ids"].shape[0])]
        rows = []
        for document, count in enumerate(batch["sentence_mask"].sum(-1).tolist()):
            rows.append((document, ()))
            if count >= 2:
                rows.append((document, (count - 1, 0)))
        return rows

    def inputs(self, batch, rows, extra_summary_padding=0):
        if self.kind == ABSTRACTIVE:  # teacher forcing on the labels (passed apart, as `labels` below)
            inputs = {key: value for key, value in batch.items() if key != "labels"}
            return dict(inputs, decoder_input_ids=decoder_inputs_from_labels(batch["labels"], self.get_config()))
        if self.kind != STEPWISE:
            return dict(batch)
        inputs = dict(batch, **step_inputs(rows))
        padding = torch.full((len(rows), extra_summary_padding), -1, dtype=torch.long)
        inputs["summary_indices"] = torch.cat([inputs["summary_indices"], padding], dim=1)
        return inputs

    def labels(self, batch, rows):
        if self.kind == WIKISUM:
            return batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        if self.kind == ABSTRACTIVE:
            return batch["labels"]
        if self.kind == STEPWISE:
            end = batch["sentence_mask"].shape[1]
            return torch.tensor([end if prefix else 0 for _, prefix in rows])
        mask = batch["sentence_mask"]
        alternating = (torch.arange(mask.shape[1]) % 2 == 0).float().expand_as(mask)
        return torch.where(mask, alternating, -100.0)

    def row_outputs(self, output, batch, rows):
        """The outputs that mean something, one tensor per row: the real sentences' scores; stepwise the open
        sentences' and the end unit's; WikiSum the logits at the real positions."""
        values = []
        for row, (document, prefix) in enumerate(rows):
            if self.kind == WIKISUM:
                values.append(output.logits[row][batch["attention_mask"][row].bool()])
                continue
            if self.kind == ABSTRACTIVE:
                values.append(output.logits[row][batch["labels"][row] != -100])
                continue
            sentences = batch["sentence_mask"][document].clone()
            if self.kind == EXTRACTIVE:
                values.append(output.logits[row][sentences])
                continue
            sentences[list(prefix)] = False
            values.append(output.logits[row][torch.cat([sentences, torch.tensor([True])])])
        return values

    @torch.no_grad()
    def outputs(self, model, batch, rows, **kwargs):
        return self.row_outputs(model(**self.inputs(batch, rows, **kwargs)), batch, rows)

    def assert_rows_close(self, actual, expected, **tolerance):
        assert len(actual) == len(expected)
        for row, (got, wanted) in enumerate(zip(actual, expected)):
            torch.testing.assert_close(got, wanted, msg=lambda message, row=row: f"row {row}: {message}", **tolerance)

    # -- the shared fixtures --------------------------------------------------------------------------------------

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def one_thread(cls):
        """Tiny models on a shared 2-core machine run faster on one thread than on two."""
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(threads)

    @pytest.fixture(scope="class")
    @classmethod
    def context(cls, tmp_path_factory, minilm_tokenizer):
        """What a test class builds once: the tiny reference model (default attention back end), its saved folder
        (with the tokenizer), the processor, the examples' features, their batch and rows, and the reference outputs."""
        self = cls()
        config = self.get_config()
        torch.manual_seed(0)
        model = self.new_model(config).eval()
        left_out = set(model._keys_to_ignore_on_save or ())  # reloaded as their source has them: no noise
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name not in left_out:
                    parameter.add_(self.weight_noise * torch.randn_like(parameter))
        dropouts = [m.p for m in model.modules() if isinstance(m, nn.Dropout) and m.p > 0]
        assert not dropouts, "tiny configs must turn dropout off (training-mode checks compare runs)"
        folder = tmp_path_factory.mktemp(config.model_type) / "model"
        model.save_pretrained(folder)
        minilm_tokenizer.save_pretrained(folder)
        processor = self.model_class.processor_class(minilm_tokenizer, model.config)
        features = [self.encode(processor, example) for example in self.examples]
        batch = self.collate(processor, features)
        rows = self.rows(batch)
        return SimpleNamespace(
            model=model,
            folder=folder,
            processor=processor,
            features=features,
            batch=batch,
            rows=rows,
            expected=self.outputs(model, batch, rows),
        )

    def load(self, context, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.auto_class.from_pretrained(context.folder, **kwargs).eval()

    # -- 1. save and load ------------------------------------------------------------------------------------------

    def test_save_and_load_give_identical_outputs(self, context):
        folder = context.folder
        assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
        config = AutoConfig.from_pretrained(folder)
        assert type(config) is self.model_class.config_class
        assert settings_of(config) == settings_of(context.model.config)
        for loader in (self.model_class, self.auto_class):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loaded = loader.from_pretrained(folder).eval()
            assert type(loaded) is self.model_class
            assert loaded.config._attn_implementation == context.model.config._attn_implementation
            self.assert_rows_close(self.outputs(loaded, context.batch, context.rows), context.expected, **SAME)

    def test_export_round_trip_gives_identical_outputs(self, context, tmp_path):
        # A folder name of its own per architecture: it names the remote-code module (transformers_modules.<name>).
        model_type = self.model_class.config_class.model_type
        repo = export_model(str(context.folder), str(tmp_path / f"sumformers_{model_type}_export"))
        config = AutoConfig.from_pretrained(repo)
        # In-process, a class registered with the Auto classes wins over the repo's remote code (transformers'
        # `explicit_local_code`): the Auto class loads the exported weights into the package's class ...
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            local = self.auto_class.from_pretrained(repo, trust_remote_code=True).eval()
            # ... and the remote code is what the Auto class would load without sumformers installed.
            remote_class = get_class_from_dynamic_module(config.auto_map[self.auto_class.__name__], str(repo))
            remote = remote_class.from_pretrained(repo).eval()
        assert type(local) is self.model_class
        assert remote_class.__module__.startswith("transformers_modules.")
        assert remote_class.__name__ == self.model_class.__name__
        for loaded in (local, remote):
            self.assert_rows_close(self.outputs(loaded, context.batch, context.rows), context.expected, **SAME)

    # -- 2. and 3. batching and padding -------------------------------------------------------------------------

    def test_batch_equals_its_items_one_by_one(self, context):
        assert len({token_count(feature) for feature in context.features}) > 1, "the examples must differ in length"
        for row, (document, prefix) in enumerate(context.rows):
            alone = self.collate(context.processor, [context.features[document]])
            (actual,) = self.outputs(context.model, alone, [(0, prefix)])
            torch.testing.assert_close(actual, context.expected[row], **FLOAT32)

    def test_padding_does_not_change_outputs(self, context):
        longest = max(context.features, key=token_count)
        for feature in context.features:
            if feature is longest:
                continue
            alone = self.collate(context.processor, [feature])
            # The processor pads the example to the longest one's tokens (and sentences): keep that row only.
            padded = {key: value[:1] for key, value in self.collate(context.processor, [feature, longest]).items()}
            assert padded["input_ids"].shape[1] > alone["input_ids"].shape[1]
            rows = self.rows(alone)
            expected = self.outputs(context.model, alone, rows)
            actual = self.outputs(context.model, padded, rows, extra_summary_padding=1)
            self.assert_rows_close(actual, expected, **FLOAT32)

    # -- 4. attention back ends ---------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "implementation",
        # compiling flex_attention on a shared CPU takes half a minute or more
        ["sdpa", "blocked", "flash_attention_2", pytest.param("flex_attention", marks=pytest.mark.slow)],
    )
    def test_attention_backend_equals_eager(self, context, implementation):
        """A declared back end, chosen at load or switched on a built model (`set_attn_implementation`), reaches
        every layer and gives eager's outputs; an undeclared one is refused wherever it is asked for."""
        if implementation not in self.attn_implementations():
            self.assert_refused_everywhere(context, implementation)
            return
        eager = self.load(context, attn_implementation="eager")
        model = self.load(context, dtype=torch.float32, attn_implementation=implementation)
        switched = copy.deepcopy(eager)
        switched.set_attn_implementation(implementation)
        # The choice reaches every sub-module that reads it (BERTSum's encoder has a config of its own), eager's too;
        # a transformers encoder inside runs SDPA for sumformers' own "blocked" (and says so at load)
        for loaded, wanted in ((model, implementation), (eager, "eager"), (switched, implementation)):
            assert backends_of(loaded) == {wanted}
            assert backends_of(loaded, transformers_encoders=True) <= {"sdpa" if wanted == "blocked" else wanted}
        expected = self.outputs(eager, context.batch, context.rows)
        self.assert_rows_close(self.outputs(model, context.batch, context.rows), expected, **FLOAT32)
        self.assert_rows_close(self.outputs(switched, context.batch, context.rows), expected, **FLOAT32)

    def test_other_attention_backends_are_refused_at_load(self, context):
        """A back end the class does not declare (one transformers knows, or sumformers' "blocked", which every
        sumformers model's checks know) is refused by `from_pretrained` and `from_config` in one line naming the
        declared ones, instead of loading and failing in `forward`."""
        declared = self.model_class.attention_backends
        assert "eager" in declared and set(declared) <= set(ATTENTION_IMPLEMENTATIONS)
        # transformers reads its own flags for its checks: they say the same
        assert self.model_class._supports_sdpa == ("sdpa" in declared)
        assert self.model_class._supports_flex_attn == ("flex_attention" in declared)
        others = [name for name in ALL_BACKENDS if name not in declared]
        for implementation in others:
            self.assert_refused_everywhere(context, implementation)

    def assert_refused_everywhere(self, context, implementation):
        """`implementation` is refused in one line naming it and the declared back ends by every way of asking for
        it: `from_pretrained` (the Auto class's and the model class's), `from_config`, the constructor (a config that
        names it) and `set_attn_implementation` on a built model, which keeps its back end."""
        declared = self.model_class.attention_backends
        assert implementation not in declared
        built, config = copy.deepcopy(context.model), copy.deepcopy(context.model.config)
        before = backends_of(built)
        named = AutoConfig.from_pretrained(context.folder, attn_implementation=implementation)
        for ask in (
            lambda: self.load(context, attn_implementation=implementation),
            lambda: self.model_class.from_pretrained(context.folder, attn_implementation=implementation),
            lambda: self.auto_class.from_config(config, attn_implementation=implementation),
            lambda: self.model_class(copy.deepcopy(named)),
            lambda: built.set_attn_implementation(implementation),
        ):
            with pytest.raises(ValueError) as refusal:
                ask()
            message = str(refusal.value)
            assert "\n" not in message and repr(implementation) in message
            assert all(repr(name) in message for name in declared), message
        assert backends_of(built) == before

    @pytest.mark.parametrize("name", ["past_key_values", "cache"])
    @torch.no_grad()
    def test_a_step_from_the_decoding_cache_equals_the_full_forward(self, context, name):
        """transformers 5.23's `generate()` hands a model its decoding cache as `past_key_values`, 5.24's as `cache`:
        under either name, the last position fed alone after a cached forward of the others gives the full forward's
        logits (a forward that ignored one name decoded every step without its past, or refused it)."""
        if self.kind not in (ABSTRACTIVE, WIKISUM) or context.model.config.model_type == "sentence_planner":
            pytest.skip("no cached decoding from teacher-forcing inputs (the sentence planner's plan: generate())")
        inputs = self.inputs(self.collate(context.processor, context.features[:1]), [(0, ())])
        inputs.pop("summary_sentences", None)  # BertSumAbs's training batches carry them for the planner only
        key = "decoder_input_ids" if self.kind == ABSTRACTIVE else "input_ids"
        full = context.model(**inputs).logits[:, -1]
        # WikiSum's attention mask covers the past and the new tokens: the first call's, the others only
        shorter = [key, "attention_mask"] if self.kind == WIKISUM else [key]
        start = context.model(**dict(inputs, **{field: inputs[field][:, :-1] for field in shorter}), use_cache=True)
        cache = start["cache"] if "cache" in start else start["past_key_values"]  # the output's field: 5.24, 5.23
        step = dict(inputs, **{key: inputs[key][:, -1:], name: cache})
        torch.testing.assert_close(context.model(**step, use_cache=True).logits[:, -1], full, **FLOAT32)

    # -- 5. gradients: checkpointing and LoRA ---------------------------------------------------------------------

    def gradients(self, model, context, checkpointing=False):
        """Gradients of the loss on the reference batch (training mode), and how often the checkpointed layers ran."""
        calls = []
        if checkpointing:
            base = model.get_base_model() if hasattr(model, "get_base_model") else model
            base.activation_checkpointing_enable()
            layers = [module for module in base.modules() if isinstance(module, GradientCheckpointingLayer)]
            assert layers and all(layer.gradient_checkpointing for layer in layers)
            # A checkpointed layer's forward runs again in the backward pass: count the calls of a module inside it.
            next(layers[-1].children()).register_forward_hook(lambda *args: calls.append(1))
        model.train()
        inputs = self.inputs(context.batch, context.rows)
        loss = model(**inputs, labels=self.labels(context.batch, context.rows)).loss
        loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}, len(calls)

    def test_gradient_checkpointing_gives_the_same_gradients(self, context):
        if not self.model_class.supports_gradient_checkpointing:
            pytest.skip(f"{self.model_class.__name__} does not support gradient checkpointing")
        plain, _ = self.gradients(copy.deepcopy(context.model), context)
        checkpointed, calls = self.gradients(copy.deepcopy(context.model), context, checkpointing=True)
        assert calls == self.checkpointed_runs  # forward, then the recomputation in the backward pass
        trainable = [parameter for parameter in context.model.parameters() if parameter.requires_grad]
        assert plain.keys() == checkpointed.keys() and len(plain) == len(trainable)
        for name, gradient in plain.items():
            torch.testing.assert_close(checkpointed[name], gradient, atol=1e-6, rtol=1e-5, msg=name)

    def lora_model(self, context):
        if context.model.lora_layers is None:
            pytest.skip(f"{self.model_class.__name__} is trained in full here (lora_layers is None)")
        peft_model = random_lora(copy.deepcopy(context.model), self.lora_target_modules)
        trainable = [name for name, parameter in peft_model.named_parameters() if parameter.requires_grad]
        assert any("lora_A" in name for name in trainable) and any("lora_B" in name for name in trainable)
        # LoRA and the new modules train, nothing else
        new = [f".{module}." for module in context.model.new_modules]
        assert all(any(module in f".{name}" for name in trainable) for module in new)
        assert all("lora_" in name or ("modules_to_save" in name and any(m in f".{name}" for m in new))
                   for name in trainable), trainable
        return peft_model

    def test_lora_forward_equals_the_merged_forward(self, context):
        peft_model = self.lora_model(context).eval()
        with_lora = self.outputs(peft_model, context.batch, context.rows)
        assert max((a - b).abs().max() for a, b in zip(with_lora, context.expected)) > 1e-3  # LoRA matters
        merged = peft_model.merge_and_unload()
        assert type(merged) is self.model_class
        self.assert_rows_close(self.outputs(merged, context.batch, context.rows), with_lora, **FLOAT32)

    def test_lora_gradients_with_and_without_checkpointing(self, context):
        if not self.model_class.supports_gradient_checkpointing:
            pytest.skip(f"{self.model_class.__name__} does not support gradient checkpointing")
        plain, _ = self.gradients(self.lora_model(context), context)
        checkpointed, calls = self.gradients(self.lora_model(context), context, checkpointing=True)
        assert calls == self.checkpointed_runs
        assert plain.keys() == checkpointed.keys() and any("lora_A" in name for name in plain)
        for name, gradient in plain.items():
            torch.testing.assert_close(checkpointed[name], gradient, atol=1e-6, rtol=1e-5, msg=name)

    # -- 6. bf16 ----------------------------------------------------------------------------------------------------

    def test_bf16_forward_is_finite_and_close_to_fp32(self, context):
        model = copy.deepcopy(context.model).to(torch.bfloat16)
        outputs = self.outputs(model, context.batch, context.rows)
        for row, (value, expected) in enumerate(zip(outputs, context.expected)):
            assert value.dtype == torch.bfloat16 and torch.isfinite(value).all(), row
            torch.testing.assert_close(value.float(), expected, atol=self.bf16_atol, rtol=0.0)

    def test_bf16_loss_is_float32_and_close_to_fp32(self, context):
        inputs, labels = self.inputs(context.batch, context.rows), self.labels(context.batch, context.rows)
        model = copy.deepcopy(context.model).to(torch.bfloat16)
        with torch.no_grad():
            expected = context.model(**inputs, labels=labels).loss
            loss = model(**inputs, labels=labels).loss
        assert torch.isfinite(loss)
        torch.testing.assert_close(loss.float(), expected, atol=self.bf16_atol, rtol=0.0)
        # as transformers' losses: a bf16 loss would keep about three significant digits
        assert loss.dtype == torch.float32

    # -- 7. the standard loading calls and the pipeline ---------------------------------------------------------------

    def test_auto_loading_and_pipeline_follow_the_model(self, context):
        folder = context.folder
        assert type(AutoConfig.from_pretrained(folder)) is self.model_class.config_class
        loaded = self.load(context, dtype=torch.float32, attn_implementation="eager")
        assert type(loaded) is self.model_class and loaded.config._attn_implementation == "eager"
        assert {parameter.dtype for parameter in loaded.parameters()} == {torch.float32}
        self.assert_rows_close(self.outputs(loaded, context.batch, context.rows), context.expected, **FLOAT32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summarizer = pipeline(self.task, model=str(folder))
        assert type(summarizer) is ARCHITECTURES[self.model_class.config_class.model_type].pipeline_class
        assert type(summarizer.model) is self.model_class
        inputs = self.pipeline_model_inputs(context.processor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(self, f"check_{self.task.replace('-', '_')}_pipeline")(summarizer, context.model, inputs)

    def check_extractive_summarization_pipeline(self, summarizer, model, inputs):
        sentences = inputs.pop("sentences")
        inputs.pop("default_num_sentences", None)
        with torch.no_grad():
            probabilities = torch.sigmoid(model(**inputs).logits[0, : len(sentences)])
        result = summarizer(self.pipeline_input, num_sentences=2, trigram_blocking=False)
        expected = sorted(probabilities.topk(2).indices.tolist())
        assert result["sentences"] == expected
        assert result["scores"] == pytest.approx(probabilities[expected].tolist(), abs=1e-6)
        assert result["summary"] == "\n".join(sentences[index] for index in expected)

    def check_stepwise_summarization_pipeline(self, summarizer, model, inputs):
        """Beam 1: each step takes the most probable allowed choice of the model's step logits (END from the
        second step on: min_sentences is 1) and reports the step's whole distribution."""
        sentences = inputs.pop("sentences")
        result = summarizer(self.pipeline_input, beam_size=1, num_sentences=2, return_steps=True)
        chosen = []
        for step in result["steps"]:
            with torch.no_grad():
                summary = torch.tensor([chosen], dtype=torch.long).view(1, -1)
                logits = model(**inputs, summary_indices=summary).logits[0]
            distribution = torch.softmax(logits, -1)
            allowed = logits.clone()
            allowed[chosen] = -torch.inf
            if not chosen:
                allowed[-1] = -torch.inf
            choice = int(allowed.argmax())
            assert step["sentence"] == (None if choice == len(sentences) else choice)
            assert step["distribution"] == pytest.approx(distribution.tolist(), abs=1e-6)
            assert step["probability"] == pytest.approx(float(distribution[choice]), abs=1e-6)
            if step["sentence"] is None:
                break
            chosen.append(choice)
        assert len(chosen) >= 1 and result["selection_order"] == chosen

    def check_abstractive_summarization_pipeline(self, summarizer, model, inputs):
        """The pipeline's summary is `generate()` with its settings and the word trigram blocking, decoded by the
        processor (one sentence per line)."""
        from sumformers.generation.word_ngram_blocking import NoRepeatWordNGramLogitsProcessor, word_start_mask

        inputs.pop("sentences")
        decode_inputs = {name: inputs.pop(name) for name in summarizer.model_processor.decode_inputs}
        settings = dict(num_beams=2, min_length=4, max_length=12)
        result = summarizer(self.pipeline_input, **settings)
        config = model.config
        ignored = (config.decoder_start_token_id, config.pad_token_id)
        blocking = NoRepeatWordNGramLogitsProcessor(3, word_start_mask(summarizer.tokenizer), ignored_token_ids=ignored)
        generated = model.generate(**inputs, logits_processor=[blocking], **settings)[0]
        assert result["summary"] == summarizer.model_processor.decode(generated.tolist(), **decode_inputs)
        assert 4 <= len(generated) <= 12

    def check_wikisum_pipeline(self, summarizer, model, inputs):
        ids = inputs["input_ids"]
        settings = dict(num_beams=1, do_sample=False, max_new_tokens=5, min_new_tokens=5)
        result = summarizer(self.pipeline_input, **settings)
        generated = model.generate(ids, attention_mask=torch.ones_like(ids), **settings)[0, ids.shape[1] :]
        assert result["input_tokens"] == ids.shape[1]
        assert result["summary"] == summarizer.model_processor.decode(generated.tolist())
        with torch.no_grad():
            scores = model(ids).logits[0, -1]
        scores[model.generation_config.eos_token_id] = -torch.inf  # min_new_tokens forbids ending at once
        assert int(generated[0]) == int(scores.argmax())

    # -- 8. the contract --------------------------------------------------------------------------------------------

    def test_contract_is_consistent(self, context, minilm_tokenizer):
        model, cls = context.model, self.model_class
        architecture = ARCHITECTURES[cls.config_class.model_type]
        assert architecture.model_class is cls and architecture.config_class is cls.config_class
        assert cls.is_stepwise == (KIND_OF_TASK.get(architecture.task, architecture.task) == STEPWISE)
        # The adapter contract as the training scripts and the hub code read it: from the model, where a class whose
        # contract depends on its config (WikiSum's `decoder_init`) computes it.
        pretrained, new, lora_layers = model.pretrained_modules, model.new_modules, model.lora_layers
        module_names = {part for name, _ in model.named_modules() for part in name.split(".")}
        assert set(new) <= module_names
        children = dict(model.named_children())
        assert set(pretrained) <= set(children)
        # An adapter checkpoint rebuilds the pretrained modules and saves the new ones: every top-level module with
        # weights must be one or the other, unless the model is trained in full (no LoRA layers: WikiSum from scratch).
        with_weights = {name for name, child in children.items() if any(True for _ in child.parameters())}
        if lora_layers is not None:
            assert with_weights <= set(pretrained) | set(new)
            paths = (lora_layers,) if isinstance(lora_layers, str) else lora_layers
            assert all(isinstance(model.get_submodule(path), nn.ModuleList) for path in paths)
        else:
            assert not pretrained and not new
        processor = cls.processor_class(minilm_tokenizer, model.config)
        assert processor.config is model.config and processor.tokenizer is minilm_tokenizer
        several = {"documents": ["One sentence here. And another one.", "A second document."]}
        try:
            processor.check_input(several)
            reads_several = True
        except (TypeError, ValueError):
            reads_several = False
        assert reads_several == cls.reads_multiple_documents


def backends_of(model, transformers_encoders: bool = False) -> set[str]:
    """The attention back ends the model's modules would run: every module's `config._attn_implementation`, those
    inside the transformers models it holds (a pretrained encoder) apart."""
    inside = {
        id(inner)
        for module in model.modules()
        if isinstance(module, PreTrainedModel) and not isinstance(module, SummarizerMixin)
        for inner in module.modules()
    }
    return {
        module.config._attn_implementation
        for module in model.modules()
        if hasattr(module, "config") and (id(module) in inside) == transformers_encoders
    }


def settings_of(config) -> dict:
    """A config's settings as config.json holds them (JSON keys), without where it was loaded from."""
    settings = json.loads(config.to_json_string(use_diff=False))
    settings.pop("_name_or_path", None)
    return settings


def token_count(feature) -> int:
    """Tokens of one example's features (a dict of lists with `input_ids`, or a list of token ids)."""
    return len(feature["input_ids"] if isinstance(feature, dict) else feature)


__all__ = [
    "ARTICLE",
    "DOCUMENTS",
    "SENTENCES",
    "ModelTesterMixin",
    "document_batch",
    "random_lora",
    "step_inputs",
]
