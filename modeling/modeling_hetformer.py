"""HetFormer (Liu et al. 2021, "HETFORMER: Heterogeneous Transformer with Sparse Attention for Long-Text Extractive
Summarization") over any BERT/RoBERTa encoder; the default is the bundled all-MiniLM-L6-v2.

One sequence holds every node of the heterogeneous graph: tokens, a sentence node (the `[CLS]` of BERTSum's
``[CLS] sentence [SEP]`` layout) before each sentence, and for multi-document input a document node before each
document. Named-entity mentions are tokens that carry an entity-cluster id. Each layer runs one attention per
pattern, each with its own query/key/value projections and its own mask, and sums the outputs:

- tokens: a sliding window (growing with depth: 32 tokens on each side at the bottom to 512 at the top, stored
  two-sided as 64 to 1024) over every position, nodes included: a node is a `[CLS]` token and reads its own
  sentence there;
- nodes: sentence nodes to and from every token; document nodes to and from their document's tokens; every node
  to and from every other node, across documents (the patterns of `hetformer_graph.HeterogeneousGraph`);
- entities: full attention among the mentions of one entity cluster (computed on the gathered mentions only).

The pretrained encoder supplies the embeddings (positions extended by copying, the Longformer recipe), the token
projections and everything after attention; the node and entity projections start as copies of the token ones. A
linear scorer over the sentence nodes gives one logit per sentence (BCE against oracle labels).
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput

from ..configuration.configuration_hetformer import HetFormerConfig
from ..configuration.summarizer_config import position_offset
from .attention import attention_forward
from .attention_patterns import true_positions
from .hetformer_graph import EntityPattern, HeterogeneousGraph, NodePattern, TokenWindowPattern
from .pretrained_encoder import load_pretrained_encoder
from .sentence_scoring import ExtractiveSummarizerOutput, sentence_logits_and_loss
from .summarizer_mixin import SummarizerMixin

TOKEN, SENTENCE, DOCUMENT = HeterogeneousGraph.TOKEN, HeterogeneousGraph.SENTENCE, HeterogeneousGraph.DOCUMENT


@dataclass
class HetFormerStructure:
    """The attention patterns of one batch, built once per forward and shared by every layer.

    `entities` is the entity pattern over the gathered mention positions `mention_positions` ([batch, mentions],
    -1 for padding); `nodes` and `entities` are None when the batch has no such node.
    """

    token_windows: dict[int, TokenWindowPattern]
    nodes: NodePattern | None
    entities: EntityPattern | None
    mention_positions: torch.Tensor | None


# ----------------------------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------------------------


class HetFormerSelfAttention(nn.Module):
    """Three projection sets (tokens, nodes, entities), one attention each with its own pattern, outputs summed."""

    def __init__(self, config: HetFormerConfig, layer_index: int):
        super().__init__()
        encoder = config.encoder_config
        if encoder.hidden_size % encoder.num_attention_heads:
            raise ValueError(
                f"hidden size {encoder.hidden_size} is not a multiple of {encoder.num_attention_heads} heads"
            )
        self.config = config
        self.layer_index = layer_index
        self.num_heads = encoder.num_attention_heads
        self.head_size = encoder.hidden_size // encoder.num_attention_heads
        self.scaling = self.head_size**-0.5
        self.dropout = encoder.attention_probs_dropout_prob
        hidden = encoder.hidden_size
        # The token set keeps BERT's names, so the pretrained weights (and LoRA's usual targets) apply to it.
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.query_node, self.key_node, self.value_node = (nn.Linear(hidden, hidden) for _ in range(3))
        self.query_entity, self.key_entity, self.value_entity = (nn.Linear(hidden, hidden) for _ in range(3))

    def copy_token_projections(self) -> None:
        """Start the node and entity projections from the (pretrained) token ones."""
        for suffix in ("node", "entity"):
            for name in ("query", "key", "value"):
                source, target = getattr(self, name), getattr(self, f"{name}_{suffix}")
                init.copy_(target.weight, source.weight)
                init.copy_(target.bias, source.bias)

    def _attend(self, hidden_states, projections, pattern) -> torch.Tensor:
        batch, length, _ = hidden_states.shape
        shape = (batch, length, self.num_heads, self.head_size)
        query, key, value = (projection(hidden_states).view(shape).transpose(1, 2) for projection in projections)
        output, _ = attention_forward(
            self, query, key, value, None,
            scaling=self.scaling, dropout=self.dropout if self.training else 0.0, attention_pattern=pattern,
        )
        return output.reshape(batch, length, -1)

    def forward(self, hidden_states: torch.Tensor, structure: HetFormerStructure) -> torch.Tensor:
        window = self.config.attention_windows[self.layer_index]
        output = self._attend(hidden_states, (self.query, self.key, self.value), structure.token_windows[window])
        if structure.nodes is not None:
            output = output + self._attend(
                hidden_states, (self.query_node, self.key_node, self.value_node), structure.nodes
            )
        if structure.entities is not None:
            # Only mentions take part: attend on the gathered mention states and add the result back in place.
            index = structure.mention_positions.clamp(min=0)[..., None].expand(-1, -1, hidden_states.shape[-1])
            mentions = self._attend(
                hidden_states.gather(1, index), (self.query_entity, self.key_entity, self.value_entity),
                structure.entities,
            )
            output = output.scatter_add(1, index, mentions)  # padding slots hold zeros
        return output


class HetFormerAttention(nn.Module):
    def __init__(self, config: HetFormerConfig, layer_index: int, pretrained_output: nn.Module):
        super().__init__()
        self.self = HetFormerSelfAttention(config, layer_index)
        self.output = pretrained_output  # the encoder's dense + dropout + residual LayerNorm

    def forward(self, hidden_states, structure):
        return self.output(self.self(hidden_states, structure), hidden_states)


class HetFormerLayer(GradientCheckpointingLayer):
    """A BERT/RoBERTa layer whose self-attention is HetFormer's; the other sub-modules are the encoder's own."""

    def __init__(self, config: HetFormerConfig, layer_index: int, pretrained_layer: nn.Module):
        super().__init__()
        self.attention = HetFormerAttention(config, layer_index, pretrained_layer.attention.output)
        self.intermediate = pretrained_layer.intermediate
        self.output = pretrained_layer.output

    def forward(self, hidden_states: torch.Tensor, structure: HetFormerStructure) -> torch.Tensor:
        attended = self.attention(hidden_states, structure)
        return self.output(self.intermediate(attended), attended)


class HetFormerPreTrainedModel(SummarizerMixin, PreTrainedModel):
    config_class = HetFormerConfig
    base_model_prefix = "hetformer"
    # the layers FSDP wraps one by one (training_scripts/accelerate/fsdp.yaml); they hold the pretrained
    # encoder's weights
    _no_split_modules = ["HetFormerLayer"]
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flex_attn = True
    attention_backends = ("eager", "sdpa", "flex_attention", "blocked")
    # memory linear in length and a backward pass on CPU ("sdpa" would mean a dense mask here: quadratic memory)
    default_attention = "blocked"
    # `forward` takes **kwargs only to ignore them; the loss is already a mean.
    accepts_loss_kwargs = False

    @torch.no_grad()
    def _init_weights(self, module):
        std = getattr(self.config.encoder_config, "initializer_range", 0.02)
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, HetFormerSelfAttention):
            module.copy_token_projections()
        if isinstance(getattr(module, "position_ids", None), torch.Tensor):  # the encoder's embedding buffers
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)


class HetFormerModel(HetFormerPreTrainedModel):
    """The HetFormer encoder: node sequence in, contextual states out."""

    def __init__(self, config: HetFormerConfig):
        super().__init__(config)
        # Built only to take its embeddings and layer sub-modules (the self-attention is replaced).
        encoder = AutoModel.from_config(config.encoder_config, add_pooling_layer=False, attn_implementation="eager")
        self.embeddings = encoder.embeddings
        self.layer = nn.ModuleList(
            HetFormerLayer(config, index, layer) for index, layer in enumerate(encoder.encoder.layer)
        )
        self.post_init()

    def load_encoder_weights(self, encoder: PreTrainedModel) -> None:
        """Copy a BERT/RoBERTa encoder's weights in: position embeddings tiled up to this model's length (the
        Longformer recipe), one token type copied to two if needed, node and entity projections from the token ones."""
        offset = self.config.position_offset
        state = {}
        for name, tensor in encoder.state_dict().items():
            if name.startswith("encoder.layer."):
                state[name.removeprefix("encoder.")] = tensor
            elif name.startswith("embeddings."):
                state[name] = tensor
        positions = state["embeddings.position_embeddings.weight"]
        rows = self.embeddings.position_embeddings.num_embeddings
        repeats = -(-(rows - offset) // (positions.shape[0] - offset))
        state["embeddings.position_embeddings.weight"] = torch.cat(
            [positions[:offset], positions[offset:].repeat(repeats, 1)]
        )[:rows]
        types = state["embeddings.token_type_embeddings.weight"]
        wanted = self.embeddings.token_type_embeddings.num_embeddings
        if types.shape[0] < wanted:  # RoBERTa has one segment type: interval segments need two
            state["embeddings.token_type_embeddings.weight"] = types[:1].expand(wanted, -1).clone()
        missing, unexpected = self.load_state_dict(state, strict=False)
        new = ("_node.", "_entity.")
        not_loaded = [name for name in missing if not any(part in name for part in new)]
        if unexpected or not_loaded:
            raise ValueError(
                f"{type(encoder).__name__} is not a BERT/RoBERTa-style encoder: unexpected {unexpected[:3]}, "
                f"missing {not_loaded[:3]}"
            )
        with torch.no_grad():
            for layer in self.layer:
                layer.attention.self.copy_token_projections()

    def build_structure(self, attention_mask, node_types, document_ids=None, entity_ids=None) -> HetFormerStructure:
        """The patterns of a batch, honouring the config's switches (so components can be turned off at inference)."""
        config = self.config
        valid = attention_mask.bool()
        if not config.use_sentence_nodes:
            node_types = node_types.masked_fill(node_types == SENTENCE, TOKEN)
        if not config.use_document_nodes:
            node_types = node_types.masked_fill(node_types == DOCUMENT, TOKEN)
        graph = HeterogeneousGraph(
            node_types, valid, document_ids=document_ids, keep_documents_apart=config.keep_documents_apart
        )
        # Nodes are `[CLS]` tokens and take part in the token window too, so that each one reads its own sentence
        # through the pretrained local projections: in the node pattern alone every sentence node attends to the
        # same keys with nearly the same query, and all sentence states collapse to one.
        sequence = HeterogeneousGraph(
            torch.zeros_like(node_types), valid, document_ids=document_ids,
            keep_documents_apart=config.keep_documents_apart,
        )
        windows = {window: sequence.token_window(window) for window in set(config.attention_windows)}
        nodes = graph.nodes() if bool(((node_types != TOKEN) & valid).any()) else None
        entities = mention_positions = None
        if config.use_entities and entity_ids is not None and bool(((entity_ids >= 0) & valid).any()):
            mention_positions = true_positions((entity_ids >= 0) & valid)
            is_mention = mention_positions >= 0
            mention_ids = entity_ids.gather(1, mention_positions.clamp(min=0)).masked_fill(~is_mention, -1)
            mention_graph = HeterogeneousGraph(torch.zeros_like(mention_positions), is_mention, entity_ids=mention_ids)
            entities = mention_graph.entities()
        return HetFormerStructure(windows, nodes, entities, mention_positions)

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        node_types: torch.LongTensor | None = None,
        document_ids: torch.LongTensor | None = None,
        entity_ids: torch.LongTensor | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape [batch, length], got {list(input_ids.shape)}")
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise ValueError(
                f"input of {input_ids.shape[1]} tokens is longer than the model's {self.config.max_position_embeddings}"
                " positions: encode it with a smaller max_length"
            )
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if node_types is None:
            node_types = torch.zeros_like(input_ids)
        # Nodes are `[CLS]` tokens: what makes them nodes is their attention pattern and projections.
        hidden_states = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        structure = self.build_structure(attention_mask, node_types, document_ids, entity_ids)
        for layer in self.layer:
            hidden_states = layer(hidden_states, structure)
        return BaseModelOutput(last_hidden_state=hidden_states)


class HetFormerForExtractiveSummarization(HetFormerPreTrainedModel):
    # The node and entity projections start as copies of the token ones and are adapted by LoRA like them.
    pretrained_modules = ("hetformer",)
    new_modules = ("scorer",)
    lora_layers = "hetformer.layer"
    reads_multiple_documents = True

    def __init__(self, config: HetFormerConfig):
        super().__init__(config)
        self.hetformer = HetFormerModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.scorer = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @classmethod
    def from_encoder(
        cls,
        encoder_path: str,
        config: HetFormerConfig | None = None,
        max_position_embeddings: int = 16384,
        attn_implementation: str | None = None,
        **config_kwargs,
    ) -> "HetFormerForExtractiveSummarization":
        """A HetFormer whose encoder starts from a pretrained BERT/RoBERTa checkpoint.

        Position embeddings are tiled up to `max_position_embeddings` tokens; the node and entity projections start
        as copies of each layer's token projections; the scorer is new. With `config`, its settings (length
        included) are used as they are, to rebuild a saved model before loading its adapter; otherwise a config is
        made from the encoder's and `config_kwargs`.
        """
        encoder = load_pretrained_encoder(encoder_path, add_pooling_layer=False)
        if config is None:
            settings = encoder.config.to_dict()
            settings["max_position_embeddings"] = max_position_embeddings + position_offset(encoder.config)
            settings["type_vocab_size"] = max(2, encoder.config.type_vocab_size)
            config_kwargs.setdefault("encoder_name_or_path", encoder_path)
            config = HetFormerConfig(encoder_config=settings, **config_kwargs)
        # A saved config keeps the back end it was given (the adapter loader sets the one asked for).
        attn_implementation = attn_implementation or config._attn_implementation_internal
        model = cls._from_config(config, attn_implementation=attn_implementation)
        model.hetformer.load_encoder_weights(encoder)
        return model

    def forward(
        self,
        input_ids: torch.LongTensor,
        cls_positions: torch.LongTensor,
        sentence_mask: torch.BoolTensor,
        attention_mask: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        node_types: torch.LongTensor | None = None,
        document_ids: torch.LongTensor | None = None,
        entity_ids: torch.LongTensor | None = None,
        labels: torch.FloatTensor | None = None,
        **kwargs,
    ) -> ExtractiveSummarizerOutput:
        sentence_mask = sentence_mask.bool()
        if node_types is None:  # BERTSum-style inputs: the `[CLS]` of every sentence is its sentence node
            node_types = torch.zeros_like(input_ids)
            rows = torch.arange(input_ids.shape[0], device=input_ids.device)[:, None].expand_as(cls_positions)
            node_types[rows[sentence_mask], cls_positions[sentence_mask]] = SENTENCE
        token_states = self.hetformer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            node_types=node_types,
            document_ids=document_ids,
            entity_ids=entity_ids,
        ).last_hidden_state
        index = cls_positions.unsqueeze(-1).expand(-1, -1, token_states.size(-1))
        sentence_states = torch.gather(token_states, 1, index)
        logits = self.scorer(self.dropout(sentence_states)).squeeze(-1)
        logits, loss = sentence_logits_and_loss(logits, sentence_mask, labels)
        return ExtractiveSummarizerOutput(loss=loss, logits=logits, sentence_states=sentence_states)

__all__ = ["HetFormerForExtractiveSummarization", "HetFormerModel", "HetFormerPreTrainedModel"]
