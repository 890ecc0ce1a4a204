"""The sentence planner (Marfurt & Henderson 2021): BertSumAbs whose decoder first predicts the representation of the
next summary sentence, then its words.

- The encoder also reads each completed summary sentence alone (`[CLS] tokens [SEP]`); the sentence vector is its
  state at the end token.
- The sentence generator, a causal Transformer decoder over the sentence vectors (a zero vector first) with
  cross-attention to the document, predicts the next sentence vector r_sent.
- The word generator adds r'_sent = dropout(linear(r_sent)) inside every layer's cross-attention sublayer:
  LN(s + CrossAtt(s, enc) + r'_sent) (equation 5). The separator token moves on to the next sentence.
- Guidance loss: MSE between each predicted vector and the encoder's vector of that gold sentence, weight lambda.
  As in the reference code, it reads a second pass of the sentence generator over detached inputs (the sentence
  vectors and the document states) against detached targets, so no gradient reaches the encoder through it; the
  first pass, whose r_sent the word generator reads, keeps its gradients, so the word loss trains the encoder through
  the plan (the sentence vectors and the document states the sentence generator attends to) as well as through the
  word generator's cross-attention.

In generation the completed sentences of each hypothesis are read from its tokens: each sentence is encoded once and
each plan computed once per hypothesis prefix (memoized for the `generate()` call), so beam reordering needs no state
of its own.
"""

from contextvars import ContextVar

import torch
from torch import nn
from torch.nn import functional as F
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

from ..configuration.configuration_sentence_planner import SentencePlannerConfig
from .modeling_bertsum import sinusoidal_positions
from .modeling_bertsumabs import BertSumAbsForConditionalGeneration, DecoderLayer

# The plans the `generate()` call under way has computed (see `generation_plan`): a context variable, not a model
# attribute, so that threads generating with one model at once keep their own.
_PLAN_MEMO: ContextVar[dict | None] = ContextVar("sentence_planner_plan_memo", default=None)


class SentenceGenerator(nn.Module):
    """Causal Transformer layers (the decoder's layer type, no cache) over sentence vectors with sinusoidal sentence
    positions, cross-attending to the document."""

    def __init__(self, config: SentencePlannerConfig):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(DecoderLayer(config, index) for index in range(config.sentence_generator_layers))

    def forward(self, sentence_inputs, sentence_mask, document_states, document_mask) -> torch.Tensor:
        """[rows, sentences, hidden] in (a zero vector, then the completed sentences' vectors), the predicted vector
        of each next sentence out."""
        positions = sinusoidal_positions(sentence_inputs.shape[1], sentence_inputs.shape[2], sentence_inputs.device)
        states = sentence_inputs + positions.to(sentence_inputs.dtype)
        # no cache, given by position: transformers 5.24 renamed the argument from `past_key_values` to `cache`
        self_mask = create_causal_mask(self.config, states, sentence_mask, None)
        cross_mask = create_bidirectional_mask(
            config=self.config,
            inputs_embeds=states,
            attention_mask=document_mask,
            encoder_hidden_states=document_states,
        )
        for layer in self.layers:
            states = layer(states, self_mask, document_states, cross_mask)
        return states


class SentencePlannerForConditionalGeneration(BertSumAbsForConditionalGeneration):
    """BertSumAbs with the sentence generator and the plan input of the word generator (see the module docstring).
    Training batches carry `summary_sentences` [rows, sentences, tokens] (the processor's `collate`); `forward`
    returns the word loss plus guidance_weight x the guidance loss."""

    config_class = SentencePlannerConfig
    new_modules = ("cross_attention", "generator", "sentence_generator", "plan_projection")

    def __init__(self, config: SentencePlannerConfig):
        super().__init__(config)
        self.sentence_generator = SentenceGenerator(config)
        hidden = config.hidden_size
        self.plan_projection = nn.Sequential(nn.Linear(hidden, hidden), nn.Dropout(config.dropout))
        self.post_init()

    # -- sentence vectors ----------------------------------------------------------------------------------------

    def sentence_vectors(self, summary_sentences: torch.LongTensor) -> torch.Tensor:
        """[rows, sentences, hidden]: the encoder's state at the end token of each sentence read alone (`[CLS] tokens
        [SEP]`, padded with the pad id); zeros for padding sentences. With gradients: the word loss trains the
        encoder through the plan (the guidance loss detaches them)."""
        rows, count, width = summary_sentences.shape
        flat = summary_sentences.reshape(rows * count, width)
        mask = (flat != self.config.pad_token_id).long()
        real = mask.any(-1)
        vectors = torch.zeros(rows * count, self.config.hidden_size, device=flat.device, dtype=self.dtype)
        if real.any():
            states = self.encoder(input_ids=flat[real], attention_mask=mask[real]).last_hidden_state
            end = mask[real].sum(-1) - 1
            vectors[real] = states[torch.arange(len(end), device=end.device), end].to(vectors.dtype)
        return vectors.view(rows, count, -1)

    def predicted_vectors(self, sentence_vectors, sentence_mask, document_states, document_mask) -> torch.Tensor:
        """r_sent for sentence 1..n given the vectors of sentences 1..n-1 (a zero vector first), attending to the
        document states (gradients flow into both inputs; detach them for the guidance pass)."""
        shifted = torch.cat([torch.zeros_like(sentence_vectors[:, :1]), sentence_vectors[:, :-1]], dim=1)
        inputs_mask = torch.cat([torch.ones_like(sentence_mask[:, :1]), sentence_mask[:, :-1]], dim=1)
        return self.sentence_generator(shifted, inputs_mask, document_states, document_mask)

    # -- the plan of each decoder position -----------------------------------------------------------------------

    def sentence_plan(self, decoder_input_ids, encoder_states, attention_mask, past_length, **inputs):
        summary_sentences = inputs.get("summary_sentences")
        plan_vectors = inputs.get("plan_vectors")
        if plan_vectors is not None:  # from `prepare_inputs_for_generation`
            return self.plan_projection(plan_vectors.to(encoder_states.dtype)), None
        if summary_sentences is None:
            raise ValueError(
                "the sentence planner needs `summary_sentences` (teacher forcing: the processor's collate) or "
                "`plan_vectors` (generation)"
            )
        if past_length:
            raise ValueError("teacher forcing with `summary_sentences` reads the whole summary: no past_key_values")
        vectors = self.sentence_vectors(summary_sentences)
        sentence_mask = (summary_sentences != self.config.pad_token_id).any(-1)
        predicted = self.predicted_vectors(vectors, sentence_mask, encoder_states, attention_mask)
        # decoder position p writes sentence k+1, k = separators among the inputs up to p
        index = (decoder_input_ids == self.config.sentence_separator_token_id).cumsum(1)
        index = index.clamp(max=predicted.shape[1] - 1)
        plan = torch.gather(predicted, 1, index.unsqueeze(-1).expand(-1, -1, predicted.shape[-1]))
        guidance = None
        if inputs.get("labels") is not None and sentence_mask.any() and self.config.guidance_weight:
            # the reference's second, detached pass: the guidance loss trains the sentence generator only
            targets = vectors.detach()
            guided = self.predicted_vectors(targets, sentence_mask, encoder_states.detach(), attention_mask)
            guidance = F.mse_loss(guided[sentence_mask].float(), targets[sentence_mask].float())
            guidance = self.config.guidance_weight * guidance
        return self.plan_projection(plan), guidance

    # -- generation --------------------------------------------------------------------------------------------

    def generate(self, *args, **kwargs):
        token = _PLAN_MEMO.set({"sentences": {}, "plans": {}})
        try:
            return super().generate(*args, **kwargs)
        finally:
            _PLAN_MEMO.reset(token)

    def prepare_inputs_for_generation(self, decoder_input_ids, **kwargs):
        model_inputs = super().prepare_inputs_for_generation(decoder_input_ids, **kwargs)
        fed = model_inputs["decoder_input_ids"].shape[1]
        encoder_states = model_inputs["encoder_outputs"][0]
        model_inputs["plan_vectors"] = self.generation_plan(
            decoder_input_ids, fed, encoder_states, model_inputs.get("attention_mask")
        )
        return model_inputs

    def completed_sentences(self, token_ids: list[int]) -> tuple[tuple[int, ...], ...]:
        """The sentences a hypothesis has closed with a separator (its begin token dropped)."""
        sentences, current = [], []
        for token in token_ids[1:]:
            if token == self.config.sentence_separator_token_id:
                sentences.append(tuple(current))
                current = []
            else:
                current.append(token)
        return tuple(sentences)

    @torch.no_grad()
    def generation_plan(self, decoder_input_ids, fed: int, encoder_states, attention_mask) -> torch.Tensor:
        """[rows, fed, hidden]: r_sent at the last `fed` positions of each hypothesis, from its completed sentences.
        Memoized per (row, completed sentences): beam search keeps each row on its document, so a row's plan
        depends only on its sentences."""
        memo = _PLAN_MEMO.get() or {"sentences": {}, "plans": {}}
        ids = decoder_input_ids.tolist()
        length = decoder_input_ids.shape[1]
        keys = [
            [(row, self.completed_sentences(ids[row][: position + 1])) for position in range(length - fed, length)]
            for row in range(len(ids))
        ]
        missing = list(dict.fromkeys(key for row_keys in keys for key in row_keys if key not in memo["plans"]))
        if missing:
            self._fill_plans(missing, memo, encoder_states, attention_mask)
        return torch.stack([torch.stack([memo["plans"][key] for key in row_keys]) for row_keys in keys])

    def _fill_plans(self, keys, memo, encoder_states, attention_mask) -> None:
        cls_id, sep_id = self.config.sentence_start_token_id, self.config.sentence_end_token_id
        new = list(dict.fromkeys(s for _, sentences in keys for s in sentences if s not in memo["sentences"]))
        if new:
            width = max(len(sentence) for sentence in new) + 2
            batch = torch.full((1, len(new), width), self.config.pad_token_id, device=encoder_states.device)
            for index, sentence in enumerate(new):
                batch[0, index, : len(sentence) + 2] = torch.tensor([cls_id, *sentence, sep_id])
            for sentence, vector in zip(new, self.sentence_vectors(batch)[0]):
                memo["sentences"][sentence] = vector
        count = max(len(sentences) for _, sentences in keys) + 1
        vectors = torch.zeros(len(keys), count, self.config.hidden_size, device=encoder_states.device)
        vectors = vectors.to(self.dtype)
        mask = torch.zeros(len(keys), count, dtype=torch.bool, device=encoder_states.device)
        for index, (_, sentences) in enumerate(keys):
            for position, sentence in enumerate(sentences):
                vectors[index, position] = memo["sentences"][sentence]
            mask[index, : len(sentences) + 1] = True
        rows = torch.tensor([row for row, _ in keys], device=encoder_states.device)
        document_mask = attention_mask[rows] if attention_mask is not None else None
        predicted = self.predicted_vectors(vectors, mask, encoder_states[rows], document_mask)
        for index, (row, sentences) in enumerate(keys):
            memo["plans"][(row, sentences)] = predicted[index, len(sentences)]


__all__ = ["SentencePlannerForConditionalGeneration"]
