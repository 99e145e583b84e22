"""
A faithfulness curve and RACU
=============================

Mask the tokens an explanation ranks highest, step by step, and watch the accuracy fall
(:func:`fmmlearn.faithfulness_curve`); do the same with random tokens
(:func:`fmmlearn.random_masking_curve`).  A faithful explanation drops the accuracy faster than
random masking.  :func:`fmmlearn.racu` is the area between the two curves relative to the area the
random curve leaves (1 at best, 0 no better than random), :func:`fmmlearn.acu` the plain area.
Because the model was fine-tuned with masking (``max_masking_ratio=1.0``), masked inputs are
in-distribution for it: the drop measures the explanation, not a distribution shift
(``docs/faithfulness.md``).

Sized for the documentation build: 160 training tweets, 2 epochs, 40 test tweets, 6 masking ratios.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import pandas as pd
from sklearn.model_selection import train_test_split

from fmmlearn import FaithfulTextClassifier, TruncationWarning, acu, faithfulness_curve, plot_faithfulness, racu, random_masking_curve
from fmmlearn.datasets import load_tweet_sentiment

warnings.simplefilter("ignore", TruncationWarning)
tweets = load_tweet_sentiment(n_samples=200, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(
    tweets.data, tweets.target, test_size=40, stratify=tweets.target, random_state=0
)
clf = FaithfulTextClassifier(model="minilm", max_masking_ratio=1.0, max_length=32, max_epochs=2,
                             learning_rate=2e-4, validation_fraction=0, random_state=0).fit(X_train, y_train)

# %%
# Two curves: input x gradient (signed) and random masking
# ---------------------------------------------------------
ratios = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
curve = faithfulness_curve(clf, X_test, y_test, method="inp-grad-sign", ratios=ratios)
baseline = random_masking_curve(clf, X_test, y_test, ratios=ratios, random_state=0)
print(curve[["method", "ratio", "value"]].to_string(index=False))
print(f"RACU {racu(curve, baseline):.3f}, ACU {acu(curve, baseline):.3f}")

# %%
# The figure
# ----------
plot_faithfulness(pd.concat([curve, baseline]), title="Accuracy as the top-ranked tokens are masked")
plt.show()
