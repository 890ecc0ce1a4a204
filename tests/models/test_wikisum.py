"""WikiSum decoder (T-D / T-DMCA): masks seen through the model, backends, cache, MoE, loss, pipeline, CLI, export."""

import json
import math
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from conftest import tiny_bert_config, tiny_wikisum_config
from sumformers import WikiSumCache, WikiSumConfig, WikiSumForCausalLM
from sumformers.hub import export_model, load_model, shipped_checkpoints
from sumformers.modeling.modeling_wikisum import timing_signal
from test_generation_common import GenerationTesterMixin
from test_modeling_common import ModelTesterMixin

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(implementation="eager", seed=0, **overrides) -> WikiSumForCausalLM:
    torch.manual_seed(seed)
    model = WikiSumForCausalLM._from_config(tiny_wikisum_config(**overrides), attn_implementation=implementation).eval()
    with torch.no_grad():  # larger embeddings give peaked logits, so greedy choices are not near-ties
        model.model.embed_tokens.weight.mul_(30)
    return model


def random_ids(batch=2, length=23, seed=1):
    return torch.randint(4, 64, (batch, length), generator=torch.Generator().manual_seed(seed))


@torch.no_grad()
def logits(model, ids, **kwargs):
    return model(ids, **kwargs).logits


# ----------------------------------------------------------------------------------------------------------------
# What each attention type lets a position see, observed through the model's outputs
# ----------------------------------------------------------------------------------------------------------------


def changed_positions(model, position, length=18):
    """Positions whose logits change when the token at `position` changes."""
    ids = random_ids(1, length)
    other = ids.clone()
    other[0, position] = (other[0, position] + 1 - 4) % 60 + 4
    difference = (logits(model, ids) - logits(model, other)).abs().amax(-1)[0]
    return [index for index in range(length) if difference[index] > 1e-6]


@pytest.mark.parametrize("layer_type", ["full", "local", "compressed"])
def test_no_position_depends_on_later_tokens(layer_type):
    model = tiny_model(attention_layers=[layer_type] * 2)
    for position in (0, 5, 11):
        assert min(changed_positions(model, position), default=position) >= position


def test_one_local_layer_sees_its_block_and_the_previous_one():
    # blocks of 4: position 5 (block 1) is read by positions 5-7 (rest of block 1) and 8-11 (block 2), not by 12+
    assert changed_positions(tiny_model(attention_layers=["local"]), 5) == [5, 6, 7, 8, 9, 10, 11]


def test_compressed_layers_see_only_completed_earlier_slots():
    # stride 3: position 7 lies in slot 2 (positions 6-8). Positions 7 and 8 share that slot and never see it; it is
    # visible from position 9 on. Through any number of compressed layers nothing else reaches positions 6-8.
    model = tiny_model(attention_layers=["compressed"] * 3)
    changed = changed_positions(model, 7)
    assert changed[0] == 7 and 8 not in changed and 9 in changed
    # the first slot's queries (0-2) see only the null slot: they depend on nothing but their own token
    assert [position for position in changed_positions(model, 0) if position < 3] == [0]


def test_full_layers_reach_every_later_position():
    assert changed_positions(tiny_model(attention_layers=["full"]), 5) == list(range(5, 18))


# ----------------------------------------------------------------------------------------------------------------
# Backends
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "implementation",
    # compiling flex_attention on a shared CPU takes a minute or more
    ["sdpa", "blocked", pytest.param("flex_attention", marks=pytest.mark.slow)],
)
def test_backends_equal_eager_in_the_model(implementation):
    layers = dict(attention_layers=["local", "compressed", "full", "local", "compressed"], moe_layers=[1])
    reference = tiny_model("eager", **layers)
    model = tiny_model(implementation, **layers)
    model.load_state_dict(reference.state_dict())
    ids = random_ids(2, 37)
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # left padding
    expected = logits(reference, ids, attention_mask=mask)
    actual = logits(model, ids, attention_mask=mask)
    real = mask.bool()
    torch.testing.assert_close(actual[real], expected[real], atol=1e-5, rtol=1e-5)


def test_blocked_backend_trains_like_eager():
    layers = dict(attention_layers=["local", "compressed", "full"])
    reference, model = tiny_model("eager", **layers), tiny_model("blocked", **layers)
    ids = random_ids(2, 21)
    for candidate in (reference, model):
        candidate(ids, labels=ids).loss.backward()
    for (name, expected), (_, actual) in zip(reference.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(actual.grad, expected.grad, atol=1e-5, rtol=1e-4, msg=name)


# ----------------------------------------------------------------------------------------------------------------
# Loss and cache
# ----------------------------------------------------------------------------------------------------------------


def test_loss_is_next_token_cross_entropy_on_every_token():
    model = tiny_model(attention_layers=["local", "compressed"])
    ids = random_ids(2, 10)
    labels = ids.clone()
    labels[1, 7:] = -100
    output = model(ids, labels=labels)
    log_probabilities = torch.log_softmax(output.logits.double(), dim=-1)
    targets = [(row, t) for row in range(2) for t in range(9) if labels[row, t + 1] != -100]
    expected = -sum(log_probabilities[row, t, labels[row, t + 1]] for row, t in targets) / len(targets)
    assert output.loss.item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("implementation", ["sdpa", "blocked"])
def test_incremental_forward_equals_full_forward(implementation):
    model = tiny_model(implementation, attention_layers=["local", "compressed", "full"], moe_layers=[0])
    ids = random_ids(2, 14)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    expected = logits(model, ids, attention_mask=mask)
    with torch.no_grad():
        step = model(ids[:, :5], attention_mask=mask[:, :5], use_cache=True)
        cache, pieces = step.past_key_values, [step.logits]
        # a chunk of three tokens, then one token at a time
        for start, stop in [(5, 8)] + [(t, t + 1) for t in range(8, 14)]:
            step = model(ids[:, start:stop], attention_mask=mask[:, :stop], past_key_values=cache, use_cache=True)
            pieces.append(step.logits)
    assert isinstance(cache, WikiSumCache) and cache.get_seq_length() == 14
    real = mask.bool()
    torch.testing.assert_close(torch.cat(pieces, dim=1)[real], expected[real], atol=1e-5, rtol=1e-5)


def test_cache_keeps_a_bounded_window_and_completed_slots():
    model = tiny_model(attention_layers=["local", "compressed"])
    cache = WikiSumCache(model.config)
    with torch.no_grad():
        model(random_ids(1, 1), past_key_values=cache, use_cache=True)
        sizes = []
        for length in range(2, 20):
            model(
                random_ids(1, 1, seed=length),
                attention_mask=torch.ones(1, length),
                past_key_values=cache,
                use_cache=True,
            )
            local, compressed = cache.layers
            sizes.append(
                (local.keys.shape[2], local.window_start, compressed.keys.shape[1], compressed.pending_keys.shape[1])
            )
    # after 19 tokens: blocks of 4 -> keys from position 12 (previous block start), 7 kept; 6 slots + 1 pending
    assert sizes[-1] == (7, 12, 6, 1)
    assert max(size[0] for size in sizes) <= 2 * 4 - 1


@pytest.mark.parametrize("settings", [dict(num_beams=1), dict(num_beams=4, length_penalty=0.6)], ids=["greedy", "beam"])
def test_generation_with_cache_equals_generation_without(settings):
    model = tiny_model("sdpa", attention_layers=["local", "compressed", "local", "compressed", "full"], moe_layers=[2])
    ids = random_ids(2, 11)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    common = dict(attention_mask=mask, max_new_tokens=24, min_new_tokens=24, do_sample=False, **settings)
    cached = model.generate(ids, use_cache=True, **common)
    uncached = model.generate(ids, use_cache=False, **common)
    assert cached.shape == (2, 35)
    assert torch.equal(cached, uncached)
    # the generated tokens are not a trivial repetition: the comparison covers many distinct decoding states
    assert len(set(cached[:, 11:].flatten().tolist())) > 5


def test_a_foreign_cache_is_refused():
    from transformers import DynamicCache

    with pytest.raises(ValueError, match="WikiSumCache"):
        tiny_model()(random_ids(1, 4), past_key_values=DynamicCache(), use_cache=True)


# ----------------------------------------------------------------------------------------------------------------
# generate(): a tokenizer's whole output, and settings refused before any work
# ----------------------------------------------------------------------------------------------------------------


def test_generate_takes_a_bert_tokenizers_output_and_ignores_segment_ids(minilm_tokenizer):
    model = tiny_model(vocab_size=minilm_tokenizer.vocab_size)
    encoded = minilm_tokenizer("Solar power in cities. Panels on public roofs.", return_tensors="pt")
    assert set(encoded) == {"input_ids", "token_type_ids", "attention_mask"}
    length = encoded["input_ids"].shape[1]
    settings = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False, "num_beams": 1}
    generated = model.generate(**encoded, **settings)
    expected = model.generate(encoded["input_ids"], attention_mask=encoded["attention_mask"], **settings)
    assert generated.shape == (1, length + 6)
    assert torch.equal(generated, expected)
    # segment ids (even a second segment) change nothing: the decoder has no segment embedding
    ids = encoded["input_ids"]
    assert torch.equal(logits(model, ids, token_type_ids=torch.ones_like(ids)), logits(model, ids))


LIMIT = "the model's limit of 64 positions (config.max_position_embeddings)"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_new_tokens": 10**9}, f"10 input tokens + max_new_tokens=1000000000 = 1000000010 exceed {LIMIT}"),
        ({"max_new_tokens": 55}, f"10 input tokens + max_new_tokens=55 = 65 exceed {LIMIT}"),
        ({"max_length": 65}, f"max_length=65 exceeds {LIMIT}"),
        # transformers' own check (GenerationConfig.validate)
        ({"max_new_tokens": -5}, "`max_new_tokens` must be greater than 0, but is -5."),
        ({"max_new_tokens": 0}, "`max_new_tokens` must be greater than 0, but is 0."),
        ({"max_new_tokens": 4, "num_beams": 0}, "num_beams must be at least 1, got 0"),
        ({"max_new_tokens": 4, "num_beams": -2}, "num_beams must be at least 1, got -2"),
        ({"max_new_tokens": 4, "num_beams": 2.5}, "num_beams must be an integer, got 2.5"),
        ({"max_new_tokens": 4, "num_beams": 2.0}, "num_beams must be an integer, got 2.0"),
        ({"max_new_tokens": 4, "num_beams": "4"}, "num_beams must be an integer, got '4'"),
        ({"max_new_tokens": 4, "num_beams": True}, "num_beams must be an integer, got True"),
        ({"max_new_tokens": "5"}, "max_new_tokens must be an integer, got '5'"),
        ({"max_new_tokens": 4, "min_new_tokens": 10}, "min_new_tokens (10) must not exceed max_new_tokens (4)"),
        ({"max_new_tokens": 4, "min_new_tokens": -1}, "min_new_tokens must be at least 0, got -1"),
        ({"max_new_tokens": 4, "num_return_sequences": 0}, "num_return_sequences must be at least 1, got 0"),
    ],
)
def test_generate_refuses_absurd_settings_before_any_work(settings, message, monkeypatch):
    model = tiny_model(max_position_embeddings=64, max_input_tokens=16)
    monkeypatch.setattr(type(model), "forward", lambda *args, **kwargs: pytest.fail("forward() ran"))
    with pytest.raises(ValueError) as error:
        model.generate(random_ids(1, 10), **settings)
    assert str(error.value) == message


def test_a_maximum_length_given_at_the_call_lowers_the_saved_minimum():
    model = tiny_model(max_position_embeddings=64, max_input_tokens=16)
    model.generation_config.update(min_new_tokens=20, max_new_tokens=30, num_beams=1, do_sample=False)
    ids = random_ids(1, 10)
    assert model.generate(ids).shape[1] - 10 >= 20  # the saved minimum holds without a maximum at the call
    short = model.generate(ids, max_new_tokens=5)
    assert torch.equal(short, model.generate(ids, max_new_tokens=5, min_new_tokens=5)) and short.shape == (1, 15)
    # a minimum given at the call is checked as given
    with pytest.raises(ValueError, match=r"^min_new_tokens \(20\) must not exceed max_new_tokens \(5\)$"):
        model.generate(ids, max_new_tokens=5, min_new_tokens=20)


def test_generate_limit_counts_the_input_and_the_summary():
    model = tiny_model(max_position_embeddings=64, max_input_tokens=16)
    settings = {"min_new_tokens": 54, "do_sample": False, "num_beams": 1}
    # exactly at the limit: 10 + 54 = 64 positions
    assert model.generate(random_ids(1, 10), max_new_tokens=54, **settings).shape == (1, 64)
    with pytest.raises(ValueError) as error:
        model.generate(random_ids(1, 64), max_new_tokens=1)
    assert str(error.value) == f"an input of 64 tokens leaves no room for a summary within {LIMIT}"
    # a generation_config object, and the model's own, are checked like keywords
    from transformers import GenerationConfig

    with pytest.raises(ValueError) as error:
        model.generate(random_ids(1, 10), generation_config=GenerationConfig(max_new_tokens=60))
    assert str(error.value) == f"10 input tokens + max_new_tokens=60 = 70 exceed {LIMIT}"
    model.generation_config.num_beams = 0
    with pytest.raises(ValueError, match="^num_beams must be at least 1, got 0$"):
        model.generate(random_ids(1, 10), max_new_tokens=4)


def test_generate_warns_of_padding_under_which_rows_do_not_decode_as_alone_and_refuses_right_padding():
    """Local blocks and compressed slots are counted from position 0: a batch's rows decode as they do alone only
    when left-padded by whole blocks and slots (lcm(4, 3) = 12 here; any padding with full layers only; the shared
    generation tester decodes such batches as their items). Other left padding gave other scores without a word
    (0.004 on this model at 5 tokens); padding on the right gave summaries continuing after the padding."""
    model = tiny_model()
    assert model.padding_alignment == 12 and tiny_model(attention_layers=["full"] * 2).padding_alignment == 1
    ids = random_ids(3, 30)
    mask = torch.ones_like(ids)
    mask[1, :12], mask[2, :5] = 0, 0
    with pytest.warns(UserWarning) as warned:
        model.generate(ids, attention_mask=mask, max_new_tokens=2)
    assert [str(warning.message) for warning in warned] == [
        "rows left-padded by [5] tokens do not decode exactly as they do alone (this model's left padding should be "
        "a multiple of 12 tokens): generate one row at a time, as the pipeline does, for outputs that do not depend "
        "on the batch"
    ]
    mask[2] = 1
    mask[2, -3:] = 0
    with pytest.raises(ValueError, match=r"^generate\(\) continues each row at its end: pad the rows on the left"):
        model.generate(ids, attention_mask=mask, max_new_tokens=2)
    mask[2] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert model.generate(ids, attention_mask=mask, max_new_tokens=2, min_new_tokens=2).shape == (3, 32)


# ----------------------------------------------------------------------------------------------------------------
# The copy head (copy_mechanism, not in the paper)
# ----------------------------------------------------------------------------------------------------------------

COPY_LAYERS = dict(attention_layers=["local", "compressed", "full"], copy_mechanism=True)


def with_separator(ids: torch.Tensor, position: int) -> torch.Tensor:
    ids = ids.clone()
    ids[:, position] = 3  # tiny_wikisum_config's separator_token_id
    return ids


def test_copy_head_mixes_the_copy_attention_and_the_vocabulary_as_computed_by_hand():
    model = tiny_model(**COPY_LAYERS)
    ids = with_separator(random_ids(1, 14), 8)
    with torch.no_grad():
        log_probs = logits(model, ids)[0].double()
        states = model.model(ids).last_hidden_state[0]
        pointer = model.pointer
        scores = pointer.copy_attention.query(states) @ pointer.copy_attention.key(states[:8]).T / math.sqrt(32)
        attention = torch.softmax(scores.double(), dim=-1)  # over the 8 input positions before the separator
        context = attention.float() @ states[:8]
        embedded = model.model.embed_projection(model.model.embed_tokens(ids[0]))
        p_copy = torch.sigmoid(pointer.switch(torch.cat([states, context, embedded], dim=-1))[:, 0].double())
        vocabulary = torch.softmax(model.lm_head(model.output_projection(states)).double(), dim=-1)
    for t in range(8, 14):  # from the separator on: the mixture
        mixture = (1 - p_copy[t]) * vocabulary[t]
        for j in range(8):
            mixture[ids[0, j]] += p_copy[t] * attention[t, j]
        torch.testing.assert_close(log_probs[t].exp(), mixture, atol=1e-6, rtol=1e-4)
        assert log_probs[t].exp().sum().item() == pytest.approx(1.0, abs=1e-6)
    # before the separator: the vocabulary alone
    torch.testing.assert_close(log_probs[:8].exp(), vocabulary[:8], atol=1e-6, rtol=1e-4)


def test_copy_head_copies_a_source_token_the_vocabulary_gives_almost_no_mass():
    model = tiny_model(**COPY_LAYERS)
    ids = with_separator(random_ids(1, 12), 6)

    def probabilities(switch_bias: float) -> torch.Tensor:  # +30: p_gen about 1 (copy), -30: about 0 (generate)
        with torch.no_grad():
            model.pointer.switch.bias.fill_(switch_bias)
        return logits(model, ids)[0].exp()

    generated = probabilities(-30.0)
    rare = min(range(4, 64), key=lambda token: generated[6:, token].max().item())  # the vocabulary's least likely
    ids[0, 2] = rare  # now in the source
    generated, copied = probabilities(-30.0), probabilities(30.0)
    assert generated[6:, rare].max().item() < 0.02  # the tiny model's vocabulary is near uniform (1/64)
    assert copied[6:, rare].min().item() > 0.1  # copied at every summary position
    torch.testing.assert_close(copied[:6], generated[:6])  # before the separator nothing is copied
    outside = [token for token in range(64) if token not in set(ids[0, :6].tolist())]
    assert copied[6:, outside].sum(-1).max().item() < 1e-6  # all the mass on source tokens


def test_copy_head_rows_with_separators_at_different_positions_score_as_they_do_alone():
    # the batch skips the copy attention before its earliest separator only: a later row's positions up to its own
    # separator keep the vocabulary softmax, as when that row is scored alone
    model = tiny_model(**COPY_LAYERS)
    ids = random_ids(2, 14)
    ids[ids == 3] = 4
    ids[0, 5], ids[1, 9] = 3, 3
    with torch.no_grad():
        batched = logits(model, ids)
        alone = torch.cat([logits(model, ids[:1]), logits(model, ids[1:])])
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-5)


def test_copy_head_without_a_separator_is_the_vocabulary_softmax():
    model = tiny_model(**COPY_LAYERS)
    ids = random_ids(2, 10)
    ids[ids == 3] = 4
    with torch.no_grad():
        states = model.model(ids).last_hidden_state
        expected = torch.log_softmax(model.lm_head(model.output_projection(states)).float(), dim=-1)
    torch.testing.assert_close(logits(model, ids), expected)
    with pytest.raises(ValueError, match="give input_ids, not inputs_embeds"):
        model(inputs_embeds=torch.zeros(1, 3, 16))


def test_copy_head_sees_no_later_token_and_caches_like_the_full_forward():
    model = tiny_model("sdpa", **COPY_LAYERS)
    ids = with_separator(random_ids(2, 16), 6)
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    expected = logits(model, ids, attention_mask=mask)
    for position in (1, 5, 9, 12):
        other = ids.clone()
        other[:, position] = ids[:, position] % 60 + 4  # another word, never the separator
        changed = (logits(model, other, attention_mask=mask) - expected).abs().amax(-1)[1] > 0
        assert not changed[:position].any(), f"a position before {position} saw it"
        assert changed[position:].all()
    with torch.no_grad():
        step = model(ids[:, :4], attention_mask=mask[:, :4], use_cache=True)
        cache, pieces = step.past_key_values, [step.logits]
        # a chunk across the separator, then one token at a time
        for start, stop in [(4, 8)] + [(t, t + 1) for t in range(8, 16)]:
            step = model(ids[:, start:stop], attention_mask=mask[:, :stop], past_key_values=cache, use_cache=True)
            pieces.append(step.logits)
    real = mask.bool()
    torch.testing.assert_close(torch.cat(pieces, dim=1)[real], expected[real], atol=1e-5, rtol=1e-5)


def test_copy_head_cache_of_full_layers_crops_its_copy_memory_too():
    model = tiny_model(attention_layers=["full", "full"], copy_mechanism=True)
    ids = with_separator(random_ids(1, 12), 5)
    expected = logits(model, ids)
    with torch.no_grad():
        cache = model(ids[:, :10], use_cache=True).past_key_values
        cache.crop(-2)  # as assisted decoding does after two rejected draft tokens
        assert [tensor.shape[1] for tensor in cache.copy_memory] == [8, 8, 8]
        resumed = model(ids[:, 8:], past_key_values=cache, use_cache=True).logits
    torch.testing.assert_close(resumed, expected[:, 8:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("settings", [dict(num_beams=1), dict(num_beams=4, length_penalty=0.6)], ids=["greedy", "beam"])
def test_copy_head_generation_with_cache_equals_generation_without(settings):
    model = tiny_model("sdpa", seed=2, **COPY_LAYERS)
    with torch.no_grad():  # copying about 5%: a random model that copies more repeats one copied token throughout
        model.pointer.switch.bias.fill_(-3.0)
    ids = with_separator(random_ids(2, 11), 10)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    common = dict(attention_mask=mask, max_new_tokens=16, min_new_tokens=16, do_sample=False, **settings)
    cached = model.generate(ids, use_cache=True, **common)
    assert torch.equal(cached, model.generate(ids, use_cache=False, **common))
    assert min(len(set(row.tolist())) for row in cached[:, 11:]) >= 3  # many decoding states compared in each row


# ----------------------------------------------------------------------------------------------------------------
# Mixture of experts
# ----------------------------------------------------------------------------------------------------------------


def moe_layer(num_experts=4, top_k=2):
    torch.manual_seed(0)
    config = tiny_wikisum_config(moe_layers=[0], num_experts=num_experts, num_experts_per_token=top_k)
    model = WikiSumForCausalLM(config)
    return model.model.layers[0].feed_forward


def test_moe_routes_each_token_to_k_experts():
    moe = moe_layer()
    hidden = torch.randn(3, 5, 32)
    with torch.no_grad():
        output = moe(hidden)
    assert ((output.gates > 0).sum(-1) == 2).all()
    torch.testing.assert_close(output.gates.sum(-1), torch.ones(15))
    flat = hidden.reshape(-1, 32)
    expected = sum(output.gates[:, [e]] * moe.experts[e](flat) for e in range(4))
    torch.testing.assert_close(output.hidden_states.reshape(-1, 32), expected, atol=1e-6, rtol=1e-5)
    top_two = moe.router(flat).topk(2).indices.sort().values
    assert torch.equal((output.gates > 0).nonzero()[:, 1].view(-1, 2), top_two)


def test_moe_balance_loss_is_zero_for_balanced_routing_and_grows_with_imbalance():
    moe = moe_layer()
    with torch.no_grad():
        # token t is a one-hot on dimension t; the router gives it equal logits for experts t and t+1 (mod 4)
        moe.router.weight.zero_()
        for token in range(4):
            moe.router.weight[token, token] = moe.router.weight[(token + 1) % 4, token] = 5.0
        balanced = moe(torch.eye(32)[:4][None])
        # every expert gets two tokens with gate 1/2 each: importance and load are equal across experts
        assert balanced.aux_loss.item() == pytest.approx(0.0, abs=1e-9)
        # all four tokens to experts 0 and 1: importance (2, 2, 0, 0) and load (4, 4, 0, 0), cv^2 = 1 each
        moe.router.weight.zero_()
        moe.router.weight[0, :4] = moe.router.weight[1, :4] = 5.0
        assert moe(torch.eye(32)[:4][None]).aux_loss.item() == pytest.approx(2.0)
        # padding tokens do not count
        mask = torch.tensor([[True, True, False, False]])
        assert moe(torch.eye(32)[:4][None], token_mask=mask).aux_loss.item() == pytest.approx(2.0)


def test_moe_loss_is_added_to_the_language_model_loss():
    model = tiny_model(moe_layers=[0, 2], num_experts=4, router_aux_loss_coef=0.5)
    ids = random_ids(2, 9)
    output = model(ids, labels=ids)
    language_model_loss = torch.nn.functional.cross_entropy(
        output.logits[:, :-1].reshape(-1, 64), ids[:, 1:].reshape(-1)
    )
    assert output.aux_loss > 0
    assert output.loss.item() == pytest.approx((language_model_loss + 0.5 * output.aux_loss).item(), rel=1e-5)


def test_config_rejects_bad_layouts():
    with pytest.raises(ValueError, match="attention_layers"):
        WikiSumConfig(attention_layers=["local", "dilated"])
    with pytest.raises(ValueError, match="moe_layers"):
        WikiSumConfig(moe_layers=[7])
    assert WikiSumConfig().variant == "T-DMCA" and WikiSumConfig(attention_layers=["full"] * 2).variant == "T-D"
    assert WikiSumConfig(moe_layers=[1]).variant == "T-DMCA-MoE"


def test_config_position_limit_leaves_room_for_the_input_and_a_summary():
    assert WikiSumConfig().max_position_embeddings == 16384
    assert WikiSumConfig(max_position_embeddings=50, max_input_tokens=48).max_input_tokens == 48
    for max_input_tokens in (1, 49):
        with pytest.raises(ValueError) as error:
            WikiSumConfig(max_position_embeddings=50, max_input_tokens=max_input_tokens)
        assert str(error.value) == (
            f"max_input_tokens must be in [2, max_position_embeddings - 2 = 48], got {max_input_tokens}"
        )


# ----------------------------------------------------------------------------------------------------------------
# Pipeline, CLI and export (MiniLM tokenizer, so a MiniLM-sized vocabulary)
# ----------------------------------------------------------------------------------------------------------------

TITLE = "Solar power in cities"
DOCUMENTS = [
    "Cities install solar panels on public roofs.\n\nThe weather was mild last week.",
    "Solar power now supplies a tenth of the power used in cities.\n\nA new stadium opened downtown.",
]


def minilm_config(**overrides) -> WikiSumConfig:
    """A tiny T-DMCA-MoE (one layer of each attention type, the middle one with experts) with MiniLM's vocabulary."""
    settings = dict(
        embedding_size=16,
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
        local_block_size=8,
        attention_layers=["local", "compressed", "full"],
        moe_layers=[1],
        num_experts=2,
        max_input_tokens=48,
    )
    settings.update(overrides)
    return WikiSumConfig(**settings)


class TestWikiSumModel(ModelTesterMixin, GenerationTesterMixin):
    model_class = WikiSumForCausalLM
    # Inputs of 48, 31 and 17 tokens, right-padded in a batch as the training script's collator pads them (the
    # pipeline generates one row at a time, without padding).
    examples = (
        {"title": TITLE, "documents": DOCUMENTS},
        {"title": "Budget", "documents": ["The council approved the new budget on Monday.\n\nIt includes roads."]},
        "One long text.\nWith two lines.",
    )
    pipeline_input = examples[0]

    def get_config(self):
        return minilm_config(local_block_size=4, expert_intermediate_size=64, hidden_dropout=0.0)

    def encode(self, processor, example):
        return processor(example)["input_ids"][0].tolist()

    def collate(self, processor, features, left=False):
        width = max(len(ids) for ids in features)
        input_ids = torch.full((len(features), width), processor.config.pad_token_id)
        attention_mask = torch.zeros(len(features), width, dtype=torch.long)
        for row, ids in enumerate(features):
            real = slice(width - len(ids), width) if left else slice(0, len(ids))
            input_ids[row, real], attention_mask[row, real] = torch.tensor(ids), 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def generation_features(self, context):
        """The examples cut at their ends so that each one's left padding in a batch is a whole number of local
        blocks and compressed slots (`padding_alignment`: other padding moves them, and `generate()` warns of it)."""
        alignment, longest = context.model.padding_alignment, max(len(ids) for ids in context.features)
        return [ids[: longest - -(-(longest - len(ids)) // alignment) * alignment] for ids in context.features]

    def generation_batch(self, processor, features):
        return self.collate(processor, features, left=True)

    @pytest.mark.xfail(
        strict=False,
        reason="local blocks and compressed slots partition the padded sequence, so left padding that is not a "
        "multiple of local_block_size and compression_stride moves them (the pipeline generates row by row)",
    )
    def test_left_padding_does_not_change_outputs(self, context):
        short, longest = context.features[2], context.features[0]
        alone = self.collate(context.processor, [short])
        padded = {key: value[:1] for key, value in self.collate(context.processor, [short, longest], left=True).items()}
        # positions count real tokens, as `generate` gives them to left-padded rows
        padded["position_ids"] = (padded["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            expected = context.model(**alone).logits[0]
            actual = context.model(**padded).logits[0][padded["attention_mask"][0].bool()]
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


class TestEncoderStartedWikiSumModel(TestWikiSumModel):
    """The same checks for a decoder in the layout `decoder_init="encoder"` gives it (post-norm, biases, GELU,
    unscaled embeddings as wide as the layers): its contract names pretrained layers, so the LoRA checks run too."""

    lora_target_modules = "q_proj,k_proj,v_proj,o_proj,up,down"

    def get_config(self):
        return minilm_config(
            decoder_init="encoder",
            encoder_layer_map=[0, 1, 0],
            embedding_size=32,
            layer_norm_position="post",
            attention_bias=True,
            hidden_act="gelu",
            scale_embedding=False,
            local_block_size=4,
            expert_intermediate_size=64,
            hidden_dropout=0.0,
        )


class TestCopyWikiSumModel(TestEncoderStartedWikiSumModel):
    """The same checks with the copy head (`copy_mechanism`): its pointer is a new module, trained in full beside
    LoRA, and its log-probabilities go through save, export, batching, padding, backends and the pipeline."""

    bf16_atol = 0.1  # as the CopyTransformer's: log-probabilities near -10 are rounded to bf16 steps of 0.0625

    def get_config(self):
        config = super().get_config()
        config.copy_mechanism = True
        return config


@pytest.fixture
def saved_wikisum(minilm_tokenizer, tmp_path):
    torch.manual_seed(0)
    model = WikiSumForCausalLM(minilm_config()).eval()
    model.generation_config.max_new_tokens = 6
    folder = tmp_path / "source"
    model.save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    return folder


def test_pipeline_feeds_ranked_paragraphs_within_L(saved_wikisum, minilm_tokenizer):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    assert summarizer.task == "wikisum"
    result = summarizer({"title": TITLE, "documents": DOCUMENTS}, max_input_tokens=30)
    # tf-idf against the title: both solar paragraphs first; the title, [SEP]s and paragraphs fill L = 30 tokens
    assert [p["index"] for p in result["paragraphs"]][:2] == [2, 0]
    assert result["input_tokens"] == 31  # L tokens and the separator
    title_tokens = len(minilm_tokenizer(TITLE, add_special_tokens=False)["input_ids"]) + 2
    assert sum(p["tokens"] for p in result["paragraphs"]) == 30 - title_tokens
    assert isinstance(result["summary"], str)
    identity = summarizer({"title": TITLE, "documents": DOCUMENTS}, ranker="identity", max_input_tokens=30)
    assert [p["index"] for p in identity["paragraphs"]] == [0, 1, 2][: len(identity["paragraphs"])]
    with pytest.raises(ValueError, match="reference"):
        summarizer({"title": TITLE, "documents": DOCUMENTS}, ranker="oracle")
    with pytest.raises(ValueError, match="unknown wikisum pipeline option"):
        summarizer("text", num_sentences=3)


def test_pipeline_batches_give_the_single_results(saved_wikisum):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    inputs = [{"title": TITLE, "documents": DOCUMENTS}, "One long text.\nWith two lines.", {"document": "Short."}]
    single = [summarizer(item) for item in inputs]
    assert summarizer(inputs, batch_size=2) == single


EMPTY_INPUTS = ["", " \n\t \n", {"documents": []}, {"documents": ["", "  "]}, {"title": TITLE}]
EMPTY_INPUTS += [{"title": TITLE, "documents": []}, {"title": TITLE, "document": "\n\n"}]


@pytest.mark.parametrize("inputs", EMPTY_INPUTS, ids=repr)
def test_processor_reports_that_empty_input_has_no_paragraph(inputs, minilm_tokenizer):
    from sumformers.processing.processing_wikisum import WikiSumProcessor

    processed = WikiSumProcessor(minilm_tokenizer, WikiSumConfig(max_input_tokens=48))(inputs)
    assert processed["paragraphs"] == ()
    assert processed["input_ids"].shape == processed["attention_mask"].shape == (1, 0)
    assert processed["input_ids"].dtype == torch.long


def test_processor_feeds_a_title_when_no_paragraph_fits_L(minilm_tokenizer):
    """Not empty input: documents too long for a tiny L still leave the title for the decoder to read."""
    from sumformers.processing.processing_wikisum import WikiSumProcessor

    processed = WikiSumProcessor(minilm_tokenizer, WikiSumConfig(max_input_tokens=48))(
        {"title": TITLE, "documents": DOCUMENTS}, max_input_tokens=4
    )
    assert processed["paragraphs"] == () and processed["input_ids"].shape == (1, 5)


def count_generate_calls(summarizer, monkeypatch) -> list:
    calls = []
    generate = summarizer.model.generate

    def counting(*args, **kwargs):
        calls.append(args)
        return generate(*args, **kwargs)

    monkeypatch.setattr(summarizer.model, "generate", counting)
    return calls


@pytest.mark.parametrize("inputs", EMPTY_INPUTS, ids=repr)
def test_pipeline_gives_an_empty_summary_for_empty_input_without_generating(inputs, saved_wikisum, monkeypatch):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    calls = count_generate_calls(summarizer, monkeypatch)
    assert summarizer(inputs) == {"summary": "", "paragraphs": [], "input_tokens": 0}
    assert calls == []


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_pipeline_batch_of_empty_and_non_empty_inputs_gives_each_its_result(batch_size, saved_wikisum, monkeypatch):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    inputs = ["", {"title": TITLE, "documents": DOCUMENTS}, {"documents": ["  "]}, {"title": TITLE}, "One text."]
    single = [summarizer(item) for item in inputs[1::3]]
    calls = count_generate_calls(summarizer, monkeypatch)
    results = summarizer(inputs, batch_size=batch_size)
    empty = {"summary": "", "paragraphs": [], "input_tokens": 0}
    assert results == [empty, single[0], empty, empty, single[1]]
    assert all(result["paragraphs"] and result["input_tokens"] > 0 for result in single)
    assert len(calls) == 2  # once per non-empty input


@pytest.mark.parametrize("batch_size", [1, 2])
def test_pipeline_batch_with_bad_items_gives_errors_for_them_and_summaries_for_the_others(batch_size, saved_wikisum):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    good = [{"title": TITLE, "documents": DOCUMENTS}, "One long text.\nWith two lines."]
    single = [summarizer(item) for item in good]
    results = summarizer([None, good[0], 3, good[1], 2.5], batch_size=batch_size)
    error = "expected a string or a dict with `title` and `documents`, got {}"
    assert results == [
        {"error": error.format("NoneType")},
        single[0],
        {"error": error.format("int")},
        single[1],
        {"error": error.format("float")},
    ]
    assert summarizer([None, 3]) == [{"error": error.format("NoneType")}, {"error": error.format("int")}]


PIPELINE_LIMIT = "the model's limit of 16384 positions (config.max_position_embeddings)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # the longest decoder input the options allow: L = 48 (the config's) tokens and the separator
        (
            {"max_new_tokens": 10**9},
            f"49 input tokens + max_new_tokens=1000000000 = 1000000049 exceed {PIPELINE_LIMIT}",
        ),
        ({"max_new_tokens": -1}, "`max_new_tokens` must be greater than 0, but is -1."),
        ({"num_beams": 0}, "num_beams must be at least 1, got 0"),
        ({"num_beams": 1.5}, "num_beams must be an integer, got 1.5"),
        ({"num_beams": "2"}, "num_beams must be an integer, got '2'"),
        ({"max_new_tokens": 5, "min_new_tokens": 6}, "min_new_tokens (6) must not exceed max_new_tokens (5)"),
        (
            {"max_input_tokens": 1},
            (
                "max_input_tokens must be between 2 and 16382, got 1 (the model's limit is 16384 positions, "
                "config.max_position_embeddings, for the input, separator and summary)"
            ),
        ),
        (
            {"max_input_tokens": 16383},
            (
                "max_input_tokens must be between 2 and 16382, got 16383 (the model's limit is 16384 positions, "
                "config.max_position_embeddings, for the input, separator and summary)"
            ),
        ),
        (
            {"max_input_tokens": 16382, "max_new_tokens": 2},
            f"16383 input tokens + max_new_tokens=2 = 16385 exceed {PIPELINE_LIMIT}",
        ),
        ({"max_input_tokens": 40.0}, "max_input_tokens must be an integer, got 40.0"),
    ],
)
def test_pipeline_refuses_absurd_settings_before_any_work(options, message, saved_wikisum, monkeypatch):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    monkeypatch.setattr(summarizer, "preprocess", lambda *args, **kwargs: pytest.fail("preprocess ran"))
    monkeypatch.setattr(summarizer.model, "generate", lambda *args, **kwargs: pytest.fail("generate ran"))
    for inputs in ({"title": TITLE, "documents": DOCUMENTS}, [TITLE, ""]):
        with pytest.raises(ValueError) as error:
            summarizer(inputs, **options)
        assert str(error.value) == message


def test_pipeline_maximum_length_lowers_the_saved_minimum(saved_wikisum):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    summarizer.model.generation_config.min_new_tokens = 6  # the saved maximum is 6 too
    inputs = {"title": TITLE, "documents": DOCUMENTS}
    assert summarizer(inputs, max_new_tokens=3) == summarizer(inputs, max_new_tokens=3, min_new_tokens=3)


@pytest.mark.parametrize("where", ["saved", "given"])
def test_pipeline_default_maximum_rises_to_a_longer_minimum(where, saved_wikisum, monkeypatch):
    import sumformers
    from sumformers.pipelines.wikisum import DEFAULT_MAX_NEW_TOKENS

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    summarizer.model.generation_config.update(max_new_tokens=None, num_beams=1, do_sample=False)
    minimum = DEFAULT_MAX_NEW_TOKENS + 5
    if where == "saved":
        summarizer.model.generation_config.min_new_tokens = minimum
    generate, lengths = summarizer.model.generate, []

    def recording_generate(input_ids, **kwargs):
        output = generate(input_ids, **kwargs)
        lengths.append(output.shape[1] - input_ids.shape[1])
        return output

    monkeypatch.setattr(summarizer.model, "generate", recording_generate)
    summarizer({"title": TITLE, "documents": DOCUMENTS}, **({"min_new_tokens": minimum} if where == "given" else {}))
    # the default maximum of 160 would contradict the minimum: it rises to it and the summary is that long
    assert lengths == [minimum]


def test_cli_summarizes_jsonl_with_titles(saved_wikisum, tmp_path, capsys):
    from sumformers_cli import main

    source = tmp_path / "input.jsonl"
    source.write_text(
        json.dumps({"id": "a", "title": TITLE, "documents": DOCUMENTS})
        + "\n"
        + json.dumps({"id": "b", "document": "x y z"})
        + "\n"
    )
    assert (
        main(
            [
                "summarize",
                "--model",
                str(saved_wikisum),
                "--ranker",
                "textrank",
                "--max-input-tokens",
                "24",
                str(source),
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["id"] for row in rows] == ["a", "b"]
    assert rows[0]["input_tokens"] == 25 and rows[0]["paragraphs"]
    with pytest.raises(SystemExit):
        main(["summarize", "--model", str(saved_wikisum), "--num-sentences", "2", str(source)])
    assert "does not apply to a wikisum model" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_status:
        main(["summarize", "--model", str(saved_wikisum), "--max-new-tokens", "1000000000", str(source)])
    assert exit_status.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "sumformers: error: 49 input tokens + max_new_tokens=1000000000 = 1000000049 exceed the model's limit of "
        "16384 positions (config.max_position_embeddings)"
    )


REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.modules["sumformers"] = None  # make `import sumformers` fail
    import torch
    from transformers import AutoModelForCausalLM, pipeline
    repo, title, documents = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    model = AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    summarizer = pipeline(model=repo, trust_remote_code=True)
    result = summarizer({"title": title, "documents": documents}, num_beams=2)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 103]])
    generated = model.generate(ids, max_new_tokens=8, num_beams=2)
    print(json.dumps({"task": summarizer.task, "result": result, "generated": generated.tolist()}))
    """
)


def test_export_round_trip_generates_the_same_tokens(saved_wikisum, tmp_path):
    import sumformers

    repo = export_model(str(saved_wikisum), str(tmp_path / "repo"))
    config = json.loads((repo / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_wikisum.WikiSumForCausalLM"
    assert config["custom_pipelines"]["wikisum"]["impl"] == "wikisum.WikiSumPipeline"
    assert {"ranking.py", "attention.py", "wikisum.py", "modeling_wikisum.py"} <= {p.name for p in repo.glob("*.py")}
    assert json.loads((repo / "generation_config.json").read_text())["max_new_tokens"] == 6
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    completed = subprocess.run(
        [sys.executable, "-c", REMOTE_SCRIPT, str(repo), TITLE, json.dumps(DOCUMENTS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    remote = json.loads(completed.stdout.strip().splitlines()[-1])
    local_pipeline = sumformers.load_pipeline(str(saved_wikisum))
    assert remote["task"] == "wikisum"
    assert remote["result"] == local_pipeline({"title": TITLE, "documents": DOCUMENTS}, num_beams=2)
    local = load_model(str(saved_wikisum)).generate(
        torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 103]]), max_new_tokens=8, num_beams=2
    )
    assert remote["generated"] == local.tolist()


# ----------------------------------------------------------------------------------------------------------------
# The shipped checkpoint
# ----------------------------------------------------------------------------------------------------------------

SHIPPED = "wikisum-tdmca-copy-minilm-cnndm"
ARTICLE = Path(__file__).resolve().parents[2] / "examples" / "cnn_missing_student.txt"


@pytest.mark.skipif(SHIPPED not in shipped_checkpoints(), reason="the trained WikiSum checkpoint is not shipped")
def test_shipped_checkpoint_is_a_small_fp16_adapter_that_writes_from_the_article():
    from safetensors import safe_open

    folder = Path(shipped_checkpoints()[SHIPPED])
    assert sum(path.stat().st_size for path in folder.iterdir()) <= 20 * 2**20
    with safe_open(str(folder / "adapter_model.safetensors"), "pt") as weights:
        assert {weights.get_tensor(name).dtype for name in weights.keys()} == {torch.float16}
    model = load_model(SHIPPED)
    config = model.config
    assert model.dtype == torch.float32 and config.variant == "T-DMCA" and config.decoder_init == "encoder"
    # trigram blocking and a minimum length are shipped, and the card says why, with the measurements behind them
    settings = model.generation_config
    assert config.copy_mechanism and settings.no_repeat_ngram_size == 3 and settings.min_new_tokens == 50
    card = (folder / "README.md").read_text()
    assert (
        "repeated 3-grams of WordPieces blocked, at least 50 WordPieces written (both chosen on 100 CNN articles "
        "not reported here"
    ) in card
    import sumformers

    article = ARTICLE.read_text()
    summary = sumformers.load_pipeline(SHIPPED)({"documents": [article]})["summary"]
    words = re.findall(r"[a-z0-9]+", summary.lower())
    # it names the missing student (Cayman Naib) from the article (the checkpoint it replaced wrote ".,,,. the,. the"
    # on every input); blocking leaves no word trigram twice
    assert len(words) >= 10 and {"cayman", "naib"} & set(words)
    trigrams = list(zip(words, words[1:], words[2:]))
    assert len(set(trigrams)) == len(trigrams)


# ----------------------------------------------------------------------------------------------------------------
# From scratch stays the default: a from-scratch start gives what it gave before decoder_init existed
# ----------------------------------------------------------------------------------------------------------------

PIN_IDS = [[101, 7592, 2088, 2003, 1037, 3231, 1997, 1996, 2047, 5166, 102, 2009, 2950, 2769, 2005, 2816, 103]]
PIN_IDS[0] += [1996, 2473, 2097, 3696, 2009, 2279, 2733, 1012, 102]


def test_from_encoder_without_decoder_init_is_the_from_scratch_start_it_was():
    torch.manual_seed(0)
    model = WikiSumForCausalLM.from_encoder(
        "minilm", hidden_size=32, embedding_size=16, num_attention_heads=4, intermediate_size=64, local_block_size=4
    ).eval()
    assert model.config.decoder_init == "random" and model.model.norm is not None and model.model.embed_norm is None
    ids = torch.tensor(PIN_IDS)
    with torch.no_grad():
        # the loss the same seed gave before decoder_init existed (main at 36b0c49)
        assert model(ids, labels=ids).loss.item() == pytest.approx(10.328494, abs=1e-5)


# ----------------------------------------------------------------------------------------------------------------
# A decoder started from a pretrained encoder (decoder_init="encoder")
# ----------------------------------------------------------------------------------------------------------------

# five layers over the tiny encoder's two: decoder layer i starts from encoder layer i mod 2
DEEPER_T_DMCA = ["local", "compressed", "full", "local", "compressed"]


def encoder_started(folder, implementation="eager", **overrides) -> WikiSumForCausalLM:
    settings = dict(
        decoder_init="encoder",
        attention_layers=DEEPER_T_DMCA,
        local_block_size=4,
        hidden_dropout=0.0,
        attn_implementation=implementation,
    )
    settings.update(overrides)
    return WikiSumForCausalLM.from_encoder(str(folder), **settings).eval()


def word_ids(batch=1, length=18, seed=1):
    return torch.randint(1000, 30000, (batch, length), generator=torch.Generator().manual_seed(seed))


def assert_no_position_sees_a_later_token(model, ids) -> torch.Tensor:
    """Changing the token at a position changes no logit before it (and its own); returns the logits of `ids`."""
    base = logits(model, ids)
    for position in (0, 4, 7, 12, 17):
        other = ids.clone()
        other[0, position] += 1
        changed = (logits(model, other) - base).abs().amax(-1)[0] > 0
        assert not changed[:position].any(), f"a position before {position} saw it"
        assert changed[position]
    return base


@pytest.mark.parametrize(
    "implementation", ["eager", "sdpa", "blocked", pytest.param("flex_attention", marks=pytest.mark.slow)]
)
def test_encoder_started_decoder_never_sees_the_future(tiny_encoder_folder, implementation):
    model = encoder_started(tiny_encoder_folder, implementation, moe_layers=[2], num_experts=2)
    ids = word_ids()
    base = assert_no_position_sees_a_later_token(model, ids)
    reference = encoder_started(tiny_encoder_folder, "eager", moe_layers=[2], num_experts=2)
    torch.testing.assert_close(base, logits(reference, ids))


def test_encoder_started_decoder_holds_the_encoders_weights(tiny_encoder_folder):
    from transformers import BertModel

    encoder = BertModel.from_pretrained(tiny_encoder_folder, add_pooling_layer=False)
    model = encoder_started(tiny_encoder_folder, moe_layers=[2], num_experts=2)
    config = model.config
    assert config.encoder_layer_map == [0, 1, 0, 1, 0]
    assert (config.hidden_size, config.embedding_size, config.num_attention_heads, config.intermediate_size) == (
        32,
        32,
        4,
        64,
    )
    assert (config.layer_norm_position, config.hidden_act, config.attention_bias) == ("post", "gelu", True)
    state, source = model.state_dict(), encoder.state_dict()
    copies = {
        "model.layers.0.attention.q_proj.weight": "encoder.layer.0.attention.self.query.weight",
        "model.layers.3.attention.k_proj.bias": "encoder.layer.1.attention.self.key.bias",
        "model.layers.4.attention.v_proj.weight": "encoder.layer.0.attention.self.value.weight",
        "model.layers.1.attention.o_proj.weight": "encoder.layer.1.attention.output.dense.weight",
        "model.layers.1.attention_norm.weight": "encoder.layer.1.attention.output.LayerNorm.weight",
        "model.layers.3.feed_forward_norm.bias": "encoder.layer.1.output.LayerNorm.bias",
        "model.layers.0.feed_forward.up.weight": "encoder.layer.0.intermediate.dense.weight",
        "model.layers.2.feed_forward.experts.0.up.bias": "encoder.layer.0.intermediate.dense.bias",
        "model.layers.2.feed_forward.experts.1.down.weight": "encoder.layer.0.output.dense.weight",
        "model.embed_norm.bias": "embeddings.LayerNorm.bias",
    }
    for name, origin in copies.items():
        torch.testing.assert_close(state[name], source[origin], atol=0, rtol=0, msg=name)
    # word embeddings plus segment 0 and the mean position, tied with the output; projections start as the identity
    embeddings = encoder.embeddings
    expected = (
        embeddings.word_embeddings.weight
        + embeddings.token_type_embeddings.weight[0]
        + embeddings.position_embeddings.weight.mean(0)
    )
    torch.testing.assert_close(model.model.embed_tokens.weight, expected)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert torch.equal(model.output_projection.weight, torch.eye(32))
    # the scaled timing signal is as large as the centred learned position vectors
    positions = embeddings.position_embeddings.weight
    timing = timing_signal(torch.arange(512), 32) * config.timing_signal_scale
    assert timing.pow(2).mean().sqrt().item() == pytest.approx(
        (positions - positions.mean(0)).pow(2).mean().sqrt().item(), rel=1e-4
    )
    assert_compression_starts_as_averages(model.model.layers[1].attention)


def assert_compression_starts_as_averages(attention) -> None:
    """A compressed layer's slot is the mean key and the mean value of its three positions; the null slot is zero."""
    keys, values = torch.randn(2, 6, 32), torch.randn(2, 6, 32)
    with torch.no_grad():
        slot_keys, slot_values = attention.compress(keys, values)
    torch.testing.assert_close(slot_keys, keys.view(2, 2, 3, 32).mean(2))
    torch.testing.assert_close(slot_values, values.view(2, 2, 3, 32).mean(2))
    assert not attention.null_slot.key.any() and not attention.null_slot.value.any()


def test_encoder_started_full_layers_are_berts_layers_under_a_causal_mask(tmp_path, minilm_tokenizer):
    """Reference check of the post-norm layout, biases, activation and embeddings: with one vector at every
    position (so the inputs are BERT's exactly) two full-attention layers compute what the same BERT computes with
    a causal mask, and the tied output scores words as BERT's embeddings do."""
    from transformers import BertModel

    torch.manual_seed(0)
    encoder = BertModel(tiny_bert_config(), add_pooling_layer=False)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
        table = encoder.embeddings.position_embeddings.weight
        table.copy_(table[:1].clone().expand_as(table))
    encoder.save_pretrained(tmp_path)
    minilm_tokenizer.save_pretrained(tmp_path)
    model = encoder_started(tmp_path, attention_layers=["full", "full"])
    assert model.config.timing_signal_scale == 0.0
    causal = BertModel.from_pretrained(tmp_path, add_pooling_layer=False, is_decoder=True).eval()
    ids = word_ids(2, 9)
    with torch.no_grad():
        expected = causal(ids).last_hidden_state
        torch.testing.assert_close(model.model(ids).last_hidden_state, expected, atol=1e-5, rtol=1e-5)
        expected_scores = torch.log_softmax(expected @ encoder.embeddings.word_embeddings.weight.T, dim=-1)
        torch.testing.assert_close(torch.log_softmax(logits(model, ids), -1), expected_scores, atol=1e-4, rtol=1e-4)


def test_learned_positions_make_full_layers_berts_under_a_causal_mask(tiny_encoder_folder, tmp_path):
    """With `position_embeddings="learned"` the decoder takes BERT's own position table (not the constant one of the
    test above): full-attention layers compute causal BERT's hidden states exactly, at every position."""
    from transformers import BertModel

    model = encoder_started(
        tiny_encoder_folder, attention_layers=["full", "full"], position_embeddings="learned", max_input_tokens=400
    )
    assert model.config.max_position_embeddings == 512
    causal = BertModel.from_pretrained(tiny_encoder_folder, add_pooling_layer=False, is_decoder=True).eval()
    ids = word_ids(2, 40)
    with torch.no_grad():
        torch.testing.assert_close(
            model.model(ids).last_hidden_state, causal(ids).last_hidden_state, atol=1e-5, rtol=1e-5
        )
    # a T-DMCA layout over the learned table still sees no later token, and the table survives saving
    tdmca = encoder_started(tiny_encoder_folder, position_embeddings="learned", max_input_tokens=400)
    assert_no_position_sees_a_later_token(tdmca, word_ids())
    tdmca.save_pretrained(tmp_path)
    loaded = WikiSumForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    torch.testing.assert_close(logits(loaded, word_ids()), logits(tdmca, word_ids()), atol=0, rtol=0)


def test_learned_positions_are_limited_to_the_table(tiny_encoder_folder):
    with pytest.raises(ValueError) as error:
        encoder_started(
            tiny_encoder_folder, position_embeddings="learned", max_position_embeddings=600, max_input_tokens=400
        )
    assert str(error.value) == (
        "decoder_init='encoder' needs the encoder's layer settings: max_position_embeddings=600 (the encoder "
        "learned 512)"
    )
    with pytest.raises(ValueError, match=r"^max_input_tokens must be in \[2, max_position_embeddings - 2 = 510\]"):
        encoder_started(tiny_encoder_folder, position_embeddings="learned")  # the default L, 1,024, does not fit
    model = encoder_started(tiny_encoder_folder, position_embeddings="learned", max_input_tokens=400)
    with pytest.raises(ValueError) as error:
        model(word_ids(1, 513))
    assert str(error.value) == (
        "position 512 is beyond the learned position table's 512 positions (config.max_position_embeddings)"
    )
    with pytest.raises(ValueError, match="^position_embeddings must be one of"):
        WikiSumConfig(position_embeddings="rotary")


def test_encoder_started_decoder_round_trips_through_from_pretrained(tiny_encoder_folder, tmp_path):
    model = encoder_started(tiny_encoder_folder, moe_layers=[2], num_experts=2)
    model.save_pretrained(tmp_path / "saved")
    loaded = WikiSumForCausalLM.from_pretrained(tmp_path / "saved", attn_implementation="eager").eval()
    assert loaded.config.decoder_init == "encoder" and loaded.config.encoder_layer_map == [0, 1, 0, 1, 0]
    assert loaded.model.norm is None and loaded.model.embed_norm is not None
    ids = word_ids(2, 13)
    torch.testing.assert_close(logits(loaded, ids), logits(model, ids), atol=0, rtol=0)


def test_encoder_layer_map_can_be_given_and_is_checked(tiny_encoder_folder):
    from transformers import BertModel

    encoder = BertModel.from_pretrained(tiny_encoder_folder, add_pooling_layer=False)
    model = encoder_started(
        tiny_encoder_folder, attention_layers=["local", "compressed", "local"], encoder_layer_map=[1, 1, 0]
    )
    for layer, source in zip(model.model.layers, (1, 1, 0)):
        assert torch.equal(layer.attention.q_proj.weight, encoder.encoder.layer[source].attention.self.query.weight)
    with pytest.raises(ValueError) as error:
        encoder_started(tiny_encoder_folder, encoder_layer_map=[0, 2, 0, 1, 0])
    assert str(error.value) == (
        "decoder_init='encoder' needs the encoder's layer settings: encoder_layer_map=[0, 2, 0, 1, 0] must name one of "
        "the 2 layers each"
    )
    with pytest.raises(ValueError) as error:
        encoder_started(tiny_encoder_folder, intermediate_size=128)
    assert str(error.value) == (
        "decoder_init='encoder' needs the encoder's layer settings: intermediate_size=128 (the encoder's: 64)"
    )
    with pytest.raises(ValueError, match="^decoder_init must be one of"):
        encoder_started(tiny_encoder_folder, decoder_init="bert")
    with pytest.raises(ValueError, match="^encoder_layer_map names 2 layers for 5 decoder layers$"):
        encoder_started(tiny_encoder_folder, encoder_layer_map=[0, 1])


def test_encoder_started_decoder_takes_the_encoders_vocabulary_and_special_tokens(tmp_path):
    """An encoder whose WordPiece vocabulary is not MiniLM's: the special token ids, the vocabulary size and the
    processor's input all follow its tokenizer."""
    from transformers import BertModel, BertTokenizerFast

    from sumformers.processing.processing_wikisum import WikiSumProcessor

    words = "solar power cities panels roofs public install on the of a in weather was mild last week".split()
    vocabulary = ["[UNK]", "[PAD]", "[SEP]", "[CLS]", "[MASK]", ".", ","] + words
    tokenizer = BertTokenizerFast(vocab={token: index for index, token in enumerate(vocabulary)})
    torch.manual_seed(0)
    BertModel(tiny_bert_config(vocab_size=len(vocabulary), pad_token_id=1), add_pooling_layer=False).save_pretrained(
        tmp_path
    )
    tokenizer.save_pretrained(tmp_path)
    model = encoder_started(tmp_path, attention_layers=["local", "compressed"])
    config = model.config
    assert config.vocab_size == len(vocabulary) == model.lm_head.weight.shape[0]
    special = (config.bos_token_id, config.eos_token_id, config.paragraph_separator_token_id, config.separator_token_id)
    assert special == (3, 2, 2, 4) and config.pad_token_id == 1
    processed = WikiSumProcessor(tokenizer, config)({"title": "solar power", "documents": ["install panels on roofs."]})
    # [CLS] solar power [SEP] install panels on roofs . [SEP] [MASK]
    assert processed["input_ids"].tolist() == [[3, 7, 8, 2, 13, 10, 14, 11, 5, 2, 4]]


# ----------------------------------------------------------------------------------------------------------------
# An adapter checkpoint over the encoder's copy: LoRA on the copied layers, the modules without a counterpart in the
# encoder trained in full, the rest rebuilt by `from_encoder` when loading
# ----------------------------------------------------------------------------------------------------------------

ALL_PROJECTIONS = "q_proj,k_proj,v_proj,o_proj,up,down"


def test_contract_follows_the_decoder_start(tiny_encoder_folder):
    from sumformers.training import ModelArguments, apply_lora

    scratch = tiny_model(attention_layers=["local", "compressed"])
    assert (scratch.pretrained_modules, scratch.new_modules, scratch.lora_layers) == ((), (), None)
    with pytest.raises(ValueError, match="^WikiSumForCausalLM has no pretrained layers for LoRA to adapt"):
        apply_lora(scratch, ModelArguments(lora_target_modules=ALL_PROJECTIONS))
    started = encoder_started(tiny_encoder_folder, moe_layers=[2], num_experts=2)
    assert started.pretrained_modules == ("model", "lm_head") and started.lora_layers == "model.layers"
    assert started.new_modules == (
        "embed_projection",
        "output_projection",
        "key_compression",
        "value_compression",
        "null_slot",
        "router",
    )
    # only the modules a layout has
    full = encoder_started(tiny_encoder_folder, attention_layers=["full", "local"])
    assert full.new_modules == ("embed_projection", "output_projection")


def test_from_encoder_rebuilds_every_weight_outside_the_new_modules(tiny_encoder_folder):
    """What an adapter checkpoint leaves out, loading rebuilds exactly: two starts under different random seeds agree
    on every weight but the new modules' (the routers start random, so they must be saved)."""
    torch.manual_seed(1)
    first = encoder_started(tiny_encoder_folder, moe_layers=[2], num_experts=2)
    torch.manual_seed(2)
    second = encoder_started(tiny_encoder_folder, moe_layers=[2], num_experts=2)
    new = set(first.new_modules)
    other = second.state_dict()
    rebuilt = [name for name in first.state_dict() if not new & set(name.split("."))]
    assert len(rebuilt) > 50
    for name in rebuilt:
        torch.testing.assert_close(first.state_dict()[name], other[name], atol=0, rtol=0, msg=name)
    routers = [model.model.layers[2].feed_forward.router.weight for model in (first, second)]
    assert not torch.equal(*routers)


@pytest.fixture(scope="module")
def adapter_checkpoint(tiny_encoder_folder, minilm_tokenizer, tmp_path_factory):
    """The encoder-started L-M-F-L-M decoder (experts in layer 2) with LoRA r=4 on all six projections of every layer,
    random LoRA weights and its new modules moved off their start (so that both matter), saved as an adapter
    checkpoint with GNMT decoding in its generation config."""
    from transformers import GenerationConfig

    from sumformers.hub import save_adapter_checkpoint
    from test_modeling_common import random_lora

    model = encoder_started(tiny_encoder_folder, moe_layers=[2], num_experts=2)
    model.generation_config = GenerationConfig(
        num_beams=2, length_penalty=0.6, length_penalty_type="gnmt", max_new_tokens=6, eos_token_id=102
    )
    peft_model = random_lora(model, ALL_PROJECTIONS, module_noise=0.05).eval()
    folder = tmp_path_factory.mktemp("wikisum-adapter") / "checkpoint"
    save_adapter_checkpoint(peft_model, folder, minilm_tokenizer, {"model_name": "wikisum-adapter"})
    return peft_model, folder


def test_adapter_checkpoint_holds_exactly_the_lora_and_new_module_tensors_in_fp16(adapter_checkpoint):
    from safetensors import safe_open

    peft_model, folder = adapter_checkpoint
    assert not (folder / "model.safetensors").exists()
    weights = folder / "adapter_model.safetensors"
    with safe_open(str(weights), "pt") as saved:
        tensors = {name: saved.get_tensor(name) for name in saved.keys()}
    assert {tensor.dtype for tensor in tensors.values()} == {torch.float16}
    # PEFT's names: base_model.model.<module>.lora_A.weight / .lora_B.weight for the adapted projections, and
    # base_model.model.<parameter> for the new modules
    model = WikiSumForCausalLM(peft_model.get_base_model().config)
    projections = ALL_PROJECTIONS.split(",")
    layers = [name for name, _ in model.named_modules() if name.startswith("model.layers.")]
    adapted = [name for name in layers if name.split(".")[-1] in projections]
    new = [name for name, _ in model.named_parameters() if set(model.new_modules) & set(name.split("."))]
    expected = {f"base_model.model.{name}.lora_{half}.weight" for name in adapted for half in "AB"}
    expected |= {f"base_model.model.{name}" for name in new}
    assert set(tensors) == expected
    # by hand (hidden 32, r 4; 5 layers, layer 2 with 2 experts, layers 1 and 4 compressed):
    #   LoRA: q, k, v, o 4 x (4 * 32 + 32 * 4) = 1,024; up 4 * 32 + 64 * 4 = 384, down 4 * 64 + 32 * 4 = 384;
    #         4 dense layers x 1,792 + layer 2's 1,024 + 2 x 768 = 9,728
    #   new:  projections to and from the embeddings 2 x 32 * 32 = 2,048; per compressed layer two convolutions
    #         2 x (32 * 32 * 3 + 32) = 6,208 and null slots 2 x 32 = 64, twice: 12,544; router 2 * 32 = 64
    #   all:  9,728 + 2,048 + 12,544 + 64 = 24,384 values, 48,768 bytes in fp16
    trainable = sum(parameter.numel() for parameter in peft_model.parameters() if parameter.requires_grad)
    assert sum(tensor.numel() for tensor in tensors.values()) == trainable == 24_384
    # the file is those bytes and safetensors' JSON header (its length in the first 8 bytes) and nothing else
    header = int.from_bytes(weights.read_bytes()[:8], "little")
    assert weights.stat().st_size == 8 + header + 2 * 24_384


def test_adapter_checkpoint_loads_as_the_peft_model_that_saved_it(adapter_checkpoint):
    import copy

    from transformers import AutoModelForCausalLM

    import sumformers

    peft_model, folder = adapter_checkpoint
    ids = word_ids(2, 19)
    expected = logits(peft_model, ids)
    # the same model with its trained tensors rounded as the checkpoint stores them
    rounded = copy.deepcopy(peft_model)
    with torch.no_grad():
        for parameter in rounded.parameters():
            if parameter.requires_grad:
                parameter.copy_(parameter.half().float())
    expected_rounded = logits(rounded, ids)
    for load in (WikiSumForCausalLM.from_pretrained, AutoModelForCausalLM.from_pretrained, sumformers.load_model):
        loaded = load(str(folder)).eval()
        assert type(loaded) is WikiSumForCausalLM and loaded.dtype == torch.float32
        assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
        settings = loaded.generation_config
        assert (settings.num_beams, settings.length_penalty, settings.length_penalty_type) == (2, 0.6, "gnmt")
        actual = logits(loaded, ids)
        torch.testing.assert_close(actual, expected_rounded, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(actual, expected, atol=1e-2, rtol=1e-3)  # fp16 storage of the trained tensors


@pytest.mark.parametrize("implementation", ["eager", "sdpa", "blocked"])
def test_adapter_checkpoint_loads_as_a_causal_decoder(adapter_checkpoint, implementation):
    loaded = WikiSumForCausalLM.from_pretrained(str(adapter_checkpoint[1]), attn_implementation=implementation)
    assert loaded.config._attn_implementation == implementation
    assert_no_position_sees_a_later_token(loaded.eval(), word_ids())


def test_adapter_checkpoint_exports_merged_with_the_same_logits(adapter_checkpoint, tmp_path):
    from transformers import AutoModelForCausalLM
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    folder = adapter_checkpoint[1]
    repo = export_model(str(folder), str(tmp_path / "sumformers_wikisum_adapter_export"))
    assert (repo / "model.safetensors").is_file() and not (repo / "adapter_model.safetensors").exists()
    assert json.loads((repo / "generation_config.json").read_text())["length_penalty_type"] == "gnmt"
    config = json.loads((repo / "config.json").read_text())
    remote_class = get_class_from_dynamic_module(config["auto_map"]["AutoModelForCausalLM"], str(repo))
    ids = word_ids(2, 19)
    expected = logits(load_model(str(folder)), ids)
    for loaded in (
        AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=True),
        remote_class.from_pretrained(repo),
    ):
        torch.testing.assert_close(logits(loaded.eval(), ids), expected, atol=1e-6, rtol=1e-6)
    assert remote_class.__module__.startswith("transformers_modules.")


def test_default_minilm_started_adapter_checkpoint_fits_the_shipping_limit(minilm_tokenizer, tmp_path):
    """The default T-DMCA started from the bundled MiniLM (22.7M parameters, about 45 MB in fp16) with LoRA r=16 on
    all six projections, saved untrained: the adapter is 2,620,416 values, 5.2 MB in fp16, far under 20 MB."""
    from sumformers.hub import save_adapter_checkpoint
    from sumformers.training import ModelArguments, apply_lora

    model = WikiSumForCausalLM.from_encoder("minilm", decoder_init="encoder")
    assert model.config.variant == "T-DMCA" and model.config.hidden_size == 384
    arguments = ModelArguments(lora_r=16, lora_alpha=32, lora_target_modules=ALL_PROJECTIONS)
    folder = save_adapter_checkpoint(apply_lora(model, arguments), tmp_path / "checkpoint", minilm_tokenizer)
    # LoRA 5 layers x (4 x 16 * (384 + 384) + 2 x 16 * (384 + 1536)) = 552,960; projections 2 x 384 * 384 = 294,912;
    # 2 compressed layers x (2 x (384 * 384 * 3 + 384) + 2 x 384) = 1,772,544
    weights = folder / "adapter_model.safetensors"
    header = int.from_bytes(weights.read_bytes()[:8], "little")
    assert weights.stat().st_size == 8 + header + 2 * (552_960 + 294_912 + 1_772_544)
    assert sum(path.stat().st_size for path in folder.iterdir()) <= 20 * 2**20


# ----------------------------------------------------------------------------------------------------------------
# GNMT's length penalty beside transformers'
# ----------------------------------------------------------------------------------------------------------------

# After the prompt [1] the model allows exactly two hypotheses (end token 2):
#   A = [10, 2]                  P = 0.6   log P = -0.510826  |A| = 2
#   B = [11, 12, 13, 14, 15, 2]  P = 0.4   log P = -0.916291  |B| = 6
# transformers, log P / |Y| ** 0.6:         A: -0.510826 / 1.515717 = -0.337019   B: -0.916291 / 2.930156 = -0.312711
# GNMT, log P / ((5 + |Y|) / 6) ** 0.6:     A: -0.510826 / 1.096903 = -0.465698   B: -0.916291 / 1.438616 = -0.636925
# so B wins under transformers' normalisation and A under GNMT's.
NEXT_TOKEN = {1: {10: 0.6, 11: 0.4}, 10: {2: 1.0}, 11: {12: 1.0}, 12: {13: 1.0}, 13: {14: 1.0}, 14: {15: 1.0}}
NEXT_TOKEN[15] = {2: 1.0}
HYPOTHESIS_A, HYPOTHESIS_B = [1, 10, 2], [1, 11, 12, 13, 14, 15, 2]


@pytest.fixture
def two_hypothesis_model(monkeypatch):
    """A WikiSum model whose next-token distribution depends only on the last token (`NEXT_TOKEN`; every other token
    has probability e^-10000, none for an unlisted last token)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    model = tiny_model()

    def forward(input_ids=None, attention_mask=None, **kwargs):
        scores = torch.full((*input_ids.shape, 64), -1e4)
        for row, sequence in enumerate(input_ids.tolist()):
            for position, token in enumerate(sequence):
                for following, probability in NEXT_TOKEN.get(token, {}).items():
                    scores[row, position, following] = math.log(probability)
        return CausalLMOutputWithPast(logits=scores)

    monkeypatch.setattr(model, "forward", forward)
    return model


def beams(model, **settings):
    output = model.generate(
        torch.tensor([[1]]),
        num_beams=2,
        num_return_sequences=2,
        length_penalty=0.6,
        max_new_tokens=6,
        do_sample=False,
        use_cache=False,
        output_scores=True,
        return_dict_in_generate=True,
        **settings,
    )
    # up to the end token: transformers fills finished rows with it (the padding id 0 is falsy there)
    sequences = [row[: row.index(2) + 1] for row in output.sequences.tolist()]
    return sequences, output.sequences_scores.tolist()


def test_gnmt_length_penalty_picks_the_hypothesis_the_hand_computation_picks(two_hypothesis_model):
    sequences, scores = beams(two_hypothesis_model)  # transformers' normalisation, the default
    assert sequences == [HYPOTHESIS_B, HYPOTHESIS_A]
    assert scores == pytest.approx([-0.312711, -0.337019], abs=1e-5)
    sequences, scores = beams(two_hypothesis_model, length_penalty_type="gnmt")
    assert sequences == [HYPOTHESIS_A, HYPOTHESIS_B]
    assert scores == pytest.approx([-0.465698, -0.636925], abs=1e-5)
    # the generation config's entry is the default, and the keyword overrides it
    two_hypothesis_model.generation_config.length_penalty_type = "gnmt"
    assert beams(two_hypothesis_model)[0][0] == HYPOTHESIS_A
    assert beams(two_hypothesis_model, length_penalty_type="transformers")[0][0] == HYPOTHESIS_B
    # a generate() call leaves no setting behind
    del two_hypothesis_model.generation_config.length_penalty_type
    assert beams(two_hypothesis_model)[0][0] == HYPOTHESIS_B


def test_gnmt_length_penalty_formula():
    from sumformers.generation.length_penalty import gnmt_length_penalty

    assert gnmt_length_penalty(1, 0.6) == 1.0  # ((5 + 1) / 6) ** alpha
    assert gnmt_length_penalty(7, 0.6) == pytest.approx(1.515717, abs=1e-6)  # 2 ** 0.6
    assert gnmt_length_penalty(30, 0.0) == 1.0


def test_length_penalty_type_is_checked_before_any_work(monkeypatch, saved_wikisum):
    import sumformers

    model = tiny_model()
    monkeypatch.setattr(type(model), "forward", lambda *args, **kwargs: pytest.fail("forward() ran"))
    message = "length_penalty_type must be one of ('transformers', 'gnmt'), got 'wu'"
    with pytest.raises(ValueError) as error:
        model.generate(random_ids(1, 5), max_new_tokens=3, num_beams=2, length_penalty_type="wu")
    assert str(error.value) == message
    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    with pytest.raises(ValueError) as error:
        summarizer({"title": TITLE, "documents": DOCUMENTS}, length_penalty_type="wu")
    assert str(error.value) == message


def test_pipeline_passes_the_length_penalty_type_to_generate(saved_wikisum, monkeypatch):
    import sumformers

    summarizer = sumformers.load_pipeline(str(saved_wikisum))
    seen = []
    generate = type(summarizer.model).generate

    def recording(model, *args, **kwargs):
        seen.append(kwargs.get("length_penalty_type"))
        return generate(model, *args, **kwargs)

    monkeypatch.setattr(type(summarizer.model), "generate", recording)
    summarizer({"title": TITLE, "documents": DOCUMENTS}, num_beams=2, length_penalty_type="gnmt")
    assert seen == ["gnmt"]


# ----------------------------------------------------------------------------------------------------------------
# One trained decoder under another layout (from_trained_decoder: the T-D / T-DMCA / MoE comparison's common start)
# ----------------------------------------------------------------------------------------------------------------


def trained_t_dmca(folder) -> WikiSumForCausalLM:
    """An encoder-started T-DMCA whose new parts (convolutions, null slots) are no longer their start values."""
    model = encoder_started(folder, copy_mechanism=True)
    torch.manual_seed(3)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "_compression" in name or "null_slot" in name:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    return model


def test_from_trained_decoder_under_its_own_layout_is_the_same_model(tiny_encoder_folder):
    source = trained_t_dmca(tiny_encoder_folder)
    copy = WikiSumForCausalLM.from_trained_decoder(source, max_input_tokens=700).eval()
    assert copy.config.max_input_tokens == 700 and source.config.max_input_tokens == 1024
    assert copy.config.attention_layers == DEEPER_T_DMCA and copy.config.copy_mechanism
    for name, weight in source.state_dict().items():
        torch.testing.assert_close(copy.state_dict()[name], weight, atol=0, rtol=0, msg=name)
    ids = word_ids(2, 20)
    torch.testing.assert_close(logits(copy, ids), logits(source, ids), atol=0, rtol=0)


def test_from_trained_decoder_upcycles_experts_and_swaps_attention_types(tiny_encoder_folder):
    source = trained_t_dmca(tiny_encoder_folder)
    weights, ids = source.state_dict(), word_ids(2, 20)
    # experts: every expert is the trained feed-forward block, so the output is the dense model's whatever the router
    moe = WikiSumForCausalLM.from_trained_decoder(source, moe_layers=[1, 3], num_experts=3).eval()
    for expert in range(3):
        for part in ("up.weight", "down.bias"):
            torch.testing.assert_close(
                moe.state_dict()[f"model.layers.3.feed_forward.experts.{expert}.{part}"],
                weights[f"model.layers.3.feed_forward.{part}"], atol=0, rtol=0,
            )  # fmt: skip
    torch.testing.assert_close(logits(moe, ids), logits(source, ids), atol=1e-5, rtol=1e-5)
    # T-D: the compressed layers become full layers with the same projections; their convolutions are dropped
    full = WikiSumForCausalLM.from_trained_decoder(source, attention_layers=["full"] * 5).eval()
    assert not any("_compression" in name or "null_slot" in name for name in full.state_dict())
    assert all(torch.equal(full.state_dict()[name], weights[name]) for name in full.state_dict())
    layer = encoder_started(tiny_encoder_folder, attention_layers=["full"] * 5, copy_mechanism=True)
    layer.load_state_dict(full.state_dict())
    torch.testing.assert_close(logits(full, ids), logits(layer.eval(), ids), atol=0, rtol=0)
    # a layer compressed only in the new layout starts as stride averages and a zero null slot, as from the encoder
    back = WikiSumForCausalLM.from_trained_decoder(full, attention_layers=["compressed"] * 5)
    assert_compression_starts_as_averages(back.model.layers[0].attention)
    # ... while a layer compressed in both keeps the trained convolution
    kept = WikiSumForCausalLM.from_trained_decoder(source, attention_layers=["compressed"] * 5)
    assert torch.equal(kept.state_dict()["model.layers.1.attention.key_compression.weight"],
                       weights["model.layers.1.attention.key_compression.weight"])  # fmt: skip
    assert torch.equal(kept.model.layers[0].attention.null_slot.key, torch.zeros(32))


def test_from_trained_decoder_refuses_other_sizes(tiny_encoder_folder):
    source = encoder_started(tiny_encoder_folder)
    with pytest.raises(
        ValueError, match=r"^from_trained_decoder keeps the source's sizes; cannot change \['hidden_size'\]"
    ):
        WikiSumForCausalLM.from_trained_decoder(source, hidden_size=64)
    with pytest.raises(ValueError, match=r"^from_trained_decoder keeps the source's depth \(5 layers\), got 2"):
        WikiSumForCausalLM.from_trained_decoder(source, attention_layers=["full", "full"])
    with pytest.raises(ValueError, match="must index the 5 layers"):
        WikiSumForCausalLM.from_trained_decoder(source, moe_layers=[7])
    with pytest.raises(
        ValueError, match=r"^from_trained_decoder: \['attention_layer'\] are not WikiSumConfig settings$"
    ):
        WikiSumForCausalLM.from_trained_decoder(source, attention_layer=["full"] * 5)
