"""Stepwise against non-stepwise at equal budgets, over seeds (issue 57): models trained on the same documents for
the same optimizer steps from the same start, one run per seed, compared on development documents in three
decodings: the paper's setting (each model at its own length, no trigram blocking: top 3 for HiBERT, the end unit
for the stepwise models), matched length (exactly 3 sentences, no blocking), the shipped decoding (own length,
trigram blocking) and own length with the end unit calibrated (no blocking; each stepwise model's `end_bias` chosen
by `choose_end_bias.choose`, the rule the shipped stepwise checkpoints were calibrated by, per arm and seed, on
tuning documents disjoint from the reported ones: raw CNN `validation[600:700]` and lowercased
`validation_large[1300:1400]` together; HiBERT keeps its 3 sentences).

Every arm must share one frozen sentence encoder (checked on each model: its vectors of the first document equal
the cached ones), so each document's sentence vectors are computed once and the models differ only in what they
learned above them. Paired differences are per document and seed; the table gives their mean over seeds with a 95%
bootstrap interval over documents (of the per-document mean over seeds) and the range of the per-seed means.

    python benchmarks/stepwise_pairs.py --seeds 1,2,3 \
        --arms "HiBERT=runs/pairs/hibert-seed{seed}/final,Stepwise HiBERT=runs/pairs/stepwise-seed{seed}/final"

The first arm is the non-stepwise reference. Development documents only (`stepwise_candidates_dev.DEV_SETS`).
"""

import argparse

from _common import lead_words, setup_runtime, write_report
from choose_end_bias import SUMMARY_SENTENCES, choose

TUNED = "own length, end bias chosen on tuning documents"
DECODINGS = (  # (label, stepwise summary length as (min, max) sentences, trigram blocking)
    ("own length, no blocking (the paper's)", (1, 4), False),
    ("3 sentences, no blocking (matched)", (3, 3), False),
    ("own length, trigram blocking (shipped)", (1, 4), True),
    (TUNED, (1, 4), False),
)
NON_STEPWISE_SENTENCES = 3  # HiBERT's top 3 (`DEFAULT_SUMMARY_SENTENCES["extractive"]`)
# (file under the shared cnn_dailymail folder, first document, documents): after the reported `DEV_SETS` slices
TUNING_SETS = (("validation.jsonl", 600, 100), ("validation_large.jsonl.gz", 1300, 100))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", required=True,
                        help="comma-separated NAME=PATH, PATH with {seed}; the first is the non-stepwise reference")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--limit", type=int, default=150, help="documents per development set")
    parser.add_argument("--end_biases", default="0,-1,-2,-3,-4,-5", help="the candidates for the tuned end bias")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=None)
    return parser.parse_args()


def document_inputs(summarizer, documents: list[str]) -> list[dict]:
    """Each document as the stepwise pipeline prepares it (its sentences and BERTSum-layout tensors)."""
    return [summarizer.preprocess(document) for document in documents]


def sentence_vectors(model, inputs: dict):
    import torch

    with torch.no_grad():
        return model.sentence_vectors(
            inputs["input_ids"], inputs["attention_mask"], inputs["cls_positions"], inputs["sentence_mask"].bool()
        )


def chosen_sentences(model, vectors, inputs: dict, lengths: tuple[int, int], trigram_blocking: bool,
                     end_bias: float = 0.0) -> list[int]:
    """The sentence indices a model picks over precomputed `vectors`, in document order: a non-stepwise model its
    top `NON_STEPWISE_SENTENCES` by score, a stepwise model its beam search (beam 3, `end_bias` on the end unit)."""
    import torch

    from sumformers.generation.stepwise_decoding import stepwise_beam_search
    from sumformers.text.sentences import select_sentences

    sentences = inputs["sentences"]
    mask = inputs["sentence_mask"].bool()
    with torch.no_grad():
        if not model.is_stepwise:
            logits = model(sentence_vectors=vectors, sentence_mask=mask).logits[0, : len(sentences)]
            ranked = torch.argsort(logits, descending=True).tolist()
            return sorted(select_sentences(ranked, sentences, NON_STEPWISE_SENTENCES, trigram_blocking))
        document = model.prepare_document(sentence_vectors=vectors, sentence_mask=mask)

        def score_rows(document_indices, prefixes):
            width = max(len(prefix) for prefix in prefixes)
            summary = torch.full((len(prefixes), width), -1, dtype=torch.long)
            for row, prefix in enumerate(prefixes):
                summary[row, : len(prefix)] = torch.tensor(prefix, dtype=torch.long)
            return model(**document, summary_indices=summary, row_documents=torch.tensor(document_indices)).logits

        low, high = lengths
        (hypothesis,) = stepwise_beam_search(score_rows, [sentences], beam_size=3, num_sentences=high,
                                             min_sentences=low, trigram_blocking=trigram_blocking,
                                             end_bias=end_bias)
    return sorted(step.sentence for step in hypothesis.steps if step.sentence is not None)


def tuned_end_bias(decode, references: list[str], biases: list[float]) -> tuple[dict, list[dict]]:
    """The end bias `choose_end_bias.choose` takes among `biases` (the best mean ROUGE-1 among those whose mean
    length lies in `SUMMARY_SENTENCES`, else the nearest that range), and every candidate: `decode(bias)` gives each
    tuning document's summary as its list of sentences, scored against `references`."""
    from sumformers.text.scoring import rouge_per_example

    candidates = []
    for bias in biases:
        summaries = decode(bias)
        scores = rouge_per_example(["\n".join(summary) for summary in summaries], references)
        candidates.append({"end_bias": bias, "rouge1": sum(score["rouge1"] for score in scores) / len(scores),
                           "mean_sentences": sum(map(len, summaries)) / len(summaries)})
    return choose(candidates, *SUMMARY_SENTENCES), candidates


def seed_paired(per_seed: list[list[float]], reference: list[list[float]]) -> tuple[float, tuple, tuple]:
    """Mean over seeds of the paired per-document differences, its bootstrap interval over documents and the range
    of the per-seed means."""
    from sumformers.text.scoring import bootstrap_interval

    by_seed = [[a - b for a, b in zip(scores, base)] for scores, base in zip(per_seed, reference)]
    by_document = [sum(column) / len(column) for column in zip(*by_seed)]
    seed_means = [sum(differences) / len(differences) for differences in by_seed]
    return sum(by_document) / len(by_document), bootstrap_interval(by_document), (min(seed_means), max(seed_means))


def interval_text(mean: float, low: float, high: float) -> str:
    return f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]"


def main():
    args = parse_args()
    setup_runtime(args.threads)
    import torch
    from stepwise_candidates_dev import DEV_SETS

    from sumformers.hub import load_model, load_pipeline
    from sumformers.text.evaluation import data_dir, read_jsonl
    from sumformers.text.scoring import rouge_per_example
    from sumformers.text.sentences import has_repeated_trigram

    seeds = [int(seed) for seed in args.seeds.split(",")]
    biases = [float(bias) for bias in args.end_biases.split(",")]
    arms = [tuple(entry.split("=", 1)) for entry in args.arms.split(",")]
    models = {(name, seed): load_model(path.format(seed=seed)).eval() for name, path in arms for seed in seeds}
    reference_name = arms[0][0]
    if models[reference_name, seeds[0]].is_stepwise:
        raise ValueError(f"the first arm ({reference_name}) must be the non-stepwise reference")
    summarizer = load_pipeline(next(path.format(seed=seeds[0]) for name, path in arms
                                    if models[name, seeds[0]].is_stepwise))
    lines = [
        "Development documents (never reported). ROUGE F1 x 100 (rouge-score, stemming), mean over seeds (each seed's "
        "figure in brackets); paired = per-document ROUGE-1 minus the reference's (same seed, same decoding), mean "
        "over seeds with a 95% bootstrap interval over documents, then the range of the per-seed means; vs Lead of "
        "as many words: the document's first N words, N = the summary's; redundancy = % of summaries repeating a "
        "trigram across sentences.",
        "",
        "Arms (`{seed}` in " + ", ".join(map(str, seeds)) + "): "
        + "; ".join(f"{name}: `{path}`" for name, path in arms),
    ]
    tuning = [row for name, start, count in TUNING_SETS
              for row in read_jsonl(data_dir() / "cnn_dailymail" / name)[start : start + count]]
    tuning_inputs = document_inputs(summarizer, [row["document"] for row in tuning])
    tuning_vectors = [sentence_vectors(models[reference_name, seeds[0]], document) for document in tuning_inputs]
    lines += ["", f"## End bias chosen on {len(tuning)} tuning documents", "",
              "Raw CNN " + ", lowercased ".join(f"`{name.split('.')[0]}[{start}:{start + count}]`"
                                               for name, start, count in TUNING_SETS)
              + f" (disjoint from the documents below), no blocking; the rule of `choose_end_bias.py`: the best "
              f"ROUGE-1 among the biases giving {SUMMARY_SENTENCES[0]:g}-{SUMMARY_SENTENCES[1]:g} sentences on "
              "average, else the nearest that range. Each candidate: end bias: ROUGE-1 / mean sentences.", "",
              "| model | seed | chosen end bias | candidates |", "|---|---|---|---|"]
    end_biases = {}
    for (arm, seed), model in models.items():
        if not model.is_stepwise:
            continue

        def decode(bias, model=model):
            picks = [chosen_sentences(model, v, document, (1, 4), False, bias)
                     for v, document in zip(tuning_vectors, tuning_inputs)]
            return [[document["sentences"][index] for index in pick] for pick, document in zip(picks, tuning_inputs)]

        chosen, candidates = tuned_end_bias(decode, [row["summary"] for row in tuning], biases)
        end_biases[arm, seed] = chosen["end_bias"]
        lines.append(f"| {arm} | {seed} | {chosen['end_bias']:g} | " + "; ".join(
            f"{c['end_bias']:g}: {c['rouge1']:.2f} / {c['mean_sentences']:.2f}" for c in candidates) + " |")
        print(lines[-1], flush=True)
    for title, name, start, count in DEV_SETS:
        rows = read_jsonl(data_dir() / "cnn_dailymail" / name)[start : start + min(args.limit, count)]
        references = [row["summary"] for row in rows]
        inputs = document_inputs(summarizer, [row["document"] for row in rows])
        vectors = [sentence_vectors(models[reference_name, seeds[0]], document) for document in inputs]
        for (arm, seed), model in models.items():  # one frozen sentence encoder for all
            if not torch.allclose(sentence_vectors(model, inputs[0]), vectors[0], atol=1e-5):
                raise ValueError(f"{arm} (seed {seed}) has another sentence encoder: its pairs would not be paired")
        lines += ["", f"## {title}: {len(rows)} documents", "",
                  "| model | decoding | ROUGE-1 | ROUGE-2 | paired ROUGE-1 vs " + reference_name + " | paired ROUGE-1 "
                  "vs Lead of as many words | sentences | words | redundancy % |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for label, lengths, blocking in DECODINGS:
            scores = {}
            for (arm, seed), model in models.items():
                end_bias = end_biases.get((arm, seed), 0.0) if label == TUNED else 0.0
                picks = [chosen_sentences(model, v, document, lengths, blocking, end_bias)
                         for v, document in zip(vectors, inputs)]
                sentences = [[document["sentences"][index] for index in pick] for pick, document in zip(picks, inputs)]
                summaries = ["\n".join(chosen) for chosen in sentences]
                leads = [lead_words(document["sentences"], len(summary.split()))
                         for document, summary in zip(inputs, summaries)]
                scores[arm, seed] = {
                    "rouge": rouge_per_example(summaries, references),
                    "lead": [example["rouge1"] for example in rouge_per_example(leads, references)],
                    "sentences": sum(map(len, picks)) / len(picks),
                    "words": sum(len(summary.split()) for summary in summaries) / len(summaries),
                    "redundancy": 100.0 * sum(map(has_repeated_trigram, sentences)) / len(sentences),
                }
            for arm, _ in arms:
                runs = [scores[arm, seed] for seed in seeds]
                rouge1 = [[example["rouge1"] for example in run["rouge"]] for run in runs]
                means = {key: [sum(example[key] for example in run["rouge"]) / len(rows) for run in runs]
                         for key in ("rouge1", "rouge2")}
                figure = {key: f"{sum(values) / len(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"
                          for key, values in means.items()}
                if arm == reference_name:
                    versus_reference = "-"
                else:
                    reference = [[example["rouge1"] for example in scores[reference_name, seed]["rouge"]]
                                 for seed in seeds]
                    mean, interval, spread = seed_paired(rouge1, reference)
                    versus_reference = f"{interval_text(mean, *interval)}; seeds {spread[0]:+.2f} to {spread[1]:+.2f}"
                mean, interval, _ = seed_paired(rouge1, [run["lead"] for run in runs])
                lines.append(
                    f"| {arm} | {label} | {figure['rouge1']} | {figure['rouge2']} | {versus_reference} | "
                    f"{interval_text(mean, *interval)} | "
                    f"{sum(run['sentences'] for run in runs) / len(runs):.2f} | "
                    f"{sum(run['words'] for run in runs) / len(runs):.1f} | "
                    f"{sum(run['redundancy'] for run in runs) / len(runs):.1f} |"
                )
    write_report("stepwise_pairs.py", lines, args.output)


if __name__ == "__main__":
    main()
