"""Train Stepwise HiBERT / Stepwise ETCSum (Narayan et al. 2020) or their non-stepwise variants with the Trainer.

    accelerate launch training_scripts/train_stepwise.py --model_type stepwise_hibert \
        --train_file ../shared/data/cnn_dailymail/train.jsonl \
        --validation_file ../shared/data/cnn_dailymail/validation.jsonl \
        --train_split "train+validation[300:]" --eval_split "validation[:300]" --output_dir runs/stepwise-hibert \
        --do_train --do_eval

Data: every document's greedy oracle (ROUGE-1 F + ROUGE-2 F, PreSumm's `greedy_selection`) in the order the greedy
search picks the sentences. Stepwise models learn one (document, step) row per oracle sentence and one for the end of
the summary: the first k-1 oracle sentences as the partial summary, the k-th (or END) as the target, cross-entropy. A
batch holds whole documents, and each document is encoded once for all its rows where the model allows it (HiBERT:
sentence vectors). Non-stepwise models learn 0/1 oracle labels with binary cross-entropy.

HiBERT's sentence encoder is frozen by default (`--precompute_sentence_vectors`): the sentence vectors of every
document are then computed once before training, which makes an epoch cost only the small document encoder. LoRA
(`--use_lora`, default) adapts the pretrained layers the model trains (HiBERT: the document layers; ETCSum: the encoder
layers in `--lora_layers`); the layers the model creates are trained in full and saved with the adapter.

Evaluation runs the model's own pipeline (`stepwise-summarization` with beam search, or `extractive-summarization`
with top k) on the eval split and reports ROUGE. Resumes from the newest checkpoint in --output_dir.
"""

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import torch

from sumformers import ARCHITECTURES
from sumformers.configuration.summarizer_config import DEFAULT_SUMMARY_SENTENCES
from sumformers.feature_files import load_features, read_header, save_features
from sumformers.modeling.modeling_stepwise_hibert import HiBertPreTrainedModel
from sumformers.text.scoring import greedy_oracle
from sumformers.training import (  # StepwiseCollator: train_content_planner imports it from here
    FeatureFileArguments,
    StepwiseCollator,
    apply_lora,
    dataset_evaluation,
    final_training_loss,
    finish_training,
    load_splits,
    lora_summary,
    map_training_features,
    model_and_tokenizer,
    model_input,
    near_duplicate_feature,
    new_card_info,
    parse_arguments,
    subset_description,
    take_push_to_hub,
    train,
    trained_length,
    training_source,
    training_subset,
)

logger = logging.getLogger("train_stepwise")


@dataclass
class StepwiseArguments(FeatureFileArguments):
    model_type: str = field(
        default="stepwise_hibert",
        metadata={"help": "stepwise_hibert, hibert, stepwise_etcsum or etcsum"},
    )
    max_length: int | None = field(
        default=None, metadata={"help": "Document tokens (BERTSum layout); default and maximum: the model's limit."}
    )
    oracle_num_sentences: int = field(
        default=DEFAULT_SUMMARY_SENTENCES["stepwise"],
        metadata={"help": "Longest oracle summary (the paper's 4 steps)."},
    )
    precompute_sentence_vectors: bool = field(
        default=True, metadata={"help": "HiBERT: freeze the sentence encoder and encode every sentence once."}
    )
    sentence_vector_cache: str | None = field(
        default=None,
        metadata={
            "help": "HiBERT: a file keeping precomputed sentence vectors between runs (keyed by the sentence "
            "encoder's settings and the document's tokens), e.g. for the stepwise and non-stepwise models."
        },
    )
    train_sentence_encoder: bool = field(
        default=False,
        metadata={
            "help": "HiBERT: train the sentence encoder too (token level; no precomputed vectors), with LoRA on its "
            "layers under --use_lora. The recipe for a GPU: on two CPU cores it is several times slower."
        },
    )
    save_features: str | None = field(
        default=None,
        metadata={
            "help": "HiBERT: segment the training split, search its oracles, write the features to this file "
            "(sumformers.feature_files, xz) and stop; --features_file then trains on them elsewhere."
        },
    )
    precompute_bf16: bool = field(
        default=False,
        metadata={
            "help": "HiBERT: compute the frozen sentence vectors under bfloat16 autocast (cosine >= 0.9999 to "
            "float32), stored in float32. Faster only on a CPU with native bfloat16: MiniLM gave 2.8x float32's "
            "sentences per second on one machine, 0.26x on an AMD EPYC without AVX512-BF16."
        },
    )
    config_overrides: str | None = field(
        default=None,
        metadata={
            "help": "JSON object of model config settings, e.g. '{\"document_layers\": 2, \"local_radius\": 84}'."
        },
    )
    # Decoding for evaluation, saved as the model's pipeline defaults.
    num_sentences: int | None = field(
        default=None,
        metadata={
            "help": "Sentences per summary (stepwise models: the most, one per step). Default: 3; stepwise 4 "
            "(DEFAULT_SUMMARY_SENTENCES)."
        },
    )
    beam_size: int = field(default=3)
    min_sentences: int = field(default=1, metadata={"help": "Stepwise models: END only from this length on."})
    trigram_blocking: bool = field(default=False)
    duplicate_probability: float = field(
        default=0.0,
        metadata={
            "help": "Stepwise HiBERT over precomputed vectors: the chance that a training document (drawn anew each "
            "batch) gets an exact copy of one oracle sentence right after it, the twins right before either is "
            "chosen and never after (sumformers.training.StepwiseCollator). 0: off."
        },
    )
    duplicate_negative_weight: float = field(
        default=0.0,
        metadata={"help": "With --duplicate_probability: the unlikelihood weight of the copy of a chosen sentence."},
    )
    prefix_orders: int = field(
        default=0,
        metadata={
            "help": "Stepwise models: this many random orders of each document's oracle set added as rows (every "
            "proper non-empty prefix; right: any oracle sentence not yet chosen). 0: off."
        },
    )
    end_negative_weight: float = field(
        default=0.0,
        metadata={
            "help": "Stepwise HiBERT: on every row that continues the summary, the end-of-summary unit is an explicit "
            "negative with this unlikelihood weight w, which lowers its log-odds by log(1 + w) (the length "
            "calibration of a decoding end_bias of -log(1 + w), learned; sumformers.training.StepwiseCollator). 0: off."
        },
    )
    near_duplicate_share: float = field(
        default=0.0,
        metadata={
            "help": "With --duplicate_probability: the share of the inserted copies that are near-duplicates (a "
            "paraphrase: about one word in seven dropped, two adjacent words swapped; sumformers.training."
            "near_duplicate_feature), encoded once with the sentence vectors. 0: exact copies only."
        },
    )
    anchor_weight: float = field(
        default=0.0,
        metadata={
            "help": "With --init_from: the weight of KL(starting model || model) on the oracle-order rows, over "
            "every choice but an inserted copy and its twin (sumformers.training.AnchoredTrainer), so that a short "
            "continued run learns the new signals without drifting from what the starting model learned on more "
            "data. 0: off."
        },
    )
    train_only: str | None = field(
        default=None,
        metadata={
            "help": "With --init_from: comma-separated module names (e.g. 'summary_attention,end_embedding'); every "
            "other parameter stays as the checkpoint has it, so that the path reading the partial summary learns "
            "while what scores a sentence's salience does not drift on a small CPU training set."
        },
    )
    init_from: str | None = field(
        default=None,
        metadata={
            "help": "HiBERT: an adapter checkpoint of --model_type (e.g. checkpoints/stepwise-hibert-minilm-cnndm) "
            "whose adapter keeps training (its LoRA on the document layers and its new modules; its sentence "
            "encoder, adapted or not, stays frozen as it is), saved again as an adapter over the same encoder. "
            "--model_name_or_path, --use_lora and the LoRA flags are then not used; --config_overrides may add "
            "settings (decoding, `summary_null_slot`). Precomputed sentence vectors come from its own sentence "
            "encoder (the cache key names its adapter)."
        },
    )


def summary_size(stepwise_args: StepwiseArguments) -> int:
    """--num_sentences, or the default (`DEFAULT_SUMMARY_SENTENCES`): the paper's 4 steps for stepwise models, top 3
    for the others."""
    if stepwise_args.num_sentences is not None:
        return stepwise_args.num_sentences
    return DEFAULT_SUMMARY_SENTENCES["stepwise" if stepwise_args.model_type.startswith("stepwise") else "extractive"]


def oracle_in_selection_order(
    sentences: list[str], reference: str, num_sentences: int, metric: str = "r1+r2"
) -> list[int]:
    """The greedy oracle's sentences in the order the greedy search adds them: the stepwise targets."""
    return greedy_oracle(sentences, reference, num_sentences=num_sentences, metric=metric, selection_order=True)


def build_features(example, processor, multiple_documents, columns, max_length, oracle_num_sentences) -> dict:
    """One document through the model's processor (BERTSum layout) with its oracle over the sentences that were
    kept (selection order); an empty `oracle` means nothing can be learned from it."""
    oracle = partial(
        oracle_in_selection_order,
        reference=example[columns.summary_column],
        num_sentences=oracle_num_sentences,
        metric="full" if columns.oracle == "full" else "r1+r2",
    )
    return processor.training_features(
        model_input(example[columns.text_column], multiple_documents),
        oracle,
        max_length=max_length,
        oracle_over_document=columns.oracle == "full",
    )


def _vector_key(model, feature, bf16: bool, adapter: str | None = None) -> str:
    """What a document's sentence vectors depend on: the frozen sentence encoder's settings, precision and tokens,
    and the digest of the adapter it runs under (`adapter_digest`, --init_from; None: the plain encoder)."""
    config = model.config
    settings = [config.encoder_name_or_path, config.sentence_encoder_layers, config.sentence_pooling, bf16]
    settings += [config.max_sentence_tokens, feature["input_ids"], feature["cls_positions"]]
    if adapter is not None:  # left out otherwise, so that the caches of runs from the plain encoder stay valid
        settings.append(adapter)
    return hashlib.sha1(json.dumps(settings).encode()).hexdigest()


def adapter_digest(checkpoint: str) -> str:
    """A digest of an adapter checkpoint's weights: its sentence encoder's vectors depend on them."""
    digest = hashlib.sha1()
    for path in sorted(Path(checkpoint).glob("*.safetensors")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def add_null_slots(peft_model) -> None:
    """Give a continued adapter's document-to-summary attention the null slot of `summary_null_slot`, starting at
    zero as a new model's does: the trained copy PEFT keeps of it (trainable, saved with the adapter) and the frozen
    original."""
    from torch import nn

    from sumformers.modeling.modeling_stepwise_hibert import SummaryAttention

    base = peft_model.get_base_model()
    for name, module in peft_model.named_modules():
        if isinstance(module, SummaryAttention) and module.null_state is None:
            del module.null_state  # a plain attribute (None) until now
            module.null_state = nn.Parameter(
                torch.zeros(base.config.hidden_size), requires_grad=".modules_to_save." in f".{name}."
            )
    base.config.summary_null_slot = True


def continued_adapter(checkpoint: str, stepwise_args: StepwiseArguments):
    """The adapter checkpoint `checkpoint` (--init_from) as a trainable PEFT model and its tokenizer: the base rebuilt
    from its config (updated with --config_overrides) over its encoder, its adapter loaded trainable and not merged;
    the sentence encoder's parameters (LoRA included) frozen."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    from sumformers.modeling.pretrained_encoder import quiet_loading

    model_class = ARCHITECTURES[stepwise_args.model_type].model_class
    config = model_class.config_class.from_pretrained(checkpoint)
    if config.model_type != ARCHITECTURES[stepwise_args.model_type].config_class.model_type:
        raise ValueError(f"--init_from {checkpoint} holds a {config.model_type}, not a {stepwise_args.model_type}")
    overrides = json.loads(stepwise_args.config_overrides or "{}")
    # a null slot the checkpoint lacks is added after loading (PEFT loads a trained copy only of what it saved)
    new_null_slot = overrides.pop("summary_null_slot", False) and not getattr(config, "summary_null_slot", False)
    config.update(overrides)
    base = model_class.from_encoder(config.encoder_name_or_path, config=config)
    with quiet_loading():
        model = PeftModel.from_pretrained(base, checkpoint, is_trainable=True)
    if new_null_slot:
        add_null_slots(model)
    kept = [f".{module}." for module in (stepwise_args.train_only or "").split(",") if module.strip()]
    for name, parameter in model.named_parameters():
        if ".sentence_encoder." in name or (kept and not any(module in f".{name}." for module in kept)):
            parameter.requires_grad_(False)
    trainable, total = model.get_nb_trainable_parameters()
    if trainable == 0:
        raise ValueError(f"--train_only {stepwise_args.train_only!r} names no trainable module of {checkpoint}")
    logger.info("continuing %s: %d trainable of %d parameters", checkpoint, trainable, total)
    return model, AutoTokenizer.from_pretrained(checkpoint)


def save_sentence_vectors(cache: dict, cache_path: str):
    """Write the cache to a temporary file that then replaces it (the loaded vectors may be mapped from the old one)."""
    Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(f"{cache_path}.tmp")
    torch.save(cache, temporary)
    temporary.replace(cache_path)


@torch.no_grad()
def add_sentence_vectors(
    model,
    features: list[dict],
    collate,
    cache_path: str | None,
    bf16: bool = False,
    batch_size: int = 16,
    save_seconds: float = 600.0,
    adapter: str | None = None,
    device: str = "cpu",
):
    """Encode every document's sentences once with the (frozen) sentence encoder, reusing a cache file if given.

    The cache file is `torch.save`'s zip format of {key: float32 vectors of one document}; it is read memory-mapped
    (tensors only, `weights_only`), so the cached documents' vectors are paged in from the file as training reads
    them instead of all being copied into memory first. New vectors are written to a temporary file that then
    replaces the cache: writing over the file the loaded vectors are mapped from would truncate it under them. The
    file is rewritten every `save_seconds` of encoding too, so a run that is cut off (a slow encoder: MPNet on CPU
    takes hours for the 40k articles) resumes from what it last wrote. The encoder runs on `device` (a GPU run's
    vectors: seconds, where the CPU takes minutes) and is moved back to the CPU, where the Trainer expects it."""
    cached = cache_path and Path(cache_path).is_file()
    cache = torch.load(cache_path, mmap=True, weights_only=True) if cached else {}
    keys = [_vector_key(model, feature, bf16, adapter) for feature in features]
    missing = [index for index, key in enumerate(keys) if key not in cache]
    logger.info("sentence vectors: %d documents cached, %d to encode", len(features) - len(missing), len(missing))
    model.eval().to(device)
    saved_at = time.monotonic()
    for start in range(0, len(missing), batch_size):
        chunk = missing[start : start + batch_size]
        batch = {key: value.to(device) for key, value in collate([features[index] for index in chunk]).items()}
        with torch.no_grad(), torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            vectors = model.sentence_vectors(
                batch["input_ids"], batch["attention_mask"], batch["cls_positions"], batch["sentence_mask"]
            ).float().cpu()
        for row, index in enumerate(chunk):
            cache[keys[index]] = vectors[row, : len(features[index]["labels"])].clone()
        if start % (batch_size * 10) == 0:
            logger.info("sentence vectors: %d / %d documents", start + len(chunk), len(missing))
        last = start + batch_size >= len(missing)
        if cache_path and (last or time.monotonic() - saved_at >= save_seconds):
            save_sentence_vectors(cache, cache_path)
            saved_at = time.monotonic()
    model.train().to("cpu")
    for key, feature in zip(keys, features):
        feature["sentence_vectors"] = cache[key]


def add_near_duplicate_vectors(model, features, collate, tokenizer, stepwise_args, seed: int, device="cpu"):
    """Each feature's `near_duplicate_vectors`: the sentence vectors of `near_duplicate_feature`'s paraphrases of its
    oracle sentences (document i's drawn with seed + i), through the same encoder and cache as its own vectors."""
    continuations = {index for token, index in tokenizer.get_vocab().items() if token.startswith("##")}
    near = [near_duplicate_feature(feature, continuations.__contains__, seed + index)
            for index, feature in enumerate(features)]
    add_sentence_vectors(
        model, near, collate, stepwise_args.sentence_vector_cache, stepwise_args.precompute_bf16,
        adapter=adapter_digest(stepwise_args.init_from) if stepwise_args.init_from else None, device=device,
    )
    for feature, paraphrases in zip(features, near):
        feature["near_duplicate_vectors"] = paraphrases["sentence_vectors"]


def training_signals(stepwise_args: StepwiseArguments) -> str:
    """The card's account of the training signals beyond the oracle order (issue 57), "" when none is on."""
    signals = []
    if stepwise_args.duplicate_probability:
        negative = stepwise_args.duplicate_negative_weight
        near = stepwise_args.near_duplicate_share
        copies = (f"a copy ({near:g} of them near-duplicates: a few words dropped, two swapped)" if near
                  else "an exact copy")
        signals.append(
            f"{copies} of an oracle sentence inserted in {stepwise_args.duplicate_probability:g} of the documents "
            f"(both twins right until one is chosen, then the other "
            f"{f'an explicit negative, unlikelihood weight {negative:g}' if negative else 'never a target'})"
        )
    if stepwise_args.anchor_weight:
        signals.append(
            f"KL to the starting model's next-choice distribution on the oracle-order rows, copies left out "
            f"(weight {stepwise_args.anchor_weight:g})"
        )
    if stepwise_args.prefix_orders:
        signals.append(
            f"{stepwise_args.prefix_orders} random orders of each oracle set as extra prefixes (right: any oracle "
            "sentence not yet chosen)"
        )
    if stepwise_args.end_negative_weight:
        signals.append(
            f"the end-of-summary unit an explicit negative on every row that continues the summary (unlikelihood "
            f"weight {stepwise_args.end_negative_weight:g})"
        )
    return "".join(f", plus {signal}" for signal in signals)


def new_model(encoder: str, source: str, stepwise_args: StepwiseArguments):
    """A new `--model_type` model over `encoder`, with the decoding settings as its pipeline defaults."""
    overrides = json.loads(stepwise_args.config_overrides or "{}")
    decoding = {"trigram_blocking": stepwise_args.trigram_blocking, "num_sentences": summary_size(stepwise_args)}
    if stepwise_args.model_type.startswith("stepwise"):
        decoding.update(beam_size=stepwise_args.beam_size, min_sentences=stepwise_args.min_sentences)
    model_class = ARCHITECTURES[stepwise_args.model_type].model_class
    return model_class.from_encoder(encoder, encoder_name_or_path=source, **decoding, **overrides)


def main():
    model_args, data_args, training_args, stepwise_args = parse_arguments(StepwiseArguments)
    logging.basicConfig(level=logging.INFO if training_args.should_log else logging.WARNING)
    if stepwise_args.model_type not in ("stepwise_hibert", "hibert", "stepwise_etcsum", "etcsum"):
        raise ValueError(f"unknown --model_type {stepwise_args.model_type!r}")
    push = take_push_to_hub(training_args)
    # with --features_file the training split is read from that file; evaluation still reads --validation_file
    has_data = data_args.dataset_name or data_args.train_file or data_args.validation_file
    train_dataset, eval_dataset = load_splits(data_args) if has_data else (None, None)

    source = model_args.model_name_or_path
    if stepwise_args.init_from:
        if not stepwise_args.model_type.endswith("hibert"):
            raise ValueError("--init_from continues a HiBERT adapter checkpoint")
        model, tokenizer = continued_adapter(stepwise_args.init_from, stepwise_args)
    else:
        model, tokenizer = model_and_tokenizer(source, lambda encoder, _: new_model(encoder, source, stepwise_args))
    processor = model.processor_class(tokenizer, model.config)
    stepwise = model.is_stepwise
    multiple_documents = model.reads_multiple_documents

    card_info = new_card_info(training_args, data_args, datasets=[data_args.dataset_name or "local-jsonl"])
    features = None
    feature_settings = {
        "max_length": processor.token_limit(stepwise_args.max_length),
        "max_sentence_tokens": model.config.max_sentence_tokens,
        "min_sentence_tokens": model.config.min_sentence_tokens,
        "max_document_sentences": getattr(model.config, "max_document_sentences", None),
        "oracle": data_args.oracle,
        "oracle_num_sentences": stepwise_args.oracle_num_sentences,
    }
    if stepwise_args.save_features:
        mapped = map_training_features(
            train_dataset, build_features, training_args, data_args, processor, multiple_documents,
            max_length=stepwise_args.max_length, oracle_num_sentences=stepwise_args.oracle_num_sentences,
        )
        source = training_source(data_args)
        save_features(mapped.to_list(), stepwise_args.save_features, tokenizer, dict(feature_settings, source=source))
        logger.info("wrote the features of %d documents to %s", len(mapped), stepwise_args.save_features)
        return
    if training_args.do_train and (train_dataset is not None or stepwise_args.features_file):
        if stepwise_args.features_file:
            mapped = training_subset(load_features(stepwise_args.features_file, expected=feature_settings), data_args)
            trained_on = read_header(stepwise_args.features_file)["source"] + subset_description(data_args)
        else:
            mapped = map_training_features(
                train_dataset, build_features, training_args, data_args, processor, multiple_documents,
                max_length=stepwise_args.max_length, oracle_num_sentences=stepwise_args.oracle_num_sentences,
            ).to_list()
            trained_on = training_source(data_args)
        features = [feature for feature in mapped if feature["oracle"]]
        logger.info("%d of %d training documents have an oracle summary", len(features), len(mapped))
        hibert = isinstance(model, HiBertPreTrainedModel) or bool(stepwise_args.init_from)
        precomputed = stepwise_args.precompute_sentence_vectors and hibert and not stepwise_args.train_sentence_encoder
        if precomputed:
            model.sentence_encoder.requires_grad_(False)
            with training_args.main_process_first(desc="sentence vectors"):  # the others then read its cache file
                add_sentence_vectors(
                    model, features, processor.collate, stepwise_args.sentence_vector_cache,
                    stepwise_args.precompute_bf16,
                    adapter=adapter_digest(stepwise_args.init_from) if stepwise_args.init_from else None,
                    device=training_args.device,
                )
            if stepwise_args.near_duplicate_share:
                add_near_duplicate_vectors(model, features, processor.collate, tokenizer, stepwise_args,
                                           seed=training_args.seed, device=training_args.device)
            for feature in features:  # the token inputs are not needed any more
                for key in ("input_ids", "token_type_ids", "attention_mask", "cls_positions"):
                    feature.pop(key)
        adapted = ("sentence_encoder.encoder.layer",) if hibert and stepwise_args.train_sentence_encoder else ()
        if not stepwise_args.init_from:  # a continued adapter trains as it was saved
            model = apply_lora(model, model_args, also_adapt=adapted)
    collate = StepwiseCollator(
        processor.collate,
        stepwise,
        seed=training_args.seed,
        duplicate_probability=stepwise_args.duplicate_probability,
        duplicate_negative_weight=stepwise_args.duplicate_negative_weight,
        prefix_orders=stepwise_args.prefix_orders,
        max_sentences=getattr(model.config, "max_document_sentences", None),
        near_duplicate_share=stepwise_args.near_duplicate_share,
        end_negative_weight=stepwise_args.end_negative_weight,
        anchor=bool(stepwise_args.anchor_weight),
    )
    teacher = None
    if stepwise_args.anchor_weight:
        if not stepwise_args.init_from:
            raise ValueError("--anchor_weight keeps the distribution of the model --init_from names: give it")
        teacher, _ = continued_adapter(
            stepwise_args.init_from, replace(stepwise_args, config_overrides=None, train_only=None)
        )
    trainer, result = train(
        model, training_args, features, collate, tokenizer=tokenizer, max_seconds=stepwise_args.max_train_seconds,
        teacher=teacher, anchor_weight=stepwise_args.anchor_weight,
    )
    if result is not None:
        rows = sum(len(f["oracle"]) + 1 for f in features) if stepwise else len(features)
        oracle = (
            "Oracle (Full) (mean of ROUGE-1/2/Lsum F, greedy, whole document)"
            if data_args.oracle == "full"
            else "greedy-oracle (ROUGE-1 F + ROUGE-2 F)"
        )
        adapters = (
            f"continuing the adapter of {stepwise_args.init_from} (its LoRA, r={model.peft_config['default'].r})"
            if stepwise_args.init_from
            else lora_summary(model_args)
        )
        only = stepwise_args.train_only
        trained_modules = f"only {only} trained" if only else "new layers trained in full"
        card_info["training"] = (
            f"{len(features)} documents ({rows} oracle-order training rows) from {trained_on}, "
            f"{trained_length(trainer)}, batch "
            f"{training_args.per_device_train_batch_size} documents x {training_args.world_size} processes, learning "
            f"rate {training_args.learning_rate}, {adapters} "
            f"({trained_modules}"
            f"{', sentence encoder frozen' if precomputed else ''}"
            f"{', LoRA on the sentence encoder too' if adapted and model_args.use_lora else ''}), "
            f"{oracle} targets (at most "
            f"{stepwise_args.oracle_num_sentences} sentences, in selection order)"
            f"{training_signals(stepwise_args)}; "
            f"{final_training_loss(trainer, result)}."
        )

    # Evaluation runs the model's own pipeline: `stepwise-summarization` (beam search) or `extractive-summarization`.
    if stepwise:
        options = {
            "beam_size": stepwise_args.beam_size,
            "num_sentences": summary_size(stepwise_args),
            "min_sentences": stepwise_args.min_sentences,
        }
        decoding = f"beam {stepwise_args.beam_size}, {stepwise_args.min_sentences} to {summary_size(stepwise_args)}"
        decoding += " sentences"
    else:
        options = {"num_sentences": summary_size(stepwise_args)}
        decoding = f"top {summary_size(stepwise_args)} sentences"
    if stepwise_args.max_length:
        options["max_length"] = stepwise_args.max_length
    evaluate = dataset_evaluation(
        tokenizer,
        eval_dataset,
        data_args,
        f"{decoding}, trigram blocking {stepwise_args.trigram_blocking}",
        batch_size=8,
        trigram_blocking=stepwise_args.trigram_blocking,
        **options,
    )
    finish_training(trainer, tokenizer, training_args, card_info, push, evaluate)


if __name__ == "__main__":
    main()
