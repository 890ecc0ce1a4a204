"""The ablations of Aksenov et al. 2020 (BERT-windowing, convolutional self-attention, CopyTransformer) on CNN/DM, as
the paper's small models (hidden 256, 4 heads, 3 + 3 layers): every variant trained with one recipe and one step
budget, then scored on 1,000 documents no model saw (the first 1,000 of the shared `validation_large`, lowercased).

Tables (each row a variant; `--tables` picks them):

- `1`: CopyTransformer against + 1D / + 2D / + circular 2D convolutional self-attention in the lowest encoder layer
  (window 13, 3 heads), 512-token truncated input.
- `2`: Transformer (no copy), CopyTransformer, BERT encoder + Transformer decoder (the frozen MiniLM's windowed
  features straight to the decoder), BERT-transformer encoder (the features stacked under the encoder layers) and the
  same with the BERT-conditioned decoder (BERT's word embeddings), each on 512-token truncated articles and on
  full-length articles (up to `FULL_LENGTH` tokens; the BERT variants read them in windows of 512 every 256).
- `4` and `4_full`: stacking against concatenation, 512 tokens and full length. Concatenation as the paper builds
  it: the output of a circular 2D convolutional self-attention layer (Table 1's best) concatenated with the BERT
  features, two Transformer layers over the result; each also with the BERT-conditioned decoder (the table's two
  rows with BERT on both sides); last, the concatenation after the whole 3-layer convolutional token encoder with no
  layer over it (this package's design before issue #40, whose trained rows earlier reports hold).
- `sweep`: the 1D window (the paper's Figure 4), 512 tokens; a PNG beside the report.
- `bert_input`: the BERT-conditioned decoder's input (stacking, 512 tokens): BERT's word embeddings projected and
  scaled by sqrt(d_model) plus the decoder's positions (`decoder_embeddings="bert"`) against the original code's
  BERT embedding layer (word, position, token type, LayerNorm) through a linear layer (`"bert_embedding_layer"`).
- `small`: the circular 2D row against the same with a 128-wide factorized word table (`word_embedding_size`), the
  cost of fitting a token-input variant in the 20 MB shipping limit.

Each table gives ROUGE-1/2/Lsum F1 x 100 with 95% bootstrap intervals over the documents and, for every row but the
first, the paired bootstrap interval of its ROUGE-1 difference to the table's first row (the component's effect).
Decoding is each model's generation config (the original's: beam 4, 55 to 100 tokens, length penalty 0.9).

Training: `--train` trains the variants a table needs whose `<runs_dir>/<variant>/final` is missing, one after the
other, with `training_scripts/train_abstractive.py` and the recipe of `training_arguments` (one epoch over the same
16 x `--steps` random CNN/DM `train_large` articles for every variant, batch 16, Adam 1e-3 with 200 warm-up steps
then constant, label smoothing 0.1, bf16 autocast on a GPU or a CPU with native bfloat16 (float32 on other CPUs,
where bf16 is emulated and several times slower); the BERT variants over frozen features cached once per input
length); a run resumes from its newest checkpoint. Without `--train`, a missing variant's row says so, unless
`--reuse_earlier JSON` finds its row in an earlier report's JSON over the same documents (marked "earlier run"); with
`--variants`, the other rows of the tables come from there too, so a sweep grows one trained variant at a time. The
report states each variant's optimizer steps (from its card); all ran on CPU.

    python benchmarks/quality_windowed.py --tables 1 --train --steps 600 --threads 2
    python benchmarks/quality_windowed.py --tables 1,sweep --train --train_only      # training queue, no report
    python benchmarks/quality_windowed.py --tables 1,2,4,4_full,sweep --limit 20 --output /tmp/qw.md   # a quick look
    python benchmarks/quality_windowed.py --tables sweep --variants conv_1d_window9 --train \
        --reuse_earlier benchmarks/results/quality_windowed_sweep.json \
        --reuse_earlier benchmarks/results/quality_windowed.json --output benchmarks/results/quality_windowed_sweep.md

`--ship VARIANT` ships a scored variant: it is decoded again with word trigram blocking, then written to
`checkpoints/copytransformer-circular2d-cnndm` (`--ship_to`) with fp16 weights, blocking on in its config, and a card
with both decodings' scores and the variant's table rows; it must be the best-scoring variant of the run's tables
within 20 MiB:

    python benchmarks/quality_windowed.py --tables 1,2,small --variants conv_circular_2d_words128 \
        --reuse_earlier benchmarks/results/quality_windowed.json --output benchmarks/results/quality_windowed_small.md \
        --ship conv_circular_2d_words128

Speed and peak memory of windowed encoding against truncation (512 to 100,000 tokens) are `windowed_memory.py`'s
measurements (`benchmarks/results/windowed_memory.md`); `--tables memory` reruns it.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

from _common import (
    REPO,
    SOURCES,
    TRAINING_RUN,
    data_slice,
    display_path,
    find_checkpoint,
    format_cell,
    setup_runtime,
    write_report,
)
from quality_abstractive import abstractive_metrics, abstractive_summaries, describe_decoding, format_examples

FULL_LENGTH = 2048  # document tokens of the full-length rows: all but the longest CNN/DM articles
BERT_STACKED = {"encoder_input": "bert_windowed"}
# variant -> (row name, CopyTransformerConfig overrides, document tokens)
VARIANTS = {
    "copy_transformer": ("CopyTransformer, 512 tokens", {}, 512),
    "conv_1d": ("+ 1D convolution, window 13", {"convolution": "1d"}, 512),
    "conv_2d": ("+ 2D convolution", {"convolution": "2d"}, 512),
    "conv_circular_2d": ("+ circular 2D convolution", {"convolution": "circular_2d"}, 512),
    # the circular 2D row with ALBERT's factorized word table: the one way a strong variant fits the shipping limit
    "conv_circular_2d_words128": ("+ circular 2D convolution, 128-wide word table",
                                  {"convolution": "circular_2d", "word_embedding_size": 128}, 512),
    **{
        f"conv_1d_window{window}": (f"+ 1D convolution, window {window}", {"convolution": "1d",
                                                                            "convolution_window": window}, 512)
        for window in (5, 9, 11, 17)
    },
    **{
        f"{name}{'_full' if full else ''}": (
            f"{row}, {'full length' if full else '512 tokens'}",
            {**overrides, **({"max_source_positions": FULL_LENGTH} if full else {})},
            FULL_LENGTH if full else 512,
        )
        for full in (False, True)
        for name, row, overrides in (
            ("transformer", "Transformer", {"copy_mechanism": False}),
            ("copy_transformer", "CopyTransformer", {}),
            ("bert_decoder", "BERT encoder + Transformer decoder", {**BERT_STACKED, "encoder_layers": 0}),
            ("bert_stacked", "BERT-transformer encoder", BERT_STACKED),
            ("bert_stacked_bert_decoder", "BERT-transformer encoder + BERT-conditioned decoder",
             {**BERT_STACKED, "decoder_embeddings": "bert"}),
            # the original code's decoder input: BERT's whole embedding layer through a linear layer, unscaled
            ("bert_stacked_bert_embedding_layer",
             "BERT-transformer encoder + BERT-conditioned decoder through BERT's embedding layer (original input)",
             {**BERT_STACKED, "decoder_embeddings": "bert_embedding_layer"}),
            # the paper's concatenation: the convolutional layer's output (Table 1's best convolution) beside the
            # features, two Transformer layers over them
            ("bert_concat_paper", "Concatenation (circular 2D convolutional layer, 2 layers over it)",
             {"encoder_input": "bert_concat", "convolution": "circular_2d", "concat_after_layers": 1}),
            ("bert_concat_paper_bert_decoder",
             "Concatenation (circular 2D convolutional layer, 2 layers over it) + BERT-conditioned decoder",
             {"encoder_input": "bert_concat", "convolution": "circular_2d", "concat_after_layers": 1,
              "decoder_embeddings": "bert"}),
            # the features beside the whole convolutional encoder's output, no layer over them (not the paper's;
            # the design of the rows reported before issue #40)
            ("bert_concat", "Concatenation after the circular 2D convolutional encoder",
             {"encoder_input": "bert_concat", "convolution": "circular_2d", "concat_after_layers": 3}),
        )
        if (name, full) != ("copy_transformer", False)  # defined above
    },
}
TABLES = {
    "1": ("Table 1: convolutional self-attention (512 tokens)",
          ["copy_transformer", "conv_1d", "conv_2d", "conv_circular_2d"]),
    "2": ("Table 2: BERT conditioning, truncated and full-length input",
          [f"{name}{suffix}" for suffix in ("", "_full") for name in
           ("transformer", "copy_transformer", "bert_decoder", "bert_stacked", "bert_stacked_bert_decoder")]),
    **{
        name: (f"Table 4: stacking against concatenation ({length})",
               [f"{variant}{suffix}" for variant in ("bert_stacked", "bert_concat_paper", "bert_stacked_bert_decoder",
                                                     "bert_concat_paper_bert_decoder", "bert_concat")])
        for name, suffix, length in (("4", "", "512 tokens"), ("4_full", "_full", "full length"))
    },
    "bert_input": ("The BERT-conditioned decoder's input: BERT's word embeddings scaled by sqrt(d_model) with the "
                   "decoder's positions against BERT's embedding layer through a linear layer (512 tokens)",
                   ["bert_stacked_bert_decoder", "bert_stacked_bert_embedding_layer"]),
    "small": ("The word table factorized to fit the shipping limit (512 tokens)",
              ["conv_circular_2d", "conv_circular_2d_words128"]),
    "sweep": ("The 1D convolution's window (512 tokens)",
              ["copy_transformer", "conv_1d_window5", "conv_1d_window9", "conv_1d_window11", "conv_1d",
               "conv_1d_window17"]),
}
# variants whose rows in reports from before this list's fixes were decoded from models the fix changed: reused, such
# a row (one without a "decoded" date, which rows carry since) reads as outdated and is compared with nothing
OUTDATED = {
    "bert_stacked_bert_decoder_full": "decoded before issue #40's fix of the BERT-conditioned decoder's input scale "
    "(the 512-token row went from 12.04 to 19.38 with it); the retrained row: quality_windowed_table4_full.json",
}
DEV_SPLIT = "validation[1000:1100]"  # the training script's end-of-run check; never the reported documents
COLUMNS = ("rouge1", "rouge2", "rougeLsum", "repeated_trigrams", "mean_words")
SHIPPED_NAME = "copytransformer-circular2d-cnndm"
SHIPPED_BLOCKING = 3  # word trigrams: without blocking most summaries of these small models repeat one
SHIPPING_LIMIT_MIB = 20  # a shipped checkpoint's folder


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default="1,2,4,4_full,sweep",
                        help="comma-separated: 1, 2, 4, 4_full, small, sweep, memory")
    parser.add_argument("--variants", default=None,
                        help="comma-separated: train and decode only these variants of the tables (default all)")
    parser.add_argument("--train", action="store_true", help="train the variants whose final folder is missing")
    parser.add_argument("--train_only", action="store_true", help="with --train: train, then stop before decoding")
    parser.add_argument("--features_only", action="store_true",
                        help="map the training features of each input length the variants read, with every core, "
                        "into datasets' cache, then stop (variants of one length share them: run_on_gpu.sh runs this "
                        "before its parallel runs)")
    parser.add_argument("--steps", type=int, default=600, help="training updates per variant (default 600)")
    parser.add_argument("--runs_dir", default=str(REPO / "runs" / "copy-ablation"))
    parser.add_argument("--seed", type=int, default=42,
                        help="the training runs' seed (initialisation, dropout, batch order; the documents stay the "
                        "same): another seed in another --runs_dir repeats a variant to see the run-to-run spread")
    parser.add_argument("--train_file", default=None, help="default: the shared cnn_dailymail/train_large.jsonl.gz")
    parser.add_argument("--train_presampled", action="store_true",
                        help="--train_file holds the recipe's 16 x --steps documents already, in the order the subset "
                        "seed draws them from train_large (benchmarks/carry_to_gpu.py writes it for a GPU machine): "
                        "read as they are, so a run there trains on the same batches as one here")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="where variants train and decode; on cuda the BERT variants run the frozen BERT in every "
                        "step (a GPU does it in milliseconds) instead of caching its features")
    parser.add_argument("--data_file", default=None, help="default: the shared cnn_dailymail/validation_large")
    parser.add_argument("--start", type=int, default=0, help="first document (default 0)")
    parser.add_argument("--limit", type=int, default=1000, help="documents (default 1000)")
    parser.add_argument("--train_sampling_strategy", choices=["random", "group_by_length"], default="random",
                        help="how training draws its batches: the recipe's random batches, or the Trainer's "
                        "length-grouped ones (16 full-length articles pad to about 800 tokens instead of 1,660: the "
                        "CopyTransformer stepped in 9.5 s on the 2 CPU cores, about 26 s at random; the row's "
                        "training cell names the sampler)")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache_dir", default=str(REPO / "runs" / "quality_windowed"))
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "quality_windowed.md"))
    parser.add_argument("--ship", default=None, metavar="VARIANT",
                        help="also decode VARIANT with word trigram blocking and write its final model, fp16 and with "
                        "blocking on, to --ship_to with a card of this run's scores")
    parser.add_argument("--ship_to", default=str(REPO / "checkpoints" / SHIPPED_NAME))
    parser.add_argument("--reuse_earlier", metavar="JSON", action="append", default=[],
                        help="an earlier report's JSON (e.g. benchmarks/results/quality_windowed.json; repeatable, "
                        "the first with a row wins): a table variant not decoded in this run (its final folder is "
                        "missing, or it is outside --variants) keeps its row from it when that run scored the same "
                        "documents (the row says so); training folders do not outlive a machine, so a sweep trained "
                        "later still compares with the rows trained before")
    args = parser.parse_args()
    args.tables = [table.strip() for table in args.tables.split(",") if table.strip()]
    unknown = sorted(set(args.tables) - set(TABLES) - {"memory"})
    if unknown:
        parser.error(f"unknown tables {unknown}: choose among {[*TABLES, 'memory']}")
    if args.variants is not None:
        args.variants = [variant.strip() for variant in args.variants.split(",") if variant.strip()]
        unknown = sorted(set(args.variants) - set(VARIANTS))
        if unknown:
            parser.error(f"unknown variants {unknown}: choose among {list(VARIANTS)}")
    # the decoding options quality_abstractive's decoding reads: none set, each model's generation config decides
    args.num_beams = args.max_length = args.min_length = args.length_penalty = args.no_repeat_word_ngram_size = None
    if args.ship is not None and args.ship not in VARIANTS:
        parser.error(f"unknown --ship variant {args.ship!r}: choose among {list(VARIANTS)}")
    return args


def training_arguments(variant: str, args, data_dir: Path) -> list[str]:
    """The command line that trains `variant` with the shared recipe."""
    from sumformers.training import cpu_bfloat16_is_native

    _, overrides, max_length = VARIANTS[variant]
    cnndm = data_dir / "cnn_dailymail"
    return [
        sys.executable, str(REPO / "training_scripts" / "train_abstractive.py"),
        "--model_type", "copy_transformer", "--config_overrides", json.dumps(overrides),
        "--train_file", args.train_file or str(cnndm / "train_large.jsonl.gz"),
        "--validation_file", str(cnndm / "validation_large.jsonl.gz"),
        # one epoch over the same random documents for every variant (train_large is ordered CNN, then Daily Mail)
        "--train_split", "train", "--max_train_samples", str(16 * args.steps),
        *([] if args.train_presampled else ["--train_subset_seed", "0"]),
        "--eval_split", DEV_SPLIT, "--do_train", "--do_eval",
        "--preprocessing_num_workers", "2", "--max_length", str(max_length), "--max_target_length", "100",
        "--num_beams", "4", "--learning_rate", "1e-3", "--lr_scheduler_type", "constant_with_warmup",
        "--warmup_steps", "200", "--weight_decay", "0.0", "--max_steps", str(args.steps),
        "--per_device_train_batch_size", "16", *(["--use_cpu"] if args.device == "cpu" else []),
        # bf16 autocast where it is native: emulated on a CPU without it, it is several times slower than float32
        *(["--bf16"] if args.device == "cuda" or cpu_bfloat16_is_native() else []),
        "--train_sampling_strategy", args.train_sampling_strategy,
        "--save_steps", "100", "--save_total_limit", "2",
        "--logging_steps", "10", "--seed", str(args.seed), "--output_dir", str(Path(args.runs_dir) / variant),
        # on CPU the BERT variants of one input length read the same frozen features: computed once, then shared
        *(["--bert_feature_cache", str(Path(args.runs_dir) / f"bert-features-{max_length}-{16 * args.steps}.u16")]
          if overrides.get("encoder_input", "tokens") != "tokens" and args.device == "cpu" else []),
    ]


def trained_variant(variant: str, args, data_dir: Path) -> Path | None:
    """The variant's final folder; trained first with --train when missing."""
    final = find_checkpoint([str(Path(args.runs_dir) / variant / "final")])
    if final is None and args.train:
        print(f"training {variant}", file=sys.stderr, flush=True)
        subprocess.run(training_arguments(variant, args, data_dir), check=True)
        final = find_checkpoint([str(Path(args.runs_dir) / variant / "final")])
    return final


def earlier_result(variant: str, earlier: dict, documents: str, count: int) -> dict | None:
    """`variant`'s row of an earlier run (its report's JSON `earlier`) if that run scored the same `count` documents
    of `documents`, marked as earlier; else None."""
    result = earlier.get(variant)
    if not isinstance(result, dict) or result.get("documents") != documents:
        return None
    if len(result.get("rouge1_per_document", ())) != count:
        return None
    training = result.get("training", "-")
    if training != "-" and "," not in training:  # "600 steps": reports from before rows named the hardware (CPU)
        training = f"{training}, CPU"
    return {**result, "training": training, "earlier_run": True}


def earlier_rows(variants: list[str], decoded: list[str], reports: list[dict], documents: str, count: int,
                 runs_dir: str) -> dict:
    """Rows of `variants` reused from earlier `reports` (the first that scored the same documents): every variant not
    in `decoded` (outside --variants) and every decoded one whose final folder is missing, so it is not trained."""
    rows = {}
    for variant in variants:
        if variant in decoded and find_checkpoint([str(Path(runs_dir) / variant / "final")]) is not None:
            continue
        found = [row for row in (earlier_result(variant, report, documents, count) for report in reports) if row]
        # an outdated row gives way to a current one in any later report
        current = [row for row in found if variant not in OUTDATED or "decoded" in row]
        if current or found:
            rows[variant] = current[0] if current else f"outdated: {OUTDATED[variant]}"
    return rows


def training_summary(checkpoint: Path) -> str:
    """The variant's optimizer steps and hardware, from the card the training script writes (cards from before the
    hardware was written name none: those runs trained on CPU, the only recipe then)."""
    from sumformers.hub import read_card_info

    training = read_card_info(checkpoint).get("training", "")
    steps = TRAINING_RUN.search(training)
    return f"{steps.group(1)} steps, {steps.group(2) or 'CPU'}{steps.group(3) or ''}" if steps else "-"


def hardware(result: dict) -> str:
    """What a row's model trained on: the part of its training cell after the steps ("600 steps, NVIDIA H200")."""
    return result.get("training", "-").partition(", ")[2] or "-"


def hardware_checks(results: dict, reports: list[dict], documents: str, count: int) -> list[str]:
    """For each row, the same variant trained on other hardware in an earlier report (the same documents): both
    ROUGE-1 scores and the paired difference, which says whether a run on a GPU reproduces one on CPU."""
    lines = []
    for variant, result in results.items():
        if not isinstance(result, dict):
            continue
        others = (earlier_result(variant, report, documents, count) for report in reports)
        other = next((row for row in others if row is not None and hardware(row) != hardware(result)), None)
        if other is not None:
            lines.append(f"- {VARIANTS[variant][0]}: {hardware(result)} {result['rouge1']:.2f}, {hardware(other)} "
                         f"{other['rouge1']:.2f}; paired difference {paired_difference(result, other)}")
    return lines


def paired_difference(result: dict, base: dict) -> str:
    """ROUGE-1 of `result` minus `base` with the 95% paired bootstrap interval over the documents."""
    from sumformers.text.scoring import bootstrap_interval

    differences = [a - b for a, b in zip(result["rouge1_per_document"], base["rouge1_per_document"])]
    low, high = bootstrap_interval(differences)
    return f"{sum(differences) / len(differences):+.2f} [{low:+.2f}, {high:+.2f}]"


def format_table(title: str, variants: list[str], results: dict) -> list[str]:
    header = "| model | ROUGE-1 | ROUGE-2 | ROUGE-Lsum | ROUGE-1 - first row | repeated trigrams % | words | training |"
    lines = [f"### {title}", "", header, "|---|---|---|---|---|---|---|---|"]
    base = results.get(variants[0])
    for variant in variants:
        result = results.get(variant)
        if isinstance(result, str) or result is None:
            lines.append(f"| {VARIANTS[variant][0]} | {result or 'not evaluated'} | | | | | | |")
            continue
        cells = [format_cell(result, column) for column in COLUMNS]
        difference = "-" if variant == variants[0] or not isinstance(base, dict) else paired_difference(result, base)
        training = f"{result['training']}, earlier run" if result.get("earlier_run") else result["training"]
        lines.append(f"| {VARIANTS[variant][0]} | {cells[0]} | {cells[1]} | {cells[2]} | {difference} | {cells[3]} | "
                     f"{cells[4]} | {training} |")
    return [*lines, ""]


def sweep_plot(results: dict, output: Path) -> Path | None:
    """ROUGE-1 (with its interval) against the 1D window, the paper's Figure 4; None with fewer than two points."""
    points = sorted(
        (VARIANTS[variant][1].get("convolution_window", 13), results[variant])
        for variant in TABLES["sweep"][1][1:]
        if isinstance(results.get(variant), dict)
    )
    if len(points) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = [window for window, _ in points]
    means = [result["rouge1"] for _, result in points]
    errors = [[mean - result["rouge1_interval"][0] for mean, (_, result) in zip(means, points)],
              [result["rouge1_interval"][1] - mean for mean, (_, result) in zip(means, points)]]
    figure, axis = plt.subplots(figsize=(5, 3.5))
    axis.errorbar(windows, means, yerr=errors, marker="o", capsize=3, label="+ 1D convolution")
    base = results.get("copy_transformer")
    if isinstance(base, dict):
        axis.axhline(base["rouge1"], color="gray", linestyle="--", label="CopyTransformer")
    axis.set_xlabel("1D convolution window (positions)")
    axis.set_ylabel("ROUGE-1 F1")
    axis.legend()
    figure.tight_layout()
    # beside the report; a report of its own (quality_windowed_sweep.md) does not repeat "sweep" in the name
    stem = output.stem if output.stem.endswith("_sweep") else f"{output.stem}_sweep"
    path = output.with_name(f"{stem}.png")
    figure.savefig(path, dpi=120)
    return path


def shipped_size(checkpoint: Path) -> int:
    """Bytes of the checkpoint's folder once shipped: its weights in fp16, its other files as they are."""
    from safetensors import safe_open

    with safe_open(str(checkpoint / "model.safetensors"), "pt") as weights:
        weight_bytes = sum(2 * math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
    others = [path for path in checkpoint.iterdir() if path.name not in ("model.safetensors", "training_args.bin")]
    return weight_bytes + sum(path.stat().st_size for path in others)


def counted_fp16_size(variant: str) -> int:
    """Bytes of `variant`'s weights in fp16 counted from its config (the model built on the meta device, the frozen
    BERT left out as checkpoints leave it): the size of a row reused from an earlier run whose folder is gone."""
    import torch

    from sumformers import CopyTransformerConfig, CopyTransformerForConditionalGeneration

    with torch.device("meta"):
        model = CopyTransformerForConditionalGeneration(CopyTransformerConfig(**VARIANTS[variant][1]))
    return 2 * sum(parameter.numel() for name, parameter in model.named_parameters()
                   if not name.startswith("encoder.bert.encoder."))


def shipping_choice(variant: str, results: dict, checkpoints: dict) -> str:
    """Why `variant` ships: the best ROUGE-1 of the run's rows (decoded or reused) within the size limit (an error
    when another variant scores higher and fits as well), with the higher-scoring ones that do not fit. Sizes are
    measured on this run's folders, counted from the config (weights alone) for reused rows."""
    better = sorted((name for name, result in results.items()
                     if isinstance(result, dict) and result["rouge1"] > results[variant]["rouge1"]),
                    key=lambda name: -results[name]["rouge1"])
    mib = {name: (shipped_size(checkpoints[name]) if name in checkpoints else counted_fp16_size(name)) / 2**20
           for name in (variant, *better)}
    if mib[variant] > SHIPPING_LIMIT_MIB:
        raise SystemExit(f"--ship {variant}: {mib[variant]:.1f} MiB in fp16, over the {SHIPPING_LIMIT_MIB} MiB limit")
    fitting = [name for name in better if mib[name] <= SHIPPING_LIMIT_MIB]
    if fitting:
        raise SystemExit(f"--ship {variant}: {fitting[0]} scores higher and fits in {SHIPPING_LIMIT_MIB} MiB too")
    over = "; ".join(f"{VARIANTS[name][0]} ({results[name]['rouge1']:.2f}, {mib[name]:.1f} MiB)" for name in better)
    return (f"It ships as the highest-scoring variant of this run within the {SHIPPING_LIMIT_MIB} MiB limit for "
            f"shipped checkpoints ({mib[variant]:.1f} MiB in fp16)" + (
                f"; these score higher (ROUGE-1 without blocking, fp16 size) but do not fit: {over}." if over else "."))


def ship(variant: str, results: dict, checkpoints: dict, examples: list[dict], title: str, tables: list[str],
         args) -> Path:
    """Write `variant`'s final model to --ship_to: fp16 weights, word trigram blocking on in its config (decoded and
    scored here first, on the same documents), and a card with this run's scores, why it ships (`shipping_choice`)
    and `tables` (its rows in context)."""
    from transformers import AutoConfig

    from sumformers.hub import read_card_info, save_fp16_copy, write_card

    checkpoint, result = checkpoints[variant], results[variant]
    choice = shipping_choice(variant, results, checkpoints)
    documents, references = [example["document"] for example in examples], [example["summary"] for example in examples]
    sources = [example.get("source", "cnn") for example in examples]
    blocking = argparse.Namespace(**{**vars(args), "no_repeat_word_ngram_size": SHIPPED_BLOCKING})
    summaries, _ = abstractive_summaries(f"{variant}-blocking{SHIPPED_BLOCKING}", checkpoint, documents, blocking)
    blocked = abstractive_metrics(summaries, documents, references, sources)
    target = save_fp16_copy(checkpoint, Path(args.ship_to))
    config = AutoConfig.from_pretrained(target)
    config.no_repeat_word_ngram_size = SHIPPED_BLOCKING
    config.save_pretrained(target)
    header = "| decoding | ROUGE-1 | ROUGE-2 | ROUGE-Lsum | repeated trigrams % | words |"
    rows = [
        f"| {name} | " + " | ".join(format_cell(scores, column) for column in COLUMNS) + " |"
        for name, scores in (("generation config (the benchmark's tables)", result),
                             (f"+ word {SHIPPED_BLOCKING}-gram blocking (as shipped)", blocked))
    ]
    card = read_card_info(checkpoint)
    card.update(
        model_name=target.name,
        repo_id=f"sumformers/{target.name}",
        dataset_name=f"CNN/DailyMail ({title}, lowercased)",
        split=title,
        results={metric: round(blocked[metric], 2) for metric in ("rouge1", "rouge2", "rougeLsum")},
        evaluation="\n".join([
            f"{title}: {len(examples)} CNN/DM articles held out from training and tuning, scored by "
            "`python benchmarks/quality_windowed.py` (ROUGE F1 x 100, rouge-score with stemming, 95% bootstrap "
            "intervals; repeated trigrams = % of summaries with a word trigram twice). Trained on CPU (the recipe's "
            f"`--use_cpu`), decoded on CPU with {args.threads} threads. The tables' decoding: "
            f"{describe_decoding(checkpoint, {})}; the shipped config blocks repeated word {SHIPPED_BLOCKING}-grams, "
            f"because without it {result['repeated_trigrams']:.0f}% of this model's summaries repeat a word trigram "
            "(first row).", "", header, "|---|---|---|---|---|---|",
            *rows, "",
            choice, "",
            "The model among the paper's ablations, same documents, no blocking (ROUGE-1 - first row: paired "
            "bootstrap interval):", "", *(line for line in tables if "| not " not in line),
        ]),
    )
    write_card(target, config, card)
    return target


def main():
    args = parse_args()
    setup_runtime(args.threads)
    from sumformers.text.evaluation import data_dir

    shared = data_dir()
    data_file, examples = data_slice(args, "validation_large.jsonl.gz")
    documents = [example["document"] for example in examples]
    references = [example["summary"] for example in examples]
    sources = [example.get("source", "cnn") for example in examples]

    output = Path(args.output)
    title = f"{data_file.name}[{args.start}:{args.start + len(examples)}]"
    reports = [json.loads(Path(path).read_text()) for path in args.reuse_earlier]
    checkpoints, example_lines = {}, []
    in_tables = list(dict.fromkeys(variant for table in args.tables if table in TABLES for variant in TABLES[table][1]))
    # without an earlier row, the variants outside --variants say "not evaluated"
    needed = in_tables if args.variants is None else [variant for variant in in_tables if variant in args.variants]
    results = earlier_rows(in_tables, needed, reports, title, len(examples), args.runs_dir)
    needed = [variant for variant in needed if variant not in results]
    if args.features_only:
        for variant in {VARIANTS[variant][2]: variant for variant in needed}.values():  # one variant per length
            subprocess.run([*training_arguments(variant, args, shared), "--preprocessing_only",
                            "--preprocessing_num_workers", str(os.cpu_count())], check=True)
        return
    if args.train_only:  # e.g. a background queue: every variant trained before any is decoded
        for variant in needed:
            trained_variant(variant, args, shared)
        return
    for variant in needed:
        checkpoint = trained_variant(variant, args, shared)
        if checkpoint is None:
            results[variant] = f"not trained (`{display_path(Path(args.runs_dir) / variant)}/final` missing)"
            continue
        checkpoints[variant] = checkpoint
        print(f"decoding {variant}", file=sys.stderr, flush=True)
        summaries, seconds = abstractive_summaries(variant, checkpoint, documents, args)
        result = abstractive_metrics(summaries, documents, references, sources)
        result["training"] = training_summary(checkpoint)
        result["documents"] = title
        result["seconds"] = seconds
        result["decoded"] = date.today().isoformat()
        results[variant] = result
        example_lines += format_examples(VARIANTS[variant][0], examples, summaries)

    counts = ", ".join(f"{sources.count(source)} {label}" for source, label in SOURCES.items())
    body = [
        f"{title}: {len(examples)} CNN/DM documents held out from training and tuning ({counts}; lowercased text). "
        "ROUGE F1 x 100 (rouge-score, stemming, rougeLsum over the summary's sentences) with 95% bootstrap intervals "
        "(1,000 resamples of the documents); ROUGE-1 - first row: the mean per-document difference to the table's "
        "first row with its paired bootstrap interval; repeated trigrams = % of summaries with a word trigram twice; "
        "words = mean summary length. Small models (hidden 256, 4 heads, 3 + 3 layers) trained from scratch with one "
        "recipe (see the script) on the hardware their training column names; the BERT rows read the frozen bundled "
        "all-MiniLM-L6-v2 (on CPU its features cached once in bfloat16, on a GPU computed in every step under bf16 "
        "autocast).",
        "",
    ]
    tables = {table: format_table(*TABLES[table], results) for table in args.tables if table in TABLES}
    for lines in tables.values():
        body += lines
    checks = hardware_checks({variant: results[variant] for variant in in_tables if variant in results}, reports,
                             title, len(examples))
    if checks:
        body += ["The same variant trained on other hardware (an earlier report, the same documents; ROUGE-1, paired "
                 "difference of the table's run minus the other):", "", *checks, ""]
    if args.ship is not None:
        if not isinstance(results.get(args.ship), dict):
            raise SystemExit(f"--ship {args.ship}: not evaluated in this run (add its table to --tables)")
        if args.ship not in checkpoints:
            raise SystemExit(f"--ship {args.ship}: its row was reused from an earlier report; decode it in this run "
                             "(name it in --variants, its final folder present)")
        shipped_tables = [line for table, lines in tables.items() if args.ship in TABLES[table][1] for line in lines]
        target = ship(args.ship, results, checkpoints, examples, title, shipped_tables, args)
        body += [f"Shipped: {VARIANTS[args.ship][0]} as `{display_path(target)}` (fp16, word trigram blocking; its "
                 "card has both decodings' scores).", ""]
    if "sweep" in args.tables:
        plot = sweep_plot(results, output)
        body += [f"Window sweep plot: `{display_path(plot)}`" if plot else "Window sweep plot: fewer than two points.",
                 ""]
    if "memory" in args.tables:
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "windowed_memory.py"), "--threads",
                        str(args.threads)], check=True)
    memory = REPO / "benchmarks" / "results" / "windowed_memory.md"
    if memory.is_file():
        body += ["### Windowed encoding against truncation: time and peak memory (windowed_memory.py)", "",
                 memory.read_text().strip(), ""]
    listed = "; ".join(f"{name}: `{display_path(path)}`" for name, path in checkpoints.items())
    body += [f"Checkpoints: {listed or 'none'}", ""]
    if example_lines:
        body += ["## Example summaries (the first documents)", "", *example_lines]
    write_report("quality_windowed.py", body, args.output)
    (output.with_suffix(".json")).write_text(json.dumps(
        {variant: result for variant, result in results.items()}, indent=1, default=str))


if __name__ == "__main__":
    main()
