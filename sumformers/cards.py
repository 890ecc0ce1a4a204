"""Model cards: huggingface_hub `ModelCard`s with metadata (datasets, metrics, base model, model-index), filled from
a per-architecture template in `model_cards/` and the card info a training run records."""

from importlib import resources
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .modeling.pretrained_encoder import portable_encoder_name
from .registry import architecture_for
from .remote_code import collect_remote_code, required_packages

# The scores a card reports (x 100), as the training scripts' evaluations name them: ROUGE of summaries, BLEU of
# realized text, content selection and ordering of content plans.
METRIC_NAMES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeLsum": "ROUGE-L (sum)", "bleu": "BLEU",
                "cs_precision": "CS precision", "cs_recall": "CS recall", "cs_f1": "CS F1", "co": "CO"}


def metric_type(metric: str) -> str:
    return "rouge" if metric.startswith("rouge") else metric


def scores_text(scores: dict) -> str:
    """The reported scores of `scores`, e.g. "ROUGE-1 40.12, ROUGE-2 18.03, ROUGE-L (sum) 36.50"."""
    reported = [metric for metric in scores if metric in METRIC_NAMES]
    return ", ".join(f"{METRIC_NAMES[metric]} {scores[metric]:.2f}" for metric in reported)


def decoding_settings(generation_config, reason: str | None = None) -> str:
    """The beam search the generation config holds, as the card names it, with why it departs from the defaults
    (n-gram blocking, a minimum length) when it does."""
    penalty = getattr(generation_config, "length_penalty_type", None) or "transformers"
    formula = "((5 + |Y|) / 6) ** alpha, GNMT's" if penalty == "gnmt" else "|Y| ** alpha, transformers'"
    blocking, minimum = generation_config.no_repeat_ngram_size, generation_config.min_new_tokens
    settings = [
        f"beam {generation_config.num_beams}",
        f"length penalty alpha {generation_config.length_penalty} ({formula})",
        f"repeated {blocking}-grams of WordPieces blocked" if blocking else "no n-gram blocking",
    ]
    if minimum:
        settings.append(f"at least {minimum} WordPieces written")
    because = f" ({reason.strip()})" if (blocking or minimum) and reason else ""
    return ", ".join(settings) + because


def card_template(model_type: str) -> Path:
    return Path(str(resources.files("sumformers.model_cards") / f"{model_type}.md"))


def exported_repo_requirements(config) -> list[str]:
    """What an exported repo of this architecture needs installed: transformers, torch and its code's packages."""
    architecture = architecture_for(config)
    code = collect_remote_code(*architecture.remote_code_classes)
    return ["transformers", "torch", *required_packages(code)]


def build_model_card(config, card_info: dict) -> ModelCard:
    """`card_info` (all optional): `model_name`, `repo_id`, `datasets` (Hub ids), `dataset_name`, `split`,
    `results` ({metric: value x 100}), `training` (markdown), `decoding` (markdown: the generation config's settings
    where a template shows them), `evaluation` (markdown), `comparisons` (markdown: benchmark tables beyond the model's
    own scores, where a template shows them), `quality_note` (one sentence: how a demonstration model compares with
    the simple baseline it does not beat, with the numbers of its evaluation; the card's first line).
    `training_seconds` and `training_hardware` are not shown: a run's training time and hardware as data, for a
    card whose `training` text does not say them in the training scripts' words (`benchmarks/quality_cnndm.py`)."""
    encoder = portable_encoder_name(getattr(config, "encoder_name_or_path", None))
    results = card_info.get("results", {})
    eval_results = [
        EvalResult(
            task_type="summarization",
            dataset_type=(card_info.get("datasets") or ["unknown"])[0],
            dataset_name=card_info.get("dataset_name", "unknown"),
            dataset_split=card_info.get("split"),
            metric_type=metric_type(metric),
            metric_name=METRIC_NAMES[metric],
            metric_value=round(float(value), 2),
        )
        for metric, value in results.items()
        if metric in METRIC_NAMES
    ]
    model_name = card_info.get("model_name", f"sumformers-{config.model_type}")
    # WikiSum and the encoder-decoders write new text; every other architecture picks sentences of the input
    writes = architecture_for(config).task in ("abstractive-summarization", "wikisum", "table-to-text")
    style = "abstractive-summarization" if writes else "extractive-summarization"
    card_data = ModelCardData(
        language="en",
        license="apache-2.0",
        library_name="transformers",
        pipeline_tag="summarization",
        tags=["sumformers", "summarization", style, config.model_type],
        datasets=card_info.get("datasets"),
        metrics=list(dict.fromkeys(metric_type(metric) for metric in results if metric in METRIC_NAMES)) or None,
        base_model=encoder,
        model_name=model_name if eval_results else None,
        eval_results=eval_results or None,
    )
    card = ModelCard.from_template(
        card_data,
        template_path=str(card_template(config.model_type)),
        model_name=model_name,
        repo_id=card_info.get("repo_id", f"your-name/{model_name}"),
        encoder=encoder,
        requirements=" ".join(exported_repo_requirements(config)),
        max_tokens=getattr(config, "max_position_embeddings", "?"),
        inter_sentence_layers=getattr(config, "inter_sentence_layers", 0),
        num_sentences=getattr(config, "num_sentences", None),
        trigram_blocking=getattr(config, "trigram_blocking", True),
        relative_attention=getattr(config, "relative_attention", None),
        long_position_embeddings=getattr(config, "long_position_embeddings", None),
        training=card_info.get("training"),
        decoding=card_info.get("decoding"),
        evaluation=card_info.get("evaluation"),
        comparisons=card_info.get("comparisons"),
        config=config,
    )
    if card_info.get("quality_note"):
        # the first line a reader sees, so that a demonstration model is not taken for a usable one
        card.text = f"\n**{card_info['quality_note'].strip()}**\n" + card.text
    return card
