"""HiBERT's sentence encoder for export with its padding left out: the same function as
`HiBertPreTrainedModel.sentence_vectors`, with less work.

The sentence encoder reads every sentence in a block of `max_sentence_tokens + 2` tokens; on CNN/DM about a third of
those are padding (64% real tokens over the first 50 development articles). A padding token's state is never read:
the attention mask hides it from every real token and the pooling weighs it 0. So the exported graph runs the
embeddings, projections, layer norms and feed-forward layers on the real tokens only (one row per token, `[tokens,
hidden]`), and scatters them into the blocks only for the attention scores, where the mask needs the block layout.
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
        # each layer's query, key and value projections as one product (one pass over the tokens)
        self.projections = nn.ModuleList()
        for layer in self.encoder.encoder.layer:
            parts = [layer.attention.self.query, layer.attention.self.key, layer.attention.self.value]
            projection = nn.Linear(parts[0].in_features, 3 * parts[0].out_features)
            projection.weight.data = torch.cat([part.weight.data for part in parts])
            projection.bias.data = torch.cat([part.bias.data for part in parts])
            self.projections.append(projection)

    def forward(self, input_ids, attention_mask, token_type_ids, cls_positions, sentence_mask):
        config = self.encoder.config
        block_size = self.model.config.max_sentence_tokens + 2
        block_ids, block_mask = sentence_blocks(input_ids, attention_mask, cls_positions, sentence_mask, block_size,
                                                config.pad_token_id or 0)
        # the blocks of every sentence slot (a padding slot's block is all padding): indexing the real sentences
        # first would give the token count a bound the exporter cannot write
        ids, mask = block_ids.flatten(0, 1), block_mask.flatten(0, 1)  # [slots, block]
        tokens = mask.flatten().nonzero().squeeze(1)  # the real tokens' places in the flattened blocks
        # the packed row each block place reads for the attention: its own token, or on padding the block's first
        # token (a real score, so the softmax's largest term is a real one; its value is zeroed, see `_attention`)
        rank = mask.flatten().cumsum(0).view(mask.shape) - 1
        source = torch.where(mask, rank, rank[:, :1]).clamp(min=0).flatten()
        embeddings = self.encoder.embeddings
        # token type 0 everywhere, as the model gives the encoder no token types
        states = embeddings.LayerNorm(
            embeddings.word_embeddings(ids.flatten()[tokens])
            + embeddings.token_type_embeddings.weight[0]
            + embeddings.position_embeddings(tokens % block_size)
        )
        for layer, projection in zip(self.encoder.encoder.layer, self.projections):
            context = self._attention(projection(states), mask, tokens, source, config.num_attention_heads)
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
    def _attention(queries_keys_values, mask, tokens, source, heads):
        """Self-attention of the packed tokens within their blocks, with no mask: [tokens, 3 * hidden] -> [tokens,
        hidden]. ONNX Runtime's attention kernel is about twice as fast without a mask (3.4 ms against 1.8 ms a layer
        for 24 blocks of 38). A padding place holds its block's first key and a zero value, and each head's values
        gain a column that is 1 on real tokens: that column's output is the attention mass on real keys, and dividing
        by it gives the masked softmax's result (the padding terms cancel; their scores are real scores, so the
        quotient stays near 1/(1 + padding) at worst, with no underflow)."""
        slots, width = mask.shape
        hidden = queries_keys_values.shape[-1] // 3
        head_size = hidden // heads
        blocks = queries_keys_values.index_select(0, source).view(slots, width, 3, heads, head_size)
        query, key, value = blocks.unbind(2)  # [slots, block, heads, head size]
        real = mask[..., None, None].to(value.dtype)
        value = torch.cat([value * real, real.expand(-1, -1, heads, 1)], dim=-1)
        output = nn.functional.scaled_dot_product_attention(
            query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), scale=head_size**-0.5
        )  # [slots, heads, block, head size + 1]
        output = output.transpose(1, 2).reshape(slots * width, heads, head_size + 1).index_select(0, tokens)
        return (output[..., :head_size] / output[..., head_size:]).flatten(1)


__all__ = ["PackedSentenceVectors", "packs_sentence_encoder"]
