"""benchmarks/quality_windowed.py: its variants are valid CopyTransformer configs that differ from the table's first
row only in what the row names, the paired difference against hand-computed numbers, and the training recipe."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ARTICLE, SENTENCES, imported_benchmark, tiny_copy_transformer_config
from sumformers import CopyTransformerConfig

script = imported_benchmark("quality_windowed")


def test_every_variant_is_a_valid_config_and_every_table_names_known_variants(script):
    for variant, (_, overrides, max_length) in script.VARIANTS.items():
        config = CopyTransformerConfig(**overrides)
        assert max_length <= config.max_source_positions, variant
    for _, variants in script.TABLES.values():
        assert all(variant in script.VARIANTS for variant in variants)


@pytest.mark.parametrize(
    "variant, differs_in",
    [
        ("conv_1d", {"convolution": "1d"}),
        ("conv_circular_2d", {"convolution": "circular_2d"}),
        ("conv_1d_window5", {"convolution": "1d", "convolution_window": 5}),
        ("transformer", {"copy_mechanism": False}),
        ("bert_decoder", {"encoder_input": "bert_windowed", "encoder_layers": 0}),
        ("bert_stacked_full", {"encoder_input": "bert_windowed", "max_source_positions": 2048}),
        # concatenation as the paper builds it: the features beside the convolutional layer's output (Table 1's best
        # convolution), two layers over them; the earlier design after the whole encoder
        ("bert_concat_paper", {"encoder_input": "bert_concat", "convolution": "circular_2d", "concat_after_layers": 1}),
        ("bert_concat_paper_bert_decoder", {"encoder_input": "bert_concat", "convolution": "circular_2d",
                                            "concat_after_layers": 1, "decoder_embeddings": "bert"}),
        ("bert_concat", {"encoder_input": "bert_concat", "convolution": "circular_2d", "concat_after_layers": 3}),
        ("bert_stacked_bert_embedding_layer", {"encoder_input": "bert_windowed",
                                               "decoder_embeddings": "bert_embedding_layer"}),
    ],
)
def test_a_variant_changes_only_its_component(script, variant, differs_in):
    base = CopyTransformerConfig().to_dict()
    changed = CopyTransformerConfig(**script.VARIANTS[variant][1]).to_dict()
    assert {key: value for key, value in changed.items() if base.get(key) != value} == differs_in


def test_table_4_has_the_papers_concatenation_and_both_with_the_bert_conditioned_decoder(script):
    for table, suffix in (("4", ""), ("4_full", "_full")):
        assert script.TABLES[table][1] == [
            f"bert_stacked{suffix}", f"bert_concat_paper{suffix}", f"bert_stacked_bert_decoder{suffix}",
            f"bert_concat_paper_bert_decoder{suffix}", f"bert_concat{suffix}"]


def test_paired_difference_by_hand(script):
    result = {"rouge1_per_document": [40.0, 30.0, 50.0, 20.0]}
    base = {"rouge1_per_document": [38.0, 31.0, 44.0, 20.0]}
    # differences 2, -1, 6, 0: mean 1.75; every bootstrap mean lies between the smallest and largest difference
    text = script.paired_difference(result, base)
    mean, interval = text.split(" ", 1)
    assert mean == "+1.75"
    low, high = (float(value) for value in interval.strip("[]").split(", "))
    assert -1.0 <= low <= 1.75 <= high <= 6.0


def test_missing_variants_are_marked_and_the_first_row_has_no_difference(script):
    first = {"rouge1": 30.0, "rouge2": 10.0, "rougeLsum": 27.0, "repeated_trigrams": 5.0, "mean_words": 50.0,
             "rouge1_per_document": [30.0, 30.0], "training": "600 steps"}
    lines = script.format_table("T", ["copy_transformer", "conv_1d"], {"copy_transformer": first})
    assert lines[4] == "| CopyTransformer, 512 tokens | 30.00 | 10.00 | 27.00 | - | 5.00 | 50.0 | 600 steps |"
    assert lines[5].startswith("| + 1D convolution, window 13 | not evaluated |")


def test_an_earlier_row_is_reused_only_for_the_same_documents_and_says_so(script):
    row = {"rouge1": 30.0, "rouge2": 10.0, "rougeLsum": 27.0, "repeated_trigrams": 5.0, "mean_words": 50.0,
           "rouge1_per_document": [30.0, 30.0], "training": "600 steps", "documents": "validation[0:2]"}
    earlier = {"copy_transformer": row, "conv_1d": "not trained (...)"}
    reused = script.earlier_result("copy_transformer", earlier, "validation[0:2]", 2)
    # a row from before rows named their hardware trained on CPU, the only recipe then
    assert reused == {**row, "training": "600 steps, CPU", "earlier_run": True}
    assert script.earlier_result("copy_transformer", earlier, "validation[2:4]", 2) is None  # other documents
    assert script.earlier_result("copy_transformer", earlier, "validation[0:2]", 3) is None
    assert script.earlier_result("conv_1d", earlier, "validation[0:2]", 2) is None  # no row to reuse
    assert script.earlier_result("conv_2d", earlier, "validation[0:2]", 2) is None
    # reused twice, marked once
    again = script.earlier_result("copy_transformer", {"copy_transformer": reused}, "validation[0:2]", 2)
    lines = script.format_table("T", ["copy_transformer"], {"copy_transformer": again})
    assert lines[4].endswith("| 600 steps, CPU, earlier run |")
    gpu = {**row, "training": "600 steps, NVIDIA H200", "documents": "validation[0:2]"}
    assert script.earlier_result("copy_transformer", {"copy_transformer": gpu}, "validation[0:2]", 2)["training"] == (
        "600 steps, NVIDIA H200")


def test_a_row_is_compared_with_the_same_variant_trained_on_other_hardware(script):
    def row(training, per_document):
        return {"rouge1": sum(per_document) / len(per_document), "rouge1_per_document": per_document,
                "training": training, "documents": "validation[0:3]"}

    gpu = row("600 steps, NVIDIA H200", [30.0, 20.0, 40.0])
    cpu_report = {"copy_transformer": row("600 steps", [28.0, 20.0, 36.0]), "conv_1d": row("600 steps", [1.0] * 3)}
    gpu_report = {"copy_transformer": gpu}
    lines = script.hardware_checks({"copy_transformer": gpu, "conv_1d": "not trained"}, [gpu_report, cpu_report],
                                   "validation[0:3]", 3)
    # differences 2, 0, 4: mean +2.00; the same hardware's row (the GPU report) is not a comparison
    assert len(lines) == 1 and lines[0].startswith(
        "- CopyTransformer, 512 tokens: NVIDIA H200 30.00, CPU 28.00; paired difference +2.00 [")
    assert script.hardware_checks({"copy_transformer": gpu}, [gpu_report], "validation[0:3]", 3) == []


def test_rows_outside_the_decoded_variants_come_from_the_first_earlier_report_that_has_them(script, tmp_path):
    def row(rouge1):
        return {"rouge1": rouge1, "rouge1_per_document": [rouge1, rouge1], "documents": "validation[0:2]"}

    sweep = {"conv_1d_window5": row(20.0), "copy_transformer": row(15.0)}
    table_1 = {"copy_transformer": row(16.0), "conv_1d": row(18.0), "conv_1d_window9": row(19.0)}
    (tmp_path / "conv_1d_window9" / "final").mkdir(parents=True)
    (tmp_path / "conv_1d_window9" / "final" / "config.json").write_text("{}")
    variants = ["copy_transformer", "conv_1d_window5", "conv_1d_window9", "conv_1d", "conv_1d_window17"]
    rows = script.earlier_rows(variants, ["conv_1d_window9", "conv_1d_window17"], [sweep, table_1],
                               "validation[0:2]", 2, str(tmp_path))
    # window 9 is decoded (its folder exists); window 17 has no folder and no earlier row; the first report wins
    assert {variant: value["rouge1"] for variant, value in rows.items()} == {
        "copy_transformer": 15.0, "conv_1d_window5": 20.0, "conv_1d": 18.0}
    assert all(value["earlier_run"] for value in rows.values())


def test_a_row_decoded_before_a_fix_of_its_variant_reads_as_outdated(script, tmp_path):
    def row(rouge1, **extra):
        return {"rouge1": rouge1, "rouge2": 5.0, "rougeLsum": rouge1, "repeated_trigrams": 90.0, "mean_words": 45.0,
                "rouge1_per_document": [rouge1, rouge1], "training": "600 steps, CPU", "documents": "validation[0:2]",
                **extra}

    variant = "bert_stacked_bert_decoder_full"
    assert variant in script.OUTDATED
    before_fix = {variant: row(12.0), "bert_stacked_full": row(17.0)}
    rows = script.earlier_rows([variant, "bert_stacked_full"], [], [before_fix], "validation[0:2]", 2, str(tmp_path))
    assert rows[variant] == f"outdated: {script.OUTDATED[variant]}"
    assert rows["bert_stacked_full"]["rouge1"] == 17.0  # not in the list: reused as it is
    lines = script.format_table("T", ["bert_stacked_full", variant], rows)
    assert lines[5].startswith("| BERT-transformer encoder + BERT-conditioned decoder, full length | outdated: ")
    # a row decoded since (it has a date) is the retrained model's: reused, and the first report with a row wins
    retrained = {variant: row(19.0, decoded="2026-11-29")}
    rows = script.earlier_rows([variant], [], [retrained, before_fix], "validation[0:2]", 2, str(tmp_path))
    assert rows[variant]["rouge1"] == 19.0 and rows[variant]["earlier_run"]
    # an outdated row listed first gives way to the retrained one of a later report
    rows = script.earlier_rows([variant], [], [before_fix, retrained], "validation[0:2]", 2, str(tmp_path))
    assert rows[variant]["rouge1"] == 19.0


def test_the_recipe_trains_the_variant_with_its_settings(script, tmp_path, monkeypatch):
    import sumformers.training

    monkeypatch.setattr(sumformers.training, "cpu_bfloat16_is_native", lambda: True)
    args = SimpleNamespace(train_file=None, steps=600, runs_dir=str(tmp_path), seed=7, device="cpu",
                           train_sampling_strategy="random", train_presampled=False)
    command = script.training_arguments("bert_concat_full", args, Path("/data"))
    arguments = command[2:]
    # each flag with the value after it (None for a switch such as --do_train)
    options = {flag: (value if not value.startswith("--") else None)
               for flag, value in zip(arguments, [*arguments[1:], "--"]) if flag.startswith("--")}
    assert options["--do_train"] is None and options["--bf16"] is None
    assert command[1].endswith("training_scripts/train_abstractive.py")
    assert json.loads(options["--config_overrides"]) == {"encoder_input": "bert_concat", "convolution": "circular_2d",
                                                         "concat_after_layers": 3, "max_source_positions": 2048}
    assert options["--max_length"] == "2048" and options["--max_steps"] == "600"
    assert options["--train_file"] == "/data/cnn_dailymail/train_large.jsonl.gz"
    assert options["--eval_split"] == "validation[1000:1100]"  # the dev documents, never the reported ones
    assert options["--output_dir"] == str(tmp_path / "bert_concat_full")
    # one epoch over the same random documents for every variant
    assert (options["--max_train_samples"], options["--train_subset_seed"]) == ("9600", "0")
    assert options["--seed"] == "7"  # the run's own seed: initialisation, dropout and order, not the documents
    # the BERT variants of one length share one feature cache; the token variants have none
    assert options["--bert_feature_cache"] == str(tmp_path / "bert-features-2048-9600.u16")
    stacked = script.training_arguments("bert_stacked_full", args, Path("/data"))
    assert stacked[stacked.index("--bert_feature_cache") + 1] == options["--bert_feature_cache"]
    assert "--bert_feature_cache" not in script.training_arguments("conv_1d", args, Path("/data"))
    assert "--use_cpu" in arguments
    # a CPU that only emulates bfloat16 trains in float32 (there bf16 autocast is several times slower)
    monkeypatch.setattr(sumformers.training, "cpu_bfloat16_is_native", lambda: False)
    assert "--bf16" not in script.training_arguments("bert_concat_full", args, Path("/data"))


def test_the_recipe_on_a_gpu_reads_presampled_documents_and_runs_the_frozen_bert_in_every_step(script, tmp_path,
                                                                                            monkeypatch):
    import sumformers.training

    # bf16 autocast on a GPU whatever the CPU can do
    monkeypatch.setattr(sumformers.training, "cpu_bfloat16_is_native", lambda: False)
    args = SimpleNamespace(train_file="/carry/sample.jsonl.gz", steps=600, runs_dir=str(tmp_path), seed=42,
                           train_sampling_strategy="random", device="cuda", train_presampled=True)
    command = script.training_arguments("bert_concat_full", args, Path("/data"))
    assert command[command.index("--train_file") + 1] == "/carry/sample.jsonl.gz"
    # the file holds the 9,600 documents in the order the subset seed drew them: taken as they are
    assert command[command.index("--max_train_samples") + 1] == "9600" and "--train_subset_seed" not in command
    assert "--use_cpu" not in command and "--bert_feature_cache" not in command and "--bf16" in command


def test_the_training_cell_names_steps_and_hardware_from_the_card(script, tmp_path):
    card = tmp_path / "sumformers_card.json"
    for training, cell in (("9600 documents, 600 optimizer steps (1.00 epochs) on NVIDIA H200, batch 16",
                            "600 steps, NVIDIA H200"),
                           ("9600 documents, 600 optimizer steps (1.00 epochs), batch 16", "600 steps, CPU"),
                           ("9600 documents, 600 optimizer steps (1.00 epochs) on CPU, group_by_length sampling, "
                            "batch 16", "600 steps, CPU, group_by_length sampling"),
                           ("no steps written", "-")):
        card.write_text(json.dumps({"training": training}))
        assert script.training_summary(tmp_path) == cell


def test_shipping_writes_fp16_weights_blocking_on_and_the_scores_of_that_decoding(script, tmp_path, minilm_tokenizer):
    """`--ship`: the copy's weights are the trained ones rounded to fp16, its config blocks word trigrams, and its card
    gives the scores of the summaries that the shipped copy itself writes (the same documents)."""
    import torch
    from safetensors.torch import load_file
    from transformers import pipeline

    from sumformers import CopyTransformerForConditionalGeneration

    torch.manual_seed(0)
    model = CopyTransformerForConditionalGeneration(tiny_copy_transformer_config(no_repeat_word_ngram_size=0))
    trained = tmp_path / "trained"
    model.save_pretrained(trained)
    minilm_tokenizer.save_pretrained(trained)
    (trained / "training_args.bin").write_bytes(b"not shipped")
    (trained / "sumformers_card.json").write_text(json.dumps({"training": "2 optimizer steps", "datasets": ["x"]}))
    examples = [{"document": ARTICLE, "summary": "the student is missing ."},
                {"document": " ".join(SENTENCES), "summary": "the the meeting ."}]
    args = SimpleNamespace(ship_to=str(tmp_path / "shipped"), cache_dir=str(tmp_path / "cache"), batch_size=2,
                           threads=1, num_beams=1, max_length=12, min_length=1, length_penalty=None,
                           no_repeat_word_ngram_size=None)
    result = {"rouge1": 1.0, "rouge2": 0.5, "rougeLsum": 1.0, "repeated_trigrams": 50.0, "mean_words": 9.0}
    target = script.ship("copy_transformer", {"copy_transformer": result}, {"copy_transformer": trained}, examples,
                         "docs[0:2]", ["### T", "| + 1D convolution | not trained (missing) | |"], args)

    assert not (target / "training_args.bin").exists()
    saved, shipped = load_file(trained / "model.safetensors"), load_file(target / "model.safetensors")
    assert saved.keys() == shipped.keys()
    for name, tensor in saved.items():
        assert shipped[name].dtype == torch.float16 and torch.equal(shipped[name], tensor.half()), name
    assert json.loads((target / "config.json").read_text())["no_repeat_word_ngram_size"] == 3
    summarizer = pipeline("abstractive-summarization", model=str(target), num_beams=1, max_length=12, min_length=1)
    card = json.loads((target / "sumformers_card.json").read_text())
    for blocking in (None, 0):  # the shipped config's blocking, then none: the card has the first scores only
        summaries = [summarizer(example["document"], no_repeat_word_ngram_size=blocking)["summary"]
                     for example in examples]
        scores = script.abstractive_metrics(summaries, [e["document"] for e in examples],
                                            [e["summary"] for e in examples], ["cnn", "cnn"])
        rounded = {metric: round(scores[metric], 2) for metric in ("rouge1", "rouge2", "rougeLsum")}
        assert (card["results"] == rounded) == (blocking is None)
    assert card["model_name"] == "shipped" and card["training"] == "2 optimizer steps"
    assert "| generation config (the benchmark's tables) | 1.00 | 0.50 | 1.00 | 50.00 | 9.0 |" in card["evaluation"]
    assert "without it 50% of this model's summaries repeat" in card["evaluation"]
    assert "### T" in card["evaluation"] and "not trained" not in card["evaluation"]  # rows in context: scored ones
    assert "repeated word 3-grams blocked" in (target / "README.md").read_text()


def test_the_shipped_variant_must_be_the_best_that_fits(script, tmp_path, monkeypatch):
    """`shipping_choice`: sizes are the fp16 weights plus the other files; a higher-scoring variant that fits stops the
    shipping, one that does not fit is named with its score and size."""
    import torch
    from safetensors.torch import save_file

    checkpoints = {}
    for name, values in (("copy_transformer", 1000), ("conv_1d", 3000), ("bert_stacked", 500)):
        checkpoints[name] = tmp_path / name
        checkpoints[name].mkdir()
        save_file({"weight": torch.zeros(values), "bias": torch.zeros(24)}, checkpoints[name] / "model.safetensors")
        (checkpoints[name] / "tokenizer.json").write_text("x" * 976)
        (checkpoints[name] / "training_args.bin").write_text("x" * 10**6)  # not shipped
    # fp16: 2 x (values + 24) bytes, plus the 976-byte tokenizer: 3,024, 7,024 and 2,024 bytes
    assert script.shipped_size(checkpoints["conv_1d"]) == 7024
    monkeypatch.setattr(script, "SHIPPING_LIMIT_MIB", 4000 / 2**20)
    # a row reused from an earlier run has no folder here: its size is counted from its config (13,507,131 weights)
    results = {"copy_transformer": {"rouge1": 15.0}, "conv_1d": {"rouge1": 19.0}, "bert_stacked": {"rouge1": 12.0},
               "transformer": "not trained", "conv_2d": {"rouge1": 19.5, "earlier_run": True}}
    text = script.shipping_choice("copy_transformer", results, checkpoints)
    assert text.endswith("(0.0 MiB in fp16); these score higher (ROUGE-1 without blocking, fp16 size) but do not fit: "
                         "+ 2D convolution (19.50, 25.8 MiB); + 1D convolution, window 13 (19.00, 0.0 MiB).")
    with pytest.raises(SystemExit, match="copy_transformer scores higher and fits"):
        script.shipping_choice("bert_stacked", results, checkpoints)
    with pytest.raises(SystemExit, match="over the"):
        script.shipping_choice("conv_1d", results, checkpoints)


@pytest.mark.parametrize("variant", ["conv_circular_2d_words128", "bert_stacked_bert_decoder"])
def test_a_variants_counted_size_is_that_of_its_saved_weights(script, variant, tmp_path):
    from sumformers import CopyTransformerForConditionalGeneration

    config = CopyTransformerConfig(**script.VARIANTS[variant][1])
    model = CopyTransformerForConditionalGeneration(config)  # the BERT variant saves without its frozen BERT
    model.save_pretrained(tmp_path)
    others = sum(path.stat().st_size for path in tmp_path.iterdir() if path.name != "model.safetensors")
    assert script.counted_fp16_size(variant) == script.shipped_size(tmp_path) - others
    # the factorized table is what brings the circular 2D variant under the limit (a full table: 25.8 MiB)
    assert script.counted_fp16_size(variant) / 2**20 < script.SHIPPING_LIMIT_MIB - 1
