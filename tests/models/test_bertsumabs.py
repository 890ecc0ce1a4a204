"""BertSumAbs and the sentence planner: the shared model checks, the processor's summary layout, the loss, the
BERT2BERT start, and the planner's equations (sentence generator causal over sentences, the plan entering only the
cross-attention sublayer, no guidance gradient into the encoder, generation's plan equal to teacher forcing)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.nn import functional as F
from transformers import LogitsProcessor

from conftest import SENTENCES, tiny_bert_config, tiny_bertsumabs_config
from sumformers import BertSumAbsForConditionalGeneration, SentencePlannerForConditionalGeneration
from sumformers.modeling.modeling_bertsumabs import decoder_inputs_from_labels
from sumformers.training import ModelArguments, apply_lora
from test_generation_common import GenerationTesterMixin
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")

SUMMARIES = (
    "the cat sat on the mat.\nit was very happy there.",
    "a short one.",
    "first point here.\nsecond point here.\nthird point, also here.",
)
EXAMPLES = tuple(zip((SENTENCES, SENTENCES[1:3], SENTENCES[:4]), SUMMARIES))


class AbstractiveTester(ModelTesterMixin, GenerationTesterMixin):
    examples = EXAMPLES
    # word logits over a 30,522-token vocabulary: the largest |bf16 - fp32| measured on the tiny models is 0.026
    bf16_atol = 0.05

    def encode(self, processor, example):
        document, summary = example
        return processor.training_features(document, summary, max_target_length=40)


class TestBertSumAbs(AbstractiveTester):
    model_class = BertSumAbsForConditionalGeneration

    def get_config(self):
        return tiny_bertsumabs_config()


class TestSentencePlanner(AbstractiveTester):
    model_class = SentencePlannerForConditionalGeneration
    # the sentence generator (the last checkpointed layers) runs twice: for the plan, and the guidance loss's
    # detached pass; each run is recomputed in the backward pass
    checkpointed_runs = 4

    def get_config(self):
        return tiny_bertsumabs_config(planner=True)

    def teacher_forcing_inputs(self, model, sequences):
        return {"summary_sentences": summary_sentences_of(model, sequences)}


def summary_sentences_of(model, sequences):
    """The planner's teacher-forcing input for generated `sequences`: each completed sentence of each row alone as
    `[CLS] tokens [SEP]` ([rows, sentences + 1, width]), as the processor's collate lays out a summary's."""
    sentences = [model.completed_sentences(row) for row in sequences.tolist()]
    width = max((len(s) for row in sentences for s in row), default=0) + 2
    summary = torch.zeros(len(sentences), max(len(row) for row in sentences) + 1, width, dtype=torch.long)
    for row, row_sentences in enumerate(sentences):
        for index, sentence in enumerate(row_sentences):
            summary[row, index, : len(sentence) + 2] = torch.tensor([101, *sentence, 102])
    return summary


def tiny(planner=True, seed=0, **overrides):
    torch.manual_seed(seed)
    model_class = SentencePlannerForConditionalGeneration if planner else BertSumAbsForConditionalGeneration
    model = model_class(tiny_bertsumabs_config(planner=planner, **overrides)).eval()
    with torch.no_grad():  # larger weights give peaked distributions (greedy choices far from ties)
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def batch_of(model, minilm_tokenizer, examples=EXAMPLES):
    processor = model.processor_class(minilm_tokenizer, model.config)
    return processor, processor.collate([processor.training_features(d, s, max_target_length=40) for d, s in examples])


# ----------------------------------------------------------------------------------------------------------------
# Processor
# ----------------------------------------------------------------------------------------------------------------


def test_summary_layout_and_decoding(minilm_tokenizer):
    config = tiny_bertsumabs_config(planner=True)
    processor = SentencePlannerForConditionalGeneration.processor_class(minilm_tokenizer, config)
    features = processor.target_features("the cat sat.\nit left.")
    cat, left = (minilm_tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("the cat sat.", "it left."))
    # PreSumm's ids: [unused1] ends the summary, [unused2] separates sentences
    assert (config.eos_token_id, config.sentence_separator_token_id, config.decoder_start_token_id) == (2, 3, 1)
    assert features["labels"] == [*cat, 3, *left, 2]
    assert features["summary_sentences"] == [[101, *cat, 102], [101, *left, 102]]
    assert processor.decode([1, *cat, 3, *left, 2, 0, 0]) == "the cat sat.\nit left."
    # cut at the target limit: no end token, the cut sentence's tokens as far as they go
    short = processor.target_features("the cat sat.\nit left.", max_target_length=len(cat) + 3)
    assert short["labels"] == [*cat, 3, left[0]]
    assert short["summary_sentences"][1] == [101, left[0], 102]


def test_loss_is_label_smoothed_cross_entropy_of_the_logits(minilm_tokenizer):
    model = tiny(planner=False)
    _, batch = batch_of(model, minilm_tokenizer)
    with torch.no_grad():
        output = model(**batch)
    labelled = batch["labels"] != -100
    expected = F.cross_entropy(output.logits[labelled], batch["labels"][labelled], label_smoothing=0.1)
    torch.testing.assert_close(output.loss, expected)
    # training mode projects only the labelled positions: same loss, no logits
    model.train()
    with torch.no_grad():
        training_output = model(**batch)
    assert training_output.logits is None
    torch.testing.assert_close(training_output.loss, expected)


def test_decoder_inputs_are_the_labels_shifted_right():
    config = tiny_bertsumabs_config()
    labels = torch.tensor([[5, 6, 2, -100], [7, 3, 8, 2]])
    assert decoder_inputs_from_labels(labels, config).tolist() == [[1, 5, 6, 2], [1, 7, 3, 8]]


# ----------------------------------------------------------------------------------------------------------------
# BERT2BERT start and LoRA
# ----------------------------------------------------------------------------------------------------------------


def test_decoder_started_from_the_encoder_copies_its_layers(tmp_path, minilm_tokenizer):
    torch.manual_seed(0)
    from transformers import BertModel

    encoder = BertModel(tiny_bert_config(), add_pooling_layer=False)
    encoder.save_pretrained(tmp_path / "encoder")
    minilm_tokenizer.save_pretrained(tmp_path / "encoder")
    model = BertSumAbsForConditionalGeneration.from_encoder(
        str(tmp_path / "encoder"), decoder_init="encoder", decoder_layers=2, dropout=0.0, max_target_positions=64
    )
    for layer, encoder_layer in zip(model.decoder.layers, encoder.encoder.layer):
        torch.testing.assert_close(layer.attention.query.weight, encoder_layer.attention.self.query.weight)
        torch.testing.assert_close(layer.attention.output.dense.weight, encoder_layer.attention.output.dense.weight)
        torch.testing.assert_close(layer.feed_forward.intermediate.weight, encoder_layer.intermediate.dense.weight)
        torch.testing.assert_close(layer.feed_forward.output.LayerNorm.bias, encoder_layer.output.LayerNorm.bias)
    embeddings = encoder.embeddings
    expected = embeddings.position_embeddings.weight[:64] + embeddings.token_type_embeddings.weight[0]
    torch.testing.assert_close(model.decoder.position_embeddings.weight, expected)
    # the decoder reads the encoder's word embeddings (tied), and its output layer too
    assert model.get_input_embeddings() is model.encoder.embeddings.word_embeddings
    with pytest.raises(ValueError, match="decoder_init='encoder' reuses encoder layers"):
        tiny_bertsumabs_config(decoder_init="encoder", decoder_layers=3)


def test_a_random_decoder_trains_in_full_under_lora():
    model = tiny(planner=True)
    arguments = ModelArguments(lora_target_modules="query,value", lora_r=2, lora_alpha=4, lora_dropout=0.0)
    peft_model = apply_lora(model, arguments, full_modules=("decoder",))
    trainable = [name for name, parameter in peft_model.named_parameters() if parameter.requires_grad]
    assert not any("decoder" in name and "lora_" in name for name in trainable)  # no LoRA on a decoder trained in full
    assert any(".encoder.encoder.layer." in name and "lora_A" in name for name in trainable)
    for module in ("decoder", "generator", "sentence_generator", "plan_projection"):
        assert any(f"{module}.modules_to_save" in name for name in trainable), module
    assert peft_model.peft_config["default"].modules_to_save == [
        "decoder", "generator", "sentence_generator", "plan_projection"
    ]


# ----------------------------------------------------------------------------------------------------------------
# The sentence planner's equations
# ----------------------------------------------------------------------------------------------------------------


def test_sentence_generator_is_causal_over_sentences():
    model = tiny()
    torch.manual_seed(1)
    vectors = torch.randn(1, 4, 32)
    mask = torch.ones(1, 4, dtype=torch.bool)
    document, document_mask = torch.randn(1, 7, 32), torch.ones(1, 7, dtype=torch.long)
    with torch.no_grad():
        reference = model.predicted_vectors(vectors, mask, document, document_mask)
        for changed in range(4):
            other = vectors.clone()
            other[0, changed] += 1.0
            predicted = model.predicted_vectors(other, mask, document, document_mask)
            moved = (predicted - reference).abs().amax(-1)[0] > 1e-6
            # r_k reads the sentences before k: changing sentence j moves r_{j+1} on, nothing before
            assert moved.tolist() == [index > changed for index in range(4)], changed


def test_plan_enters_every_layer_inside_the_cross_attention_sublayer(minilm_tokenizer):
    model = tiny()
    _, batch = batch_of(model, minilm_tokenizer)
    decoder_inputs = decoder_inputs_from_labels(batch["labels"], model.config)
    inputs = {key: batch[key] for key in ("input_ids", "token_type_ids", "attention_mask")}
    captured = {}

    def capture(name):
        def hook(module, args, output):
            captured[name] = (args, output)

        return hook

    for index, layer in enumerate(model.decoder.layers):
        layer.attention.register_forward_hook(capture(f"self{index}"))
        layer.cross_attention.output.dense.register_forward_hook(capture(f"dense{index}"))
        layer.cross_attention.register_forward_hook(capture(f"cross{index}"))
    plans = [torch.randn(*decoder_inputs.shape, 32) for _ in range(2)]
    runs = []
    with torch.no_grad():
        for plan in plans:
            model(**inputs, decoder_input_ids=decoder_inputs, plan_vectors=plan)
            runs.append(dict(captured))
    # layer 0's self-attention does not see the plan; every cross-attention output does
    torch.testing.assert_close(runs[0]["self0"][1], runs[1]["self0"][1])
    for run, plan in zip(runs, plans):
        projected = model.plan_projection(plan)
        for index, layer in enumerate(model.decoder.layers):
            states = run[f"cross{index}"][0][0]
            attended = run[f"dense{index}"][1]
            # equation 5: LN(s + CrossAtt(s, enc) + r'_sent)
            expected = layer.cross_attention.output.LayerNorm(states + attended + projected)
            torch.testing.assert_close(run[f"cross{index}"][1], expected)
    assert (runs[0]["cross1"][1] - runs[1]["cross1"][1]).abs().max() > 1e-3


def test_guidance_loss_sends_no_gradient_into_the_encoder(minilm_tokenizer):
    model = tiny()
    model.train()
    _, batch = batch_of(model, minilm_tokenizer)
    encoder_states = model.encode(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    decoder_inputs = decoder_inputs_from_labels(batch["labels"], model.config)
    _, guidance = model.sentence_plan(
        decoder_inputs, encoder_states, batch["attention_mask"], 0,
        summary_sentences=batch["summary_sentences"], labels=batch["labels"],
    )
    guidance.backward()
    assert all(parameter.grad is None for parameter in model.encoder.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.sentence_generator.parameters())
    # the guidance loss is the MSE to the encoder's vectors of the gold sentences, times lambda (1 here)
    with torch.no_grad():
        vectors = model.sentence_vectors(batch["summary_sentences"])
        mask = (batch["summary_sentences"] != 0).any(-1)
        predicted = model.predicted_vectors(vectors, mask, encoder_states, batch["attention_mask"])
    torch.testing.assert_close(guidance, F.mse_loss(predicted[mask], vectors[mask]))


def word_loss_by_hand(model, batch, plan_from_encoder=True):
    """The word loss built from the planner's modules step by step (the autograd reference): each summary sentence
    encoded alone, its vector the state at its end token; the sentence generator over the shifted vectors and the
    document; each decoder position reading the plan of its sentence. `plan_from_encoder=False` detaches the
    sentence generator's inputs (the plan then carries no gradient to the encoder, as before issue #40)."""
    encoder_states = model.encode(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    sentences = batch["summary_sentences"]
    vectors = torch.zeros(*sentences.shape[:2], model.config.hidden_size)
    for row in range(sentences.shape[0]):
        for index in range(sentences.shape[1]):
            tokens = sentences[row, index][sentences[row, index] != 0]
            if len(tokens):
                states = model.encoder(input_ids=tokens[None]).last_hidden_state
                vectors = vectors.index_put((torch.tensor(row), torch.tensor(index)), states[0, -1])
    real = (sentences != 0).any(-1)
    shifted = torch.cat([torch.zeros_like(vectors[:, :1]), vectors[:, :-1]], 1)
    shifted_mask = torch.cat([torch.ones_like(real[:, :1]), real[:, :-1]], 1)
    document = encoder_states if plan_from_encoder else encoder_states.detach()
    if not plan_from_encoder:
        shifted = shifted.detach()
    predicted = model.sentence_generator(shifted, shifted_mask, document, batch["attention_mask"])
    decoder_inputs = decoder_inputs_from_labels(batch["labels"], model.config)
    sentence_index = (decoder_inputs == model.config.sentence_separator_token_id).cumsum(1)
    plan = torch.stack([predicted[row, sentence_index[row].clamp(max=predicted.shape[1] - 1)]
                        for row in range(len(predicted))])
    words = model.get_input_embeddings().weight
    states = model.decoder(F.embedding(decoder_inputs, words), None, encoder_states, batch["attention_mask"],
                           None, model.plan_projection(plan))
    return model.word_loss(model.generator(states, words).flatten(0, 1), batch["labels"].flatten())


def test_word_loss_trains_the_encoder_through_the_sentence_plan(minilm_tokenizer):
    # guidance off: the loss is the word loss alone
    model = tiny(guidance_weight=0.0)
    _, batch = batch_of(model, minilm_tokenizer)
    parameters = list(model.encoder.parameters())

    def encoder_gradient(loss):
        return torch.cat([g.flatten() for g in torch.autograd.grad(loss, parameters, allow_unused=True,
                                                                   materialize_grads=True)])

    gradient = encoder_gradient(model(**batch).loss)
    reference = encoder_gradient(word_loss_by_hand(model, batch))
    without_plan_path = encoder_gradient(word_loss_by_hand(model, batch, plan_from_encoder=False))
    torch.testing.assert_close(gradient, reference, atol=1e-6, rtol=1e-4)
    # the part that flows through r_sent (sentence vectors and the document states the sentence generator reads)
    through_plan = (reference - without_plan_path).norm() / reference.norm()
    assert through_plan > 0.05, through_plan


class ForceSeparators(LogitsProcessor):
    """Makes greedy decoding close a sentence at the given steps (so generation meets its plan updates)."""

    def __init__(self, separator: int, at_lengths: set[int]):
        self.separator, self.at_lengths = separator, at_lengths

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] in self.at_lengths:
            scores = torch.full_like(scores, -torch.inf)
            scores[:, self.separator] = 0.0
        return scores


@pytest.mark.parametrize("planner", [False, True])
def test_generation_equals_teacher_forcing_and_the_cache_changes_nothing(planner, minilm_tokenizer):
    model = tiny(planner=planner)
    processor, _ = batch_of(model, minilm_tokenizer)
    documents = [processor(example[0]) for example in EXAMPLES[:2]]
    batch = processor.collate([{key: doc[key][0].tolist() for key in ("input_ids", "token_type_ids", "attention_mask")}
                               for doc in documents])
    separator = model.config.sentence_separator_token_id
    settings = dict(num_beams=1, do_sample=False, min_length=12, max_length=12, return_dict_in_generate=True,
                    output_logits=True, logits_processor=[ForceSeparators(separator, {3, 7})])
    with torch.no_grad():
        cached = model.generate(**batch, **settings)
        uncached = model.generate(**batch, use_cache=False, **settings)
    sequences = cached.sequences
    assert (sequences[:, 3] == separator).all() and (sequences[:, 7] == separator).all()
    assert torch.equal(sequences, uncached.sequences)
    step_logits = torch.stack(cached.logits, 1)
    torch.testing.assert_close(torch.stack(uncached.logits, 1), step_logits, atol=1e-5, rtol=1e-5)
    # teacher forcing on the generated summary gives the logits of every generation step
    labels = sequences[:, 1:]
    inputs = dict(batch, decoder_input_ids=sequences[:, :-1])
    if planner:
        inputs["summary_sentences"] = summary_sentences_of(model, sequences)
    with torch.no_grad():
        forced = model(**inputs).logits
    assert forced.shape[1] == labels.shape[1]
    torch.testing.assert_close(forced, step_logits, atol=1e-4, rtol=1e-4)


def test_threads_generating_with_one_planner_get_the_summaries_each_gets_alone(minilm_tokenizer):
    """The plans `generate()` memoizes belong to its call: threads generating with one planner at once get the
    summaries each call gets alone (the memo was a model attribute, replaced by whichever call started last)."""
    model = tiny(planner=True)
    processor, _ = batch_of(model, minilm_tokenizer)
    keys = ("input_ids", "token_type_ids", "attention_mask")
    documents = [{key: processor(document)[key] for key in keys} for document, _ in EXAMPLES] * 4
    separator = model.config.sentence_separator_token_id
    settings = dict(num_beams=2, min_length=12, max_length=12, logits_processor=[ForceSeparators(separator, {3, 7})])

    def summary(document):
        return model.generate(**document, **settings, return_dict_in_generate=True, output_scores=True)

    alone = [summary(document) for document in documents]
    with ThreadPoolExecutor(4) as pool:
        in_threads = list(pool.map(summary, documents))
    for got, expected in zip(in_threads, alone):
        assert got.sequences.tolist() == expected.sequences.tolist()
        torch.testing.assert_close(got.sequences_scores, expected.sequences_scores)
