"""The CopyTransformer: the shared model checks, the pointer-generator mixture against hand computations, copying an
unknown source word, the loss, generation (cache, batches, log-probabilities as logits, coverage penalty), the
processor's extended vocabulary and the configuration."""

import math
import warnings

import pytest
import torch
from torch.nn import functional as F
from transformers import pipeline
from transformers.cache_utils import EncoderDecoderCache

from conftest import ARTICLE, SENTENCES, tiny_copy_transformer_config
from sumformers import CopyTransformerConfig, CopyTransformerForConditionalGeneration
from sumformers.generation.coverage_penalty import CoveragePenaltyLogitsProcessor, summary_coverage_penalty
from sumformers.modeling.modeling_copy_transformer import (
    CopyTransformerCache,
    mixture_log_probs,
    sinusoidal_positions,
)
from test_generation_common import GenerationTesterMixin
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 30522
# Each document holds one word the vocabulary lacks (a [UNK] piece), so that every batch of them has the same
# extended vocabulary (vocab + 1) and the shared checks run the copy path; the first summary copies its word.
EXAMPLES = (
    ([*SENTENCES, "The zorblax✓ fund pays for it."], "the council approved the budget.\nthe zorblax✓ fund pays."),
    ([*SENTENCES[1:3], "Ask for 🦜 at the desk."], "a short one."),
    ([*SENTENCES[:4], "The ☃ parade is on Friday."], "first point here.\nsecond point, also here."),
)


class TestCopyTransformer(ModelTesterMixin, GenerationTesterMixin):
    model_class = CopyTransformerForConditionalGeneration
    examples = EXAMPLES
    pipeline_input = ARTICLE + " The zorblax✓ fund pays for it."
    # log-probabilities near -10 (a 30,522-token vocabulary) are rounded to bf16 steps of 0.0625: the largest
    # |bf16 - fp32| measured on the tiny model over five seeds is 0.043 (log-probabilities) and 0.0002 (loss)
    bf16_atol = 0.1

    def get_config(self):
        return tiny_copy_transformer_config()

    def encode(self, processor, example):
        document, summary = example
        return processor.training_features(document, summary, max_target_length=40)


class TestCopyTransformerLearnedPositionsUntied(TestCopyTransformer):
    """The other position embedding and an output layer of its own, through the same checks (saving, export)."""

    def get_config(self):
        return tiny_copy_transformer_config(position_embedding_type="learned", tie_word_embeddings=False)


class TestPlainTransformer(TestCopyTransformer):
    """The paper's Transformer baseline (`copy_mechanism=False`) through the same checks."""

    def get_config(self):
        return tiny_copy_transformer_config(copy_mechanism=False)


class TestCopyTransformerFactorizedWordTable(TestCopyTransformer):
    """A factorized word table (`word_embedding_size`, the tied output layer through its projection) through the same
    checks."""

    def get_config(self):
        return tiny_copy_transformer_config(word_embedding_size=16)


def tiny(seed=0, noise=0.05, **overrides):
    torch.manual_seed(seed)
    model = CopyTransformerForConditionalGeneration(tiny_copy_transformer_config(**overrides)).eval()
    with torch.no_grad():  # larger weights give peaked distributions (greedy choices far from ties)
        for parameter in model.parameters():
            parameter.add_(noise * torch.randn_like(parameter))
    return model


def processor_of(model, minilm_tokenizer):
    return model.processor_class(minilm_tokenizer, model.config)


def source_batch(processor, documents):
    """The documents as `__call__` encodes them, padded into one batch, and their unknown words."""
    encoded = [processor(document) for document in documents]
    features = [{key: item[key][0].tolist() for key in ("input_ids", "attention_mask", "source_extended_ids")}
                for item in encoded]
    return processor.collate(features), [item["source_oov_words"] for item in encoded]


def lm_head_outputs(model):
    """Capture the output layer's logits (P_vocab before the softmax) of the next forward."""
    captured = []
    model.lm_head.register_forward_hook(lambda module, args, output: captured.append(output))
    return captured


# ----------------------------------------------------------------------------------------------------------------
# The mixture
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("grad_mode", [torch.enable_grad, torch.no_grad], ids=["training", "decoding"])
def test_mixture_matches_a_hand_computation_and_sums_to_one(grad_mode):
    """Both ways of summing a word's copy mass: the same-word matrix (training) and the scatter (no gradient)."""
    torch.manual_seed(0)
    vocab, source, steps = 7, 5, 3
    vocab_logits = torch.randn(2, steps, vocab)
    attention = torch.softmax(torch.randn(2, steps, source), -1)
    switch = torch.randn(2, steps)
    # row 0 repeats word 4 and holds two unknown words (extended ids 7 and 8); row 1 holds none
    ids = torch.tensor([[4, 7, 4, 8, 1], [2, 3, 5, 6, 0]])
    with grad_mode():
        log_probs = mixture_log_probs(vocab_logits, attention, switch, ids)
    assert log_probs.shape == (2, steps, 9)
    probabilities = log_probs.exp()
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(2, steps))
    for row in range(2):
        for step in range(steps):
            p_gen = 1 / (1 + math.exp(-switch[row, step].item()))
            softmax = torch.softmax(vocab_logits[row, step].double(), -1).tolist()
            for word in range(9):
                copied = sum(attention[row, step, i].item() for i in range(source) if ids[row, i] == word)
                generated = softmax[word] if word < vocab else 0.0
                expected = p_gen * copied + (1 - p_gen) * generated
                assert probabilities[row, step, word].item() == pytest.approx(expected, rel=1e-5, abs=1e-7)
    # an extended slot no source position holds has probability 0 (row 1 has no unknown word)
    assert torch.isneginf(log_probs[1, :, 7:]).all()


def test_mixture_gradients_equal_those_of_the_plain_formula_with_repeated_words():
    """Each word's copy mass is written once per source position holding it: the gradients must count it once, as
    the plain p_gen * scatter_add(attention) + (1 - p_gen) * softmax does."""
    torch.manual_seed(0)
    ids = torch.tensor([[4, 7, 4, 8, 4], [2, 2, 5, 6, 0]])
    inputs = [torch.randn(2, 3, 7), torch.softmax(torch.randn(2, 3, 5), -1), torch.randn(2, 3)]
    targets = torch.tensor([[4, 8, 2], [2, 6, 0]])

    def gradients(log_probabilities):
        leaves = [tensor.clone().requires_grad_() for tensor in inputs]
        log_probabilities(*leaves).sum().backward()
        return [leaf.grad for leaf in leaves]

    def plain(vocab_logits, attention, switch):
        p_gen = torch.sigmoid(switch)[..., None]
        vocabulary = torch.nn.functional.pad(torch.softmax(vocab_logits, -1), (0, 2))
        copied = torch.zeros(2, 3, 9).scatter_add(-1, ids[:, None, :].expand(2, 3, 5), attention)
        return (p_gen * copied + (1 - p_gen) * vocabulary).gather(-1, targets[..., None]).log()

    expected = gradients(plain)
    mixture = gradients(lambda *leaves: mixture_log_probs(*leaves, ids).gather(-1, targets[..., None]))
    for actual, reference in zip(mixture, expected):
        torch.testing.assert_close(actual, reference, atol=1e-5, rtol=1e-4)


def test_mixture_of_the_model_sums_to_one_over_the_extended_vocabulary(minilm_tokenizer):
    model = tiny()
    processor = processor_of(model, minilm_tokenizer)
    # two and zero unknown words: the batch's extended vocabulary has two slots
    documents = ["The zorblax✓ and the 🦜 met. They talked.", "Plain words only here."]
    batch, oov_words = source_batch(processor, documents)
    assert oov_words == [("zorblax✓", "🦜"), ()]
    torch.manual_seed(1)
    decoder_inputs = torch.randint(0, VOCAB + 2, (2, 6))
    with torch.no_grad():
        output = model(**batch, decoder_input_ids=decoder_inputs)
    assert output.logits.shape == (2, 6, VOCAB + 2)
    torch.testing.assert_close(output.logits.exp().sum(-1), torch.ones(2, 6))
    assert (output.logits[0, :, VOCAB:] > -torch.inf).all() and torch.isneginf(output.logits[1, :, VOCAB:]).all()
    # the logits are log-probabilities: log_softmax leaves them as they are (beam search applies it)
    torch.testing.assert_close(torch.log_softmax(output.logits, -1), output.logits)


def test_plain_transformer_is_the_softmax_of_the_output_layer_and_trains_unknown_words_as_unk(minilm_tokenizer):
    model = tiny(copy_mechanism=False)
    assert model.pointer is None
    processor = processor_of(model, minilm_tokenizer)
    batch, _ = source_batch(processor, ["The zorblax✓ bird sang. The bird sang again."])
    captured = lm_head_outputs(model)
    labels = torch.tensor([[2001, VOCAB, 2]])  # VOCAB: the copied unknown word's extended id
    with torch.no_grad():
        output = model(**batch, labels=labels)
    assert output.p_gen is None and output.copy_attentions is None
    torch.testing.assert_close(output.logits, torch.log_softmax(captured[0].float(), -1))
    # the extended id is trained as [UNK]: the loss is the label-smoothed NLL of (2001, [UNK], 2)
    as_unknown = torch.tensor([[2001, model.config.unk_token_id, 2]])
    smoothing = model.config.label_smoothing
    picked = output.logits[0].gather(-1, as_unknown[0, :, None]).squeeze(-1)
    expected = ((1 - smoothing) * -picked - smoothing * output.logits[0].mean(-1)).mean()
    torch.testing.assert_close(output.loss, expected)
    with pytest.raises(ValueError, match="no copy mechanism"):
        model.generate(batch["input_ids"], coverage_penalty=5.0)
    with pytest.raises(ValueError, match="needs copy_mechanism=True"):
        CopyTransformerConfig(copy_mechanism=False, coverage_penalty=5.0)


@pytest.mark.parametrize("copying", [True, False])
def test_p_gen_at_its_limits_gives_the_copy_or_the_vocabulary_distribution(copying, minilm_tokenizer):
    model = tiny()
    processor = processor_of(model, minilm_tokenizer)
    batch, _ = source_batch(processor, ["The zorblax✓ bird sang. The bird sang again."])
    with torch.no_grad():  # p_gen = sigmoid(+-100): exactly 1 or 0 in float32
        model.pointer.switch.weight.zero_()
        model.pointer.switch.bias.fill_(100.0 if copying else -100.0)
    vocab_logits = lm_head_outputs(model)
    decoder_inputs = torch.tensor([[1, 1996, VOCAB, 4743]])
    with torch.no_grad():
        output = model(**batch, decoder_input_ids=decoder_inputs)
    assert torch.all(output.p_gen == (1.0 if copying else 0.0))
    probabilities = output.logits.exp()
    if copying:  # P_copy: the copy attention scattered onto the source's (extended) ids
        expected = torch.zeros_like(probabilities)
        for position, word in enumerate(batch["source_extended_ids"][0].tolist()):
            expected[0, :, word] += output.copy_attentions[0, :, position]
    else:  # P_vocab, nothing on the extended slot
        expected = F.pad(torch.softmax(vocab_logits[0], -1), (0, 1))
    torch.testing.assert_close(probabilities, expected, atol=1e-7, rtol=1e-5)


def test_copy_attention_is_a_module_of_its_own():
    model = tiny()
    pointer = {parameter.data_ptr() for parameter in model.pointer.parameters()}
    decoder = {parameter.data_ptr() for parameter in model.decoder.parameters()}
    assert pointer and not pointer & decoder
    cross = model.decoder.layers[-1].cross_attention
    assert model.pointer.copy_attention.key.weight.shape == cross.k_proj.weight.shape
    assert not torch.equal(model.pointer.copy_attention.key.weight, cross.k_proj.weight)
    # moving the copy attention's weights moves the copy attention and nothing the decoder computes
    batch = {"input_ids": torch.tensor([[1996, 100, 4743, 6369]]), "decoder_input_ids": torch.tensor([[1, 1996, 4743]])}
    states = []
    model.lm_head.register_forward_hook(lambda module, args, output: states.append(args[0]))
    with torch.no_grad():
        before = model(**batch)
        model.pointer.copy_attention.query.weight.add_(0.5)
        after = model(**batch)
    torch.testing.assert_close(states[0], states[1], atol=0, rtol=0)
    assert (before.copy_attentions - after.copy_attentions).abs().max() > 1e-3


# ----------------------------------------------------------------------------------------------------------------
# The loss
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_equals_a_hand_computation_on_two_tokens(smoothing, minilm_tokenizer):
    model = tiny(label_smoothing=smoothing)
    processor = processor_of(model, minilm_tokenizer)
    batch, _ = source_batch(processor, ["The zorblax✓ bird sang."])
    source = batch["source_extended_ids"][0].tolist()
    sang = source[3]
    # two labelled tokens (the copied unknown word, then "sang"), a padded third
    labels = torch.tensor([[VOCAB, sang, -100]])
    vocab_logits = lm_head_outputs(model)
    with torch.no_grad():
        output = model(**batch, labels=labels)
    losses = []
    for step, target in enumerate([VOCAB, sang]):
        p_gen = output.p_gen[0, step].item()
        attention = output.copy_attentions[0, step].tolist()
        softmax = torch.softmax(vocab_logits[0][0, step].double(), -1)

        def probability(word):
            copied = sum(a for a, source_word in zip(attention, source) if source_word == word)
            return p_gen * copied + (1 - p_gen) * (softmax[word].item() if word < VOCAB else 0.0)

        nll = -math.log(probability(target))
        # smoothing: the mean of -log p(w) over the fixed vocabulary (only source words get copy mass)
        mixed = (1 - p_gen) * softmax
        for word in set(source):
            if word < VOCAB:
                mixed[word] = probability(word)
        losses.append((1 - smoothing) * nll + smoothing * -mixed.log().mean().item())
    assert output.loss.item() == pytest.approx(sum(losses) / 2, rel=1e-5)


def test_without_copying_the_loss_is_cross_entropy_with_label_smoothing(minilm_tokenizer):
    model = tiny()
    with torch.no_grad():
        model.pointer.switch.weight.zero_()
        model.pointer.switch.bias.fill_(-100.0)
    processor = processor_of(model, minilm_tokenizer)
    batch = processor.collate([processor.training_features(document, summary) for document, summary in EXAMPLES])
    vocab_logits = lm_head_outputs(model)
    with torch.no_grad():
        output = model(**batch)
    labels = batch["labels"].masked_fill(batch["labels"] >= VOCAB, 100)  # an uncopyable word is [UNK] to P_vocab
    expected = F.cross_entropy(vocab_logits[0].flatten(0, 1), labels.flatten(), label_smoothing=0.1)
    # the copied word's label is its extended id, which only the copy distribution reaches (p = 0 here)
    assert torch.isinf(output.loss)
    with torch.no_grad():
        output = model(**{**batch, "labels": labels})
    torch.testing.assert_close(output.loss, expected)


def test_bad_labels_and_sources_get_one_line_errors():
    model = tiny()
    inputs = dict(input_ids=torch.tensor([[1996, 100, 4743]]), source_extended_ids=torch.tensor([[1996, VOCAB, 4743]]))
    with pytest.raises(ValueError, match=r"labels must lie in the extended vocabulary \[0, 30523\)"):
        model(**inputs, labels=torch.tensor([[VOCAB + 1, 2]]))
    with pytest.raises(ValueError, match="must match the source"):
        model(input_ids=inputs["input_ids"], source_extended_ids=torch.tensor([[1996]]), labels=torch.tensor([[2]]))
    with pytest.raises(ValueError, match="give `decoder_input_ids` or `labels`"):
        model(**inputs)


# ----------------------------------------------------------------------------------------------------------------
# Copying an unknown word, saving, loading and the pipeline
# ----------------------------------------------------------------------------------------------------------------


def test_an_unknown_source_word_is_copied_and_written_back_after_overfitting(minilm_tokenizer, tmp_path):
    torch.manual_seed(0)
    model = CopyTransformerForConditionalGeneration(tiny_copy_transformer_config())
    processor = processor_of(model, minilm_tokenizer)
    document = "The zorblax✓ bird sang at dawn. Nobody had heard it before."
    features = processor.training_features(document, "zorblax✓ sang at dawn.")
    assert features["labels"][0] == VOCAB and features["source_extended_ids"][1] == VOCAB
    batch = processor.collate([features])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(40):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        output = model(**batch)
    # the unknown word gets its mass from copying: most of the first step's probability
    assert output.logits[0, 0].exp().argmax() == VOCAB and output.logits[0, 0, VOCAB].exp() > 0.5
    inputs = processor(document)
    oov_words = inputs.pop("source_oov_words")
    inputs.pop("sentences")
    generated = model.generate(**inputs, num_beams=1, min_length=1, max_length=10)[0]
    assert generated.tolist() == [1, *features["labels"]]
    assert processor.decode(generated, oov_words) == "zorblax✓ sang at dawn."

    # save and load: the same log-probabilities, and the pipeline writes the copied word back
    model.save_pretrained(tmp_path / "model")
    minilm_tokenizer.save_pretrained(tmp_path / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = CopyTransformerForConditionalGeneration.from_pretrained(tmp_path / "model").eval()
        summarizer = pipeline("abstractive-summarization", model=str(tmp_path / "model"))
    assert loaded.lm_head.weight is loaded.encoder.embed_tokens.weight
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, output.logits, atol=1e-6, rtol=1e-6)
    assert type(summarizer.model) is CopyTransformerForConditionalGeneration
    settings = dict(num_beams=2, min_length=1, max_length=10)
    assert summarizer(document, **settings)["summary"] == "zorblax✓ sang at dawn."
    # batched, each row decodes with its own unknown words
    results = summarizer([document, "Plain words only.", document], batch_size=2, **settings)
    assert results[0] == results[2] == {"summary": "zorblax✓ sang at dawn."}


# ----------------------------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------------------------

DOCUMENTS = ("The zorblax✓ bird sang at dawn. Nobody had heard it before.", "Plain words only. Two sentences.")


def test_cached_generation_equals_uncached_and_teacher_forcing(minilm_tokenizer):
    model = tiny(noise=0.3)
    batch, _ = source_batch(processor_of(model, minilm_tokenizer), DOCUMENTS)
    # no repeated token: the random model's summaries vary (and copy the unknown word, an extended id)
    settings = dict(min_length=8, max_length=8, no_repeat_ngram_size=1)
    settings.update(return_dict_in_generate=True, output_logits=True)
    for num_beams in (1, 2):
        with torch.no_grad():
            cached = model.generate(**batch, num_beams=num_beams, **settings)
            uncached = model.generate(**batch, num_beams=num_beams, use_cache=False, **settings)
        assert torch.equal(cached.sequences, uncached.sequences), num_beams
    # greedy: each step's logits are teacher forcing's on the generated summary
    with torch.no_grad():
        greedy = model.generate(**batch, num_beams=1, **settings)
        forced = model(**batch, decoder_input_ids=greedy.sequences[:, :-1]).logits
    torch.testing.assert_close(forced, torch.stack(greedy.logits, 1), atol=1e-5, rtol=1e-5)
    assert greedy.sequences[0, 3] == VOCAB


@pytest.mark.parametrize("num_beams", [1, 2])
def test_batched_generation_equals_generation_item_by_item(num_beams, minilm_tokenizer):
    model = tiny(noise=0.3)
    processor = processor_of(model, minilm_tokenizer)
    batch, _ = source_batch(processor, DOCUMENTS)
    settings = dict(num_beams=num_beams, min_length=3, max_length=9, no_repeat_ngram_size=1)
    with torch.no_grad():
        together = model.generate(**batch, **settings)
        for row, document in enumerate(DOCUMENTS):
            alone, _ = source_batch(processor, [document])
            single = model.generate(**alone, **settings)[0]
            assert together[row, : len(single)].tolist() == single.tolist(), row
            assert (together[row, len(single) :] == model.config.pad_token_id).all()


def test_generate_without_extended_ids_reads_the_input_ids():
    model = tiny(noise=0.3)
    input_ids = torch.tensor([[1996, 100, 4743, 6369, 1012]])
    with torch.no_grad():
        plain = model.generate(input_ids=input_ids, num_beams=1, min_length=5, max_length=5)
        explicit = model.generate(
            input_ids=input_ids, source_extended_ids=input_ids, num_beams=1, min_length=5, max_length=5
        )
    assert torch.equal(plain, explicit) and (plain < VOCAB).all()


# ----------------------------------------------------------------------------------------------------------------
# Coverage penalty
# ----------------------------------------------------------------------------------------------------------------


def test_summary_coverage_penalty_by_hand():
    coverage = torch.tensor([[0.5, 1.5, 2.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    # beta * sum_i (max(c_i, 1) - 1)
    assert summary_coverage_penalty(coverage, 2.0).tolist() == [3.0, 0.0]


def test_coverage_penalty_processor_subtracts_the_growth_of_each_rows_penalty():
    history = torch.tensor([[[0.9, 0.1, 0.0], [0.6, 0.4, 0.0]], [[0.2, 0.8, 0.0], [0.1, 0.9, 0.0]]])
    scores = torch.log_softmax(torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 1.0, -torch.inf]]), -1)
    processed = CoveragePenaltyLogitsProcessor(5.0, lambda: history)(torch.zeros(2, 2, dtype=torch.long), scores)
    # row 0: coverage (1.5, 0.5) after the step, (0.9, 0.1) before: 5 * 0.5 - 0; row 1: (0.3, 1.7): 5 * 0.7 - 0
    torch.testing.assert_close(processed, scores - torch.tensor([[2.5], [3.5]]))
    with pytest.raises(ValueError, match="`beta` has to be a number of at least 0"):
        CoveragePenaltyLogitsProcessor(-1.0, lambda: history)


@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_beam_scores_are_log_probabilities_less_the_coverage_penalty(beta, minilm_tokenizer):
    """Beam search over the logits adds the mixture's log-probabilities (log_softmax leaves them as they are); with the
    penalty, a finished beam's score is its log-probability less beta * penalty(coverage of its copy attention)."""
    model = tiny(noise=0.3)
    batch, _ = source_batch(processor_of(model, minilm_tokenizer), DOCUMENTS)
    with torch.no_grad():
        result = model.generate(
            **batch, num_beams=3, min_length=7, max_length=7, length_penalty=0.0, coverage_penalty=beta,
            return_dict_in_generate=True, output_scores=True,
        )
        sequences = result.sequences
        forced = model(**batch, decoder_input_ids=sequences[:, :-1])
    log_probability = forced.logits.gather(-1, sequences[:, 1:, None]).squeeze(-1).sum(-1)
    coverage = forced.copy_attentions.sum(1)
    expected = log_probability - summary_coverage_penalty(coverage, beta)
    torch.testing.assert_close(result.sequences_scores, expected, atol=1e-4, rtol=1e-5)
    if beta:
        assert (summary_coverage_penalty(coverage, beta) > 0.1).all()  # the penalty is not idle here


def test_coverage_penalty_changes_which_beam_wins_and_needs_the_cache(minilm_tokenizer):
    model = tiny(noise=0.3)
    batch, _ = source_batch(processor_of(model, minilm_tokenizer), DOCUMENTS[:1])
    settings = dict(num_beams=4, min_length=8, max_length=8, length_penalty=0.0)
    with torch.no_grad():
        plain = model.generate(**batch, **settings)
        model.config.coverage_penalty = 50.0  # the config's weight is the default
        penalized = model.generate(**batch, **settings)
        forced = [model(**batch, decoder_input_ids=sequence[:, :-1]).copy_attentions.sum(1) for sequence in
                  (plain, penalized)]
    assert not torch.equal(plain, penalized)
    assert summary_coverage_penalty(forced[1], 1.0) < summary_coverage_penalty(forced[0], 1.0)
    with pytest.raises(ValueError, match="keep use_cache on"):
        model.generate(**batch, use_cache=False, **settings)


def test_cache_reorders_the_decoded_state_with_the_beams_and_keeps_the_source_state():
    """A beam index points to a beam of the same document, whose encoder states are the same: the cross-attention's
    keys and values and the copy keys stay, the self-attention's and the copy attention move."""
    cache = CopyTransformerCache()
    rows = torch.arange(3.0)[:, None, None, None].expand(3, 1, 2, 4)
    cache.self_attention_cache.update(rows, rows, 0)
    cache.cross_attention_cache.update(rows, rows, 0)
    cache.copy_keys = torch.arange(3.0)[:, None, None].expand(3, 2, 4)
    cache.add_copy_attention(torch.arange(3.0)[:, None, None].expand(3, 1, 2))
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    assert cache.self_attention_cache.layers[0].keys[:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]
    assert cache.copy_attention[:, 0, 0].tolist() == [2.0, 2.0, 0.0]
    assert cache.cross_attention_cache.layers[0].keys[:, 0, 0, 0].tolist() == [0.0, 1.0, 2.0]
    assert cache.copy_keys[:, 0, 0].tolist() == [0.0, 1.0, 2.0]


def test_beam_search_equals_beam_search_that_reorders_the_whole_cache(minilm_tokenizer, monkeypatch):
    model = tiny(noise=1.0)  # beams that swap rows: without any reordering, these sequences differ
    batch, _ = source_batch(processor_of(model, minilm_tokenizer), DOCUMENTS)
    settings = dict(num_beams=3, min_length=6, max_length=9, coverage_penalty=1.0, return_dict_in_generate=True,
                    output_scores=True)
    with torch.no_grad():
        kept = model.generate(**batch, **settings)

        def reorder_everything(cache, beam_idx):
            EncoderDecoderCache.reorder_cache(cache, beam_idx)
            cache._map_rows(lambda rows: rows.index_select(0, beam_idx))

        monkeypatch.setattr(CopyTransformerCache, "reorder_cache", reorder_everything)
        reordered = model.generate(**batch, **settings)
    assert torch.equal(kept.sequences, reordered.sequences)
    torch.testing.assert_close(kept.sequences_scores, reordered.sequences_scores, rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------------------------
# Processor
# ----------------------------------------------------------------------------------------------------------------


def test_processor_gives_unknown_words_extended_ids_and_decodes_them(minilm_tokenizer):
    config = tiny_copy_transformer_config()
    processor = CopyTransformerForConditionalGeneration.processor_class(minilm_tokenizer, config)
    document = ["Zorblax✓ met a 🦜.", "The ZORBLAX✓ left."]
    features = processor.source_features(document)
    # the same word in two spellings is one unknown word after the tokenizer's normalization (lowercasing)
    assert features["source_oov_words"] == ["zorblax✓", "🦜"]
    ids = features["input_ids"]
    assert [token for token in ids if token == 100] == [100] * 3
    expected = [VOCAB if index in (0, 6) else VOCAB + 1 if index == 3 else token for index, token in enumerate(ids)]
    assert [minilm_tokenizer.convert_ids_to_tokens(token) for token in ids[1:3]] == ["met", "a"]
    assert features["source_extended_ids"] == expected
    # a summary's unknown word is copied under its extended id when the source has it, [UNK] otherwise
    target = processor.target_features("the zorblax✓ left.\nno ☃ here.", features["source_oov_words"])["labels"]
    the, left, stop, no, here = minilm_tokenizer.convert_tokens_to_ids(["the", "left", ".", "no", "here"])
    assert target == [the, VOCAB, left, stop, 3, no, 100, here, stop, 2]
    assert processor.decode([1, *target, 0], features["source_oov_words"]) == "the zorblax✓ left.\nno here."
    with pytest.raises(ValueError, match="stands for source word 2, but the source has 2 unknown words"):
        processor.decode([VOCAB + 2], features["source_oov_words"])


def test_processor_call_collate_and_truncation(minilm_tokenizer):
    config = tiny_copy_transformer_config(max_source_positions=8)
    processor = CopyTransformerForConditionalGeneration.processor_class(minilm_tokenizer, config)
    with pytest.warns(UserWarning, match="limit of 8 tokens: kept 2 of 2 sentences, the last one cut"):
        inputs = processor("The 🦜 sang. Then it slept a long time.")
    assert inputs["input_ids"].shape == (1, 8) and inputs["source_oov_words"] == ("🦜",)
    assert inputs["sentences"] == ("The 🦜 sang.", "Then it slept a long time.")
    with pytest.warns(UserWarning, match="limit of 8 tokens: kept 1 of 2 sentences.$"):
        processor("The 🦜 sang a long song today. Then it slept.")
    assert inputs["source_extended_ids"][0, 1] == VOCAB
    short = processor.training_features("One word.", "one.")
    long = processor.training_features("The 🦜 sang. It slept.", "it slept.")
    batch = processor.collate([short, long])
    assert batch["input_ids"][0].tolist() == [*short["input_ids"], 0, 0, 0, 0]
    assert batch["attention_mask"][0].tolist() == [1, 1, 1, 0, 0, 0, 0]
    assert batch["source_extended_ids"][1, 1] == VOCAB
    assert batch["labels"][0].tolist() == [*short["labels"], -100]


def test_processor_rejects_bad_input_in_one_line(minilm_tokenizer):
    processor_class = CopyTransformerForConditionalGeneration.processor_class
    processor = processor_class(minilm_tokenizer, tiny_copy_transformer_config())
    with pytest.raises(TypeError, match="expected a string"):
        processor.check_input(3)
    for empty in ("   ", {"sentences": ["", " "]}, []):
        with pytest.raises(ValueError, match="the document has no text"):
            processor(empty)
    with pytest.raises(ValueError, match="does not fit the model"):
        processor_class(minilm_tokenizer, tiny_copy_transformer_config(vocab_size=1000))


# ----------------------------------------------------------------------------------------------------------------
# Configuration, positions, embeddings
# ----------------------------------------------------------------------------------------------------------------


def test_defaults_are_the_papers_small_model_and_its_decoding():
    config = CopyTransformerConfig()
    assert (config.d_model, config.attention_heads, config.encoder_layers, config.decoder_layers) == (256, 4, 3, 3)
    assert (config.ffn_dim, config.dropout, config.vocab_size, config.coverage_penalty) == (1024, 0.1, VOCAB, 0.0)
    generation = CopyTransformerForConditionalGeneration.default_generation_config(config)
    assert (generation.num_beams, generation.min_length, generation.max_length) == (4, 56, 101)


@pytest.mark.parametrize(
    "setting, message",
    [
        (dict(encoder_input="bert"), r"encoder_input='bert' is not supported: choose one of \('tokens'"),
        (dict(convolution="3d"), r"convolution='3d' is not supported: choose one of \('none', '1d'"),
        (dict(convolution="1d", convolution_layers=3), "convolution_layers=3 exceeds encoder_layers=2"),
        (dict(convolution_window=12), "convolution_window must be a positive odd integer"),
        (dict(decoder_embeddings="bert"), 'decoder_embeddings="bert" needs a BERT encoder input'),
        (dict(position_embedding_type="rotary"), "position_embedding_type='rotary' is not supported"),
        (dict(d_model=30), "attention_heads=4 must divide d_model=30"),
        (dict(coverage_penalty=-1.0), "coverage_penalty must be at least 0"),
        (dict(word_embedding_size=0), "word_embedding_size must be a positive integer, got 0"),
        (dict(word_embedding_size=64, encoder_input="bert_windowed", decoder_embeddings="bert"),
         "word_embedding_size: stacking with the BERT-conditioned decoder keeps no word table"),
    ],
)
def test_unsupported_settings_are_one_line_errors(setting, message):
    with pytest.raises(ValueError, match=message):
        CopyTransformerConfig(**{"encoder_layers": 2, **setting})


def test_sinusoidal_positions_by_hand():
    encodings = sinusoidal_positions(torch.tensor([0, 1, 2]), 4)
    # PE(p, 2i) = sin(p / 10000^(2i/4)), PE(p, 2i+1) = cos(...)
    expected = [[math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)] for p in range(3)]
    torch.testing.assert_close(encodings, torch.tensor(expected))


def test_learned_positions_and_untied_output_layer():
    model = tiny(position_embedding_type="learned", tie_word_embeddings=False)
    assert model.encoder.positions.table.weight.shape == (128, 32)
    assert model.decoder.positions.table.weight.shape == (64, 32)
    assert model.lm_head.weight is not model.encoder.embed_tokens.weight
    with pytest.raises(ValueError, match="a summary of 65 tokens is longer than the model's 64"):
        model(input_ids=torch.tensor([[1996, 4743]]), decoder_input_ids=torch.ones(1, 65, dtype=torch.long))


@pytest.mark.parametrize("copy_mechanism", [False, True])
def test_a_factorized_word_table_is_read_and_written_through_its_projection(copy_mechanism):
    model = tiny(word_embedding_size=8, copy_mechanism=copy_mechanism)
    table, projection = model.encoder.embed_tokens.weight, model.encoder.embed_projection.weight
    assert table.shape == (VOCAB, 8) and projection.shape == (32, 8) and model.get_output_embeddings() is None
    ids = torch.tensor([[1, 1996, 4743, VOCAB + 2]])  # an id past the vocabulary (a copied word) reads as [UNK]
    expected = table[[1, 1996, 4743, 100]] @ projection.T * math.sqrt(32)
    torch.testing.assert_close(model.embed_decoder_inputs(ids), expected[None], rtol=0, atol=1e-6)
    hidden = []
    model.decoder.norm.register_forward_hook(lambda module, args, output: hidden.append(output))
    with torch.no_grad():
        outputs = model(input_ids=torch.tensor([[1996, 4743, 2003]]), labels=torch.tensor([[1996, 2]]),
                        output_attentions=False)
        # by hand: P_vocab's logits are h . (P e_w) + b_w, the input side's product unscaled (the tie)
        vocab_log_probs = torch.log_softmax(hidden[0] @ (table @ projection.T).T + model.lm_head.bias, dim=-1)
    if not copy_mechanism:
        torch.testing.assert_close(outputs.logits, vocab_log_probs, rtol=0, atol=1e-5)
    else:  # off the source's words the mixture is (1 - p_gen) P_vocab: equal up to one factor per step
        ratio = outputs.logits[..., :VOCAB].exp() / vocab_log_probs.exp()
        ratio[..., [1996, 4743, 2003]] = ratio[..., :1]
        torch.testing.assert_close(ratio, ratio[..., :1].expand_as(ratio), rtol=1e-3, atol=0)


def test_a_factorized_word_table_saves_the_parameters_it_should(tmp_path):
    from safetensors import safe_open

    full, factorized = tiny(), tiny(word_embedding_size=8)
    count = lambda model: sum(parameter.numel() for parameter in model.parameters())  # noqa: E731
    # the table loses VOCAB x (32 - 8) and the projection adds 8 x 32; both keep the output layer's per-word bias
    assert count(full) - count(factorized) == VOCAB * (32 - 8) - 8 * 32
    factorized.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as saved:
        shapes = {key: saved.get_slice(key).get_shape() for key in saved.keys()}
    assert {key: shape for key, shape in shapes.items() if VOCAB in shape} == {
        "encoder.embed_tokens.weight": [VOCAB, 8], "lm_head.bias": [VOCAB]}
    reloaded = CopyTransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    ids = torch.tensor([[1996, 4743, 2003]])
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=ids, labels=ids).logits,
                                   factorized(input_ids=ids, labels=ids).logits)


def test_a_factorized_word_table_starts_at_the_scale_of_a_full_one():
    torch.manual_seed(0)
    model = CopyTransformerForConditionalGeneration(tiny_copy_transformer_config(word_embedding_size=8))
    with torch.no_grad():
        projected = model.encoder.embed_tokens.weight @ model.encoder.embed_projection.weight.T
    # the full table's rows are normal(0, 0.02): the product keeps that scale (with a 0.02 projection it would be
    # 0.02 * 0.02 * sqrt(8) = 0.001)
    assert abs(projected.std().item() - 0.02) < 0.002


def test_generation_reads_the_extended_vocabulary_width_from_the_text_config_only_while_it_runs():
    """transformers before 5.23 reshapes beam scores by `get_text_config().vocab_size`: within
    `extended_vocabulary`, that plain call gives the copy mechanism's width; the config itself, other configs and
    `decoder=True` calls (the cache's) keep the vocabulary."""
    config, other = tiny_copy_transformer_config(), tiny_copy_transformer_config()
    vocab = config.vocab_size
    with config.extended_vocabulary(vocab + 3):
        assert config.get_text_config().vocab_size == vocab + 3
        assert config.vocab_size == vocab and config.get_text_config(decoder=True).vocab_size == vocab
        assert other.get_text_config().vocab_size == vocab
    assert config.get_text_config().vocab_size == vocab
    with config.extended_vocabulary(vocab):  # no unknown source word: nothing extended
        assert config.get_text_config() is config
