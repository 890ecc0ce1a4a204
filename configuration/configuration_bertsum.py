"""Configuration of the BERTSum-style extractive summarizer (Liu & Lapata 2019, "Text Summarization with
Pretrained Encoders"), over any BERT/RoBERTa encoder."""

from transformers import PretrainedConfig

from .summarizer_config import DEFAULT_SUMMARY_SENTENCES, PretrainedEncoderConfigMixin


class BertSumConfig(PretrainedEncoderConfigMixin, PretrainedConfig):
    r"""
    Args:
        encoder_config (`PretrainedConfig` or `dict`, *optional*):
            The configuration of the underlying BERT/RoBERTa encoder (a sub-config); defaults to a BERT config.
            Its `type_vocab_size` must be at least 2 for interval segment embeddings.
        encoder_name_or_path (`str`, *optional*):
            Where the encoder weights came from (a Hub id or path), recorded for model cards.
        inter_sentence_layers (`int`, *optional*, defaults to 2):
            Transformer layers over the sentence vectors before the scorer (PreSumm's `ext_layers`).
        inter_sentence_heads (`int`, *optional*, defaults to 8):
            Attention heads of those layers.
        inter_sentence_ff_size (`int`, *optional*, defaults to 1536):
            Feed-forward size of those layers.
        dropout (`float`, *optional*, defaults to 0.1):
            Dropout in the inter-sentence layers.
        max_sentence_tokens (`int`, *optional*, defaults to 200):
            Tokens kept per sentence (PreSumm's `max_src_ntokens_per_sent`).
        min_sentence_tokens (`int`, *optional*, defaults to 5):
            A sentence cut by the length limit is kept only if at least this many of its tokens fit.
        num_sentences (`int`, *optional*, defaults to 3):
            Default summary length of the pipeline.
        trigram_blocking (`bool`, *optional*, defaults to `True`):
            Default of the pipeline: skip a sentence that shares a trigram with one already chosen.
    """

    model_type = "bertsum"

    inter_sentence_layers: int = 2
    inter_sentence_heads: int = 8
    inter_sentence_ff_size: int = 1536
    dropout: float = 0.1
    max_sentence_tokens: int = 200
    min_sentence_tokens: int = 5
    num_sentences: int = DEFAULT_SUMMARY_SENTENCES["extractive"]
    trigram_blocking: bool = True
