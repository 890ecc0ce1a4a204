"""Prompts and summaries of WikiSum over a pretrained Llama-family decoder (`modeling_wikisum_llama`).

Stage 1 is the package's WikiSum extraction (`text.ranking`): the article's sentences ranked (`config.ranker`) and
the best that fit in `config.max_input_tokens` base-model tokens kept, in article order or rank order
(`config.input_order`). Stage 2's input is the paper's layout, input then separator then summary: the instruction
and the kept text as the user turn of the base model's chat template, whose assistant header is the separator (a
tokenizer without a chat template gets the plain text and a "Summary:" line)."""

import torch
from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

from ..generation.word_ngram_blocking import NoRepeatWordNGramLogitsProcessor, text_word_starts
from ..text.ranking import fit_to_budget, rank_paragraphs
from ..text.sentences import split_sentences
from .processing_utils import SummarizationProcessor


def ranked_text(tokenizer, config, article: str) -> str:
    """The article's best sentences within `config.max_input_tokens` tokens (the last one cut to fit), joined by
    spaces."""
    sentences = split_sentences(article)
    ranked = rank_paragraphs(sentences, ranker=config.ranker)
    kept = fit_to_budget(ranked, config.max_input_tokens, lambda text: tokenizer.encode(text, add_special_tokens=False))
    if config.input_order == "article":
        kept = sorted(kept, key=lambda item: item[0].paragraph.index)
    return " ".join(tokenizer.decode(tokens).strip() for _, tokens in kept)


def prompt_ids(tokenizer, config, article: str) -> list[int]:
    """Input and separator: the token ids a summary follows."""
    request = f"{config.instruction}\n\n{ranked_text(tokenizer, config, article)}"
    if tokenizer.chat_template:
        messages = [{"role": "user", "content": request}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        return list(ids)
    return tokenizer.encode(f"{request}\n\nSummary:", add_special_tokens=False)


def summary_ids(tokenizer, summary: str) -> list[int]:
    """The training target after the separator: the summary, then the end of the assistant turn (the chat template's
    end token) or the end-of-sequence token."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>") if tokenizer.chat_template else None
    if not isinstance(end, int) or end == tokenizer.unk_token_id:
        end = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    return tokenizer.encode(" ".join(summary.split()), add_special_tokens=False) + [end]


def generated_text_processors(
    tokenizer, prompt_length: int, repetition_penalty: float, no_repeat_word_ngram_size: int, word_texts=None
) -> LogitsProcessorList:
    """The decoding rules over the generated tokens only (the prompt, the article's text, is left out of both):
    CTRL's repetition penalty (applied to the prompt too, it keeps the summary from writing the article's names) and
    the blocking of repeated word n-grams (PreSumm's trigram blocking, on words rather than BPE tokens: compared by
    their text, `word_texts = text_word_starts(tokenizer)`, so that a word written in other pieces, or after a
    no-break space, which SmolLM2 writes to get round id-based blocking, is still the same word)."""
    processors = LogitsProcessorList()
    if repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(repetition_penalty, prompt_ignore_length=prompt_length))
    if no_repeat_word_ngram_size:
        starts, texts = text_word_starts(tokenizer) if word_texts is None else word_texts
        processors.append(NoRepeatWordNGramLogitsProcessor(
            no_repeat_word_ngram_size, starts, token_texts=texts, prompt_ignore_length=prompt_length
        ))
    return processors


class WikiSumLlamaProcessor(SummarizationProcessor):
    """An article -> the prompt's token ids (`prompt_ids`, a batch of one); generated ids -> the summary, one sentence
    a line."""

    def check_input(self, document) -> None:
        if not isinstance(document, str):
            raise TypeError(f"WikiSum over Llama summarizes an article (a string), got {type(document).__name__}")

    def token_limit(self, max_length: int | None = None) -> int:
        # the ranker reads the whole article and keeps `max_input_tokens` of it: the pipeline cuts only what is far
        # past anything it could keep (twice this many words)
        return self.config.max_position_embeddings

    def __call__(self, document: str, max_length: int | None = None) -> dict:
        self.check_input(document)
        ids = torch.tensor([prompt_ids(self.tokenizer, self.config, document)])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def decode(self, summary_ids) -> str:
        text = self.tokenizer.decode(summary_ids, skip_special_tokens=True).strip()
        return "\n".join(split_sentences(text))


__all__ = ["WikiSumLlamaProcessor", "generated_text_processors", "prompt_ids", "ranked_text", "summary_ids"]
