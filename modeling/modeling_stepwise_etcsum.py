"""ETCSum extractive summarizers (Narayan et al. 2020, "Stepwise Extractive Summarization and Planning with
Structured Transformers"): an ETC encoder (Ainslie et al. 2020) started from a pretrained BERT.

Input: the document's tokens in the BERTSum layout (`[CLS] sentence [SEP]` per sentence) as *long* tokens, and one
*global* token per sentence. Attention (the foundation's `GlobalLocalPattern`): long-to-long within `local_radius`
with relative positions clipped at `relative_pos_max_distance`, global-to-global full, long-to-global and
global-to-long full or restricted to the own sentence (`hard_l2g_masking` / `hard_g2l_masking`), with the "own
sentence" label as their relative id (offset past the distances, so one table serves all four parts, as in ETC).

Relative attention (`config.relative_attention`), per layer:
- "keys" (new models; ETC's relative attention, the relative keys of Shaw et al. 2018): a learned key vector per
  relative id and head added on the key side, ``score_ij = q_i . (k_j + a_{id(i,j)}) / sqrt(d)``, plus ETC's learned
  bias per relative id and head. What ETC defines and this model does: l2l and g2g ids are the clipped distances
  (g2g between global positions, i.e. sentence order), l2g and g2l ids are "own sentence" / "other sentence". Both
  tables start at zero.
- "bias": the bias only (the checkpoints trained before relative keys; a config.json without the key loads so).

Long-token absolute positions (`config.long_position_embeddings`): "tiled" for new models (BERT's table repeated, the
Longformer recipe: the pretrained layers were trained with absolute positions, and without them a sentence's first
token cannot tell where in the document it stands); "none" as in ETC, whose own checkpoints were pretrained with
relative positions only (word order then comes from the relative keys alone). A sentence is scored from its first
token (`[CLS]`).

- `ETCSumForExtractiveSummarization`: a sigmoid score per sentence; `extractive-summarization` pipeline (top k).
- `StepwiseETCSumForExtractiveSummarization`: the partial summary's tokens (each chosen sentence's tokens as in the
  document, token type 1) follow the document's, with one global token per summary sentence and one for the end of
  the summary; a softmax over the document sentences and the end unit (scored from its global token) picks the next
  choice. Document and summary are encoded together, so each step re-encodes: document tokens read every global
  token (l2g) and the first summary tokens inside their band, so from the first layer's output on every document
  state depends on the summary and nothing past the embeddings could be reused; instead every live beam hypothesis
  of a step is one row of a single batched forward over the sparse (linear-memory) attention.

Global tokens carry a type embedding (document sentence, summary sentence, end) and the sentence's index in the
document or in the summary (separate tables); inputs of `max_document_tokens` (default 4,096) fit.
Attention runs through `config._attn_implementation`: "blocked" (CPU training, linear memory), "flex_attention"
(inference; falls back to "blocked" where a CPU backward is needed), "sdpa" or "eager" (dense reference).
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.utils import ModelOutput

from ..configuration.configuration_etcsum import ETCSumConfig
from ..configuration.configuration_stepwise_etcsum import StepwiseETCSumConfig, StepwiseETCSumPlannerConfig
from .attention import attention_forward
from .attention_patterns import GlobalLocalPattern
from .bert_blocks import (
    BertStyleAttention,
    BertStyleFeedForward,
    bert_layer_state,
    init_bert_style_weights,
    load_encoder_and_config,
)
from .sentence_scoring import (
    StepwiseScoringMixin,
    check_sentence_slots,
    first_sentences,
    reads_back_freely,
    slot_logits_and_loss,
)
from .summarizer_mixin import SummarizerMixin

# Global token types.
DOCUMENT_SENTENCE, SUMMARY_SENTENCE, END_OF_SUMMARY = 0, 1, 2


@dataclass
class ETCSumSummarizerOutput(ModelOutput):
    """
    Args:
        loss (`torch.FloatTensor` of shape `(1,)`, *optional*): binary cross-entropy (non-stepwise, mean over real
            sentences) or cross-entropy over the next choice (stepwise, mean over rows).
        logits (`torch.FloatTensor`): non-stepwise `(batch_size, num_document_sentences)`, one score per sentence
            before the sigmoid; stepwise `(num_rows, num_document_sentences + 1)`, the next-choice scores before the
            softmax, the last column being the end-of-summary unit. Padded sentences (and, stepwise, sentences
            already in the summary) hold the dtype's minimum.
        sentence_states (`torch.FloatTensor` of shape `(rows, num_document_sentences, hidden_size)`): the states of the
            sentences' first tokens, fed to the scorer.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    sentence_states: torch.FloatTensor | None = None


class RelativePositionBias(nn.Module):
    """One learned bias per relative id (clipped distances, then the two l2g/g2l labels) and head."""

    def __init__(self, vocab_size: int, num_heads: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(vocab_size, num_heads))


class RelativePositionKeys(nn.Module):
    """One learned key vector per relative id and head (ETC's relative embeddings, Shaw et al.'s a^K)."""

    def __init__(self, vocab_size: int, num_heads: int, head_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(vocab_size, num_heads, head_dim))


class ETCAttention(BertStyleAttention):
    """Global-local self-attention: BERT's projections and residual output (parameter names included), a sparse
    pattern instead of dense attention, and per-layer relative-position representations (relative keys and a bias,
    or the bias only: `config.relative_attention`)."""

    def __init__(self, encoder_config, config: ETCSumConfig):
        super().__init__(encoder_config, config)
        vocab = GlobalLocalPattern.relative_vocab_size(config.relative_pos_max_distance)
        self.relative_bias = RelativePositionBias(vocab, self.num_heads)
        if config.relative_attention == "keys":
            head_dim = encoder_config.hidden_size // self.num_heads
            self.relative_keys = RelativePositionKeys(vocab, self.num_heads, head_dim)

    def forward(self, states: torch.Tensor, pattern: GlobalLocalPattern) -> torch.Tensor:
        keys = self.relative_keys.weight if hasattr(self, "relative_keys") else None
        pattern = pattern.with_relative_tables(self.relative_bias.weight, keys)
        attended, _ = attention_forward(
            self,
            self._heads(self.query(states)),
            self._heads(self.key(states)),
            self._heads(self.value(states)),
            None,
            dropout=self.attention_dropout if self.training else 0.0,
            attention_pattern=pattern,
        )
        return self.output(attended.flatten(2), states)


class ETCLayer(GradientCheckpointingLayer):
    def __init__(self, encoder_config, config: ETCSumConfig):
        super().__init__()
        self.attention = ETCAttention(encoder_config, config)
        self.feed_forward = BertStyleFeedForward(encoder_config)

    def forward(self, states: torch.Tensor, pattern: GlobalLocalPattern) -> torch.Tensor:
        return self.feed_forward(self.attention(states, pattern))


class LongEmbeddings(nn.Module):
    """BERT's token embeddings (parameter names as in `BertEmbeddings`) with a longer position table, or, with
    `num_positions=None` (ETC), none: positions then come from the attention's relative keys only."""

    def __init__(self, encoder_config, num_positions: int | None):
        super().__init__()
        hidden = encoder_config.hidden_size
        self.word_embeddings = nn.Embedding(encoder_config.vocab_size, hidden, padding_idx=encoder_config.pad_token_id)
        self.position_embeddings = None if num_positions is None else nn.Embedding(num_positions, hidden)
        self.token_type_embeddings = nn.Embedding(encoder_config.type_vocab_size, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=encoder_config.layer_norm_eps)
        self.dropout = nn.Dropout(encoder_config.hidden_dropout_prob)

    def forward(self, input_ids, position_ids, token_type_ids):
        embedded = self.word_embeddings(input_ids)
        if self.position_embeddings is not None:
            embedded = embedded + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embedded + self.token_type_embeddings(token_type_ids)))

    def load_bert_embeddings(self, bert_embeddings: nn.Module) -> None:
        """Copy a BERT's embeddings; its position table, if this model has one, is repeated to fill the longer one."""
        state = dict(bert_embeddings.state_dict())
        if self.position_embeddings is not None:
            table = state["position_embeddings.weight"]
            repeats = -(-self.position_embeddings.num_embeddings // table.shape[0])
            state["position_embeddings.weight"] = table.repeat(repeats, 1)[: self.position_embeddings.num_embeddings]
        self.load_state_dict({name: state[name] for name in self.state_dict()})


# A sentence bound past every position: `_count_at_most` counts no start of a sentence slot the document does not use.
_PAST_EVERY_POSITION = torch.iinfo(torch.long).max


def _count_at_most(bounds: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """For each of `values` [rows, n], how many of its row's ascending `bounds` [rows, m] are at most it
    (`torch.searchsorted(..., right=True)`, which ONNX has no operator for; m is a few dozen sentences)."""
    return (bounds[:, None, :] <= values[:, :, None]).sum(-1)


@dataclass
class _Rows:
    """Long and global inputs of a batch of (document, partial summary) rows; each row's real tokens and real global
    tokens come first (padding last), so relative positions do not depend on how a batch is padded."""

    input_ids: torch.Tensor  # [rows, long]
    position_ids: torch.Tensor
    token_type_ids: torch.Tensor
    long_mask: torch.Tensor
    long_sentence_ids: torch.Tensor
    global_types: torch.Tensor  # [rows, globals]
    global_positions: torch.Tensor
    global_mask: torch.Tensor
    global_sentence_ids: torch.Tensor
    end_index: torch.Tensor | None  # [rows]: the end token's global position


class ETCSumPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = ETCSumConfig
    base_model_prefix = "etcsum"
    # the layers FSDP wraps one by one (training_scripts/accelerate/fsdp.yaml); they hold the pretrained
    # encoder's weights
    _no_split_modules = ["ETCLayer"]
    main_input_name = "input_ids"
    # A Rotowire table row (about 6,000 long and 400 global tokens) keeps about 1.5 GB of activations per layer for
    # the backward pass; checkpointing keeps one layer's (`--gradient_checkpointing`).
    supports_gradient_checkpointing = True
    # The sparse attention serves every backend (`modeling/attention.py`). Dense attention would need a [heads,
    # length, length] bias per row: the default is the linear-memory "blocked".
    _supports_sdpa = True
    _supports_flex_attn = True
    attention_backends = ("eager", "sdpa", "flex_attention", "blocked")
    default_attention = "blocked"
    # `forward` takes **kwargs only to ignore them; the loss is already a mean.
    accepts_loss_kwargs = False
    # Rebuilt from the pretrained encoder by `from_encoder` (the relative-position biases inside the layers excepted,
    # see `new_modules`); everything else is new and saved with adapters.
    pretrained_modules = ("embeddings", "layers")
    lora_layers = "layers"

    def __init__(self, config: ETCSumConfig, stepwise: bool):
        super().__init__(config)
        encoder_config = config.encoder_config
        hidden = encoder_config.hidden_size
        tiled = config.long_position_embeddings == "tiled"
        self.embeddings = LongEmbeddings(encoder_config, config.long_length if tiled else None)
        self.layers = nn.ModuleList(ETCLayer(encoder_config, config) for _ in range(encoder_config.num_hidden_layers))
        self.global_embeddings = nn.Embedding(3 if stepwise else 1, hidden)
        self.sentence_positions = nn.Embedding(config.max_document_sentences, hidden)
        self.scorer = nn.Linear(hidden, 1)

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    @torch.no_grad()
    def _init_weights(self, module):
        init_bert_style_weights(module, getattr(self.config.encoder_config, "initializer_range", 0.02))
        if isinstance(module, (RelativePositionBias, RelativePositionKeys)):
            module.weight.zero_()

    @classmethod
    def from_encoder(cls, encoder_path: str, config: ETCSumConfig | None = None, **config_kwargs):
        """A summarizer whose embeddings and layers start from a pretrained BERT (without its position table, as in
        ETC, or with it repeated to `long_length` for `long_position_embeddings="tiled"`); relative keys and biases
        start at zero, global token embeddings from the `[CLS]` (sentences) and `[SEP]` (end) embeddings, and the
        scorer is new.

        With `config`, its settings are used as they are (to rebuild a saved model before loading its adapter);
        otherwise a config is made from the encoder's and `config_kwargs`.
        """
        encoder, config = load_encoder_and_config(cls.config_class, encoder_path, config, **config_kwargs)
        model = cls(config)
        model.embeddings.load_bert_embeddings(encoder.embeddings)
        new_in_layer = {"attention.relative_bias.weight"}
        if config.relative_attention == "keys":
            new_in_layer.add("attention.relative_keys.weight")
        for layer, pretrained in zip(model.layers, encoder.encoder.layer):
            missing, unexpected = layer.load_state_dict(bert_layer_state(pretrained), strict=False)
            if unexpected or set(missing) != new_in_layer:
                raise ValueError(f"unexpected encoder layer layout: missing {missing}, unexpected {unexpected}")
        words, types = encoder.embeddings.word_embeddings.weight, encoder.embeddings.token_type_embeddings.weight
        cls_id = encoder.config.cls_token_id if getattr(encoder.config, "cls_token_id", None) is not None else 101
        sep_id = encoder.config.sep_token_id if getattr(encoder.config, "sep_token_id", None) is not None else 102
        starts = [words[cls_id] + types[0], words[cls_id] + types[min(1, types.shape[0] - 1)], words[sep_id] + types[0]]
        with torch.no_grad():
            model.global_embeddings.weight.copy_(torch.stack(starts[: model.global_embeddings.num_embeddings]))
        return model

    # ------------------------------------------------------------------------------------------------------------

    def _check_documents(self, input_ids, cls_positions, sentence_mask):
        if input_ids is None or cls_positions is None or sentence_mask is None:
            raise ValueError("`input_ids`, `cls_positions` and `sentence_mask` are required (BERTSum layout)")
        if input_ids.shape[1] > self.config.max_document_tokens:
            raise ValueError(
                f"documents of {input_ids.shape[1]} tokens exceed max_document_tokens={self.config.max_document_tokens}"
            )

    def _layout(self, input_ids, attention_mask, cls_positions, sentence_mask, summary_indices, row_documents, end):
        """Rows [document tokens ; summary tokens] with global tokens [document sentences ; summary sentences ; end].

        Summary sentence k of a document with n sentences has sentence id n + k (its global token sits at global
        position n + k); the end token's id, n + len(summary), has no long token, so with hard g2l masking it reads
        only global tokens. Built by index arithmetic on the inputs' device; the rows' widths are exact on the CPU
        and bounds from the inputs' shapes elsewhere, so that nothing is read back from an accelerator
        (`sentence_scoring.HOST_READ_DEVICES`).
        """
        device = input_ids.device
        summary_indices = summary_indices.long()  # an empty summary built as torch.tensor([[]]) is float
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        lengths = attention_mask.long().sum(-1)[row_documents, None]  # [rows, 1]
        counts = sentence_mask.long().sum(-1)[row_documents, None]
        # each row's sentence bounds: its sentences' starts, then the document's length, then past every position
        slots = torch.arange(cls_positions.shape[1] + 1, device=device)
        starts = F.pad(cls_positions[row_documents], (0, 1))
        bounds = torch.where(slots < counts, starts, torch.where(slots == counts, lengths, _PAST_EVERY_POSITION))
        # the summary's sentences in selection order (-1 padding moved last), and one empty segment so that a row
        # without a summary still has one
        padded = F.pad(summary_indices, (0, 1), value=-1)
        chosen = (padded >= 0).long()
        summary_length = chosen.sum(-1, keepdim=True)
        # each entry's place once the chosen ones are moved first, in order (a stable sort, which ONNX lacks)
        rank = torch.where(chosen.bool(), chosen.cumsum(-1), summary_length + (1 - chosen).cumsum(-1)) - 1
        summary = torch.zeros_like(padded).scatter(1, rank, padded).clamp(min=0)
        chosen = torch.arange(padded.shape[1], device=device) < summary_length
        first = bounds.gather(1, summary)
        sizes = (torch.minimum(bounds.gather(1, summary + 1), first + self.config.max_sentence_tokens + 2) - first)
        sizes = sizes * chosen
        ends = sizes.cumsum(-1)  # where each summary sentence's tokens end, counted after the document's
        row_length = lengths + ends[:, -1:]
        global_length = counts + summary_length + int(end)
        if torch.compiler.is_exporting() or not reads_back_freely(device):
            # traced (the ONNX export: widths read from the values would fix the traced axes) or on an accelerator
            # (no step waits for the device): the widths the input shapes allow; the extra padding changes no score
            # (real tokens come first)
            long_width = input_ids.shape[1] + summary_indices.shape[1] * (self.config.max_sentence_tokens + 2)
            global_width = cls_positions.shape[1] + summary_indices.shape[1] + int(end)
        else:  # the exact widths: reading a CPU tensor waits for nothing
            long_width, global_width = torch.stack([row_length.max(), global_length.max()]).tolist()

        position = torch.arange(long_width, device=device).expand(row_documents.shape[0], -1)
        long_mask = position < row_length
        in_document = position < lengths
        offset = (position - lengths).clamp(min=0)  # position among the summary's tokens
        segment = _count_at_most(ends, offset).clamp(max=ends.shape[1] - 1)
        summary_index = first.gather(1, segment) + offset - (ends - sizes).gather(1, segment)
        index = torch.where(in_document, position, torch.where(long_mask, summary_index, 0))
        document_sentence = _count_at_most(bounds, position) - 1
        sentence_ids = torch.where(in_document, document_sentence, counts + segment)

        slot = torch.arange(global_width, device=device).expand(row_documents.shape[0], -1)
        global_mask = slot < global_length
        in_summary = (slot >= counts) & (slot < counts + summary_length)
        is_end = global_mask & (slot == counts + summary_length)
        global_types = torch.where(in_summary, SUMMARY_SENTENCE, torch.where(is_end, END_OF_SUMMARY, DOCUMENT_SENTENCE))
        return _Rows(
            input_ids=input_ids[row_documents[:, None], index] * long_mask,
            position_ids=torch.arange(long_width, device=device).expand(row_documents.shape[0], -1),
            token_type_ids=(long_mask & ~in_document).long(),
            long_mask=long_mask,
            long_sentence_ids=torch.where(long_mask, sentence_ids, -1),
            global_types=global_types,
            global_positions=torch.where(slot < counts, slot, torch.where(in_summary, slot - counts, 0)),
            global_mask=global_mask,
            # a global token's sentence id is its global position; padding gets -1
            global_sentence_ids=torch.where(global_mask, slot, -1),
            end_index=global_mask.long().sum(-1) - 1 if end else None,
        )

    def _global_states(self, rows: _Rows) -> torch.Tensor:
        """Type embedding plus the sentence's index in the document or in the summary (none for the end token)."""
        types = rows.global_types[..., None]
        positions = torch.where(types == DOCUMENT_SENTENCE, self.sentence_positions(rows.global_positions), 0.0)
        if hasattr(self, "summary_positions"):
            summary_positions = self.summary_positions(
                rows.global_positions.clamp(max=self.config.max_summary_sentences - 1)
            )
            positions = torch.where(types == SUMMARY_SENTENCE, summary_positions, positions)
        states = self.global_embeddings(rows.global_types) + positions
        return self.embeddings.dropout(self.embeddings.LayerNorm(states))

    def _encode(self, rows: _Rows) -> torch.Tensor:
        """[rows, globals + long, hidden]: the encoder's output over ``[global tokens ; long tokens]``."""
        pattern = GlobalLocalPattern(
            long_sentence_ids=rows.long_sentence_ids,
            global_sentence_ids=rows.global_sentence_ids,
            local_radius=self.config.local_radius,
            relative_pos_max_distance=self.config.relative_pos_max_distance,
            long_attention_mask=rows.long_mask,
            global_attention_mask=rows.global_mask,
            hard_g2l_masking=self.config.hard_g2l_masking,
            hard_l2g_masking=self.config.hard_l2g_masking,
        )
        long_states = self.embeddings(rows.input_ids, rows.position_ids, rows.token_type_ids)
        states = torch.cat([self._global_states(rows), long_states], dim=1)
        for layer in self.layers:
            states = layer(states, pattern)
        return states

    def _first_token_states(self, states, rows: _Rows, cls_positions, row_documents) -> torch.Tensor:
        """States of every document sentence's first token (document tokens come first in each row)."""
        first = rows.global_types.shape[1] + cls_positions[row_documents]
        return states.gather(1, first[..., None].expand(-1, -1, states.shape[-1]))


class ETCSumForExtractiveSummarization(ETCSumPreTrainedModel):
    """Non-stepwise ETCSum: one sigmoid score per sentence."""

    config_class = ETCSumConfig
    new_modules = ("global_embeddings", "sentence_positions", "relative_bias", "relative_keys", "scorer")

    def __init__(self, config: ETCSumConfig):
        super().__init__(config, stepwise=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        cls_positions: torch.LongTensor | None = None,
        sentence_mask: torch.BoolTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        labels: torch.FloatTensor | None = None,
        **kwargs,
    ) -> ETCSumSummarizerOutput:
        """BERTSum-layout inputs (as `extractive-summarization` gives them); `labels` [batch, sentences] are 0/1
        (padding -100). Sentences past `max_document_sentences` get no score (the dtype's minimum), with a warning."""
        self._check_documents(input_ids, cls_positions, sentence_mask)
        sentence_mask = sentence_mask.bool()
        limit = self.config.max_document_sentences
        kept_mask, kept_positions = first_sentences(sentence_mask, limit), cls_positions[:, :limit]
        documents = torch.arange(input_ids.shape[0], device=input_ids.device)
        no_summary = torch.full((input_ids.shape[0], 0), -1, dtype=torch.long, device=input_ids.device)
        rows = self._layout(input_ids, attention_mask, kept_positions, kept_mask, no_summary, documents, end=False)
        sentence_states = self._first_token_states(self._encode(rows), rows, kept_positions, documents)
        logits = self.scorer(sentence_states).squeeze(-1)
        logits, loss = slot_logits_and_loss(logits, kept_mask, sentence_mask.shape[1], labels)
        return ETCSumSummarizerOutput(loss=loss, logits=logits, sentence_states=sentence_states)


class StepwiseETCSumForExtractiveSummarization(StepwiseScoringMixin, ETCSumPreTrainedModel):
    """Stepwise ETCSum: scores the next sentence (or the end of the summary) given the partial summary.

    Rows: each row is one (document, partial summary) pair; `row_documents` says which document of the batch a row
    reads.
    """

    config_class = StepwiseETCSumConfig
    output_class = ETCSumSummarizerOutput
    new_modules = (
        "global_embeddings",
        "sentence_positions",
        "summary_positions",
        "relative_bias",
        "relative_keys",
        "scorer",
    )

    def __init__(self, config: StepwiseETCSumConfig):
        super().__init__(config, stepwise=True)
        self.summary_positions = nn.Embedding(config.max_summary_sentences, self.config.hidden_size)
        self.post_init()

    def prepare_document(
        self,
        input_ids=None,
        cls_positions=None,
        sentence_mask=None,
        attention_mask=None,
        repeatable_mask=None,
        **kwargs,
    ):
        """What stays fixed while a summary grows: the document's inputs (each step re-encodes them with the
        summary, since document tokens attend to the summary's global tokens) and the mask of the sentences that may
        be chosen again (`repeatable_mask`, None: none)."""
        self._check_documents(input_ids, cls_positions, sentence_mask)
        check_sentence_slots(sentence_mask, self.config.max_document_sentences)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "cls_positions": cls_positions,
            "sentence_mask": sentence_mask.bool(),
            "repeatable_mask": repeatable_mask,
        }

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        cls_positions: torch.LongTensor | None = None,
        sentence_mask: torch.BoolTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        summary_indices: torch.LongTensor | None = None,
        row_documents: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None,
        repeatable_mask: torch.BoolTensor | None = None,
        **kwargs,
    ) -> ETCSumSummarizerOutput:
        """Documents in the BERTSum layout ([documents, ...]); rows as `next_choice_forward` takes them. `labels`
        [rows]: the next sentence's index, or `num_document_sentences` (the sentence axis' width) for the end.
        `repeatable_mask` [documents, sentences]: sentences that stay choosable once in the summary (a planner's
        sentence break and team names); by default none."""
        document = self.prepare_document(input_ids, cls_positions, sentence_mask, attention_mask, repeatable_mask)
        return self.next_choice_forward(document, summary_indices, row_documents, labels)

    def row_logits(self, document, summary_indices, row_documents):
        rows = self._layout(
            document["input_ids"],
            document["attention_mask"],
            document["cls_positions"],
            document["sentence_mask"],
            summary_indices,
            row_documents,
            end=True,
        )
        states = self._encode(rows)
        sentence_states = self._first_token_states(states, rows, document["cls_positions"], row_documents)
        end_state = states[torch.arange(states.shape[0], device=states.device), rows.end_index].unsqueeze(1)
        logits = self.scorer(torch.cat([sentence_states, end_state], dim=1)).squeeze(-1)
        return logits, {"sentence_states": sentence_states}


class StepwiseETCSumForContentPlanning(StepwiseETCSumForExtractiveSummarization):
    """Stepwise ETCSum as a Rotowire content planner (Narayan et al. 2020, section 7): the long input is the whole
    table, every record's template sentence and the sentence-break unit (`processing.planner_inputs`), one global
    token each, which the sparse attention makes affordable; the end-of-summary unit ends the plan. Served by the
    `content-planning` pipeline."""

    config_class = StepwiseETCSumPlannerConfig


__all__ = [
    "ETCSumForExtractiveSummarization",
    "ETCSumPreTrainedModel",
    "ETCSumSummarizerOutput",
    "StepwiseETCSumForContentPlanning",
    "StepwiseETCSumForExtractiveSummarization",
]
