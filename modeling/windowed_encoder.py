"""BERT-windowing (Aksenov et al. 2020): a frozen pretrained encoder read over documents of any length in overlapping
windows, giving per-token features for a summarizer's own encoder or decoder.

Windows. A document's tokens (without special tokens) are cut into windows of ``window - 2`` tokens starting every
``stride`` tokens; the last window is moved back to end at the last token, so that the tail is read with a full
window (it then overlaps its predecessors more, up to three windows over one token). Each window reaches the encoder
the way BERT saw its pre-training inputs, ``[CLS] tokens [SEP]`` at positions ``0 .. window - 1`` (``window=512``
fills BERT's positions), and the states of ``[CLS]`` and ``[SEP]`` are dropped. A document of at most ``window - 2``
tokens is thus one window: exactly the plain single pass over ``[CLS] document [SEP]``.

Features. The concatenation of the encoder's last four hidden layers (``4 * hidden`` per token), averaged over the
windows covering each token: divided by the token's count of windows (1 at the ends, 2 in the middle, 3 where the
last window overlaps two others; the reference code's fixed /2 is wrong at the ends and the tail). A trainable
linear layer maps them to ``d_model``.

Memory. The windows of a batch are encoded ``max_windows_per_pass`` at a time and added into per-token sums, so
memory is the features themselves (linear in length) plus one pass of bounded size. `frozen_features` runs
without gradients and with the encoder kept in eval mode, so its output depends on the tokens alone and can be
cached for training (`forward(features=...)`).
"""

import torch
from torch import nn
from transformers import AutoTokenizer

from ..configuration.summarizer_config import position_offset
from .pretrained_encoder import load_pretrained_encoder, resolve_encoder

# The hidden layers whose states are concatenated, from the top.
FEATURE_LAYERS = 4


def window_starts(length: int, span: int, stride: int) -> list[int]:
    """First tokens of the windows of `span` tokens over `length` tokens: every `stride` tokens, the last window
    moved back to end at the last token (none for an empty document)."""
    if length == 0:
        return []
    if length <= span:
        return [0]
    return [*range(0, length - span, stride), length - span]


class WindowedEncoder(nn.Module):
    """A frozen BERT-style encoder over overlapping windows (see the module docstring) and a trainable projection.

    Args:
        d_model: width of the output features.
        encoder: the pretrained encoder: a module, or a name or path for `load_pretrained_encoder` (default: the
            bundled all-MiniLM-L6-v2). Its parameters are frozen and it stays in eval mode.
        window: encoder positions per window, ``[CLS]`` and ``[SEP]`` included.
        stride: tokens between the starts of consecutive windows (at most ``window - 2``, so no token is skipped).
        cls_token_id, sep_token_id: the special tokens framing each window; default: those of the encoder's
            tokenizer when the encoder is given by name (required with a module).
        max_windows_per_pass: windows encoded at a time (bounds the memory of one pass).
    """

    def __init__(
        self,
        d_model: int,
        encoder: nn.Module | str | None = None,
        window: int = 512,
        stride: int = 256,
        cls_token_id: int | None = None,
        sep_token_id: int | None = None,
        max_windows_per_pass: int = 8,
    ):
        super().__init__()
        if encoder is None or isinstance(encoder, str):
            path = resolve_encoder(encoder)
            tokenizer = AutoTokenizer.from_pretrained(path)
            cls_token_id = tokenizer.cls_token_id if cls_token_id is None else cls_token_id
            sep_token_id = tokenizer.sep_token_id if sep_token_id is None else sep_token_id
            encoder = load_pretrained_encoder(path, add_pooling_layer=False)
        if cls_token_id is None or sep_token_id is None:
            raise ValueError("with an encoder module, pass `cls_token_id` and `sep_token_id` (they frame each window)")
        config = encoder.config
        if config.num_hidden_layers < FEATURE_LAYERS:
            raise ValueError(
                f"the features concatenate {FEATURE_LAYERS} hidden layers; the encoder has {config.num_hidden_layers}"
            )
        positions = config.max_position_embeddings - position_offset(config)
        if not 3 <= window <= positions:
            raise ValueError(f"`window` must be within 3..{positions} (the encoder's positions), got {window}")
        if not 1 <= stride <= window - 2:
            raise ValueError(f"`stride` must be within 1..{window - 2} (window - 2: no token skipped), got {stride}")
        if max_windows_per_pass < 1:
            raise ValueError(f"`max_windows_per_pass` must be positive, got {max_windows_per_pass}")
        self.encoder = encoder.requires_grad_(False).eval()
        self.window, self.stride, self.max_windows_per_pass = window, stride, max_windows_per_pass
        self.cls_token_id, self.sep_token_id = cls_token_id, sep_token_id
        self.pad_token_id = config.pad_token_id if config.pad_token_id is not None else 0
        self.feature_size = FEATURE_LAYERS * config.hidden_size
        self.projection = nn.Linear(self.feature_size, d_model)

    def train(self, mode: bool = True) -> "WindowedEncoder":
        super().train(mode)
        self.encoder.eval()  # frozen: no dropout, so that the features can be cached
        return self

    @staticmethod
    def _lengths(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        batch, length = input_ids.shape
        if attention_mask is None:
            return torch.full((batch,), length, device=input_ids.device)
        if attention_mask.shape != input_ids.shape:
            raise ValueError(
                f"`attention_mask` must have shape {list(input_ids.shape)}, got {list(attention_mask.shape)}"
            )
        valid = attention_mask != 0
        lengths = valid.sum(-1)
        if not torch.equal(valid, torch.arange(length, device=valid.device) < lengths[:, None]):
            raise ValueError("`attention_mask` must be right-padded (each document's tokens first)")
        return lengths

    @torch.no_grad()
    def frozen_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """[batch, length, 4 * hidden] float32 window-averaged features of documents given as token ids without
        special tokens ([batch, length], right-padded; padding positions get zeros)."""
        batch, length = input_ids.shape
        span = self.window - 2
        windows = [
            (row, start, min(span, size - start))
            for row, size in enumerate(self._lengths(input_ids, attention_mask).tolist())
            for start in window_starts(size, span, self.stride)
        ]
        sums = torch.zeros(batch * length, self.feature_size, device=input_ids.device)
        counts = torch.zeros(batch * length, device=input_ids.device)
        for first in range(0, len(windows), self.max_windows_per_pass):
            chunk = windows[first : first + self.max_windows_per_pass]
            width = max(size for _, _, size in chunk) + 2
            ids = input_ids.new_full((len(chunk), width), self.pad_token_id)
            mask = torch.zeros_like(ids)
            for n, (row, start, size) in enumerate(chunk):
                ids[n, 0], ids[n, size + 1] = self.cls_token_id, self.sep_token_id
                ids[n, 1 : size + 1] = input_ids[row, start : start + size]
                mask[n, : size + 2] = 1
            states = self.encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            features = torch.cat(states[-FEATURE_LAYERS:], dim=-1).float()
            # token k of a window sits at row k + 1, after [CLS]
            targets = torch.cat(
                [row * length + start + torch.arange(size, device=sums.device) for row, start, size in chunk]
            )
            rows = torch.cat([features[n, 1 : size + 1] for n, (_, _, size) in enumerate(chunk)])
            sums.index_add_(0, targets, rows)
            counts.index_add_(0, targets, torch.ones_like(targets, dtype=counts.dtype))
        return (sums / counts.clamp(min=1)[:, None]).view(batch, length, self.feature_size)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """[batch, length, d_model]: the projection of `frozen_features(input_ids, attention_mask)`, or of
        precomputed (cached) `features`; give one of the two."""
        if (input_ids is None) == (features is None):
            raise ValueError("give either `input_ids` or precomputed `features`")
        if features is None:
            features = self.frozen_features(input_ids, attention_mask)
        return self.projection(features.to(self.projection.weight.dtype))


__all__ = ["FEATURE_LAYERS", "WindowedEncoder", "window_starts"]
