"""
Erasure metrics with a validity flag
====================================

Comprehensiveness (how much the predicted probability falls when the top ``k`` share of tokens is
removed) and sufficiency (how much it falls when *only* those are kept), with AOPC over ``k``
(ERASER; :func:`fmmlearn.erasure_metrics`).  Removing tokens by masking only measures the
explanation when masked inputs are in-distribution: given calibration texts (``X_calib``), each
``(mode, k)`` row carries the share of its perturbed inputs MaSF flags (``ood_share``) and whether
that is within the allowed factor of the null share (``valid``).  :func:`fmmlearn.plot_erasure`
draws the summary.

Sized for the documentation build: 160 training tweets, 2 epochs, 40 test tweets.
"""

# %%
import warnings

import matplotlib.pyplot as plt
from sklearn.model_selection import train_test_split

from fmmlearn import FaithfulTextClassifier, TruncationWarning, erasure_metrics, plot_erasure
from fmmlearn.datasets import load_tweet_sentiment

warnings.simplefilter("ignore", TruncationWarning)
tweets = load_tweet_sentiment(n_samples=260, random_state=0)
X_train, X_rest, y_train, y_rest = train_test_split(
    tweets.data, tweets.target, train_size=160, stratify=tweets.target, random_state=0
)
X_calib, X_test, _, y_test = train_test_split(X_rest, y_rest, test_size=40, stratify=y_rest, random_state=0)
clf = FaithfulTextClassifier(model="minilm", max_masking_ratio=1.0, max_length=32, max_epochs=2,
                             learning_rate=2e-4, validation_fraction=0, random_state=0).fit(X_train, y_train)

# %%
# Comprehensiveness and sufficiency of input x gradient
# -----------------------------------------------------
report = erasure_metrics(clf, X_test, y_test, method="inp-grad-sign", k=(0.1, 0.2, 0.5), X_calib=X_calib,
                         n_bootstrap=999, random_state=0)
print(report.summary[["mode", "k", "mean", "ci_low", "ci_high", "ood_share", "valid"]].round(3).to_string(index=False))

# %%
# The figure
# ----------
plot_erasure(report.summary, title="Erasure metrics of inp-grad-sign (masked MiniLM)")
plt.show()
