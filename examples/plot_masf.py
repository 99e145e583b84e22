"""
Is masking in-distribution? The MaSF test
=========================================

:func:`fmmlearn.in_distribution_report` runs the MaSF test (Madsen et al., 2024): it calibrates on
validation texts masked exactly like the training batches, then, masking ratio by masking ratio,
computes a p-value per masked test text.  The share of test texts flagged (p below the threshold)
should stay near the null share for a model fine-tuned with masking, and grow with the ratio for a
plain fine-tuned model.  :func:`fmmlearn.plot_in_distribution` draws both models.

Sized for the documentation build: two small fits (plain and masked), 60 calibration and 40 test
tweets, 5 masking ratios, so the shares are coarse.
"""

# %%
import warnings

import matplotlib.pyplot as plt
from sklearn.model_selection import train_test_split

from fmmlearn import FaithfulTextClassifier, TruncationWarning, in_distribution_report, plot_in_distribution
from fmmlearn.datasets import load_tweet_sentiment

warnings.simplefilter("ignore", TruncationWarning)  # a few long tweets are cut
tweets = load_tweet_sentiment(n_samples=260, random_state=0)
X_train, X_rest, y_train, y_rest = train_test_split(
    tweets.data, tweets.target, train_size=160, stratify=tweets.target, random_state=0
)
X_calib, X_test, _, y_test = train_test_split(X_rest, y_rest, test_size=40, stratify=y_rest, random_state=0)
settings = dict(model="minilm", max_length=32, max_epochs=2, learning_rate=2e-4, validation_fraction=0,
                random_state=0)
models = {"plain": FaithfulTextClassifier(max_masking_ratio=0.0, **settings).fit(X_train, y_train),
          "masked": FaithfulTextClassifier(max_masking_ratio=1.0, **settings).fit(X_train, y_train)}

# %%
# The reports: p-values per masked test text
# ------------------------------------------
ratios = (0.0, 0.25, 0.5, 0.75, 1.0)
reports = {name: in_distribution_report(clf, X_calib, X_test, y_test, method="rand", ratios=ratios,
                                        random_state=0)
           for name, clf in models.items()}
print(reports["masked"].head())

# %%
# The share of masked test texts flagged, per masking ratio
# ---------------------------------------------------------
plot_in_distribution(reports, title="Share of masked test tweets MaSF flags")
plt.show()
