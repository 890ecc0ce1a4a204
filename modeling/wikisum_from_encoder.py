"""A WikiSum decoder that starts from a pretrained BERT-style encoder (`WikiSumForCausalLM.from_encoder`): the
config settings under which it can take the encoder's weights, the check that a config has them, and the two starts
(`decoder_init="encoder"`: the whole decoder copied from the encoder; `"random"`: only the word table, reduced)."""

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from ..configuration.configuration_wikisum import WikiSumConfig
from .wikisum_positions import learned_positions, timing_signal


def encoder_decoder_settings(encoder: PreTrainedModel, encoder_path: str) -> dict:
    """The WikiSumConfig settings under which a decoder can take over a BERT-style encoder's weights: its vocabulary
    and special tokens (from its tokenizer), its layer sizes, activation, post-norm layout and attention biases, and
    a timing signal the size of its centred learned position vectors."""
    from transformers import AutoTokenizer

    from .pretrained_encoder import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder(encoder_path))
    special = {
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
        "separator_token_id": tokenizer.mask_token_id,
        "paragraph_separator_token_id": tokenizer.sep_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    missing = [name for name, value in special.items() if value is None]
    if missing:
        raise ValueError(f"the encoder's tokenizer needs [CLS], [SEP], [MASK] and [PAD] tokens; it lacks {missing}")
    settings = encoder.config
    positions = learned_positions(encoder).detach().float()
    signal = timing_signal(torch.arange(positions.shape[0]), settings.hidden_size)
    scale = (positions - positions.mean(dim=0)).pow(2).mean().sqrt() / signal.pow(2).mean().sqrt()
    return {
        **special,
        "decoder_init": "encoder",
        "embedding_size": settings.hidden_size,
        "hidden_size": settings.hidden_size,
        "num_attention_heads": settings.num_attention_heads,
        "intermediate_size": settings.intermediate_size,
        "expert_intermediate_size": settings.intermediate_size,
        "hidden_act": settings.hidden_act,
        "layer_norm_eps": settings.layer_norm_eps,
        "hidden_dropout": settings.hidden_dropout_prob,
        "layer_norm_position": "post",
        "attention_bias": True,
        "scale_embedding": False,
        "timing_signal_scale": round(scale.item(), 6),
    }


def encoder_mismatches(encoder: PreTrainedModel, config: WikiSumConfig) -> list[str]:
    """What keeps `config`'s decoder from taking over `encoder`'s weights (empty: nothing)."""
    settings = encoder.config
    expected = {
        "hidden_size": settings.hidden_size,
        "embedding_size": settings.hidden_size,
        "num_attention_heads": settings.num_attention_heads,
        "intermediate_size": settings.intermediate_size,
        "hidden_act": settings.hidden_act,
        "layer_norm_position": "post",
        "attention_bias": True,
    }
    if config.moe_layers:
        expected["expert_intermediate_size"] = settings.intermediate_size
    problems = [
        f"{name}={getattr(config, name)!r} (the encoder's: {value!r})"
        for name, value in expected.items()
        if getattr(config, name) != value
    ]
    learned = learned_positions(encoder).shape[0]
    if config.position_embeddings == "learned" and config.max_position_embeddings > learned:
        problems.append(f"max_position_embeddings={config.max_position_embeddings} (the encoder learned {learned})")
    layer_map = config.encoder_layer_map
    if layer_map is None or any(not 0 <= index < settings.num_hidden_layers for index in layer_map):
        layers = settings.num_hidden_layers
        problems.append(f"encoder_layer_map={layer_map!r} must name one of the {layers} layers each")
    return problems



@torch.no_grad()
def copy_encoder_weights(model, encoder: PreTrainedModel) -> None:
    """Copy a BERT-style encoder (transformers' `BertModel` layout) into `model`, a `WikiSumForCausalLM`
    (`decoder_init="encoder"`).

    - Word embeddings (tied with the output as always; the projections to and from `embedding_size` start as the
      identity) plus the position-independent part of BERT's input: segment 0's vector and the mean of the learned
      position vectors. A vector added to every row of the tied table shifts all logits of a position by the same
      amount, so the output distribution is unchanged while the input is BERT's.
    - Positions: the learned table covers 512 positions and WikiSum reads thousands, so by default the varying part
      of the positions is carried by the timing signal, scaled (`timing_signal_scale`, set by `from_encoder`) to the
      size of the centred learned vectors; the copied layers thus see position vectors of the size they were trained
      with, though not the same ones. With `position_embeddings="learned"` the decoder's table is the centred
      learned vectors themselves (at most 512 positions), so its input is BERT's exactly. The embedding LayerNorm is
      the encoder's.
    - Decoder layer i from encoder layer `config.encoder_layer_map[i]`: query, key, value and output projections,
      both LayerNorms (post-norm, as BERT was trained) and the feed-forward block; every expert of a
      mixture-of-experts layer starts as that feed-forward block (sparse upcycling: identical experts give the dense
      layer's output whatever the router picks).
    - Memory-compressed layers: `WikiSumAttention.start_compression_as_averages`."""
    config = model.config
    problems = encoder_mismatches(encoder, config)
    if problems:
        raise ValueError(f"decoder_init='encoder' needs the encoder's layer settings: {'; '.join(problems)}")
    embeddings, encoder_layers = encoder.embeddings, encoder.encoder.layer
    positions = learned_positions(encoder)
    offset = positions.mean(dim=0)
    if getattr(embeddings, "token_type_embeddings", None) is not None:
        offset = offset + embeddings.token_type_embeddings.weight[0]
    decoder = model.model
    decoder.embed_tokens.weight.copy_(embeddings.word_embeddings.weight + offset)
    if decoder.embed_positions is not None:
        decoder.embed_positions.weight.copy_(positions[: config.max_position_embeddings] - positions.mean(dim=0))
    identity = torch.eye(config.hidden_size)
    decoder.embed_projection.weight.copy_(identity)
    model.output_projection.weight.copy_(identity)
    decoder.embed_norm.load_state_dict(embeddings.LayerNorm.state_dict())
    for layer, source_index in zip(decoder.layers, config.encoder_layer_map):
        source = encoder_layers[source_index]
        attention = layer.attention
        for target, origin in (
            (attention.q_proj, source.attention.self.query),
            (attention.k_proj, source.attention.self.key),
            (attention.v_proj, source.attention.self.value),
            (attention.o_proj, source.attention.output.dense),
        ):
            target.load_state_dict(origin.state_dict())
        layer.attention_norm.load_state_dict(source.attention.output.LayerNorm.state_dict())
        layer.feed_forward_norm.load_state_dict(source.output.LayerNorm.state_dict())
        experts = getattr(layer.feed_forward, "experts", [layer.feed_forward])
        for expert in experts:
            expert.up.load_state_dict(source.intermediate.dense.state_dict())
            expert.down.load_state_dict(source.output.dense.state_dict())
        if attention.layer_type == "compressed":
            attention.start_compression_as_averages()


def reduced_word_table(encoder: PreTrainedModel, config: WikiSumConfig) -> torch.Tensor:
    """The from-scratch decoder's start (`decoder_init="random"`): the encoder's word embeddings, centred, reduced to
    `config.embedding_size` columns by PCA (or zero-padded to them) and rescaled to the initializer's std."""
    table = encoder.get_input_embeddings().weight.detach().float()
    centered = table - table.mean(dim=0)
    if config.embedding_size < centered.shape[1]:
        _, _, components = torch.linalg.svd(centered, full_matrices=False)
        reduced = centered @ components[: config.embedding_size].T
    else:
        reduced = F.pad(centered, (0, config.embedding_size - centered.shape[1]))
    return reduced * (config.initializer_range / reduced.std())


__all__ = ["copy_encoder_weights", "encoder_decoder_settings", "encoder_mismatches", "reduced_word_table"]
