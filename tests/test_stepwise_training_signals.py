"""Issue 57's training signals that need the partial summary (`StepwiseCollator`'s duplicates and random prefix
orders, the set loss of `next_choice_logits_and_loss`), `train_stepwise.py --init_from` and the duplicate probe of
`benchmarks/duplicate_probe.py`."""

import copy
import math

import pytest
import torch

from conftest import REPO_ROOT, imported_benchmark, training_script
from sumformers.modeling.sentence_scoring import next_choice_logits_and_loss
from sumformers.training import StepwiseCollator

pytestmark = pytest.mark.usefixtures("one_thread")

SHIPPED = REPO_ROOT / "checkpoints" / "stepwise-hibert-minilm-cnndm"
probe = imported_benchmark("duplicate_probe", "probe")


def no_summary(rows: int, width: int = 0) -> torch.Tensor:
    return torch.full((rows, width), -1, dtype=torch.long)


def test_a_set_label_with_one_positive_is_cross_entropy():
    logits = torch.tensor([[1.0, 2.0, 0.5, -1.0]])  # three sentences and the end unit
    mask = torch.ones(1, 3, dtype=torch.bool)
    _, single = next_choice_logits_and_loss(logits, mask, no_summary(1), torch.tensor([1]))
    _, as_set = next_choice_logits_and_loss(logits, mask, no_summary(1), torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
    # -log softmax: log(e^1 + e^2 + e^0.5 + e^-1) - 2
    expected = math.log(math.e + math.e**2 + math.e**0.5 + math.e**-1) - 2.0
    assert single.item() == pytest.approx(expected, abs=1e-6)
    assert as_set.item() == pytest.approx(expected, abs=1e-6)


def test_a_set_label_scores_the_probability_the_set_holds_and_negatives_add_unlikelihood():
    logits = torch.tensor([[0.0, math.log(2.0), math.log(3.0), math.log(4.0)]])  # probabilities 1, 2, 3, 4 / 10
    mask = torch.ones(1, 3, dtype=torch.bool)
    _, loss = next_choice_logits_and_loss(logits, mask, no_summary(1), torch.tensor([[1.0, 0.0, 1.0, 0.0]]))
    assert loss.item() == pytest.approx(-math.log(0.4), abs=1e-6)
    # sentence 1 (p = 0.2) an explicit negative with weight 0.5: + 0.5 * -log(0.8)
    _, loss = next_choice_logits_and_loss(logits, mask, no_summary(1), torch.tensor([[1.0, -0.5, 1.0, 0.0]]))
    assert loss.item() == pytest.approx(-math.log(0.4) - 0.5 * math.log(0.8), abs=1e-6)
    # a sentence already in the summary is closed: the set's probability is over the open ones (2 + 3 + 4 = 9)
    summary = torch.tensor([[0]])
    _, loss = next_choice_logits_and_loss(logits, mask, summary, torch.tensor([[0.0, 0.0, 1.0, 0.0]]))
    assert loss.item() == pytest.approx(-math.log(3 / 9), abs=1e-6)


def test_set_labels_need_a_positive_in_every_row():
    with pytest.raises(ValueError, match="positive"):
        next_choice_logits_and_loss(torch.zeros(1, 3), torch.ones(1, 2, dtype=torch.bool), no_summary(1),
                                    torch.tensor([[0.0, -1.0, 0.0]]))


def vector_feature(oracle, count):
    # sentence i's vector is (i, i): a copy is told apart by its values
    vectors = torch.arange(count, dtype=torch.float)[:, None].repeat(1, 2)
    return {"oracle": oracle, "labels": [float(i in oracle) for i in range(count)], "sentence_vectors": vectors}


def test_a_duplicate_is_right_before_either_twin_is_chosen_and_a_negative_after():
    collator = StepwiseCollator(None, stepwise=True, duplicate_probability=1.0, duplicate_negative_weight=0.5, seed=3)
    batch = collator([vector_feature([1], 3)])
    # sentence 1 copied right after itself: a b b c, oracle [1] stays [1], the copy at 2
    assert batch["sentence_vectors"][0, :, 0].tolist() == [0.0, 1.0, 1.0, 2.0]
    assert batch["sentence_mask"].tolist() == [[True] * 4]
    prefixes = batch["summary_indices"].tolist()
    assert prefixes[0] == [-1]
    chosen = prefixes[1][0]
    other = 3 - chosen  # the twins are 1 and 2
    assert chosen in (1, 2)
    # step 0: either twin is right; step 1: the end (column 4), the other twin an explicit negative
    expected_end = [0.0] * 5
    expected_end[4], expected_end[other] = 1.0, -0.5
    assert batch["labels"].tolist() == [[0.0, 1.0, 1.0, 0.0, 0.0], expected_end]


def test_a_duplicate_shifts_the_later_oracle_sentences_and_is_skipped_at_the_sentence_limit():
    collator = StepwiseCollator(None, stepwise=True, duplicate_probability=1.0, seed=0)
    doubled, twins = collator.with_duplicate(vector_feature([3, 0], 5))
    twin = twins[0]
    assert twins == (twin, twin + 1) and twin in (3, 0)
    assert doubled["oracle"] == ([3, 0] if twin == 3 else [4, 0])  # only the sentences after the twin move
    assert doubled["sentence_vectors"][:, 0].tolist() == sorted([0.0, 1.0, 2.0, 3.0, 4.0, float(twin)])
    full = StepwiseCollator(None, stepwise=True, duplicate_probability=1.0, max_sentences=5)
    assert full.with_duplicate(vector_feature([3, 0], 5))[1] is None
    with pytest.raises(ValueError, match="precomputed"):
        collator.with_duplicate({"oracle": [0], "labels": [1.0, 0.0]})


def test_random_prefix_orders_accept_any_oracle_sentence_not_yet_chosen():
    collator = StepwiseCollator(None, stepwise=True, prefix_orders=1, seed=1)
    batch = collator([vector_feature([2, 0, 3], 4)])
    prefixes = [[index for index in row if index >= 0] for row in batch["summary_indices"].tolist()]
    labels = batch["labels"].tolist()
    # the paper's rows first, one right choice each (the end: column 4)
    assert prefixes[:4] == [[], [2], [2, 0], [2, 0, 3]]
    assert labels[:4] == [[0, 0, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1]]
    # then one random order: its prefixes of 1 and 2 sentences, right = the rest of {0, 2, 3}
    first, second = prefixes[4], prefixes[5]
    assert len(first) == 1 and len(second) == 2 and second[:1] == first and set(second) < {0, 2, 3}
    for prefix, label in zip(prefixes[4:], labels[4:]):
        assert [index for index in range(5) if label[index] == 1] == [i for i in (0, 2, 3) if i not in prefix]
    assert len(prefixes) == 6


def test_without_the_new_signals_the_rows_are_the_papers():
    batch = StepwiseCollator(None, stepwise=True)([vector_feature([2, 0], 3)])
    assert batch["labels"].tolist() == [2, 0, 3]


def test_the_probe_inserts_the_copy_after_the_first_pick_and_ranks_it(probe):
    assert probe.with_copy(["a", "b", "c"], 1) == ["a", "b", "b", "c"]

    def score(sentences, prefix):
        # a scorer that prefers "b" wherever it is, and reads its summary only by closing what it holds
        logits = torch.tensor([3.0 if sentence == "b" else 1.0 for sentence in sentences] + [0.0])
        for index in prefix:
            logits[index] = -math.inf
        return torch.log_softmax(logits, dim=-1)

    result = probe.probe_sentences(score, ["a", "b", "c"])
    assert (result["first"], result["copy_top"], result["copy_rank"]) == (1, True, 1)
    # before: e^3 / (e + e^3 + e^3 + e + 1); after (the first b closed): e^3 / (e + e^3 + e + 1)
    before = 3.0 - math.log(2 * math.e + 2 * math.e**3 + 1)
    after = 3.0 - math.log(2 * math.e + math.e**3 + 1)
    assert result["log_prob_before"] == pytest.approx(before, abs=1e-5)
    assert result["log_prob_after"] == pytest.approx(after, abs=1e-5)
    assert probe.summarize([result, None])["copy_top"] == 1


@pytest.fixture(scope="module")
def continued():
    script = training_script("train_stepwise")
    arguments = script.StepwiseArguments(init_from=str(SHIPPED))
    return script, *script.continued_adapter(str(SHIPPED), arguments)


def test_init_from_continues_the_shipped_adapter_as_it_scores_with_a_frozen_sentence_encoder(continued):
    from sumformers.hub import load_model

    script, model, tokenizer = continued
    merged = load_model(str(SHIPPED))
    processor = merged.processor_class(tokenizer, merged.config)
    inputs = processor((REPO_ROOT / "examples" / "cnn_missing_student.txt").read_text())
    inputs.pop("sentences")
    model.eval()
    with torch.no_grad():
        expected = merged(**inputs, summary_indices=torch.tensor([[0]])).logits
        got = model(**inputs, summary_indices=torch.tensor([[0]])).logits
    assert torch.allclose(got, expected, atol=1e-4)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert trainable and not any(".sentence_encoder." in name for name in trainable)
    assert any("lora_A" in name and "document_layers" in name for name in trainable)
    # the cache key names the adapter the sentence vectors came from
    feature = {"input_ids": [101, 7592, 102], "cls_positions": [0]}
    plain = script._vector_key(merged, feature, False)
    assert script._vector_key(merged, feature, False, script.adapter_digest(str(SHIPPED))) != plain


SHIPPED_IGNORES_ITS_SUMMARY = (
    "issue 57: the shipped Stepwise HiBERT does not read its partial summary (the copy of its first pick stays its "
    "top next choice in 14 of 20 development articles); a retrained default has not replaced it yet"
)


@pytest.mark.xfail(strict=True, reason=SHIPPED_IGNORES_ITS_SUMMARY)
def test_the_shipped_default_drops_the_copy_of_its_first_pick_on_the_bundled_articles(probe):
    import json

    lines = (REPO_ROOT / "examples" / "cnn_three_articles.jsonl").read_text().splitlines()
    results = probe.probe_model(str(SHIPPED), [json.loads(line)["document"] for line in lines])
    # the copy is not the next choice, and its probability at least halves once its twin is in the summary
    assert not any(result["copy_top"] for result in results)
    assert all(result["log_prob_after"] - result["log_prob_before"] < -math.log(2) for result in results)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=SHIPPED_IGNORES_ITS_SUMMARY)
def test_the_shipped_default_rarely_takes_the_copy_of_its_first_pick_on_development_articles(probe, data_dir):
    from sumformers.text.evaluation import read_jsonl

    rows = read_jsonl(data_dir / "cnn_dailymail" / "validation.jsonl")[300:320]
    figures = probe.summarize(probe.probe_model(str(SHIPPED), [row["document"] for row in rows]))
    assert figures["documents"] == 20
    assert figures["copy_top"] <= 2  # issue 57's target


def test_init_from_adds_a_null_slot_the_checkpoint_lacks_trainable_where_peft_trains_and_saves():
    script = training_script("train_stepwise")
    arguments = script.StepwiseArguments(init_from=str(SHIPPED), config_overrides='{"summary_null_slot": true}')
    model, _ = script.continued_adapter(str(SHIPPED), arguments)
    nulls = {name: parameter for name, parameter in model.named_parameters() if name.endswith("null_state")}
    # two document layers, each with PEFT's trained copy and the frozen original, all starting at zero
    assert len(nulls) == 4 and all(parameter.abs().max() == 0 for parameter in nulls.values())
    assert sorted(".modules_to_save." in name for name, p in nulls.items() if p.requires_grad) == [True, True]
    assert model.get_base_model().config.summary_null_slot is True


def test_train_only_freezes_all_but_the_named_modules_and_refuses_names_that_match_nothing():
    script = training_script("train_stepwise")
    arguments = script.StepwiseArguments(
        init_from=str(SHIPPED), config_overrides='{"summary_null_slot": true}',
        train_only="summary_attention,end_embedding",
    )
    model, _ = script.continued_adapter(str(SHIPPED), arguments)
    trainable = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    # PEFT's trained copies of both layers' summary attention (null slot included) and of the end embedding
    assert trainable and all(".summary_attention." in name or ".end_embedding." in name for name in trainable)
    assert sum(name.endswith("null_state") for name in trainable) == 2
    assert any(".end_embedding." in name for name in trainable)
    assert not any("lora_" in name or ".scorer." in name for name in trainable)
    with pytest.raises(ValueError, match="names no trainable module"):
        script.continued_adapter(str(SHIPPED), script.StepwiseArguments(init_from=str(SHIPPED), train_only="scorr"))


def test_a_near_duplicate_drops_and_swaps_whole_words_of_each_oracle_sentence():
    from sumformers.training import near_duplicate_feature

    # [CLS]=1, [SEP]=2; ids >= 100 are "##" continuations of the word before them
    sentences = [[10, 11, 12], [20, 100, 21, 22, 23, 24, 25, 26, 101, 27, 28, 29, 30, 31, 32], [40, 41]]
    input_ids, cls_positions = [], []
    for sentence in sentences:
        cls_positions.append(len(input_ids))
        input_ids += [1, *sentence, 2]
    feature = {"input_ids": input_ids, "cls_positions": cls_positions, "oracle": [1, 0]}
    near = near_duplicate_feature(feature, lambda token: token >= 100, seed=5)
    assert near == near_duplicate_feature(feature, lambda token: token >= 100, seed=5)
    starts = near["cls_positions"]
    first, second = near["input_ids"][starts[0] : starts[1]], near["input_ids"][starts[1] :]
    assert first[0] == second[0] == 1 and first[-1] == second[-1] == 2
    # 13 words (pieces kept with their heads): round(13 / 7) = 2 dropped, two adjacent ones swapped
    words = [[20, 100], [21], [22], [23], [24], [25], [26, 101], [27], [28], [29], [30], [31], [32]]
    body = first[1:-1]
    kept = [word for word in words if word[0] in body]
    assert len(kept) == 11 and len(body) == sum(map(len, kept))
    for word in kept:  # a continuation never leaves its head
        assert body[body.index(word[0]) : body.index(word[0]) + len(word)] == word
    order = [body.index(word[0]) for word in kept]
    assert sorted(order) != order and sum(a > b for a, b in zip(order, order[1:])) == 1  # one adjacent swap
    # three words: none dropped (fewer than 4), two swapped
    assert sorted(second[1:-1]) == [10, 11, 12] and second[1:-1] != [10, 11, 12]
    assert near["token_type_ids"] == [0] * len(first) + [1] * len(second)
    assert near["attention_mask"] == [1] * len(near["input_ids"]) and near["labels"] == [0.0, 0.0]


def test_a_near_duplicate_share_inserts_the_paraphrases_vector():
    feature = vector_feature([2, 0], 4)
    feature["near_duplicate_vectors"] = torch.tensor([[20.0] * 2, [30.0] * 2])  # paraphrases of 2, then of 0
    collator = StepwiseCollator(None, stepwise=True, duplicate_probability=1.0, near_duplicate_share=1.0, seed=0)
    doubled, (twin, copy) = collator.with_duplicate(feature)
    assert doubled["sentence_vectors"][copy, 0].item() == {2: 20.0, 0: 30.0}[twin]
    with pytest.raises(ValueError, match="near duplicates need their vectors"):
        collator.with_duplicate(vector_feature([1], 3))


def test_anchor_choices_cover_the_oracle_order_rows_except_the_twins():
    collator = StepwiseCollator(None, stepwise=True, duplicate_probability=1.0, prefix_orders=1, anchor=True, seed=3)
    batch = collator([vector_feature([1], 3), vector_feature([2, 0], 3)])
    documents = batch["row_documents"].tolist()
    choices = batch["anchor_choices"].tolist()
    # document 0 (one oracle sentence: two oracle-order rows, no random-order row; its sentence 1 copied to 2)
    assert [row for row, document in zip(choices, documents) if document == 0] == [[True, False, False, True, True]] * 2
    # document 1 (sentence 2 or 0 copied): 3 oracle-order rows anchored but for the twins, 1 random-order row not
    rows = [row for row, document in zip(choices, documents) if document == 1]
    sentences = batch["sentence_vectors"][1, :, 0].tolist()  # the twins hold equal vectors
    twins = [index for index in range(4) if sentences.count(sentences[index]) == 2]
    assert len(twins) == 2
    expected = [index not in twins for index in range(5)]
    assert rows == [expected] * 3 + [[False] * 5]
    assert "anchor_choices" not in StepwiseCollator(None, stepwise=True)([vector_feature([1], 3)])


def test_the_anchor_is_the_kl_from_the_teacher_renormalized_over_the_anchor_choices():
    from sumformers.training import anchor_divergence

    lowest = torch.finfo(torch.float32).min
    logits = torch.tensor([[0.0, math.log(3.0), lowest, 1.0], [5.0, 0.0, 0.0, 0.0]])
    teacher = torch.tensor([[math.log(2.0), math.log(2.0), lowest, 1.0], [0.0, 0.0, 0.0, 0.0]])
    choices = torch.tensor([[True, True, True, False], [False] * 4])  # row 1 is not anchored
    # row 0 over choices 0 and 1 (2 closed in both, 3 left out): model (1/4, 3/4), teacher (1/2, 1/2)
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert anchor_divergence(logits, teacher, choices).item() == pytest.approx(expected, abs=1e-6)
    assert anchor_divergence(teacher, teacher, choices).item() == pytest.approx(0.0, abs=1e-7)


def test_the_anchored_trainer_adds_the_weighted_divergence_from_a_frozen_teacher(continued):
    from transformers import TrainingArguments

    from sumformers.training import anchor_divergence, train

    _, continued_model, _ = continued
    teacher, model = copy.deepcopy(continued_model), copy.deepcopy(continued_model)
    torch.manual_seed(0)
    features = [dict(vector_feature([1, 3], 5), sentence_vectors=torch.randn(5, model.config.hidden_size))]
    batch = StepwiseCollator(None, stepwise=True, duplicate_probability=1.0, anchor=True, seed=1)(features)
    with torch.no_grad():  # the student moves away from its teacher
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    arguments = TrainingArguments(output_dir="unused", use_cpu=True, report_to=[])
    trainer, _ = train(model, arguments, teacher=teacher, anchor_weight=2.0)
    model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(model, dict(batch))
        unlabelled = {key: value for key, value in batch.items() if key not in ("labels", "anchor_choices")}
        student = model(**unlabelled, labels=batch["labels"])
        divergence = anchor_divergence(student.logits, teacher(**unlabelled).logits, batch["anchor_choices"])
    assert divergence.item() > 1e-4
    assert loss.item() == pytest.approx(student.loss.item() + 2.0 * divergence.item(), rel=1e-5)
    assert trainer.teacher is teacher and not any(parameter.requires_grad for parameter in teacher.parameters())


def test_an_end_negative_weight_makes_the_end_an_explicit_negative_wherever_the_summary_continues():
    batch = StepwiseCollator(None, stepwise=True, end_negative_weight=19.0)([vector_feature([2, 0], 3)])
    assert batch["summary_indices"].tolist() == [[-1, -1], [2, -1], [2, 0]]
    # the paper's rows, the end (column 3) a negative of weight 19 until the oracle ends
    assert batch["labels"].tolist() == [[0, 0, 1, -19], [1, 0, 0, -19], [0, 0, 0, 1]]
    with pytest.raises(ValueError, match="negative"):
        StepwiseCollator(None, stepwise=True, end_negative_weight=-1.0)


def test_the_end_weight_scales_the_end_units_gradient_on_continuing_rows_by_one_plus_the_weight():
    # two sentences and the end unit, probabilities 0.5, 0.3, 0.2
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]])).requires_grad_()
    mask = torch.ones(2, 2, dtype=torch.bool)
    labels = torch.tensor([[1.0, 0.0, -4.0], [0.0, 0.0, 1.0]])  # row 0 continues (weight 4), row 1 ends
    _, loss = next_choice_logits_and_loss(logits, mask, no_summary(2), labels)
    loss.backward()
    # d/dz_end of the mean over 2 rows: continuing (1 + 4) * 0.2 = 1.0, ending -(1 - 0.2) = -0.8, so the end's
    # log-odds settle log(1 + w) lower than without the weight (where the continuing row gives 0.2)
    assert logits.grad[:, 2].tolist() == pytest.approx([1.0 / 2, -0.8 / 2], abs=1e-6)
