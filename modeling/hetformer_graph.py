"""HetFormer's heterogeneous graph (Liu et al. 2021): one sparse attention pattern per projection set (token windows,
sentence/document nodes, entity links), with the "blocked" implementation each pattern brings (masks built once per
forward and shared by every layer). Read by `modeling_hetformer.py`; run through `attention.py`'s back ends."""

from functools import partial

import torch
import torch.nn.functional as F

from ..configuration.configuration_hetformer import DOCUMENT, SENTENCE, TOKEN
from .attention_patterns import (
    MIN_QUERY_BLOCK,
    AttentionPattern,
    SparseLayout,
    as_index_tensor,
    as_keep_mask,
    device_scalar,
    flex_bucket,
    gather_positions,
    pad_last,
    scatter_positions,
    symmetric_band,
    true_positions,
)

# `HeterogeneousGraph.token_document` of a node or padding (no document id a caller gives is this small).
NOT_A_TOKEN = torch.iinfo(torch.long).min


class HeterogeneousGraph:
    """HetFormer's heterogeneous graph over one node sequence: tokens, sentence nodes, document nodes.

    Sentence nodes are ``[CLS]``-style positions (one per sentence) and document nodes one position per document,
    all in the same sequence as the tokens; ``node_types`` tells them apart (`TOKEN`, `SENTENCE`, `DOCUMENT`).
    The graph gives one pattern per HetFormer projection set; the model runs one attention per pattern with its own
    Q/K/V and sums the outputs (a row with no edge in a pattern contributes zeros):

    - `token_window(window)`: token-to-token sliding window (two-sided ``window``, even; grows with depth).
    - `nodes()`: sentence nodes to and from every token (s2t, t2s); document nodes to and from the tokens of their
      own document (d2t, t2d); every node to and from every other node, across documents (s2s, s2d, d2s, d2d), as
      the paper's node attention is unrestricted (the authors' code gives all of them global attention).
    - `entities()`: full attention among mentions of the same entity cluster (``entity_ids``, -1 = no entity),
      across documents.

    With ``keep_documents_apart`` (multi-document input), token windows and the sentence-token edges (s2t, t2s)
    stay inside a document (``document_ids``); sentence nodes still see each other across documents (s2s), which
    is where cross-document redundancy is compared.

    Args:
        node_types: [batch, length] of `TOKEN` / `SENTENCE` / `DOCUMENT`.
        attention_mask: [batch, length], 1/True for real positions.
        entity_ids: optional [batch, length] cluster id per position, -1 for none.
        document_ids: optional [batch, length] document index per position (needed for document nodes and for
            keeping documents apart); defaults to one document.
        keep_documents_apart: see above.
    """

    TOKEN, SENTENCE, DOCUMENT = TOKEN, SENTENCE, DOCUMENT

    def __init__(
        self,
        node_types: torch.Tensor,
        attention_mask: torch.Tensor,
        entity_ids: torch.Tensor | None = None,
        document_ids: torch.Tensor | None = None,
        keep_documents_apart: bool = False,
    ):
        types = as_index_tensor(node_types, "node_types")
        shape = tuple(types.shape)
        if not bool(((types >= self.TOKEN) & (types <= self.DOCUMENT)).all()):
            raise ValueError("`node_types` must hold TOKEN (0), SENTENCE (1) or DOCUMENT (2).")
        self.batch_size, self.length = shape
        self.device = types.device
        self.keep_documents_apart = keep_documents_apart
        padded = flex_bucket(self.length)
        self.valid = pad_last(as_keep_mask(attention_mask, "attention_mask", shape), padded, False)
        self.node_types = pad_last(types, padded, self.TOKEN)
        if entity_ids is None:
            entity_ids = torch.full_like(types, -1)
        self.entity_ids = pad_last(as_index_tensor(entity_ids, "entity_ids", shape), padded, -1)
        if document_ids is None:
            document_ids = torch.zeros_like(types)
        self.document_ids = pad_last(as_index_tensor(document_ids, "document_ids", shape), padded, -1)
        # the token window's one look-up per position: a real token's document, NOT_A_TOKEN for nodes and padding
        real_token = self.valid & (self.node_types == self.TOKEN)
        self.token_document = torch.where(real_token, self.document_ids, NOT_A_TOKEN)
        # what the masks are made of, for the BlockMask cache (`AttentionPattern.mask_key`)
        self.inputs = (node_types, attention_mask, entity_ids, document_ids, keep_documents_apart)

    def token_window(self, window: int) -> "TokenWindowPattern":
        return TokenWindowPattern(self, window)

    def nodes(self) -> "NodePattern":
        return NodePattern(self)

    def entities(self) -> "EntityPattern":
        return EntityPattern(self)


class _HeterogeneousPattern(AttentionPattern):
    """Shared plumbing of the three HetFormer patterns: they read the graph's per-position tensors."""

    def __init__(self, graph: HeterogeneousGraph):
        super().__init__()
        self.graph = graph
        self.batch_size = graph.batch_size
        self.query_length = self.key_length = graph.length
        self.device = graph.device
        self._remember_mask_inputs(*graph.inputs)

    def _is(self, b, idx, node_type):
        return self.graph.node_types[b, idx] == node_type

    def _same_document(self, b, q_idx, kv_idx):
        return self.graph.document_ids[b, q_idx] == self.graph.document_ids[b, kv_idx]

    def _both_valid(self, b, q_idx, kv_idx):
        return self.graph.valid[b, q_idx] & self.graph.valid[b, kv_idx]

    def _subset_mask(self, name, q_positions, kv_positions):
        """Mask of `q_positions` ([B, R], -1 unused; None = all) against `kv_positions` (None = all), evaluated
        once per pattern (the model builds its patterns once per forward and every layer reuses them).

        Returns ``(attn_mask, has_key)``: the [B, 1, R, K] bool mask where rows without any allowed key are opened
        to every key (so that SDPA's softmax stays finite), or None where everything is allowed, and the [B, 1, R, 1]
        rows that have a key, or None where all do.
        """
        if name not in self._cache:
            length = self.query_length
            b = torch.arange(self.batch_size, device=self.device).view(-1, 1, 1, 1)
            every = torch.arange(length, device=self.device).expand(self.batch_size, -1)
            q_idx = every if q_positions is None else q_positions.clamp(min=0)
            kv_idx = every if kv_positions is None else kv_positions.clamp(min=0)
            mask = self.mask_mod(b, 0, q_idx[:, None, :, None], kv_idx[:, None, None, :])
            if kv_positions is not None:
                mask = mask & (kv_positions >= 0)[:, None, None, :]
            mask = mask.expand(self.batch_size, 1, q_idx.shape[-1], kv_idx.shape[-1])
            has_key = mask.any(dim=-1, keepdim=True)
            all_rows = bool(has_key.all())
            allowed = None if all_rows and bool(mask.all()) else mask | ~has_key
            self._cache[name] = (allowed, None if all_rows else has_key)
        return self._cache[name]


def _sdpa_rows(query, key, value, attn_mask, has_key, scaling, dropout_p):
    """SDPA with an optional bool mask whose rows without a key (`has_key` False) give zeros."""
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, scale=scaling)
    return output if has_key is None else output.masked_fill(~has_key, 0.0)


class TokenWindowPattern(_HeterogeneousPattern):
    """HetFormer token-to-token sliding window (see `HeterogeneousGraph`); node rows and keys are excluded.

    Its "blocked" backend cuts the queries into blocks of ``c`` positions (a quarter of the one-sided window, at
    least 64); block ``i`` reads the ``c + window`` keys from ``i * c - window // 2`` on, as overlapping strided
    views of the padded keys (no copy). The masks are built once per pattern from position arithmetic: blocks that
    see the plain band (no padding, border, node or sequence end in reach) share one ``[c, c + window]`` mask, and
    only the few others keep their own.
    """

    def __init__(self, graph: HeterogeneousGraph, window: int):
        if not isinstance(window, int) or window <= 0 or window % 2:
            raise ValueError(f"`window` must be a positive even integer (two-sided size), got {window!r}.")
        super().__init__(graph)
        self.window = window
        self.half_window = device_scalar(window // 2, self.device)
        self._remember_mask_inputs(window, *graph.inputs)

    def mask_mod(self, b, h, q_idx, kv_idx):  # two look-ups per pair (`token_document`), the band by arithmetic
        q_code, kv_code = self.graph.token_document[b, q_idx], self.graph.token_document[b, kv_idx]
        band = (q_idx - kv_idx).abs() <= self.half_window
        if self.graph.keep_documents_apart:
            return (q_code != NOT_A_TOKEN) & (q_code == kv_code) & band
        return (q_code != NOT_A_TOKEN) & (kv_code != NOT_A_TOKEN) & band

    def _blocks(self) -> dict:
        """The block layout and masks, built once per pattern.

        Blocks whose mask is the plain band for every batch row (no padding, document border, node or sequence end
        in reach: nearly all of them) share one [1, 1, block, span] mask; only the others keep their own.
        """
        if "blocks" not in self._cache:
            radius = self.window // 2
            # a quarter of the one-sided window: a block computes (block + window) keys per query where its band
            # needs window + 1 (1.25x), and blocks of 128+ rows keep SDPA's matmuls efficient
            block = max(MIN_QUERY_BLOCK, radius // 4)
            length = self.query_length
            num_blocks = -(-length // block)
            span = block + 2 * radius
            graph = self.graph
            token = graph.valid[:, :length] & (graph.node_types[:, :length] == HeterogeneousGraph.TOKEN)
            tail = num_blocks * block - length
            query_ok = F.pad(token, (0, tail), value=False).view(self.batch_size, num_blocks, block, 1)
            key_ok = F.pad(token, (radius, tail + radius), value=False).unfold(1, span, block)[:, :, None, :]
            # key j of block i is position i * block - radius + j: in the band of row r when 0 <= j - r <= 2 radius
            offset = torch.arange(span, device=self.device) - torch.arange(block, device=self.device)[:, None]
            band = (offset >= 0) & (offset <= 2 * radius)
            mask = band & query_ok & key_ok  # [B, blocks, block, span]
            if graph.keep_documents_apart:
                documents = graph.document_ids[:, :length]
                query_document = F.pad(documents, (0, tail), value=-1).view(self.batch_size, num_blocks, block, 1)
                key_document = F.pad(documents, (radius, tail + radius), value=-1).unfold(1, span, block)
                mask = mask & (query_document == key_document[:, :, None, :])
            plain = (mask == band).flatten(2).all(-1).all(0)  # [blocks]
            others = (~plain).nonzero().flatten()
            plain = plain.nonzero().flatten()
            mask = mask[:, others]
            has_key = mask.any(dim=-1, keepdim=True)
            layout = dict(
                block=block, num_blocks=num_blocks, span=span, band=band.view(1, 1, block, span),
                plain=plain, others=others, others_before=0,
                # block order after concatenating the plain blocks and the others
                order=torch.cat([plain, others]).argsort(),
                allowed=(mask | ~has_key).view(-1, 1, block, span),
                has_key=None if bool(has_key.all()) else has_key.view(-1, 1, block, 1),
            )
            if len(plain) and int(plain[-1] - plain[0]) + 1 == len(plain):
                # one run of plain blocks (the usual case: only the ends differ): read it as a view, no copy
                layout["plain"] = slice(int(plain[0]), int(plain[-1]) + 1)
                layout["others_before"] = int((others < plain[0]).sum())
            self._cache["blocks"] = layout
        return self._cache["blocks"]

    def blocked_attention(self, query, key, value, scaling, dropout_p):
        batch, heads, length, head_dim = query.shape
        radius = self.window // 2
        layout = self._blocks()
        block, num_blocks, span = layout["block"], layout["num_blocks"], layout["span"]
        tail = num_blocks * block - length
        padded_query = F.pad(query, (0, 0, 0, tail))
        padded_key, padded_value = (F.pad(x, (0, 0, radius, tail + radius)) for x in (key, value))
        # block i's queries are rows i * block on of padded_query, its keys i * block on of padded_key (overlapping)
        def attend(blocks, attn_mask, has_key):  # the selected blocks, batched in SDPA
            if isinstance(blocks, slice):  # a run of blocks: strided views of each batch row (SDPA reads strides)
                # taken row first and sliced before unfolding, so that the backward pass builds 1x-sized gradients
                first, stop = blocks.start * block, blocks.stop * block

                def run_of(x, row, rows):  # [B, H, N, D] -> [blocks, H, rows, D] view of one batch row
                    return x[row, :, first : stop - block + rows].unfold(1, rows, block).permute(1, 0, 3, 2)

                return torch.stack([
                    _sdpa_rows(
                        run_of(padded_query, row, block), run_of(padded_key, row, span),
                        run_of(padded_value, row, span), attn_mask, has_key, scaling, dropout_p,
                    )
                    for row in range(batch)
                ])

            def take(x, rows):  # scattered blocks (sequence ends, padding, borders): their rows copied out
                positions = (blocks[:, None] * block + torch.arange(rows, device=x.device)).flatten()
                taken = x.index_select(2, positions).view(batch, heads, len(blocks), rows, x.shape[-1])
                return taken.transpose(1, 2).flatten(0, 1)

            output = _sdpa_rows(
                take(padded_query, block), take(padded_key, span), take(padded_value, span), attn_mask, has_key,
                scaling, dropout_p,
            )
            return output.view(batch, -1, heads, block, output.shape[-1])

        plain, others = layout["plain"], layout["others"]
        plain_output = attend(plain, layout["band"], None) if isinstance(plain, slice) or len(plain) else None
        other_output = attend(others, layout["allowed"], layout["has_key"]) if len(others) else None
        if other_output is None or plain_output is None:
            output = plain_output if other_output is None else other_output
        elif isinstance(plain, slice):  # the other blocks lie before and after the run of plain ones
            before = layout["others_before"]
            output = torch.cat([other_output[:, :before], plain_output, other_output[:, before:]], dim=1)
        else:
            output = torch.cat([plain_output, other_output], dim=1).index_select(1, layout["order"])
        return output.transpose(1, 2).reshape(batch, heads, num_blocks * block, -1)[:, :, :length]

    def _layout(self):
        band = partial(symmetric_band, radius=self.window // 2)
        if self.graph.keep_documents_apart:  # document borders can cut any tile: no tile is promised full
            return SparseLayout(band=band, band_block=self.window // 2)
        real_token = self.graph.token_document != NOT_A_TOKEN
        return SparseLayout(
            band=band, band_block=self.window // 2, full_band=band, full_queries=real_token, full_keys=real_token
        )


class NodePattern(_HeterogeneousPattern):
    """HetFormer sentence and document node edges (see `HeterogeneousGraph`). Through flex, the node rows (which
    read every key) run outside the kernel, by one dense SDPA (`dense_rows_outside_flex`)."""

    dense_rows_outside_flex = True

    def mask_mod(self, b, h, q_idx, kv_idx):
        token, sentence, document = HeterogeneousGraph.TOKEN, HeterogeneousGraph.SENTENCE, HeterogeneousGraph.DOCUMENT
        q_token, q_sentence, q_document = (self._is(b, q_idx, t) for t in (token, sentence, document))
        kv_token, kv_sentence, kv_document = (self._is(b, kv_idx, t) for t in (token, sentence, document))
        same_document = self._same_document(b, q_idx, kv_idx)
        sentence_token = (q_sentence & kv_token) | (q_token & kv_sentence)
        if self.graph.keep_documents_apart:
            sentence_token = sentence_token & same_document
        document_token = ((q_document & kv_token) | (q_token & kv_document)) & same_document
        node_node = ~q_token & ~kv_token  # s2s, s2d, d2s, d2d
        return self._both_valid(b, q_idx, kv_idx) & (sentence_token | document_token | node_node)

    def flex_mask_mod(self, b, h, q_idx, kv_idx):  # the token rows: the node rows run outside flex
        return self.mask_mod(b, h, q_idx, kv_idx) & self._is(b, q_idx, HeterogeneousGraph.TOKEN)

    def _is_node(self):
        return (self.graph.node_types != HeterogeneousGraph.TOKEN) & self.graph.valid

    def _layout(self):
        node_positions = true_positions(self._is_node()[:, : self.query_length])
        return SparseLayout(extra_keys=node_positions, dense_rows=node_positions)

    def flex_layout(self):
        return SparseLayout()

    def block_flags(self):
        is_node = self._is_node()
        return {"extra_keys": is_node, "dense_rows": is_node}

    def _all_allowed(self) -> bool:
        """Whether every position sees every node and every node every position: sentence nodes only, no padding,
        documents not kept apart or only one (BERTSum-style single-document input); no mask is built then."""
        if "all_allowed" not in self._cache:
            graph, length = self.graph, self.query_length
            documents = graph.document_ids[:, :length]
            self._cache["all_allowed"] = (
                bool(graph.valid[:, :length].all())
                and not bool((graph.node_types[:, :length] == HeterogeneousGraph.DOCUMENT).any())
                and (not graph.keep_documents_apart or bool((documents == documents[:, :1]).all()))
            )
        return self._cache["all_allowed"]

    def blocked_attention(self, query, key, value, scaling, dropout_p):
        """Every query against the node keys, then the node rows against every key; both masks are built once per
        pattern and left out where everything is allowed (one document without padding)."""
        nodes = self.layout().extra_keys
        if not nodes.shape[1]:  # no node: no edge
            return query.new_zeros(query.shape[:3] + (value.shape[-1],))
        if self._all_allowed():
            self._cache.setdefault("to_nodes", (None, None))
            self._cache.setdefault("node_rows", (None, None))
        to_nodes = _sdpa_rows(
            query, gather_positions(key, nodes), gather_positions(value, nodes),
            *self._subset_mask("to_nodes", None, nodes), scaling, dropout_p,
        )
        node_rows = _sdpa_rows(
            gather_positions(query, nodes), key, value, *self._subset_mask("node_rows", nodes, None), scaling,
            dropout_p,
        )
        return scatter_positions(to_nodes, nodes, node_rows)


class EntityPattern(_HeterogeneousPattern):
    """HetFormer entity-to-entity edges: mentions of the same cluster, across documents (see `HeterogeneousGraph`)."""

    def mask_mod(self, b, h, q_idx, kv_idx):
        q_entity = self.graph.entity_ids[b, q_idx]
        return self._both_valid(b, q_idx, kv_idx) & (q_entity >= 0) & (q_entity == self.graph.entity_ids[b, kv_idx])

    def _is_mention(self):
        return (self.graph.entity_ids >= 0) & self.graph.valid

    def _layout(self):
        mentions = true_positions(self._is_mention()[:, : self.query_length])
        return SparseLayout(dense_rows=mentions, dense_row_keys=mentions)

    def flex_layout(self):
        return SparseLayout()

    def block_flags(self):
        is_mention = self._is_mention()
        return {"dense_rows": is_mention, "dense_row_keys": is_mention}

    def blocked_attention(self, query, key, value, scaling, dropout_p):
        """The mentions against the mentions (mask built once per pattern); every other row gives zeros."""
        mentions = self.layout().dense_rows
        if not mentions.shape[1]:
            return query.new_zeros(query.shape[:3] + (value.shape[-1],))
        rows = _sdpa_rows(
            gather_positions(query, mentions), gather_positions(key, mentions), gather_positions(value, mentions),
            *self._subset_mask("mentions", mentions, mentions), scaling, dropout_p,
        )
        if mentions.shape[1] == query.shape[2] and bool((mentions >= 0).all()):
            return rows  # every position is a mention (positions ascend): the rows are the output
        return scatter_positions(query.new_zeros(query.shape[:3] + (value.shape[-1],)), mentions, rows)
