"""The training scripts featurize through the model's processor: a training example holds exactly the inputs the
processor gives the model at inference (so the pipeline sees what training saw), plus labels for the sentences kept."""

import warnings

import pytest
import torch

from conftest import tiny_bert_config

ARTICLE = " ".join(
    f"Sentence number {index} tells the reader about the council meeting and the new bridge." for index in range(12)
)


def test_sentence_layout_features_are_the_inference_inputs_with_labels_for_kept_sentences(minilm_tokenizer):
    from sumformers.configuration.configuration_stepwise_hibert import StepwiseHiBertConfig
    from sumformers.processing.processing_stepwise_hibert import HiBertProcessor

    config = StepwiseHiBertConfig(encoder_config=tiny_bert_config().to_dict(), max_document_sentences=8)
    processor = HiBertProcessor(minilm_tokenizer, config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # training cuts silently: a corpus would warn once a document
        features = processor.training_features(ARTICLE, lambda sentences: [len(sentences) - 1, 0], max_length=96)
    with pytest.warns(UserWarning, match="truncated"):
        inputs = processor(ARTICLE, max_length=96)
    batch = processor.collate([features])
    for key in ("input_ids", "token_type_ids", "attention_mask", "cls_positions", "sentence_mask"):
        assert torch.equal(batch[key], inputs[key]), key
    kept = len(inputs["sentences"])
    assert 1 < kept < 8  # cut by the token limit, below the sentence limit
    assert features["oracle"] == [kept - 1, 0]  # the oracle saw only the kept sentences, its order is kept
    assert features["labels"] == [1.0] + [0.0] * (kept - 2) + [1.0]


def test_hetformer_examples_are_the_inference_inputs_and_strip_markup_by_the_config(minilm_tokenizer):
    from sumformers.configuration.configuration_hetformer import HetFormerConfig
    from sumformers.processing.processing_hetformer import HetFormerProcessor

    config = HetFormerConfig(
        encoder_config=tiny_bert_config().to_dict(), attention_windows=[8, 8], use_entities=False, strip_markup=True
    )
    processor = HetFormerProcessor(minilm_tokenizer, config)
    documents = ["Chair: We {vocalsound} start with the budget. It is small.", "Member: The bridge {gap} costs more."]
    meeting = {"documents": documents}
    prepared = processor.prepare(meeting)
    assert prepared["sentence_lists"] == [
        ["Chair: We start with the budget.", "It is small."],
        ["Member: The bridge costs more."],
    ]
    assert prepared["mentions"] == [[[], []], [[]]]
    (example,) = processor.training_examples(prepared["sentence_lists"], prepared["mentions"], lambda sentences: [2])
    inputs = processor(meeting)
    batch = processor.collate([example])
    for key in ("input_ids", "node_types", "document_ids", "entity_ids", "cls_positions"):
        assert torch.equal(batch[key], inputs[key]), key
    assert example["labels"] == [0.0, 0.0, 1.0]

    # one long document: consecutive chunks of whole sentences, each labelled over its own sentences
    long = [[f"Point {index} of the meeting was about the budget plan." for index in range(9)]]
    chunks = processor.training_examples(long, [[[] for _ in range(9)]], lambda sentences: [0], max_length=48)
    assert len(chunks) > 1 and sum(len(chunk["labels"]) for chunk in chunks) == 9
    assert all(chunk["labels"][0] == 1.0 and len(chunk["input_ids"]) <= 48 for chunk in chunks)


def test_hetformer_trains_on_sentence_layout_feature_files_as_its_processor_lays_the_document_out(minilm_tokenizer):
    """`from_sentence_layout` (train_hetformer.py --features_file, the GPU recipe's CNN/DM stage) gives the node
    sequence HetFormer's processor gives for the same sentences without entities."""
    from sumformers.configuration.configuration_hetformer import HetFormerConfig
    from sumformers.processing.processing_hetformer import encode_documents, from_sentence_layout
    from sumformers.processing.sentence_layout import encode_sentences
    from sumformers.text.sentences import split_sentences

    sentences = split_sentences(ARTICLE)
    for use_sentence_nodes in (True, False):
        config = HetFormerConfig(encoder_config=tiny_bert_config().to_dict(), attention_windows=[8, 8],
                                 use_entities=False, use_sentence_nodes=use_sentence_nodes)
        layout = encode_sentences(minilm_tokenizer, sentences, max_length=90, warn_on_truncation=False)
        feature = from_sentence_layout({**layout, "oracle": [1], "labels": [0.0, 1.0]}, config)
        expected = encode_documents(minilm_tokenizer, [sentences], config, 90, warn_on_truncation=False)
        for key in ("input_ids", "token_type_ids", "node_types", "document_ids", "entity_ids", "cls_positions"):
            assert feature[key] == expected[key], key
        assert feature["labels"] == [0.0, 1.0]


def test_wikisum_features_are_the_pipeline_input_followed_by_the_summary(minilm_tokenizer):
    from sumformers.configuration.configuration_wikisum import WikiSumConfig
    from sumformers.processing.processing_wikisum import WikiSumProcessor

    config = WikiSumConfig(
        vocab_size=len(minilm_tokenizer), pad_token_id=0, bos_token_id=101, eos_token_id=102, separator_token_id=103,
        paragraph_separator_token_id=102, max_input_tokens=40,
    )
    processor = WikiSumProcessor(minilm_tokenizer, config)
    example = {"title": "Bridge", "documents": [ARTICLE, "The bridge opens next year."], "summary": "A new bridge."}
    features = processor.training_features(example, max_summary_tokens=2)
    inputs = processor({"title": "Bridge", "documents": example["documents"]})
    assert features["input_ids"] == inputs["input_ids"][0].tolist()
    assert features["summary_start"] == len(features["input_ids"]) <= 41  # L tokens and the separator
    assert features["summary_ids"] == minilm_tokenizer("A new", add_special_tokens=False)["input_ids"] + [102]
    short = processor.training_features({**example, "documents": ["Short."]}, max_summary_tokens=2)
    batch = processor.collate([features, short])
    width = len(features["input_ids"]) + 3
    assert batch["input_ids"].shape == (2, width)
    assert batch["labels"][1].tolist().count(-100) == width - len(short["input_ids"]) - 3  # padding is not learned


def test_oracle_over_the_whole_document_drops_picks_past_the_input(minilm_tokenizer):
    """Oracle (Full) reads every sentence; a pick the model cannot read (past its token limit) leaves the targets."""
    from conftest import tiny_bert_config
    from sumformers import BertSumConfig
    from sumformers.processing.processing_bertsum import BertSumProcessor

    processor = BertSumProcessor(minilm_tokenizer, BertSumConfig(encoder_config=tiny_bert_config().to_dict()))
    sentences = ["the mayor signed the budget today .", "it adds money for schools .", "rain is expected ."]
    # an oracle that picks the last sentence it reads, then the first
    def picks(document):
        return [len(document) - 1, 0]

    # 20 tokens hold the first two sentences (9 and 8 tokens with [CLS] and [SEP]), not the third
    kept = processor.training_features(sentences, picks, max_length=20)
    assert kept["oracle"] == [1, 0] and kept["labels"] == [1.0, 1.0]
    whole = processor.training_features(sentences, picks, max_length=20, oracle_over_document=True)
    assert whole["oracle"] == [0] and whole["labels"] == [1.0, 0.0]
