"""Sentence scores and losses shared by the extractive summarizers.

Non-stepwise models give one sigmoid score per sentence slot, trained with binary cross-entropy against 0/1 oracle
labels. Stepwise models score the next choice for each (document, partial summary) row: a softmax over the document
sentences plus an end-of-summary unit (the last column), trained with cross-entropy against the next oracle choice.
"""

import warnings
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from transformers.utils import ModelOutput


@dataclass
class ExtractiveSummarizerOutput(ModelOutput):
    """
    Args:
        loss (`torch.FloatTensor` of shape `(1,)`, *optional*): BCE against the oracle labels, mean over real sentences.
        logits (`torch.FloatTensor` of shape `(batch_size, num_document_sentences)`): one score per sentence
            (before sigmoid); padded sentence slots hold the dtype's minimum.
        sentence_states (`torch.FloatTensor` of shape `(batch_size, num_document_sentences, hidden_size)`): sentence
            vectors fed to the scorer.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    sentence_states: torch.FloatTensor | None = None


def sentence_logits_and_loss(logits, sentence_mask, labels=None):
    """Per-sentence `logits` [batch, sentences] with the padded slots set to the dtype's minimum, and with `labels`
    (0/1, padding -100) the binary cross-entropy, mean over the labelled real sentences (else None)."""
    logits = logits.masked_fill(~sentence_mask, torch.finfo(logits.dtype).min)
    loss = None
    if labels is not None:
        real = sentence_mask & (labels >= 0)
        # In float32 for a bf16/fp16 model, as transformers' losses do: a bf16 loss keeps ~3 significant digits.
        loss = F.binary_cross_entropy_with_logits(logits[real].float(), labels[real].float())
    return logits, loss


def first_sentences(sentence_mask: torch.Tensor, max_document_sentences: int) -> torch.Tensor:
    """The mask of the first `max_document_sentences` sentence slots, the ones a model with that limit scores; warns
    when real sentences lie past them."""
    if sentence_mask.shape[1] > max_document_sentences and bool(sentence_mask[:, max_document_sentences:].any()):
        # stacklevel 3: the warning names the caller of the model's forward, as if raised there
        warnings.warn(
            f"Only the first {max_document_sentences} sentences of a document are scored (max_document_sentences).",
            stacklevel=3,
        )
    return sentence_mask[:, :max_document_sentences]


def slot_logits_and_loss(kept_logits, kept_mask, num_slots: int, labels=None):
    """`sentence_logits_and_loss` for scores of the first sentences only (`first_sentences`): sentences past the
    limit keep a slot (the pipeline indexes scores by sentence) but get no score."""
    missing = num_slots - kept_mask.shape[1]
    scored = F.pad(kept_mask, (0, missing), value=False)
    return sentence_logits_and_loss(F.pad(kept_logits, (0, missing)), scored, labels)


def check_sentence_slots(sentence_mask: torch.Tensor, max_document_sentences: int) -> None:
    """Stepwise models read every sentence slot of a document: more than `max_document_sentences` is an error."""
    if sentence_mask.shape[1] > max_document_sentences:
        raise ValueError(
            f"documents have {sentence_mask.shape[1]} sentence slots, "
            f"more than max_document_sentences={max_document_sentences}"
        )


class StepwiseScoringMixin:
    """The forward that the stepwise extractive models share, mixed in before their `PreTrainedModel` base: the rows
    (one per document and partial summary) and their checks, the masks of the next choice and its loss.

    A model defines `prepare_document` (what stays fixed while a summary grows: a dict holding `sentence_mask`
    [documents, sentences] and `repeatable_mask`, None or [documents, sentences]), `row_logits` and `output_class`;
    its `forward` (whose signature names its own inputs) prepares the document and returns `next_choice_forward`."""

    is_stepwise = True
    output_class: type

    def row_logits(self, document: dict, summary_indices, row_documents) -> tuple[torch.Tensor, dict]:
        """The next-choice logits [rows, sentences + 1] (end of summary last) of the rows `summary_indices` [rows, k]
        and `row_documents` [rows] (checked), before masking, and the output's other fields (the states)."""
        raise NotImplementedError

    def next_choice_forward(self, document: dict, summary_indices=None, row_documents=None, labels=None):
        """Rows given by `summary_indices` [rows, k] (partial summaries as document sentence indices in selection
        order, -1 padding; default: one empty summary per document) and `row_documents` [rows] (default: row i
        reads document i); `labels` as `next_choice_logits_and_loss` takes them."""
        sentence_mask = document["sentence_mask"]
        summary_indices, row_documents = step_rows(
            summary_indices,
            row_documents,
            sentence_mask.shape[0],
            self.config.max_summary_sentences,
            sentence_mask.device,
        )
        row_mask = sentence_mask[row_documents]
        check_summary_indices(summary_indices, row_mask)
        logits, fields = self.row_logits(document, summary_indices, row_documents)
        repeatable = document["repeatable_mask"]
        logits, loss = next_choice_logits_and_loss(
            logits, row_mask, summary_indices, labels, None if repeatable is None else repeatable.bool()[row_documents]
        )
        return self.output_class(loss=loss, logits=logits, **fields)


def step_rows(summary_indices, row_documents, num_documents: int, max_summary_sentences: int, device):
    """The rows of a stepwise forward, checked: `summary_indices` [rows, k] (partial summaries as document sentence
    indices, -1 padding; default: one empty summary per row) and `row_documents` [rows] (default: row i reads
    document i)."""
    if row_documents is None:
        row_documents = torch.arange(num_documents, device=device)
    if summary_indices is None:
        summary_indices = torch.full((row_documents.shape[0], 0), -1, dtype=torch.long, device=device)
    if summary_indices.shape[0] != row_documents.shape[0]:
        raise ValueError(
            f"`summary_indices` has {summary_indices.shape[0]} rows but `row_documents` {row_documents.shape[0]}"
        )
    if summary_indices.shape[1] > max_summary_sentences:
        raise ValueError(
            f"partial summaries of {summary_indices.shape[1]} sentences exceed max_summary_sentences="
            f"{max_summary_sentences}"
        )
    return summary_indices, row_documents


# Devices whose tensors the host reads without waiting for an accelerator: there the step's checks raise a clear
# error and Stepwise ETCSum's rows are cut to their exact widths. Elsewhere (a GPU) a training or decoding step reads
# nothing back: the checks are asserted on the device and the widths are bounds from the inputs' shapes.
HOST_READ_DEVICES = ("cpu",)


def reads_back_freely(device: torch.device) -> bool:
    return device.type in HOST_READ_DEVICES


def check_on_device(condition: torch.Tensor, message: str) -> None:
    """`ValueError(message)` where the 0-d bool `condition` is False, read back on the CPU; on an accelerator an
    assertion queued on the device (no synchronization; a failure surfaces as a device-side assert naming it)."""
    if reads_back_freely(condition.device):
        if not bool(condition):
            raise ValueError(message)
    else:
        torch._assert_async(condition, message)


def check_summary_indices(summary_indices, row_mask) -> None:
    """Every index of a row's partial summary names a real sentence of its document (`row_mask` [rows, sentences])
    or is padding (negative)."""
    named = summary_indices >= 0
    in_range = summary_indices < row_mask.shape[1]
    real = row_mask.gather(1, summary_indices.clamp(min=0, max=max(0, row_mask.shape[1] - 1))) & in_range
    message = "`summary_indices` must name real sentences of the row's document (or be -1)"
    check_on_device((real | ~named).all(), message)


def next_choice_logits_and_loss(logits, row_mask, summary_indices, labels=None, repeatable=None):
    """Next-choice `logits` [rows, sentences + 1] (end-of-summary last) with padded sentences and those already in
    the row's summary set to the dtype's minimum, and with `labels` the loss (else None).
    `repeatable` [rows, sentences] (True: a unit that may be chosen again, a planner's sentence break or team name)
    exempts sentences from the no-repeat mask.

    `labels` [rows]: the next choice's index, cross-entropy (mean over rows). `labels` [rows, sentences + 1] (float,
    e.g. from `StepwiseCollator` with duplicates or random prefix orders): a row's positive entries are its set of
    right choices, any of which will do: the loss is -log of the probability the set holds together (one positive:
    cross-entropy); its negative entries are explicit negatives (the copy of a sentence already chosen), each adding
    |weight| x -log(1 - p) (unlikelihood); the mean over rows."""
    num_document_sentences = row_mask.shape[1]
    in_summary = (summary_indices[:, :, None] == torch.arange(num_document_sentences, device=row_mask.device)).any(1)
    if repeatable is not None:
        in_summary = in_summary & ~repeatable
    closed = F.pad(~row_mask | in_summary, (0, 1), value=False)
    logits = logits.masked_fill(closed, torch.finfo(logits.dtype).min)
    if labels is None:
        return logits, None
    # float32 loss, as in `sentence_logits_and_loss`
    if labels.dim() == 1:
        return logits, F.cross_entropy(logits.float(), labels)
    return logits, target_set_loss(logits.float(), labels.float())


def target_set_loss(logits, labels):
    """The loss of `next_choice_logits_and_loss` for [rows, choices] `labels`: -log P(the positive set) plus
    |w| x -log(1 - p) for every negative entry w, mean over rows. A row needs one positive entry."""
    log_probs = torch.log_softmax(logits, dim=-1)
    check_on_device((labels > 0).any(-1).all(), "every row of set labels needs a positive entry")
    set_log_prob = torch.logsumexp(log_probs.masked_fill(labels <= 0, float("-inf")), dim=-1)
    # log(1 - p) of the negatives, stable for p near 1; clamped so that p = 1 gives a large finite penalty; computed
    # for every row (a row without negatives adds zero), so that nothing is read back to decide
    log_rest = torch.log1p(-log_probs.exp().clamp(max=1 - 1e-6))
    return (-set_log_prob - (labels.clamp(max=0).abs() * log_rest.masked_fill(labels >= 0, 0.0)).sum(-1)).mean()


__all__ = [
    "ExtractiveSummarizerOutput",
    "StepwiseScoringMixin",
    "check_on_device",
    "check_sentence_slots",
    "check_summary_indices",
    "first_sentences",
    "next_choice_logits_and_loss",
    "reads_back_freely",
    "sentence_logits_and_loss",
    "slot_logits_and_loss",
    "step_rows",
    "target_set_loss",
]
