"""Meeting transcripts as summary units (#62): speaker turns, filler, and the pipeline never choosing filler."""

import warnings

import pytest
import torch

from sumformers.text.sentences import is_filler, is_transcript, meeting_units, speaker_turn

TRANSCRIPT = "\n".join([
    "Project Manager: OK , we 're on . So today we decide the case of the remote control .",
    "Marketing: Yeah .",
    "Industrial Designer: Mm - hmm .",
    "Marketing: Our survey says young users want a curved case in bright colours . Right .",
    "User Interface:",
    "Industrial Designer: Two . The rubber case costs twelve euros , which is over the budget .",
    "Project Manager: Oh , I see . OK .",
])


@pytest.mark.parametrize("unit", [
    "OK ,", "Yeah .", "Yeah . Yeah .", "Mm-hmm .", "Mm - hmm .", "Grad A: Mm - hmm .", "Oh , I see .",
    "Thank you .", "Uh - huh .", "'kay .", "Professor C: Yeah , right , OK .", "", "Marketing:",
])
def test_backchannels_and_empty_units_are_filler(unit):
    assert is_filler(unit)


@pytest.mark.parametrize("unit", [
    "OK , we 're on .", "Yeah , the red case costs twelve euros .", "Two .", "So the budget is fixed .",
    "Project Manager: So the budget is fixed .", "No , not the 2003 model .",
])
def test_a_unit_with_a_content_word_is_not_filler(unit):
    assert not is_filler(unit)


def test_speaker_turns_and_transcript_detection():
    assert speaker_turn("Grad A: OK , we 're on .") == ("Grad A", "OK , we 're on .")
    assert speaker_turn("The Chair (Hon. Anthony Rota (Nipissing, Lib.)): I call the meeting to order.") == (
        "The Chair (Hon. Anthony Rota (Nipissing, Lib.))", "I call the meeting to order.")
    assert speaker_turn("User Interface:") == ("User Interface", "")
    assert speaker_turn("See http://example.com for the agenda.") is None
    assert is_transcript(TRANSCRIPT)
    # prose with one "Note:" line, and a two-line exchange, are not transcripts
    assert not is_transcript("The board met on Monday.\nNote: the vote was close.\nIt passed 5 to 4.")
    assert not is_transcript("A: Hello there, how are you.\nB: Fine.")


def test_turns_become_units_without_filler_with_short_sentences_joined_and_the_tag_on_each_turns_first_unit():
    assert meeting_units(TRANSCRIPT, min_words=4) == [
        # "OK , we 're on ." (4 words) stands alone; a turn's long sentences are units of their own
        "Project Manager: OK , we 're on .",
        "So today we decide the case of the remote control .",
        # "Right ." is filler and dropped; the filler-only turns give no unit
        "Marketing: Our survey says young users want a curved case in bright colours .",
        # "Two ." (1 word) is joined to the sentence after it in the same turn
        "Industrial Designer: Two . The rubber case costs twelve euros , which is over the budget .",
    ]
    # a turn of short sentences only stays one unit; the last short sentence joins the unit before it
    assert meeting_units("A: Red case .\nB: We pick the red case today . Agreed , red .\nC: OK .", min_words=4) == [
        "A: Red case .", "B: We pick the red case today . Agreed , red ."]
    assert meeting_units("A: Red case .\nB: Blue case .\nC: Green .", min_words=1, speaker_tags=False) == [
        "Red case .", "Blue case .", "Green ."]


@pytest.fixture(scope="module")
def hetformer():
    from sumformers.hub import load_pipeline

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_pipeline("hetformer-minilm-qmsum")


def test_the_shipped_hetformer_reads_a_transcript_as_meeting_units_and_never_returns_filler(hetformer):
    result = hetformer(TRANSCRIPT, num_sentences=3, return_sentences=True)
    assert result["document_sentences"] == meeting_units(TRANSCRIPT)
    assert len(result["sentences"]) == 3
    assert not any(is_filler(line) for line in result["summary"].split("\n"))


def test_filler_is_never_chosen_while_the_document_has_another_sentence(hetformer):
    sentences = ("Grad A: OK ,", "Yeah .", "We moved the demo to Friday .", "Mm - hmm .")
    outputs = {"sentences": sentences, "document_count": 1,
               "probabilities": torch.tensor([[0.9, 0.8, 0.1, 0.7]])}  # the filler scored highest
    assert hetformer.postprocess(dict(outputs), num_sentences=2)["sentences"] == [2]
    # without skip_filler, or when every sentence is filler, the scores decide
    assert hetformer.postprocess(dict(outputs), num_sentences=2, skip_filler=False)["sentences"] == [0, 1]
    only_filler = dict(outputs, sentences=("OK ,", "Yeah .", "Right .", "Mm - hmm ."))
    assert hetformer.postprocess(only_filler, num_sentences=1)["sentences"] == [0]


def test_the_training_script_labels_meeting_units_as_inference_reads_them(minilm_tokenizer):
    """train_hetformer.py's two mapped steps (`prepare`, then `build_features`) read a transcript as the pipeline
    does: markup stripped, meeting units without filler, and the greedy oracle chooses among those units."""
    from conftest import tiny_bert_config, training_script
    from sumformers import HetFormerConfig
    from sumformers.processing.processing_hetformer import HetFormerProcessor
    from sumformers.text.scoring import greedy_oracle

    script = training_script("train_hetformer")
    config = HetFormerConfig(encoder_config=tiny_bert_config().to_dict(), encoder_name_or_path="tiny",
                             attention_windows=[8, 8], use_entities=False, strip_markup=True)
    processor = HetFormerProcessor(minilm_tokenizer, config)
    marked = TRANSCRIPT.replace("we decide", "we {disfmarker} decide")
    prepared = script.prepare({"document": marked}, processor, "document", multiple_documents=False)
    units = [  # the filler turns and "Right ." are gone
        "Project Manager: OK , we 're on .", "So today we decide the case of the remote control .",
        "Marketing: Our survey says young users want a curved case in bright colours .", "Industrial Designer: Two .",
        "The rubber case costs twelve euros , which is over the budget .",
    ]
    assert prepared["sentence_lists"] == [units] == [meeting_units(TRANSCRIPT)]
    summary = "The rubber case costs twelve euros, over the budget; users want a curved case."
    batch = {"sentence_lists": [prepared["sentence_lists"]], "mentions": [prepared["mentions"]], "summary": [summary]}
    features = script.build_features(batch, processor, 512, "summary", chunk_long_documents=True)
    oracle = greedy_oracle(units, summary, metric="r1+r2")
    assert features["oracle"] == [oracle] and oracle  # one chunk: the oracle over the units, as labelled
    assert features["labels"] == [[float(index in oracle) for index in range(len(units))]]
    # with meeting segmentation off (the shipped adapter's training), the same text was read as prose sentences
    config.meeting_segmentation = "off"
    prose = script.prepare({"document": marked}, processor, "document", multiple_documents=False)["sentence_lists"][0]
    assert "Marketing: Yeah ." in prose and len(prose) > len(units)

