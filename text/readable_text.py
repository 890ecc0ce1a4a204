"""What a summarizer reads of the text a user gives it: the main text of an HTML page, without the lines that hold no
word (only whitespace and punctuation) or markup, cut to the words a model can read.

HTML is extracted with trafilatura, which keeps a page's main text and drops its navigation, boilerplate, scripts and
styles (BeautifulSoup or selectolax only strip tags: a summary would then pick menu items and cookie notices). Copied
flat into exported repos with the pipelines: it imports only the standard library at module level, and trafilatura
when a page comes in.
"""

import functools
import itertools
import re

__all__ = ["check_prose", "cut_to_words", "has_word", "html_main_text", "looks_like_html", "readable_text"]

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
# A page whose main text is shorter than this has nothing to summarize (what is left is a teaser or a menu).
MIN_MAIN_TEXT_WORDS = 10
# Prose is mostly words: whitespace-separated tokens at least half letters, of at most _LONGEST_WORD characters (a
# longer ASCII run is a blob, a hash or a URL; scripts written without spaces have words of any length). Text of at
# least _LEAST_JUDGED_CHARACTERS is refused when less than half of its characters are in such words.
_LONGEST_WORD = 40
_LEAST_JUDGED_CHARACTERS = 100


def looks_like_html(text: str) -> bool:
    """Whether `text` holds HTML markup: a doctype, a comment or a tag of an HTML element."""
    return _HTML_MARKUP.search(text) is not None


def has_word(text: str) -> bool:
    """Whether `text` has a letter or a digit (in any script): text of only whitespace, punctuation and symbols has
    nothing to summarize."""
    return _WORD_CHARACTER.search(text) is not None


@functools.lru_cache(maxsize=16)  # a pipeline checks a batch's pages before it reads them
def html_main_text(page: str) -> str:
    """The main text of an HTML page (trafilatura favouring precision: one paragraph, heading or list item a line;
    navigation, comments and boilerplate left out; its default falls back to every line of a short page, menus
    included). A fragment (no `<html>` or `<body>`) is all content: without main text, all its visible text, "" when
    it has none. Entities are decoded, so escaped markup (`&lt;p&gt;`) comes back as text.

    Raises a one-line ValueError for a page whose main text is under `MIN_MAIN_TEXT_WORDS` words."""
    try:
        import trafilatura
    except ImportError:
        raise ImportError("reading HTML needs trafilatura: pip install trafilatura") from None
    if _PAGE_ROOT.search(page) is None:
        text = trafilatura.extract(f"<html><body>{page}</body></html>", include_comments=False)
        return text if text is not None else trafilatura.html2txt(page)
    text = trafilatura.extract(page, include_comments=False, favor_precision=True) or ""
    words = len(text.split())
    if words < MIN_MAIN_TEXT_WORDS:
        raise ValueError(
            f"the HTML page's main text is {words} word{'s' * (words != 1)} (menus and boilerplate left out): too "
            "short to summarize"
        )
    return text


def readable_text(text: str) -> str:
    """`text` as a summarizer should read it: HTML (`looks_like_html`) replaced by its main text, and every line
    without a word (`has_word`) or with markup left (text the page escaped to show markup) made blank. Text whose
    lines all have words and no markup comes back unchanged."""
    if looks_like_html(text):
        text = html_main_text(text)
    return "\n".join(
        line if has_word(line) and not looks_like_html(line) else "" for line in text.split("\n")
    )


def _is_word(token: str) -> bool:
    letters = sum(character.isalpha() for character in token)
    if 2 * letters < len(token):
        return False
    return len(token) <= _LONGEST_WORD or any(character.isalpha() and not character.isascii() for character in token)


def check_prose(text: str) -> None:
    """A one-line ValueError when `text` is not prose (a base64 blob, a hex dump, a table of numbers): at least
    `_LEAST_JUDGED_CHARACTERS` non-space characters, less than half of them in words (see `_is_word`)."""
    tokens = text.split()
    characters = sum(map(len, tokens))
    if characters < _LEAST_JUDGED_CHARACTERS:
        return
    in_words = sum(len(token) for token in tokens if _is_word(token))
    if 2 * in_words < characters:
        raise ValueError(
            f"not prose: {in_words / characters:.0%} of its {characters:,} characters (spaces aside) are in words "
            "(the rest: runs without spaces, or digits and symbols), nothing to summarize"
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
