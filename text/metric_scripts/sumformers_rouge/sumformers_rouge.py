"""Local ``evaluate`` ROUGE metric: ``evaluate.load("<path to this folder>")`` works offline, unlike
``evaluate.load("rouge")`` which fetches its script from the Hub. It delegates to
``sumformers.text.scoring.rouge_scores`` so both give the same numbers."""

import datasets
import evaluate

from sumformers.text.scoring import rouge_scores

_DESCRIPTION = """ROUGE-1, ROUGE-2 and ROUGE-Lsum F1 x 100, plain mean over examples (no bootstrap), computed with
rouge-score and the Porter stemmer, one sentence per line (a text's lines when it has line breaks, otherwise
its `split_sentences` sentences). Report rougeLsum as ROUGE-L."""

_INPUTS_DESCRIPTION = """
Args:
    predictions: list of predicted summaries (str).
    references: list of reference summaries (str), one per prediction.
Returns:
    dict with float keys "rouge1", "rouge2", "rougeLsum" on a 0-100 scale.
"""

_CITATION = """@inproceedings{lin-2004-rouge,
    title = "{ROUGE}: A Package for Automatic Evaluation of Summaries",
    author = "Lin, Chin-Yew",
    booktitle = "Text Summarization Branches Out",
    year = "2004",
    pages = "74--81",
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _INPUTS_DESCRIPTION)
class SumformersRouge(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_INPUTS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            codebase_urls=["https://github.com/google-research/google-research/tree/master/rouge"],
        )

    def _compute(self, predictions, references):
        return rouge_scores(predictions, references)
