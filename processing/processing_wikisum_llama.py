"""Prompts and summaries of WikiSum over a pretrained Llama-family decoder (`modeling_wikisum_llama`).

Stage 1 is the package's WikiSum extraction (`text.ranking`): the article's sentences ranked (`config.ranker`) and
the best that fit in `config.max_input_tokens` base-model tokens kept, in article order or rank order
(`config.input_order`). Stage 2's input is the paper's layout, input then separator then summary: the instruction
and the kept text as the user turn of the base model's chat template, whose assistant header is the separator (a
tokenizer without a chat template gets the plain text and a "Summary:" line)."""

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from ..text.ranking import fit_to_budget, rank_paragraphs
from ..text.sentences import split_sentences


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


class GeneratedRepetitionPenalty(LogitsProcessor):
    """CTRL's repetition penalty (a seen token's positive logit divided by `penalty`, a negative one multiplied)
    over the generated tokens only: applied to the prompt too, it keeps the summary from writing the article's
    names."""

    def __init__(self, penalty: float, prompt_length: int):
        self.penalty, self.prompt_length = penalty, prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids[:, self.prompt_length :]
        if generated.shape[1] == 0:
            return scores
        seen = torch.gather(scores, 1, generated)
        seen = torch.where(seen < 0, seen * self.penalty, seen / self.penalty)
        return scores.scatter(1, generated, seen)


class WikiSumLlamaSummarizer:
    """Articles in, `{"summary": text}` out, one prompt at a time (greedy, KV cache); the options are `generate()`
    settings, `repetition_penalty` applied to the generated tokens only (`GeneratedRepetitionPenalty`)."""

    def __init__(self, model, tokenizer, config=None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.config = config or model.config

    @torch.no_grad()
    def __call__(self, articles, max_new_tokens: int = 120, repetition_penalty: float = 1.1, **options):
        single = isinstance(articles, str)
        summaries = []
        for article in [articles] if single else articles:
            ids = torch.tensor([prompt_ids(self.tokenizer, self.config, article)], device=self.model.device)
            processors = LogitsProcessorList([GeneratedRepetitionPenalty(repetition_penalty, ids.shape[1])])
            generated = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
                logits_processor=processors, pad_token_id=self.tokenizer.pad_token_id, **options,
            )
            text = self.tokenizer.decode(generated[0, ids.shape[1] :], skip_special_tokens=True).strip()
            summaries.append({"summary": "\n".join(split_sentences(text))})
        return summaries[0] if single else summaries


__all__ = ["GeneratedRepetitionPenalty", "WikiSumLlamaSummarizer", "prompt_ids", "ranked_text", "summary_ids"]
