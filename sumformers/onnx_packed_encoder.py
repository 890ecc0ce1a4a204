"""HiBERT's sentence encoder for export with its padding left out: the same function as
`HiBertPreTrainedModel.sentence_vectors`, with less work.

The sentence encoder reads every sentence in a block of `max_sentence_tokens + 2` tokens; on CNN/DM about a third of
those are padding (64% real tokens over the first 50 development articles). A padding token's state is never read:
the attention mask hides it from every real token and the pooling weighs it 0. So the exported graph runs the
embeddings, projections, layer norms and feed-forward layers on the real tokens only (one row per token, `[tokens,
hidden]`), and gathers them into the blocks only for the attention (see `_attention`: no mask there).
The result is the PyTorch model's up to float rounding (the export checks it against PyTorch, within 1e-4).

It covers a BERT sentence encoder with absolute positions (the shipped HiBERT checkpoints' MiniLM);
`packs_sentence_encoder` says whether a model has one.
"""

import torch
from torch import nn

from .modeling.modeling_stepwise_hibert import sentence_blocks


def packs_sentence_encoder(model) -> bool:
    """Whether `PackedSentenceVectors` computes this model's sentence vectors (a BERT with absolute positions)."""
    config = getattr(getattr(model, "sentence_encoder", None), "config", None)
    return (config is not None and config.model_type == "bert"
            and getattr(config, "position_embedding_type", "absolute") == "absolute")


class PackedSentenceVectors(nn.Module):
    """BERTSum-layout inputs -> sentence vectors [batch, sentences, hidden], as `HiBertSentenceVectors`, running the
    sentence encoder's token-wise layers on the real tokens only."""

    def __init__(self, model):
        super().__init__()
        if not packs_sentence_encoder(model):
            raise ValueError("the packed sentence encoder covers a BERT sentence encoder with absolute positions")
        self.model = model
        self.encoder = model.sentence_encoder
        heads = self.encoder.config.num_attention_heads
        # per layer, the value projection with a column more per head whose weights are 0 and bias 1 (the indicator
        # `_attention` divides by)
        self.values = nn.ModuleList()
        for layer in self.encoder.encoder.layer:
            attention = layer.attention.self
            hidden = attention.value.in_features
            value = nn.Linear(hidden, hidden + heads)
            weight = attention.value.weight.data.view(heads, -1, hidden)
            value.weight.data = torch.cat([weight, weight.new_zeros(heads, 1, hidden)], 1).flatten(0, 1)
            bias = attention.value.bias.data.view(heads, -1)
            value.bias.data = torch.cat([bias, bias.new_ones(heads, 1)], 1).flatten()
            self.values.append(value)

    def forward(self, input_ids, attention_mask, token_type_ids, cls_positions, sentence_mask):
        config = self.encoder.config
        block_size = self.model.config.max_sentence_tokens + 2
        block_ids, block_mask = sentence_blocks(input_ids, attention_mask, cls_positions, sentence_mask, block_size,
                                                config.pad_token_id or 0)
        # the blocks of every sentence slot (a padding slot's block is all padding): indexing the real sentences
        # first would give the token count a bound the exporter cannot write
        ids, mask = block_ids.flatten(0, 1), block_mask.flatten(0, 1)  # [slots, block]
        tokens = mask.flatten().nonzero().squeeze(1)  # the real tokens' places in the flattened blocks
        # the packed row each block place reads for the attention's queries and keys: its own token, or on padding
        # the block's first token (a real score, so the softmax's largest term is a real one); for its values: its
        # own, or on padding a row of zeros appended after the tokens (indicator 0 too)
        rank = mask.flatten().cumsum(0).view(mask.shape) - 1
        query_key_rows = torch.where(mask, rank, rank[:, :1]).clamp(min=0).flatten()
        value_rows = torch.where(mask.flatten(), query_key_rows, tokens.shape[0])
        embeddings = self.encoder.embeddings
        # token type 0 everywhere, as the model gives the encoder no token types
        states = embeddings.LayerNorm(
            embeddings.word_embeddings(ids.flatten()[tokens])
            + embeddings.token_type_embeddings.weight[0]
            + embeddings.position_embeddings(tokens % block_size)
        )
        for layer, value in zip(self.encoder.encoder.layer, self.values):
            attention = layer.attention.self
            context = self._attention(
                attention.query(states).index_select(0, query_key_rows),
                attention.key(states).index_select(0, query_key_rows),
                torch.cat([value(states), states.new_zeros(1, value.out_features)]).index_select(0, value_rows),
                mask.shape, tokens, config.num_attention_heads,
            )
            attended = layer.attention.output.LayerNorm(layer.attention.output.dense(context) + states)
            inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(attended))
            states = layer.output.LayerNorm(layer.output.dense(inner) + attended)
        blocks = states.new_zeros(ids.numel(), states.shape[-1]).index_copy(0, tokens, states)
        blocks = blocks.view(*ids.shape, -1)
        if self.model.config.sentence_pooling == "first":
            pooled = blocks[:, 0]
        else:  # as `sentence_vectors`: the mean over each sentence's tokens (0 for a padding slot)
            weights = mask.unsqueeze(-1).to(blocks.dtype)
            pooled = (blocks * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return pooled.view(*sentence_mask.shape, -1)

    @staticmethod
    def _attention(queries, keys, values, block_shape, tokens, heads):
        """Self-attention of the packed tokens within their blocks, with no mask: queries and keys [places, hidden]
        and values [places, heads * (head size + 1)] in the block layout -> [tokens, hidden]. ONNX Runtime's
        attention kernel is about twice as fast without a mask (1.8 ms against 3.4 ms a layer for 24 blocks of 38).
        A padding place holds its block's first key and a zero value, and each head's values have a last column
        that is 1 on real tokens: that column's output is the attention mass on the real keys, and dividing by it
        gives the masked softmax's result (the padding terms cancel; their scores are real scores, so the mass is at
        least 1/(1 + padding places): no underflow)."""
        slots, width = block_shape
        head_size = queries.shape[-1] // heads

        def split_heads(tensor):  # [places, heads * size] -> [slots, heads, block, size]
            return tensor.view(slots, width, heads, -1).transpose(1, 2)

        output = nn.functional.scaled_dot_product_attention(
            split_heads(queries), split_heads(keys), split_heads(values), scale=head_size**-0.5
        )
        # [slots, heads, block, head size + 1] -> the real tokens' rows
        output = output.transpose(1, 2).reshape(slots * width, heads, head_size + 1).index_select(0, tokens)
        return (output[..., :head_size] / output[..., head_size:]).flatten(1)


__all__ = ["PackedSentenceVectors", "packs_sentence_encoder"]
