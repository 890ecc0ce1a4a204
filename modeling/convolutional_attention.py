"""Convolutional self-attention (Yang et al. 2019, "Convolutional Self-Attention Networks"), as Aksenov et al. 2020
put it in the lowest encoder layers: each query attends only to a window of neighbouring positions, and in the 2D
variants also to the keys and values of neighbouring heads, with one softmax over the whole (head, position)
neighbourhood.

The neighbourhoods are a pattern of the shared attention module (`ConvolutionalPattern`), so every back end of
`attention.sparse_attention` runs them and is tested against its "eager" reference:

- ``"1d"``: query ``i`` of a head sees key ``j`` of the same head when ``|i - j| <= window // 2`` and both are real
  tokens. The heads stay the attention's head axis (the mask is the same in every head).
- ``"2d"`` and ``"circular_2d"``: the heads are folded into the sequence, position-major: slot ``i * heads + h``
  holds position ``i`` of head ``h``, so a ``[batch, length, heads * head_dim]`` projection is viewed as
  ``[batch, 1, length * heads, head_dim]`` without a copy. Query slot ``(h, i)`` sees key slot ``(g, j)`` when
  ``|i - j| <= window // 2`` and ``g`` is one of the ``head_window`` heads centred on ``h``: ``|g - h| <=
  head_window // 2`` with the heads past the edge absent ("2d"), or the same distance around the circle of heads
  ("circular_2d"; a head reached from both sides counts once). The attention's one softmax per query row then
  spans the whole (head, position) neighbourhood.

Windows count keys and are odd (the paper's 11 or 13 positions, 3 heads), so a window of M keys is centred on its
query; a window written ``[i - M/2, i + M/2]`` with an even M (M + 1 keys) is our ``window=M + 1``.

Memory: the "blocked" back end runs the pattern's band (query blocks against the slots within ``window // 2``
positions), linear in the length; "eager" materializes the mask over every pair of (head, position) slots and is
the reference (`ConvolutionalPattern.pair_mask` reads it per head and position). The softmax subtracts the row
maximum in every back end (torch's softmax in eager, SDPA's and FlexAttention's kernels in the others), so large
fp16 and bf16 scores do not overflow as normalizing ``exp(scores)`` directly does; rows without any key (padding)
give zeros.
"""

from functools import partial

import torch

from .attention import attention_forward
from .attention_patterns import AttentionPattern, SparseLayout, device_scalar, pad_last, symmetric_band
from .bert_blocks import BertStyleAttention

CONVOLUTION_MODES = ("1d", "2d", "circular_2d")


def _check_convolution(mode: str, window: int, head_window: int) -> None:
    if mode not in CONVOLUTION_MODES:
        raise ValueError(f"`mode` must be one of {CONVOLUTION_MODES}, got {mode!r}.")
    for name, value in (("window", window), ("head_window", head_window)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value % 2 == 0:
            raise ValueError(f"`{name}` must be a positive odd integer (centred on the query), got {value!r}.")


class ConvolutionalPattern(AttentionPattern):
    """The convolutional neighbourhoods (see the module docstring) over one padded batch.

    Args:
        attention_mask: [batch, length], 1/True for real tokens.
        mode: "1d", "2d" or "circular_2d".
        window: positions each query sees, centred on it (odd; 13 in the paper, 11 its other choice).
        num_heads: the attention's heads; the 2D modes fold them into the sequence.
        head_window: heads each query sees in the 2D modes, centred on its own (odd; 3 in the paper).
    """

    def __init__(
        self, attention_mask: torch.Tensor, mode: str = "1d", window: int = 13, num_heads: int = 1, head_window: int = 3
    ):
        super().__init__()
        _check_convolution(mode, window, head_window)
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"`num_heads` must be a positive integer, got {num_heads!r}.")
        if attention_mask.dim() != 2:
            raise ValueError(f"`attention_mask` must have shape [batch, length], got {list(attention_mask.shape)}.")
        self.mode = mode
        self.folded_heads = 1 if mode == "1d" else num_heads
        self.batch_size, self.length = attention_mask.shape
        self.query_length = self.key_length = self.length * self.folded_heads
        self.device = attention_mask.device
        slot_valid = (attention_mask != 0).repeat_interleave(self.folded_heads, dim=1)
        self.valid = pad_last(slot_valid, self.flex_query_length, False)
        # tensors rather than Python ints, so that FlexAttention compiles one kernel for every window size
        self.heads = device_scalar(self.folded_heads, self.device)
        self.radius = device_scalar(window // 2, self.device)
        self.head_radius = device_scalar(head_window // 2, self.device)
        # how far apart in the sequence two slots of one neighbourhood can lie: a circular neighbourhood can reach
        # from the first head to the last one
        head_reach = self.folded_heads - 1 if mode == "circular_2d" else min(head_window // 2, self.folded_heads - 1)
        self.slot_radius = (window // 2) * self.folded_heads + head_reach
        self._remember_mask_inputs(mode, window, num_heads, head_window, attention_mask)

    def mask_mod(self, b, h, q_idx, kv_idx):
        # `h` is the attention's head axis, the same mask in every one; the folded heads live in the slot indices
        near = (q_idx // self.heads - kv_idx // self.heads).abs() <= self.radius
        head_offset = kv_idx % self.heads - q_idx % self.heads
        if self.mode == "circular_2d":
            head_offset = head_offset.remainder(self.heads)
            head_distance = torch.minimum(head_offset, self.heads - head_offset)
        else:
            head_distance = head_offset.abs()
        return self.valid[b, q_idx] & self.valid[b, kv_idx] & near & (head_distance <= self.head_radius)

    def _layout(self):
        return SparseLayout(
            band=partial(symmetric_band, radius=self.slot_radius), band_block=max(1, self.slot_radius)
        )

    def split_heads(self, states: torch.Tensor, num_heads: int) -> torch.Tensor:
        """[batch, length, num_heads * head_dim] projections -> the attention's [batch, heads, slots, head_dim]:
        [batch, num_heads, length, head_dim] in 1D, [batch, 1, length * num_heads, head_dim] (a view) in 2D."""
        batch, length, hidden = states.shape
        if self.mode != "1d" and num_heads != self.folded_heads:
            raise ValueError(f"the pattern was built for {self.folded_heads} heads, got {num_heads}.")
        if self.folded_heads == 1:
            return states.view(batch, length, num_heads, hidden // num_heads).transpose(1, 2)
        return states.view(batch, 1, length * num_heads, hidden // num_heads)

    def merge_heads(self, output: torch.Tensor) -> torch.Tensor:
        """The attention function's [batch, slots, heads, head_dim] output -> [batch, length, hidden]."""
        return output.reshape(output.shape[0], self.length, -1)

    def attend(self, module, query, key, value, num_heads: int, scaling: float, dropout: float):
        """Convolutional self-attention of [batch, length, hidden] query/key/value projections on `module`'s back end
        (`attention.attention_forward`) -> [batch, length, hidden] (before any output projection). What
        `ConvolutionalSelfAttention` and the CopyTransformer's convolutional encoder layers both run."""
        attended, _ = attention_forward(
            module, *(self.split_heads(states, num_heads) for states in (query, key, value)), None,
            scaling=scaling, dropout=dropout, attention_pattern=self,
        )
        return self.merge_heads(attended)

    def pair_mask(self, num_heads: int) -> torch.Tensor:
        """[batch, heads, length, heads, length] bool: whether query (h, i) may attend key (g, j); the eager
        reference's mask read per head and position."""
        mask = self.dense_mask()[:, 0]
        if self.folded_heads == 1:  # the same window in every head, no head sees another
            same_head = torch.eye(num_heads, dtype=torch.bool, device=self.device)
            return same_head[None, :, None, :, None] & mask[:, None, :, None, :]
        batch, length, heads = self.batch_size, self.length, self.folded_heads
        return mask.view(batch, length, heads, length, heads).permute(0, 2, 1, 4, 3)


class ConvolutionalSelfAttention(BertStyleAttention):
    """BERT-style self-attention restricted to a convolutional neighbourhood, for an encoder's lowest layers.

    Parameters and residual output as `bert_blocks.BertStyleAttention` (`query`, `key`, `value`, `output.dense`,
    `output.LayerNorm`, post-LayerNorm), read from a BERT-style `config` (`hidden_size`, `num_attention_heads`,
    `attention_probs_dropout_prob`, `hidden_dropout_prob`, `layer_norm_eps`); the back end is
    ``config._attn_implementation`` as in the other sumformers layers ("blocked" is the one linear in the length).

    Args:
        mode: "1d", "2d" or "circular_2d" (see the module docstring).
        window: positions each query sees, centred on it (odd).
        head_window: heads each query sees in the 2D modes, centred on its own (odd).
    """

    def __init__(self, config, mode: str = "1d", window: int = 13, head_window: int = 3):
        super().__init__(config)
        _check_convolution(mode, window, head_window)
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(
                f"hidden size {config.hidden_size} is not a multiple of {config.num_attention_heads} heads"
            )
        self.config = config
        self.mode, self.window, self.head_window = mode, window, head_window
        self.scaling = (config.hidden_size // config.num_attention_heads) ** -0.5

    def pattern(self, attention_mask: torch.Tensor) -> ConvolutionalPattern:
        """This layer's pattern over a [batch, length] padding mask; layers of the same settings can share one."""
        return ConvolutionalPattern(attention_mask, self.mode, self.window, self.num_heads, self.head_window)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pattern: ConvolutionalPattern | None = None,
    ) -> torch.Tensor:
        """[batch, length, hidden] -> [batch, length, hidden]; `attention_mask` [batch, length] (1 = real token,
        default all real) or a `pattern` built once for several layers."""
        if pattern is None:
            if attention_mask is None:
                attention_mask = torch.ones(hidden_states.shape[:2], dtype=torch.bool, device=hidden_states.device)
            pattern = self.pattern(attention_mask)
        attended = pattern.attend(
            self, self.query(hidden_states), self.key(hidden_states), self.value(hidden_states), self.num_heads,
            self.scaling, self.attention_dropout if self.training else 0.0,
        )
        return self.output(attended, hidden_states)


__all__ = ["CONVOLUTION_MODES", "ConvolutionalPattern", "ConvolutionalSelfAttention"]
