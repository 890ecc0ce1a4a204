"""WikiSum (Liu et al. 2018) benchmarks on the untouched QMSum and FewSum validation files.

1. rankers: ROUGE-L (rougeLsum F1) of each stage-1 ranker alone against the reference, its ranked paragraphs cut at
   the reference's length in words (matched length), and ROUGE-L recall of the first L words (the paper's Figure 2).
2. perplexity: log-perplexity (nats per WordPiece) of QMSum's reference summary tokens under trained T-D, T-DMCA
   and T-DMCA-MoE models (`--model LABEL=PATH`, the first the reference of paired bootstrap differences), their input
   cut at growing L (each model trained at one L; the paper trains one model per L), with a PNG; with
   `--perplexity_start`, also the model they all continued from under each layout before training (`--perplexity_note`:
   how the models trained, for the table's text).
3. memory: peak resident memory and wall time of one training step (batch 1, forward + backward + AdamW) at growing
   L for T-D and T-DMCA, each case in a fresh subprocess (one thread), and the largest L each fits in 8 GB; with
   `--device cuda`, the same on the GPU: peak allocated memory, each case's allocations capped at --gpu_memory_gb
   (0: the whole card).
4. rouge: summaries of trained models (their `wikisum` pipeline and saved generation config) on the first
   --rouge_rows untouched CNN/DM validation_large articles and on FewSum's validation sets (amazon, yelp; the mean
   over their three references), beside Lead-3 and the extractive stage alone (the model's ranker, cut at the
   reference's length in words): ROUGE-1/2/Lsum F1 with a 95% bootstrap interval on ROUGE-Lsum, the share of
   summaries repeating a word trigram across sentences, and the first summaries next to their references. Each
   `--decoding JSON` (generate() options, e.g. '{"min_new_tokens": 40}') adds a row per model decoded with them
   added to its saved generation config.
5. init: the decoder's start on CNN/DM (the first stage of the paper's two-stage setup): log-perplexity of the
   validation_large highlights given the article's ranked sentences, for a decoder from scratch (the default
   sizes), one of MiniLM's shape from scratch and one started from MiniLM (`decoder_init="encoder"`), at step 0 and
   after equal numbers of training steps on the first train_large articles; and at step 0 the perplexity of each
   summary token read from its own position (what a BERT state describes), which shows whether the copy is faithful.
6. dev: the rouge part's rows on CNN/DM articles that no reported table reads (`validation.jsonl[500:600]`), where
   decoding choices are made before the rouge part reports them.
7. card: the perplexity and memory parts' tables written into the shipped checkpoint's card (`--ship NAME`).

    OMP_NUM_THREADS=1 python benchmarks/wikisum.py --part rankers
    OMP_NUM_THREADS=2 python benchmarks/wikisum.py --part perplexity --model T-D=runs/wikisum-qmsum-td/final \
        --model T-DMCA=runs/wikisum-qmsum-tdmca/final --model T-DMCA-MoE=runs/wikisum-qmsum-moe/final \
        --perplexity_start runs/wikisum-cnndm-copy/final
    OMP_NUM_THREADS=1 python benchmarks/wikisum.py --part memory
    python benchmarks/wikisum.py --part memory --device cuda --gpu_memory_gb 8     # wikisum_memory_gpu8gb.md
    OMP_NUM_THREADS=1 python benchmarks/wikisum.py --part rouge --model T-DMCA=runs/wikisum-cnndm/final
    OMP_NUM_THREADS=1 python benchmarks/wikisum.py --part init --init_steps 40 --init_L 256
    OMP_NUM_THREADS=1 python benchmarks/wikisum.py --part dev --model shipped=wikisum-tdmca-copy-minilm-cnndm \
        --decoding '{"min_new_tokens": 40}'
    python benchmarks/wikisum.py --part card --ship wikisum-tdmca-copy-minilm-cnndm

Tables are printed and written to benchmarks/results/wikisum_<part>.md (with the raw numbers in .json); the memory
and perplexity parts also write wikisum_memory.png and wikisum_perplexity.png.
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _common import command_line, ship_adapter_checkpoint

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "benchmarks" / "results"
DATA_DIR = Path(os.environ.get("SUMFORMERS_DATA_DIR", REPO.parent / "shared" / "data"))
VALIDATION_FILES = {
    "qmsum": DATA_DIR / "qmsum" / "validation.jsonl",
    "fewsum": DATA_DIR / "fewsum" / "validation.jsonl",
}

# validation.jsonl articles that no reported table reads (the training script's check reads its first 50)
DEV_ROWS = (500, 600)

RECALL_BUDGETS = (100, 500, 2000)
PERPLEXITY_LENGTHS = (256, 512, 1024, 2048, 4096)
MEMORY_LIMIT_MB = 8 * 1024
# the worker's address-space cap: a case that would need far more than the limit fails instead of swamping the machine
ADDRESS_SPACE_CAP_MB = 14 * 1024
STEP_TIMEOUT_SECONDS = 900
BISECTION_STEPS = 2
# the model every memory case builds: the shipped checkpoint's sizes, only the attention layout differs
MODEL_SIZES = dict(
    embedding_size=128, hidden_size=256, num_attention_heads=4, intermediate_size=1024, hidden_dropout=0.0
)
# T-DMCA first: the memory part measures in this order, so a run stopped by a deadline has the model's own rows
TDMCA, TD_EAGER, TD_SDPA = ("T-DMCA (blocked)", "T-D (eager: materialized scores, as in the paper)",
                            "T-D (sdpa: PyTorch fused causal kernel)")
VARIANTS = {TDMCA: ("tdmca", "blocked"), TD_EAGER: ("full", "eager"), TD_SDPA: ("full", "sdpa")}


def validation_examples() -> dict[str, list[dict]]:
    from sumformers.processing.processing_wikisum import read_wikisum_examples

    missing = [str(path) for path in VALIDATION_FILES.values() if not path.is_file()]
    if missing:
        raise SystemExit(f"validation data not found: {missing} (set SUMFORMERS_DATA_DIR)")
    return {name: read_wikisum_examples(str(path)) for name, path in VALIDATION_FILES.items()}


def markdown_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(part: str, text: str, data) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    title, _, rest = text.partition("\n")
    text = f"{title}\n\n{command_line('wikisum.py')}\n{rest}"
    (RESULTS_DIR / f"wikisum_{part}.md").write_text(text + "\n")
    (RESULTS_DIR / f"wikisum_{part}.json").write_text(json.dumps(data, indent=2) + "\n")
    print(text)


# ------------------------------------------------------------------------------------------------------------------
# 1. Rankers alone
# ------------------------------------------------------------------------------------------------------------------


def first_words(ranked, budget: int) -> str:
    """Ranked paragraphs cut at `budget` whitespace words, one paragraph a line."""
    from sumformers.text.ranking import fit_to_budget

    return "\n".join(" ".join(words) for _, words in fit_to_budget(ranked, budget))


def ranker_benchmark() -> None:
    from rouge_score import rouge_scorer

    from sumformers.text.ranking import RANKERS, rank_paragraphs, split_paragraphs
    from sumformers.text.scoring import rouge_scores
    from sumformers.text.sentences import to_sentences

    scorer = rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)
    results = {}
    for dataset, examples in validation_examples().items():
        for ranker in RANKERS:
            started = time.perf_counter()
            matched, recall = [], {budget: [] for budget in RECALL_BUDGETS}
            for example in examples:
                ranked = rank_paragraphs(
                    split_paragraphs(example["documents"]), example["title"], ranker, reference=example["summary"]
                )
                matched.append(first_words(ranked, len(example["summary"].split())))
                reference = "\n".join(to_sentences(example["summary"]))
                for budget in RECALL_BUDGETS:
                    recall[budget].append(
                        scorer.score(reference, first_words(ranked, budget))["rougeLsum"].recall * 100
                    )
            scores = rouge_scores(matched, [example["summary"] for example in examples])
            results[(dataset, ranker)] = {
                "rougeLsum_f1_matched": scores["rougeLsum"],
                "rouge1_f1_matched": scores["rouge1"],
                "rouge2_f1_matched": scores["rouge2"],
                **{f"rougeLsum_recall_at_{budget}": sum(v) / len(v) for budget, v in recall.items()},
                "seconds_per_example": (time.perf_counter() - started) / len(examples),
                "examples": len(examples),
            }
    header = ["dataset", "ranker", "ROUGE-L F1 (matched)", "ROUGE-1 F1", "ROUGE-2 F1"]
    header += [f"ROUGE-L recall @{budget} words" for budget in RECALL_BUDGETS] + ["s / example"]
    rows = [
        [
            dataset,
            ranker,
            f"{r['rougeLsum_f1_matched']:.2f}",
            f"{r['rouge1_f1_matched']:.2f}",
            f"{r['rouge2_f1_matched']:.2f}",
        ]
        + [f"{r[f'rougeLsum_recall_at_{budget}']:.2f}" for budget in RECALL_BUDGETS]
        + [f"{r['seconds_per_example']:.2f}"]
        for (dataset, ranker), r in results.items()
    ]
    text = (
        "## WikiSum stage 1: rankers alone (validation, untouched)\n\n"
        "Ranked paragraphs (title = QMSum topics / FewSum category) cut at the reference length in whitespace words "
        "(matched) or at L words (recall, the paper's Figure 2). rouge-score with stemming, one paragraph (candidate) "
        "or reference sentence per line; F1/recall x 100. The oracle ranks by recall of the reference's bigrams "
        "(cheating).\n\n" + markdown_table(header, rows)
    )
    write_results("rankers", text, [{"dataset": d, "ranker": k, **v} for (d, k), v in results.items()])


# ------------------------------------------------------------------------------------------------------------------
# 2. Log-perplexity at growing L
# ------------------------------------------------------------------------------------------------------------------


def perplexity_examples(queries_per_meeting: int) -> list[dict]:
    """QMSum validation: each meeting's general summary and its first `queries_per_meeting` query/answer pairs (the
    only long-input set here: FewSum's eight reviews and most CNN/DM articles fit in 1,024 tokens)."""
    from sumformers.processing.processing_wikisum import read_wikisum_examples

    path = VALIDATION_FILES["qmsum"]
    if not path.is_file():
        raise SystemExit(f"validation data not found: {path} (set SUMFORMERS_DATA_DIR)")
    examples = read_wikisum_examples(str(path), specific_queries=True)
    return [e for e in examples if "-q" not in e["id"] or int(e["id"].rsplit("-q", 1)[1]) < queries_per_meeting]


def summary_token_losses(model, tokenizer, examples: list[dict], length: int) -> list[tuple[float, int]]:
    """(summed negative log-likelihood in nats, token count) of each reference summary (its first 192 WordPieces and
    the end token) given the title and the model's ranked paragraphs cut at `length` tokens."""
    import torch

    from sumformers.processing.processing_wikisum import encode_wikisum_input
    from sumformers.text.ranking import rank_paragraphs, split_paragraphs

    losses = []
    for example in examples:
        ranking = rank_paragraphs(split_paragraphs(example["documents"]), example["title"], model.config.ranker)
        summary = tokenizer(example["summary"], add_special_tokens=False, verbose=False)["input_ids"][:192]
        summary = summary + [model.config.eos_token_id]
        input_ids, _ = encode_wikisum_input(tokenizer, model.config, example["title"], ranking, length)
        with torch.no_grad():
            logits = model(torch.tensor([input_ids + summary]), logits_to_keep=len(summary) + 1).logits[0, :-1]
        loss = torch.nn.functional.cross_entropy(logits.float(), torch.tensor(summary), reduction="sum").item()
        losses.append((loss, len(summary)))
    return losses


def paired_difference_interval(losses, reference, resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval (over examples) of the difference in token-weighted log-perplexity between two models
    scored on the same summaries (`losses` minus `reference`, each a list of (nats, tokens))."""
    import numpy as np

    difference = np.array([loss for loss, _ in losses]) - np.array([loss for loss, _ in reference])
    tokens = np.array([count for _, count in losses], dtype=float)
    rows = np.random.default_rng(seed).integers(0, len(tokens), size=(resamples, len(tokens)))
    values = difference[rows].sum(axis=1) / tokens[rows].sum(axis=1)
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def perplexity_benchmark(
    models: dict[str, str], start: str | None, queries_per_meeting: int, note: str | None = None
) -> None:
    """Each model (the first is the reference of the paired differences) at every L; with `start`, also that
    trained model under each distinct attention layout of `models` before any training (`from_trained_decoder`)."""
    from sumformers.hub import load_model, load_tokenizer
    from sumformers.modeling.modeling_wikisum import WikiSumForCausalLM

    examples = perplexity_examples(queries_per_meeting)
    loaded = {label: load_model(path).eval() for label, path in models.items()}
    tokenizers = {label: load_tokenizer(path) for label, path in models.items()}
    if start:
        layouts = {tuple(model.config.attention_layers): model.config for model in loaded.values()}
        for layers, config in layouts.items():
            label = f"{config.variant.removesuffix('-MoE')} at the start"
            loaded[label] = WikiSumForCausalLM.from_trained_decoder(
                load_model(start), attention_layers=list(layers), local_block_size=config.local_block_size
            ).eval()
            tokenizers[label] = load_tokenizer(start)
    results = {}
    for label, model in loaded.items():
        # blocked attention keeps the long inputs linear in memory (results equal eager's)
        model.set_attn_implementation("blocked" if model.config.variant.startswith("T-DMCA") else "sdpa")
        for length in PERPLEXITY_LENGTHS:
            started = time.perf_counter()
            results[label, length] = summary_token_losses(model, tokenizers[label], examples, length)
            print(
                label,
                length,
                f"{log_perplexity(results[label, length]):.4f}",
                f"{time.perf_counter() - started:.0f}s",
                flush=True,
            )
    write_perplexity_results(models, loaded, results, examples, start, note)


def log_perplexity(losses: list[tuple[float, int]]) -> float:
    return sum(loss for loss, _ in losses) / sum(count for _, count in losses)


def write_perplexity_results(models, loaded, results, examples, start, note=None) -> None:
    lengths = list(PERPLEXITY_LENGTHS)
    header = ["model", "parameters", "trained at"] + [f"L={length}" for length in lengths]
    rows = [
        [label, f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M", f"L={model.config.max_input_tokens}"]
        + [f"{log_perplexity(results[label, length]):.3f}" for length in lengths]
        for label, model in loaded.items()
    ]
    reference, *others = list(models)
    differences = []
    for label in others:
        cells = []
        for length in lengths:
            low, high = paired_difference_interval(results[label, length], results[reference, length])
            value = log_perplexity(results[label, length]) - log_perplexity(results[reference, length])
            cells.append(f"{value:+.3f} [{low:+.3f}, {high:+.3f}]")
        differences.append([f"{label} - {reference}"] + cells)
    meetings = sum("-q" not in example["id"] for example in examples)
    tokens = sum(count for _, count in results[reference, lengths[0]])
    text = (
        "## WikiSum stage 2: log-perplexity of the reference summaries at growing L (QMSum validation, untouched)\n\n"
        f"Nats per WordPiece of {tokens} summary tokens (each summary's first 192 and the end token) of "
        f"{len(examples)} examples: the {meetings} meetings' general summaries and their first query/answer "
        "pairs (the query as title), given the title and the tf-idf-ranked transcript turns cut at L tokens. "
        f"`at the start` rows are {start} under that layout before any QMSum training (an upcycled mixture of "
        "experts starts equal to its dense model, so it has no row of its own).\n\n"
        + (f"{note}\n\n" if note else "")
        + markdown_table(header, rows)
        + f"\n\nPaired differences to {reference} (negative: lower perplexity than {reference}), with the 95% "
        "bootstrap interval over examples:\n\n"
        + markdown_table(["models"] + [f"L={length}" for length in lengths], differences)
    )
    data = [
        {
            "model": label,
            "path": models.get(label, start),
            "L": length,
            "log_perplexity": log_perplexity(losses),
            "examples": [{"id": e["id"], "nats": loss, "tokens": count} for e, (loss, count) in zip(examples, losses)],
        }
        for (label, length), losses in results.items()
    ]
    write_results("perplexity", text, data)
    plot_perplexity(loaded, results, lengths)


def plot_perplexity(loaded, results, lengths) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.5, 4.2))
    for label in loaded:
        style = "--" if label.endswith("at the start") else "-"
        values = [log_perplexity(results[label, length]) for length in lengths]
        axis.plot(lengths, values, style, marker="o", label=label)
    axis.set_xscale("log", base=2)
    axis.set_xlabel("L (input tokens)")
    axis.set_ylabel("log-perplexity (nats per WordPiece)")
    axis.set_title("WikiSum on QMSum validation: summary log-perplexity vs L")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    figure.savefig(RESULTS_DIR / "wikisum_perplexity.png", dpi=120)


def card_benchmark(name: str) -> None:
    """The perplexity and memory parts' tables (their results files, as last written) in checkpoints/NAME's card,
    under "The paper's comparisons"."""
    from transformers import AutoConfig

    from sumformers.hub import read_card_info, write_card

    folder = REPO / "checkpoints" / name
    card = read_card_info(folder)
    if not card:
        raise SystemExit(f"--part card: {folder} is not a shipped checkpoint with a card")
    sections = []
    for part in ("perplexity", "memory"):
        path = RESULTS_DIR / f"wikisum_{part}.md"
        if not path.is_file():
            raise SystemExit(f"--part card: {path} is missing; run --part {part} first")
        sections.append(path.read_text().strip().replace("## ", "### ", 1))
    card["comparisons"] = (
        "From `benchmarks/wikisum.py` on CPU. The perplexity models are not this checkpoint: they continued from "
        "it on QMSum, one per layout, as the table says.\n\n" + "\n\n".join(sections)
    )
    write_card(folder, AutoConfig.from_pretrained(folder), card)


# ------------------------------------------------------------------------------------------------------------------
# 3. Memory and time of one training step
# ------------------------------------------------------------------------------------------------------------------


def _rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_worker(layout: str, implementation: str, length: int, gpu_gb: float | None = None) -> None:
    """One training step in this process, on CPU (one thread) or, with `gpu_gb`, on the GPU with this process's
    allocations capped at `gpu_gb` GB (0: the whole card); prints a JSON line with the peak memory (CPU: resident set;
    GPU: allocated bytes), the memory before the step and its time."""
    import torch

    from sumformers import WikiSumConfig, WikiSumForCausalLM

    if gpu_gb is None:
        cap = ADDRESS_SPACE_CAP_MB * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        torch.set_num_threads(1)
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", torch.cuda.current_device())
        if gpu_gb:
            total = torch.cuda.get_device_properties(device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, gpu_gb * 2**30 / total), device)
    layers = ["full"] * 5 if layout == "full" else ["local", "compressed", "local", "compressed", "local"]
    config = WikiSumConfig(attention_layers=layers, **MODEL_SIZES)
    model = WikiSumForCausalLM._from_config(config, attn_implementation=implementation).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1000, 30000, (1, length), generator=torch.Generator().manual_seed(0)).to(device)
    # a short step first, so that allocator and optimizer state exist before the measured one
    model(ids[:, :64], labels=ids[:, :64]).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    def used_mb() -> float:
        if device.type == "cpu":
            return _rss_peak_mb()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    before = used_mb()
    started = time.perf_counter()
    try:
        model(ids, labels=ids).loss.backward()
        optimizer.step()
        status = "ok"
    except (MemoryError, RuntimeError) as error:
        if "memory" not in str(error).lower() and not isinstance(error, MemoryError):
            raise
        status = "out of memory"
    print(json.dumps({"status": status, "peak_mb": used_mb(), "before_step_mb": before,
                      "seconds": time.perf_counter() - started}))


def _run_case(layout: str, implementation: str, length: int, gpu_gb: float | None) -> dict:
    where = "cpu" if gpu_gb is None else f"cuda:{gpu_gb:g}"
    command = [sys.executable, __file__, "--worker", layout, implementation, str(length), where]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=STEP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return {"status": f"timed out (> {STEP_TIMEOUT_SECONDS} s)"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        killed = done.returncode < 0 or "out of memory" in done.stderr.lower() or "MemoryError" in done.stderr
        last = done.stderr.strip().splitlines()[-1:]
        return {"status": "out of memory" if killed else f"failed: {last}", "last_error_line": "".join(last)}
    return json.loads(lines[-1])


def _predicted_peak(measured: dict[int, float], length: int) -> float:
    """Quadratic extrapolation a + b L + c L^2 through the last three measured peaks (linear with two)."""
    points = sorted(measured.items())[-3:]
    if len(points) < 2:
        return 0.0
    import numpy as np

    lengths, peaks = np.array([p[0] for p in points], float), np.array([p[1] for p in points])
    coefficients = np.polyfit(lengths, peaks, deg=len(points) - 1)
    return float(max(np.polyval(coefficients, length), peaks[-1]))


def _measure(results: list, measured: dict, label: str, length: int, run_case, limit_mb: float,
             skip_predicted: bool) -> bool | None:
    """Run (or, with `skip_predicted`, skip when extrapolation from `measured` says it would need far more than
    `limit_mb`) one case and record it; True when it fits, False when it does not for lack of memory, None when it
    failed otherwise."""
    layout, implementation = VARIANTS[label]
    predicted = _predicted_peak(measured, length) if skip_predicted else 0.0
    if predicted > 1.5 * limit_mb:
        case = {"variant": label, "L": length, "status": f"skipped: predicted {predicted / 1024:.1f} GB"}
    else:
        case = {"variant": label, "L": length, **run_case(layout, implementation, length)}
    results.append(case)
    print(case, flush=True)
    if case["status"] == "ok":
        measured[length] = case["peak_mb"]
        return case["peak_mb"] <= limit_mb
    return False if case["status"].startswith(("skipped", "out of memory")) else None


def largest_lengths(start: int, stop: int, run_case, limit_mb: float, skip_predicted: bool) -> tuple[list, dict]:
    """Every case measured (`run_case(layout, implementation, L)`) and each variant's largest L within `limit_mb`:
    L doubles from `start` up to `stop` until a case does not fit, then BISECTION_STEPS bisections (multiples of
    256) between the last L that fits and the first that does not."""
    results, largest = [], {}
    for label in VARIANTS:
        measured = {}
        fits, failed_at, length = None, None, start
        while length <= stop:
            outcome = _measure(results, measured, label, length, run_case, limit_mb, skip_predicted)
            if not outcome:
                failed_at = length if outcome is False else None
                break
            fits, length = length, length * 2
        for _ in range(BISECTION_STEPS if fits and failed_at else 0):
            middle = (fits + failed_at) // 2 // 256 * 256
            if middle in (fits, failed_at):
                break
            outcome = _measure(results, measured, label, middle, run_case, limit_mb, skip_predicted)
            if outcome is None:
                break
            fits, failed_at = (middle, failed_at) if outcome else (fits, middle)
        largest[label] = fits
    return results, largest


def memory_benchmark(start: int, stop: int, gpu_gb: float | None = None) -> None:
    """The memory part on CPU (resident set within 8 GB, as before) or on the GPU (`gpu_gb`: each case's allocations
    capped there, 0 for the whole card), written to wikisum_memory.md, or wikisum_memory_gpu<gb>gb.md /
    wikisum_memory_gpu.md."""
    if gpu_gb is None:
        limit_mb, suffix, where = MEMORY_LIMIT_MB, "", "CPU, 1 thread"
    else:
        import torch

        properties = torch.cuda.get_device_properties(0)
        card_mb = properties.total_memory / 2**20
        limit_mb = gpu_gb * 1024 if gpu_gb else card_mb
        suffix = f"_gpu{gpu_gb:g}gb" if gpu_gb else "_gpu"
        where = f"{properties.name}, fp32"
    results, largest = largest_lengths(
        start, stop, lambda *case: _run_case(*case, gpu_gb), limit_mb, skip_predicted=gpu_gb is None
    )
    rows = []
    for case in results:
        if case["status"] == "ok":
            rows.append([case["variant"], case["L"], f"{case['peak_mb'] / 1024:.2f}",
                         f"{(case['peak_mb'] - case['before_step_mb']) / 1024:.2f}", f"{case['seconds']:.2f}"])
        else:
            rows.append([case["variant"], case["L"], case["status"], "", ""])
    budget = f"{limit_mb / 1024:.0f} GB"
    summary = [[label, largest[label] or "none"] for label in VARIANTS]
    tdmca, td_eager, td_sdpa = (largest[label] or 0 for label in (TDMCA, TD_EAGER, TD_SDPA))
    if gpu_gb is None:
        measure = ("Peak RSS of a fresh process (ru_maxrss, includes the ~0.5 GB of imported libraries); 'step' = peak "
                   "minus the RSS before the measured step. ")
        columns = ["peak RSS (GB)", "step (GB)", "step time (s)"]
        skipping = "; a case whose extrapolated peak exceeds 12 GB is skipped. Timings on a shared 2-core machine "
        skipping += "under load are indicative only."
    else:
        cap = f"capped at {gpu_gb:g} GB" if gpu_gb else "the whole card"
        measure = (f"Each case in a fresh process whose GPU allocations are {cap} "
                   "(`torch.cuda.set_per_process_memory_fraction`): a case fits when its step raises no out-of-memory "
                   "error. Peak = `torch.cuda.max_memory_allocated` over the step (weights, AdamW state, activations; "
                   "not the CUDA context or the allocator's cache); 'step' = peak minus the memory allocated before "
                   "it. ")
        columns = ["peak allocated (GB)", "step (GB)", "step time (s)"]
        skipping = "."
    text = (
        f"## WikiSum: one training step at growing L ({where}, batch 1)\n\n"
        "Model: 5 layers, hidden 256, 4 heads, feed-forward 1024, 30,522-token vocabulary tied through a 128-wide "
        f"embedding. {measure}Step = forward, loss over every token, backward, AdamW. Lengths double from {start} "
        f"(at most {stop}); {BISECTION_STEPS} bisection steps refine the limit{skipping}\n\n"
        + markdown_table(["variant", "L", *columns], rows)
        + f"\n\nLargest L that fits in {budget}:\n\n"
        + markdown_table(["variant", "largest L"], summary)
        + f"\n\nT-DMCA / T-D (eager) = {tdmca / max(td_eager, 1):.1f}x; T-DMCA / T-D (sdpa) = "
        f"{tdmca / max(td_sdpa, 1):.1f}x."
    )
    write_results(f"memory{suffix}", text, {"cases": results, f"largest_L_in_{budget.replace(' ', '')}": largest})
    plot_memory(results, limit_mb, where, RESULTS_DIR / f"wikisum_memory{suffix}.png")


def plot_memory(results: list[dict], limit_mb: float, where: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (memory_axis, time_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label in VARIANTS:
        ok = [case for case in results if case["variant"] == label and case["status"] == "ok"]
        ok.sort(key=lambda case: case["L"])
        lengths = [case["L"] for case in ok]
        memory_axis.plot(lengths, [case["peak_mb"] / 1024 for case in ok], marker="o", label=label)
        time_axis.plot(lengths, [case["seconds"] for case in ok], marker="o", label=label)
    memory_axis.axhline(limit_mb / 1024, color="grey", linestyle="--", label=f"{limit_mb / 1024:.0f} GB")
    for axis, title, unit in ((memory_axis, "peak memory", "GB"), (time_axis, "time of one training step", "s")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("L (tokens)")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.grid(alpha=0.3)
    memory_axis.legend(fontsize=7)
    figure.suptitle(f"WikiSum T-D vs T-DMCA, one training step ({where}, batch 1)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


# ------------------------------------------------------------------------------------------------------------------
# 4. ROUGE of generated summaries, beside Lead-3 and the extractive stage
# ------------------------------------------------------------------------------------------------------------------

SHOWN_SUMMARIES = 3


def rouge_sets(cnndm_rows: int) -> dict[str, tuple[list[dict], list[list[str]]]]:
    """Evaluation set name -> (examples, each example's references), every document one sentence a line (the
    rankers rank sentences, as the CNN/DM checkpoints were trained)."""
    from sumformers.processing.processing_wikisum import read_wikisum_examples
    from sumformers.text.evaluation import read_jsonl

    missing = [str(path) for path in (CNNDM_FILES["validation"], VALIDATION_FILES["fewsum"]) if not path.is_file()]
    if missing:
        raise SystemExit(f"validation data not found: {missing} (set SUMFORMERS_DATA_DIR)")
    cnndm = read_wikisum_examples(str(CNNDM_FILES["validation"]), ranking_unit="sentence", max_rows=cnndm_rows)
    sets = {f"CNN/DM validation_large[:{cnndm_rows}]": (cnndm, [[example["summary"]] for example in cnndm])}
    fewsum_rows = read_jsonl(VALIDATION_FILES["fewsum"])
    fewsum = read_wikisum_examples(str(VALIDATION_FILES["fewsum"]), ranking_unit="sentence")
    for domain in sorted({row["domain"] for row in fewsum_rows}):
        pairs = [(example, row) for example, row in zip(fewsum, fewsum_rows) if row["domain"] == domain]
        references = [row.get("references") or [row["summary"]] for _, row in pairs]
        sets[f"FewSum {domain} validation"] = ([example for example, _ in pairs], references)
    return sets


def dev_sets() -> dict[str, tuple[list[dict], list[list[str]]]]:
    """The development articles (`DEV_ROWS` of CNN/DM validation.jsonl) as `rouge_sets` gives its sets."""
    from sumformers.processing.processing_wikisum import read_wikisum_examples

    path = DATA_DIR / "cnn_dailymail" / "validation.jsonl"
    if not path.is_file():
        raise SystemExit(f"development data not found: {path} (set SUMFORMERS_DATA_DIR)")
    first, end = DEV_ROWS
    examples = read_wikisum_examples(str(path), ranking_unit="sentence", max_rows=end)[first:]
    return {f"CNN/DM validation.jsonl[{first}:{end}]": (examples, [[example["summary"]] for example in examples])}


def options_label(options: dict) -> str:
    return ", ".join(f"{name}={value}" for name, value in options.items())


def reference_rouge(summaries: list[str], references: list[list[str]]) -> list[dict[str, float]]:
    """Per example ROUGE-1/2/Lsum F1 x 100, the mean over its references."""
    from sumformers.text.scoring import rouge_per_example

    scores = []
    for summary, refs in zip(summaries, references):
        per_reference = rouge_per_example([summary] * len(refs), refs)
        scores.append({key: sum(score[key] for score in per_reference) / len(refs) for key in per_reference[0]})
    return scores


def baseline_summaries(examples: list[dict], ranker: str) -> dict[str, list[str]]:
    """Lead-3 (the first document's first three sentences) and the extractive stage alone (`ranker`'s units cut
    at the reference's length in words)."""
    from sumformers.text.ranking import rank_paragraphs, split_paragraphs

    lead = ["\n".join(example["documents"][0].split("\n")[:3]) for example in examples]
    extractive = [
        first_words(
            rank_paragraphs(split_paragraphs(example["documents"]), example["title"], ranker),
            len(example["summary"].split()),
        )
        for example in examples
    ]
    return {"Lead-3": lead, f"extractive stage alone ({ranker}, reference length)": extractive}


def pipeline_summaries(summarizer, examples: list[dict], **options) -> list[str]:
    """The `wikisum` pipeline's summaries of `examples` as `read_wikisum_examples(..., ranking_unit="sentence")` gives
    them: their documents come one sentence a line, so they are ranked as given, each line a unit. (A model trained on
    sentences, `config.ranking_unit="sentence"`, lays out a plain article string the same way by itself.)"""
    inputs = [{"title": example["title"], "documents": example["documents"]} for example in examples]
    return [output["summary"] for output in summarizer(inputs, ranking_unit="paragraph", **options)]


def rouge_benchmark(
    models: dict[str, str],
    cnndm_rows: int,
    ship: str | None = None,
    trained_on: str = "",
    decodings: list[dict] = (),
    ship_reason: str | None = None,
    development: bool = False,
) -> None:
    """The rouge part (or with `development` the dev part); with `ship`, one model is shipped with this table on its
    card, and with `ship_reason` the last of `decodings` goes into its generation config, the reason on the card."""
    import torch
    from transformers import GenerationConfig, pipeline

    from sumformers.cards import decoding_settings
    from sumformers.hub import resolve_model
    from sumformers.text.scoring import bootstrap_interval
    from sumformers.text.sentences import has_repeated_trigram, to_sentences

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    summarizers = {label: pipeline("wikisum", model=str(resolve_model(path))) for label, path in models.items()}

    # each model with its saved generation config, then with each of `decodings` added to it
    systems_of_models = {f"{label} ({path})": (label, {}) for label, path in models.items()}
    systems_of_models.update(
        {
            f"{label}, {options_label(options)} ({path})": (label, options)
            for options in decodings
            for label, path in models.items()
        }
    )

    rankers = sorted({summarizer.model.config.ranker for summarizer in summarizers.values()}) or ["tfidf"]
    results = []
    for dataset, (examples, references) in (dev_sets() if development else rouge_sets(cnndm_rows)).items():
        systems = {}
        for ranker in rankers:
            systems.update({name: (texts, 0.0) for name, texts in baseline_summaries(examples, ranker).items()})
        for system, (label, options) in systems_of_models.items():
            started = time.perf_counter()
            texts = pipeline_summaries(summarizers[label], examples, **options)
            seconds = (time.perf_counter() - started) / len(examples)
            systems[system] = (texts, seconds)
            print(dataset, system, f"{seconds:.1f} s/example", flush=True)
        for system, (texts, seconds) in systems.items():
            per_example = reference_rouge(texts, references)
            means = {key: sum(score[key] for score in per_example) / len(per_example) for key in per_example[0]}
            low, high = bootstrap_interval([score["rougeLsum"] for score in per_example])
            repeated = sum(has_repeated_trigram(to_sentences(text)) for text in texts) / len(texts)
            results.append(
                {
                    "dataset": dataset,
                    "system": system,
                    **means,
                    "rougeLsum_interval": [low, high],
                    "repeated_trigram_rate": repeated,
                    "mean_words": sum(len(text.split()) for text in texts) / len(texts),
                    "seconds_per_example": seconds,
                    "examples": len(texts),
                    "shown": [
                        {"id": example["id"], "summary": text, "reference": refs[0]}
                        for example, text, refs in list(zip(examples, texts, references))[:SHOWN_SUMMARIES]
                    ],
                }
            )
            print({key: value for key, value in results[-1].items() if key != "shown"}, flush=True)
    header = ["dataset", "system", "ROUGE-1", "ROUGE-2", "ROUGE-Lsum [95% CI]", "repeated trigram", "words", "s / ex."]
    rows = [
        [
            r["dataset"],
            r["system"],
            f"{r['rouge1']:.2f}",
            f"{r['rouge2']:.2f}",
            f"{r['rougeLsum']:.2f} [{r['rougeLsum_interval'][0]:.2f}, {r['rougeLsum_interval'][1]:.2f}]",
            f"{100 * r['repeated_trigram_rate']:.1f}%",
            f"{r['mean_words']:.1f}",
            f"{r['seconds_per_example']:.2f}",
        ]
        for r in results
    ]
    shown = [
        f"**{r['dataset']}, {item['id']}**\n\n- {r['system']}: {item['summary']!r}\n- reference: {item['reference']!r}"
        for r in results
        if r["system"] in systems_of_models
        for item in r["shown"]
    ]
    documents = "development articles, for decoding choices" if development else "validation, untouched"
    text = (
        f"## WikiSum: ROUGE of generated summaries ({documents})\n\n"
        "rouge-score F1 x 100 with stemming, one sentence a line (ROUGE-Lsum, the summary-level ROUGE-L), the mean "
        "over the references (FewSum has three), and the 95% bootstrap interval over examples. Models decode with "
        "their saved generation config through the `wikisum` pipeline; documents are split one sentence a line so "
        "that the ranker ranks sentences. `repeated trigram`: the share of summaries with a word trigram in two "
        "sentences. Seconds per example on this machine's CPU.\n\n"
        + markdown_table(header, rows)
        + "\n\n### The first summaries next to their references\n\n"
        + "\n\n".join(shown)
    )
    write_results("dev" if development else "rouge", text, results)
    if ship:  # one model (main checks): its card gets the setting and the whole table
        (checkpoint,) = models.values()
        evaluation = [text.split("\n\n")[1], "", markdown_table(header, rows)]
        training_check = "The training run's check"
        generation, decoding = None, None
        if ship_reason:  # shipped with the last decoding measured above, and the card says why
            generation = dict(decodings[-1])
            settings = GenerationConfig.from_pretrained(checkpoint)
            settings.update(**generation)
            decoding = decoding_settings(settings, ship_reason)
        shipped = ship_adapter_checkpoint(
            checkpoint, REPO / "checkpoints" / ship, evaluation, trained_on, training_check, generation, decoding
        )
        print(f"shipped: {shipped}")


# ------------------------------------------------------------------------------------------------------------------
# 5. The decoder's start: from scratch or from MiniLM
# ------------------------------------------------------------------------------------------------------------------

CNNDM_FILES = {
    "train": DATA_DIR / "cnn_dailymail" / "train_large.jsonl.gz",
    "validation": DATA_DIR / "cnn_dailymail" / "validation_large.jsonl.gz",
}
INIT_BATCH = 4
INIT_SUMMARY_TOKENS = 96
# the shipped from-scratch run's rate, and a fine-tuning rate for the pretrained start
INIT_RATES = {"scratch": 1e-3, "scratch, MiniLM shape": 1e-3, "from MiniLM": 2e-4}


def init_benchmark(steps: int, train_rows: int, eval_rows: int, max_input_tokens: int) -> None:
    import torch
    from transformers import AutoTokenizer

    from sumformers import WikiSumForCausalLM
    from sumformers.modeling.pretrained_encoder import bundled_encoder_path
    from sumformers.processing.processing_wikisum import read_wikisum_examples

    missing = [str(path) for path in CNNDM_FILES.values() if not path.is_file()]
    if missing:
        raise SystemExit(f"CNN/DM data not found: {missing} (set SUMFORMERS_DATA_DIR)")
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(bundled_encoder_path())
    train = read_wikisum_examples(str(CNNDM_FILES["train"]), ranking_unit="sentence", max_rows=train_rows)
    validation = read_wikisum_examples(str(CNNDM_FILES["validation"]), ranking_unit="sentence", max_rows=eval_rows)
    layout = dict(
        max_input_tokens=max_input_tokens, ranker="textrank", hidden_dropout=0.1, attn_implementation="blocked"
    )
    torch.manual_seed(0)
    started = WikiSumForCausalLM.from_encoder("minilm", decoder_init="encoder", **layout)
    torch.manual_seed(0)
    models = {
        "scratch": WikiSumForCausalLM.from_encoder("minilm", **layout),
        "scratch, MiniLM shape": WikiSumForCausalLM._from_config(started.config),
        "from MiniLM": started,
    }
    checkpoints = sorted({0, steps // 4, steps // 2, steps})
    results = []
    for label, model in models.items():
        processor = model.processor_class(tokenizer, model.config)
        encoded = [processor.training_features(e, INIT_SUMMARY_TOKENS) for e in train]
        held_out = [processor.training_features(e, INIT_SUMMARY_TOKENS) for e in validation]
        optimizer = torch.optim.AdamW(model.parameters(), lr=INIT_RATES[label], weight_decay=0.01)
        order = torch.randperm(len(encoded), generator=torch.Generator().manual_seed(0)).tolist()
        started_at = time.perf_counter()
        own_token = own_token_log_perplexity(model, held_out)
        for step in range(steps + 1):
            if step in checkpoints:
                log_perplexity = summary_log_perplexity(model, held_out)
                results.append({"model": label, "step": step, "log_perplexity": log_perplexity,
                                "own_token_log_perplexity": own_token if step == 0 else None,
                                "parameters": sum(p.numel() for p in model.parameters()),
                                "seconds": time.perf_counter() - started_at})  # fmt: skip
                print(results[-1], flush=True)
            if step == steps:
                break
            model.train()
            batch = [encoded[order[(step * INIT_BATCH + k) % len(order)]] for k in range(INIT_BATCH)]
            loss = model(**processor.collate(batch)).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    rows = []
    for label, model in models.items():
        values = {r["step"]: r["log_perplexity"] for r in results if r["model"] == label}
        first = next(r for r in results if r["model"] == label)
        own = first["own_token_log_perplexity"]
        rows.append([label, f"{first['parameters'] / 1e6:.1f}M", INIT_RATES[label], f"{own:.3f} ({math.exp(own):,.0f})"]
                    + [f"{values[s]:.3f} ({math.exp(values[s]):,.0f})" for s in checkpoints])  # fmt: skip
    text = (
        "## WikiSum: the decoder's start (CNN/DM)\n\n"
        f"Log-perplexity (perplexity) of the first {eval_rows} validation_large highlights (nats per WordPiece, the "
        "summary tokens and the end token) given the article's TextRank-ranked sentences cut at "
        f"L = {max_input_tokens}, after 0 to {steps} AdamW steps of batch {INIT_BATCH} on the first {train_rows} "
        "train_large articles (loss on every token, dropout 0.1, one CPU thread). `own token, step 0`: the same "
        "summary tokens each read from its own position's output instead of the previous one's.\n\n"
        + markdown_table(
            ["start", "parameters", "learning rate", "own token, step 0"] + [f"step {s}" for s in checkpoints], rows
        )
    )
    write_results("init", text, results)


def summary_log_perplexity(model, encoded: list[dict], shift: int = 1) -> float:
    """Nats per summary token (and end token) given the decoder input, in eval mode, each token scored at the
    output `shift` positions before it (1: the next-token prediction; 0: its own position's output)."""
    import torch

    model.eval()
    total, count = 0.0, 0
    for item in encoded:
        ids = torch.tensor([item["input_ids"] + item["summary_ids"]])
        summary_length = len(item["summary_ids"])
        with torch.no_grad():
            logits = model(ids, logits_to_keep=summary_length + shift).logits[0, :summary_length].float()
        targets = torch.tensor(item["summary_ids"])
        total += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
        count += targets.numel()
    return total / count


def own_token_log_perplexity(model, encoded: list[dict]) -> float:
    return summary_log_perplexity(model, encoded, shift=0)


def generate_options(text: str) -> dict:
    """A --decoding value: a JSON object of generate() options."""
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(options, dict) or not options:
        raise argparse.ArgumentTypeError(f"expected a JSON object of generate() options, got {text!r}")
    return options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--part", choices=("rankers", "perplexity", "memory", "rouge", "init", "dev", "card"), action="append"
    )
    parser.add_argument(
        "--model", action="append", default=[], metavar="LABEL=PATH", help="trained model for --part rouge or dev"
    )
    parser.add_argument("--rouge_rows", type=int, default=500, help="CNN/DM validation_large articles of --part rouge")
    parser.add_argument(
        "--ship",
        metavar="NAME",
        help="--part rouge with one --model (an adapter checkpoint): copy it to checkpoints/NAME with this run's "
        "table on its card; --part card: the checkpoint whose card gets the perplexity and memory tables",
    )
    parser.add_argument("--trained_on", default="CPU", help="where the shipped model trained, for its card")
    parser.add_argument(
        "--decoding",
        action="append",
        default=[],
        type=generate_options,
        metavar="JSON",
        help="--part rouge or dev: also decode each model with these generate() options added to its generation "
        "config (repeatable), e.g. '{\"no_repeat_ngram_size\": 3}'",
    )
    parser.add_argument(
        "--ship_decoding_reason",
        metavar="WHY",
        help="with --ship: ship the last --decoding's options in the generation config; WHY (measured on the dev "
        "part's articles, not the reported ones) goes on the card",
    )
    parser.add_argument(
        "--perplexity_start",
        help="--part perplexity: the trained model the --model variants continued from (train_wikisum.py "
        "--start_from), scored under each of their layouts before training",
    )
    parser.add_argument("--perplexity_note", help="--part perplexity: how the models trained (the table's text)")
    parser.add_argument(
        "--queries_per_meeting", type=int, default=2, help="--part perplexity: QMSum query/answer pairs per meeting"
    )
    parser.add_argument("--start", type=int, default=1024, help="first L of the memory part")
    parser.add_argument("--stop", type=int, default=65536, help="last L tried by the memory part")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the memory part runs")
    parser.add_argument("--gpu_memory_gb", type=float, default=8.0,
                        help="--part memory --device cuda: each case's GPU allocations capped at this many GB (0: the "
                        "whole card)")
    parser.add_argument("--init_steps", type=int, default=100, help="training steps of the init part")
    parser.add_argument("--init_train_rows", type=int, default=400, help="train_large articles the init part uses")
    parser.add_argument("--init_eval_rows", type=int, default=20, help="validation_large articles it evaluates on")
    parser.add_argument("--init_L", type=int, default=512, help="L (input tokens) of the init part")
    parser.add_argument("--worker", nargs=4, metavar=("LAYOUT", "IMPLEMENTATION", "LENGTH", "WHERE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.worker:  # one case of the memory part: "cpu", or "cuda:GB" for the GPU with its allocations capped at GB
        layout, implementation, length, where = args.worker
        memory_worker(layout, implementation, int(length), None if where == "cpu" else float(where.split(":")[1]))
        return
    for part in args.part or ("rankers", "perplexity", "memory"):
        if part == "rankers":
            ranker_benchmark()
        elif part in ("rouge", "dev"):
            if not args.model or not all("=" in item for item in args.model):
                raise SystemExit(f"--part {part} needs --model LABEL=PATH (one or more)")
            models = dict(item.split("=", 1) for item in args.model)
            if args.ship and len(models) != 1:
                raise SystemExit("--ship takes exactly one --model")
            if args.ship_decoding_reason and not (args.ship and args.decoding):
                raise SystemExit("--ship_decoding_reason needs --ship and --decoding")
            rouge_benchmark(
                models,
                args.rouge_rows,
                args.ship if part == "rouge" else None,
                args.trained_on,
                args.decoding,
                args.ship_decoding_reason,
                development=part == "dev",
            )
        elif part == "init":
            init_benchmark(args.init_steps, args.init_train_rows, args.init_eval_rows, args.init_L)
        elif part == "card":
            if not args.ship:
                raise SystemExit("--part card needs --ship NAME (the shipped checkpoint whose card gets the tables)")
            card_benchmark(args.ship)
        elif part == "perplexity":
            if not args.model:
                raise SystemExit("--part perplexity needs --model LABEL=PATH (one or more; the first is the reference)")
            perplexity_benchmark(
                dict(item.split("=", 1) for item in args.model),
                args.perplexity_start,
                args.queries_per_meeting,
                args.perplexity_note,
            )
        else:
            memory_benchmark(args.start, args.stop, args.gpu_memory_gb if args.device == "cuda" else None)


if __name__ == "__main__":
    main()
