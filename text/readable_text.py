"""What a summarizer reads of the text a user gives it: the main text of an HTML page, without the lines that hold no
word (only whitespace and punctuation) or markup, cut to the words a model can read.

HTML is extracted with trafilatura, which keeps a page's main text and drops its navigation, boilerplate, scripts and
styles (BeautifulSoup or selectolax only strip tags: a summary would then pick menu items and cookie notices). Copied
flat into exported repos with the pipelines: it imports only the standard library at module level, and trafilatura
when a page comes in.
"""

import itertools
import re

__all__ = ["cut_to_words", "has_word", "html_main_text", "looks_like_html", "readable_text"]

# Elements that mark a text as HTML: a document's skeleton and the tags found in pages and fragments of them. A "<b>"
# in prose is taken for markup too; a "<" alone or "a < b > c" is not.
_HTML_ELEMENTS = (
    "html head body title meta link base script style noscript template iframe object embed svg canvas math "
    "div span p a br hr img picture source video audio track map area ul ol li dl dt dd table thead tbody tfoot tr "
    "td th caption colgroup col h1 h2 h3 h4 h5 h6 b i u s em strong small big sub sup code kbd samp var pre "
    "blockquote q cite abbr dfn mark del ins time address section article nav header footer aside main figure "
    "figcaption details summary dialog form fieldset legend label input button select option optgroup textarea "
    "output progress meter center font frame frameset wbr"
).split()
_HTML_MARKUP = re.compile(
    r"<!doctype\s+html|<!--|</?(?:" + "|".join(_HTML_ELEMENTS) + r")(?:\s[^<>]*)?/?>", re.IGNORECASE
)
_PAGE_ROOT = re.compile(r"<(?:html|body)\b", re.IGNORECASE)
# A letter or digit of any script (\w without the underscore).
_WORD_CHARACTER = re.compile(r"[^\W_]")
_WORD = re.compile(r"\S+")


def looks_like_html(text: str) -> bool:
    """Whether `text` holds HTML markup: a doctype, a comment or a tag of an HTML element."""
    return _HTML_MARKUP.search(text) is not None


def has_word(text: str) -> bool:
    """Whether `text` has a letter or a digit (in any script): text of only whitespace, punctuation and symbols has
    nothing to summarize."""
    return _WORD_CHARACTER.search(text) is not None


def html_main_text(page: str) -> str:
    """The main text of an HTML page or fragment (trafilatura: one paragraph, heading or list item a line; comments
    sections left out), else all its visible text (trafilatura finds no main text in a short fragment); "" when it has
    none. Entities are decoded, so escaped markup (`&lt;p&gt;`) comes back as text."""
    try:
        import trafilatura
    except ImportError:
        raise ImportError("reading HTML needs trafilatura: pip install trafilatura") from None
    if _PAGE_ROOT.search(page) is None:  # a fragment: trafilatura reads a page's body
        page = f"<html><body>{page}</body></html>"
    text = trafilatura.extract(page, include_comments=False)
    return text if text is not None else trafilatura.html2txt(page)


def readable_text(text: str) -> str:
    """`text` as a summarizer should read it: HTML (`looks_like_html`) replaced by its main text, and every line
    without a word (`has_word`) or with markup left (text the page escaped to show markup) made blank. Text whose
    lines all have words and no markup comes back unchanged."""
    if looks_like_html(text):
        text = html_main_text(text)
    return "\n".join(
        line if has_word(line) and not looks_like_html(line) else "" for line in text.split("\n")
    )


def cut_to_words(texts: list[str], limit: int) -> tuple[list[str], int]:
    """`texts` (one document's sentences, or a document alone) cut after their first `limit` whitespace-separated
    words in all: the texts past the limit dropped, the one that crosses it cut after its last word that fits. Returns
    the kept texts and how many words `texts` had."""
    kept, used, total = [], 0, 0
    for text in texts:
        words = len(text.split())
        total += words
        if used + words <= limit:
            kept.append(text)
            used += words
        elif used < limit:
            last = next(itertools.islice(_WORD.finditer(text), limit - used - 1, None))
            kept.append(text[: last.end()])
            used = limit
    return kept, total
