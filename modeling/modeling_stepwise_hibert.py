"""HiBERT extractive summarizers (Narayan et al. 2020, "Stepwise Extractive Summarization and Planning with
Structured Transformers", after Zhang et al. 2019).

A sentence encoder (the bottom layers of a pretrained BERT) turns every sentence, encoded on its own, into one
vector; a document encoder (transformer layers that start as copies of the pretrained encoder's top layers) runs over
those vectors with document-sentence position embeddings.

- `HiBertForExtractiveSummarization`: a sigmoid score per sentence (binary cross-entropy against oracle labels);
  served by the `extractive-summarization` pipeline (top k).
- `StepwiseHiBertForExtractiveSummarization`: conditioned on the partial summary. Every document layer runs document
  self-attention, then self-attention over the summary sentences (the same parameters), then document-to-summary
  attention (document states as queries, summary states as keys/values), then the feed-forward (shared too). A
  softmax over the document sentences plus a learned end-of-summary unit gives the next choice (cross-entropy against
  the next oracle sentence); served by the `stepwise-summarization` pipeline (beam search over steps).

Both read the BERTSum input layout of `features.encode_sentences` (`[CLS] sentence [SEP]` per sentence and
`cls_positions`) and cut it into one block of at most `max_sentence_tokens + 2` tokens per sentence, so the
pipelines and the training script share one featurization. Sentence vectors depend only on the document, not on the
partial summary: the stepwise model computes them once per document (`prepare_document`) and reuses them for every
step and beam hypothesis, and training can precompute them when the sentence encoder is frozen.
"""

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoModel, PreTrainedModel
from transformers.utils import ModelOutput

from ..configuration.configuration_hibert import HiBertConfig
from ..configuration.configuration_stepwise_hibert import StepwiseHiBertConfig, StepwiseHiBertPlannerConfig
from .bert_blocks import (
    BertStyleAttention,
    BertStyleFeedForward,
    bert_layer_state,
    init_bert_style_weights,
    load_encoder_and_config,
)
from .pretrained_encoder import encoder_attention, encoder_pooling
from .sentence_scoring import StepwiseScoringMixin, check_sentence_slots, first_sentences, slot_logits_and_loss
from .summarizer_mixin import SummarizerMixin


@dataclass
class HiBertSummarizerOutput(ModelOutput):
    """
    Args:
        loss (`torch.FloatTensor` of shape `(1,)`, *optional*): binary cross-entropy (non-stepwise, mean over real
            sentences) or cross-entropy over the next choice (stepwise, mean over rows).
        logits (`torch.FloatTensor`): non-stepwise `(batch_size, num_document_sentences)`, one score per sentence
            before the sigmoid; stepwise `(num_rows, num_document_sentences + 1)`, the next-choice scores before the
            softmax, the last column being the end-of-summary unit. Padded sentences (and, stepwise, sentences
            already in the summary) hold the dtype's minimum.
        document_states (`torch.FloatTensor` of shape `(rows, num_document_sentences, hidden_size)`): the document
            encoder's output for the document sentences.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    document_states: torch.FloatTensor | None = None


class SummaryAttention(BertStyleAttention):
    """Document-to-summary attention; with `null_slot` (`summary_null_slot`) every query also attends to a learned
    null state (its key and value through the same projections), which starts at zero."""

    def __init__(self, config, model_config, null_slot: bool = False):
        super().__init__(config, model_config)
        self.null_state = nn.Parameter(torch.zeros(config.hidden_size)) if null_slot else None

    def forward(self, queries: torch.Tensor, context: torch.Tensor, context_mask: torch.Tensor) -> torch.Tensor:
        if self.null_state is not None:
            null = self.null_state.to(context.dtype).expand(context.shape[0], 1, -1)
            context = torch.cat([context, null], dim=1)
            context_mask = F.pad(context_mask, (0, 1), value=True)
        return super().forward(queries, context, context_mask)


class HiBertDocumentLayer(nn.Module):
    """One document layer: document self-attention, [summary self-attention (shared parameters) and
    document-to-summary attention], feed-forward (shared by document and summary states)."""

    def __init__(self, config, stepwise: bool, model_config):
        super().__init__()
        self.attention = BertStyleAttention(config, model_config)
        null_slot = bool(getattr(model_config, "summary_null_slot", False))
        self.summary_attention = SummaryAttention(config, model_config, null_slot) if stepwise else None
        self.feed_forward = BertStyleFeedForward(config)

    def load_bert_layer(self, bert_layer: nn.Module) -> None:
        """Start from a pretrained BERT layer; the document-to-summary attention starts as a copy of its
        self-attention (an attention that already compares sentence states)."""
        state = bert_layer_state(bert_layer)
        if self.summary_attention is not None:
            state.update(
                {"summary_" + name: tensor for name, tensor in state.items() if name.startswith("attention.")}
            )
            if self.summary_attention.null_state is not None:
                state["summary_attention.null_state"] = torch.zeros_like(self.summary_attention.null_state)
        self.load_state_dict(state)

    def forward(self, document, document_keys, summary=None, summary_mask=None):
        """`document` [rows, n, hidden] attends to the positions in `document_keys` [rows, n] (real sentences);
        `summary` [rows, k, hidden] with `summary_mask` [rows, k]. Returns the new (document, summary)."""
        document = self.attention(document, document, document_keys)
        if summary is not None:
            has_summary = summary_mask.any(-1)
            # A row with an empty summary attends to its padding so that the softmax stays finite; its result is
            # then discarded, which makes document-to-summary attention a no-op for it.
            summary_keys = summary_mask | ~has_summary[:, None]
            summary = self.attention(summary, summary, summary_keys)
            attended = self.summary_attention(document, summary, summary_keys)
            document = torch.where(has_summary[:, None, None], attended, document)
            summary = self.feed_forward(summary)
        return self.feed_forward(document), summary


# ----------------------------------------------------------------------------------------------------------------
# Sentence blocks from the BERTSum layout
# ----------------------------------------------------------------------------------------------------------------


def sentence_blocks(input_ids, attention_mask, cls_positions, sentence_mask, block_size: int, pad_token_id: int):
    """Cut `[CLS] s1 [SEP] [CLS] s2 [SEP] ...` ([batch, length]) into one row per sentence.

    Returns `block_ids` [batch, sentences, block_size] (pad_token_id after each sentence's end) and `block_mask`
    (True on a sentence's tokens). A sentence runs from its `cls_positions` entry to the next sentence's, or to the
    end of the real tokens; longer sentences are cut to `block_size` tokens.
    """
    length = input_ids.shape[1]
    real_length = (
        attention_mask.long().sum(-1) if attention_mask is not None else torch.full_like(input_ids[:, 0], length)
    )
    next_start = torch.cat([cls_positions[:, 1:], cls_positions.new_zeros(cls_positions.shape[0], 1)], dim=1)
    next_is_real = torch.cat([sentence_mask[:, 1:], sentence_mask.new_zeros(sentence_mask.shape[0], 1)], dim=1)
    ends = torch.where(next_is_real, next_start, real_length[:, None])
    positions = cls_positions[..., None] + torch.arange(block_size, device=input_ids.device)
    block_mask = (positions < ends[..., None]) & sentence_mask[..., None]
    gathered = input_ids.gather(1, positions.clamp(max=length - 1).flatten(1)).view_as(positions)
    return torch.where(block_mask, gathered, torch.full_like(gathered, pad_token_id)), block_mask


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------


class HiBertPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = HiBertConfig
    base_model_prefix = "hibert"
    # the layers FSDP wraps one by one (training_scripts/accelerate/fsdp.yaml); transformers adds those the
    # pretrained sentence encoder's class lists (BertLayer and BertEmbeddings for BERT/MiniLM)
    _no_split_modules = ["HiBertDocumentLayer"]
    main_input_name = "input_ids"
    # `forward` takes **kwargs only to ignore them; the loss is already a mean.
    accepts_loss_kwargs = False
    # both the sentence encoder (a transformers BERT) and the document layers (`bert_blocks.dense_attention`)
    _supports_sdpa = True
    attention_backends = ("eager", "sdpa")
    pretrained_modules = ("sentence_encoder", "document_layers")
    # LoRA adapts the document layers (the sentence encoder stays frozen, so that sentence vectors can be computed
    # once).
    lora_layers = "document_layers"

    def __init__(self, config: HiBertConfig, stepwise: bool):
        super().__init__(config)
        encoder_config = config.encoder_config
        sentence_config = encoder_config.__class__(
            **dict(encoder_config.to_dict(), num_hidden_layers=config.sentence_encoder_layers)
        )
        self.sentence_encoder = AutoModel.from_config(
            sentence_config,
            add_pooling_layer=False,
            attn_implementation=encoder_attention(
                sentence_config, config._attn_implementation, f"{type(self).__name__}.sentence_encoder"
            ),
        )
        self.document_layers = nn.ModuleList(
            HiBertDocumentLayer(encoder_config, stepwise, config) for _ in range(config.document_layers)
        )
        hidden = encoder_config.hidden_size
        # Without document positions (a planner's records) the document encoder is equivariant to sentence order.
        self.sentence_positions = (
            nn.Embedding(config.max_document_sentences, hidden) if config.document_positions else None
        )
        self.document_norm = nn.LayerNorm(hidden, eps=encoder_config.layer_norm_eps)
        self.dropout = nn.Dropout(encoder_config.hidden_dropout_prob)
        self.scorer = nn.Linear(hidden, 1)

    @torch.no_grad()
    def _init_weights(self, module):
        init_bert_style_weights(module, getattr(self.config.encoder_config, "initializer_range", 0.02))

    @classmethod
    def from_encoder(cls, encoder_path: str, config: HiBertConfig | None = None, **config_kwargs):
        """A summarizer whose sentence encoder is the bottom `sentence_encoder_layers` layers of a pretrained BERT
        (with its embeddings) and whose document layers start as copies of its top `document_layers` layers; the
        position tables, end-of-summary unit and scorer are new.

        With `config`, its settings are used as they are (to rebuild a saved model before loading its adapter);
        otherwise a config is made from the encoder's and `config_kwargs`, pooling sentences as the encoder was
        trained to (`encoder_pooling`) unless `sentence_pooling` is given.
        """
        if config is None and "sentence_pooling" not in config_kwargs:
            config_kwargs["sentence_pooling"] = encoder_pooling(encoder_path)
        encoder, config = load_encoder_and_config(cls.config_class, encoder_path, config, **config_kwargs)
        available = encoder.config.num_hidden_layers
        if config.sentence_encoder_layers > available or config.document_layers > available:
            raise ValueError(
                f"the encoder has {available} layers; sentence_encoder_layers={config.sentence_encoder_layers} and "
                f"document_layers={config.document_layers} must each fit"
            )
        model = cls(config)
        wanted = model.sentence_encoder.state_dict().keys()
        model.sentence_encoder.load_state_dict({k: v for k, v in encoder.state_dict().items() if k in wanted})
        first_top_layer = available - config.document_layers
        for index, layer in enumerate(model.document_layers):
            layer.load_bert_layer(encoder.encoder.layer[first_top_layer + index])
        return model

    def sentence_vectors(self, input_ids, attention_mask, cls_positions, sentence_mask) -> torch.Tensor:
        """[batch, sentences, hidden]: every real sentence encoded on its own by the sentence encoder, pooled."""
        block_ids, block_mask = sentence_blocks(
            input_ids,
            attention_mask,
            cls_positions,
            sentence_mask,
            self.config.max_sentence_tokens + 2,
            self.sentence_encoder.config.pad_token_id or 0,
        )
        real = sentence_mask.bool()
        token_states = self.sentence_encoder(
            input_ids=block_ids[real], attention_mask=block_mask[real].long()
        ).last_hidden_state
        if self.config.sentence_pooling == "first":
            pooled = token_states[:, 0]
        else:
            weights = block_mask[real].unsqueeze(-1).to(token_states.dtype)
            pooled = (token_states * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        vectors = token_states.new_zeros(*sentence_mask.shape, token_states.shape[-1])
        vectors[real] = pooled
        return vectors

    def _embed_sentences(self, vectors: torch.Tensor, positions: nn.Embedding | None,
                         position_ids: torch.LongTensor | None = None) -> torch.Tensor:
        """Vectors plus their position embeddings (`position_ids`, default 0, 1, ... from the first), normalized."""
        # Precomputed `sentence_vectors` (e.g. a float32 cache) take the model's dtype, as the LayerNorm needs.
        vectors = vectors.to(self.document_norm.weight.dtype)
        if positions is not None:
            if position_ids is None:
                position_ids = torch.arange(vectors.shape[1], device=vectors.device)
            vectors = vectors + positions(position_ids)
        return self.dropout(self.document_norm(vectors))

    def _check_inputs(self, input_ids, cls_positions, sentence_mask, sentence_vectors):
        if sentence_mask is None:
            raise ValueError("`sentence_mask` is required (True for real sentences)")
        if sentence_vectors is None and (input_ids is None or cls_positions is None):
            raise ValueError("give `input_ids` and `cls_positions` (BERTSum layout) or precomputed `sentence_vectors`")


class HiBertForExtractiveSummarization(HiBertPreTrainedModel):
    """Non-stepwise HiBERT: sentence encoder, document encoder, one sigmoid score per sentence."""

    config_class = HiBertConfig
    # Modules `from_encoder` does not take from the pretrained encoder: trained in full and saved with adapters.
    new_modules = ("sentence_positions", "document_norm", "scorer")

    def __init__(self, config: HiBertConfig):
        super().__init__(config, stepwise=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        cls_positions: torch.LongTensor | None = None,
        sentence_mask: torch.BoolTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        sentence_vectors: torch.FloatTensor | None = None,
        labels: torch.FloatTensor | None = None,
        **kwargs,
    ) -> HiBertSummarizerOutput:
        """BERTSum-layout inputs (as `extractive-summarization` gives them) or precomputed `sentence_vectors`;
        `labels` [batch, sentences] are 0/1 (padding -100). Token type ids are not used: each sentence is encoded
        alone. Sentences past `max_document_sentences` get no score (the dtype's minimum), with a warning."""
        self._check_inputs(input_ids, cls_positions, sentence_mask, sentence_vectors)
        sentence_mask = sentence_mask.bool()
        limit = self.config.max_document_sentences
        kept_mask = first_sentences(sentence_mask, limit)
        if sentence_vectors is None:
            sentence_vectors = self.sentence_vectors(input_ids, attention_mask, cls_positions[:, :limit], kept_mask)
        states = self._embed_sentences(sentence_vectors[:, :limit], self.sentence_positions)
        keys = kept_mask | ~kept_mask.any(-1, keepdim=True)  # a document without sentences stays finite
        for layer in self.document_layers:
            states, _ = layer(states, keys)
        logits, loss = slot_logits_and_loss(self.scorer(states).squeeze(-1), kept_mask, sentence_mask.shape[1], labels)
        return HiBertSummarizerOutput(loss=loss, logits=logits, document_states=states)


class StepwiseHiBertForExtractiveSummarization(StepwiseScoringMixin, HiBertPreTrainedModel):
    """Stepwise HiBERT: scores the next sentence (or the end of the summary) given the partial summary.

    Rows: each row is one (document, partial summary) pair; `row_documents` says which document of the batch a row
    reads, so a document's sentences are encoded once for all its rows (training steps, beam hypotheses).
    """

    config_class = StepwiseHiBertConfig
    output_class = HiBertSummarizerOutput
    # Modules `from_encoder` does not take from the pretrained encoder as they are: trained in full and saved with
    # adapters (the document-to-summary attention starts as a copy of the self-attention but then learns its own).
    new_modules = (
        "summary_attention",
        "sentence_positions",
        "summary_positions",
        "end_embedding",
        "document_norm",
        "scorer",
    )

    def __init__(self, config: StepwiseHiBertConfig):
        super().__init__(config, stepwise=True)
        hidden = self.config.hidden_size
        self.summary_positions = nn.Embedding(config.max_summary_sentences, hidden)
        self.end_embedding = nn.Embedding(1, hidden)
        self.post_init()

    def prepare_document(
        self,
        input_ids=None,
        cls_positions=None,
        sentence_mask=None,
        attention_mask=None,
        sentence_vectors=None,
        repeatable_mask=None,
        **kwargs,
    ) -> dict:
        """What stays fixed while a summary grows: the sentence vectors (computed once), the sentence mask and the
        mask of the sentences that may be chosen again (`repeatable_mask`, None: none)."""
        self._check_inputs(input_ids, cls_positions, sentence_mask, sentence_vectors)
        sentence_mask = sentence_mask.bool()
        check_sentence_slots(sentence_mask, self.config.max_document_sentences)
        if sentence_vectors is None:
            sentence_vectors = self.sentence_vectors(input_ids, attention_mask, cls_positions, sentence_mask)
        return {
            "sentence_vectors": sentence_vectors,
            "sentence_mask": sentence_mask,
            "repeatable_mask": repeatable_mask,
        }

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        cls_positions: torch.LongTensor | None = None,
        sentence_mask: torch.BoolTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        sentence_vectors: torch.FloatTensor | None = None,
        summary_indices: torch.LongTensor | None = None,
        row_documents: torch.LongTensor | None = None,
        labels: torch.Tensor | None = None,
        repeatable_mask: torch.BoolTensor | None = None,
        **kwargs,
    ) -> HiBertSummarizerOutput:
        """Documents in the BERTSum layout ([documents, ...]) or as precomputed `sentence_vectors`; rows as
        `next_choice_forward` takes them. `labels` [rows]: the next sentence's index, or `num_document_sentences`
        (the sentence axis' width) for the end; or [rows, num_document_sentences + 1] set labels (positive: right
        choices, negative: explicit negatives; see `sentence_scoring.next_choice_logits_and_loss`).
        `repeatable_mask` [documents, sentences]: sentences that stay choosable once in the summary (a planner's
        sentence break and team names); by default none."""
        document = self.prepare_document(
            input_ids, cls_positions, sentence_mask, attention_mask, sentence_vectors, repeatable_mask
        )
        return self.next_choice_forward(document, summary_indices, row_documents, labels)

    def row_logits(self, document, summary_indices, row_documents):
        vectors = document["sentence_vectors"]
        num_document_sentences, hidden = vectors.shape[1:]
        row_vectors, row_mask = vectors[row_documents], document["sentence_mask"][row_documents]
        rows = row_documents.shape[0]
        end = self.document_norm(self.end_embedding.weight).expand(rows, 1, hidden)
        states = torch.cat([self._embed_sentences(row_vectors, self.sentence_positions), self.dropout(end)], dim=1)
        # The end unit reads the document and the summary but is not read by the sentences, so with an empty
        # summary the sentence states equal the non-stepwise encoder's.
        keys = F.pad(row_mask | ~row_mask.any(-1, keepdim=True), (0, 1), value=False)

        summary = summary_mask = None
        if summary_indices.shape[1] > 0:
            summary_mask = summary_indices >= 0
            picked = row_vectors.gather(1, summary_indices.clamp(min=0)[..., None].expand(-1, -1, hidden))
            summary = self._embed_sentences(picked, self.summary_positions, self.summary_position_ids(summary_mask))
        for layer in self.document_layers:
            states, summary = layer(states, keys, summary, summary_mask)
        return self.scorer(states).squeeze(-1), {"document_states": states[:, :num_document_sentences]}

    def summary_position_ids(self, summary_mask: torch.BoolTensor) -> torch.LongTensor | None:
        """The partial summary's position ids [rows, k]; None: 0, 1, ... in selection order (the paper's)."""
        return None


class StepwiseHiBertForContentPlanning(StepwiseHiBertForExtractiveSummarization):
    """Stepwise HiBERT as a Rotowire content planner (Narayan et al. 2020, section 7): the document sentences are a
    game's templated records and the sentence-break unit (`processing.planner_inputs`), read without document
    positions, so the scores of the records do not depend on their order; the end-of-summary unit ends the plan.
    Served by the `content-planning` pipeline."""

    config_class = StepwiseHiBertPlannerConfig
    new_modules = tuple(name for name in StepwiseHiBertForExtractiveSummarization.new_modules
                        if name != "sentence_positions")

    def summary_position_ids(self, summary_mask: torch.BoolTensor) -> torch.LongTensor | None:
        """With `summary_positions_from_end`, each plan unit's position is the number of units chosen after it (the
        latest is 0), so that every step reads the unit just chosen at one position whatever the plan's length."""
        if not self.config.summary_positions_from_end:
            return super().summary_position_ids(summary_mask)
        real = summary_mask.long()
        return real.flip(-1).cumsum(-1).flip(-1) - real


__all__ = [
    "HiBertForExtractiveSummarization",
    "HiBertPreTrainedModel",
    "HiBertSummarizerOutput",
    "StepwiseHiBertForContentPlanning",
    "StepwiseHiBertForExtractiveSummarization",
    "SummaryAttention",
    "sentence_blocks",
]
