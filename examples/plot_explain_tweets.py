"""
Fit, predict and explain
========================

Fine-tune the bundled MiniLM with masking (:class:`fmmlearn.FaithfulTextClassifier`) on a sample of
the bundled tweets (3 classes), predict test tweets, and explain a few decisions with two importance
measures: leave-one-out and integrated gradients, both signed (:func:`fmmlearn.explain`).  The
explanation is a long :class:`~fmmlearn.Explanation` frame (one row per example and token); here its
scores are drawn as a heatmap with matplotlib, and written as the HTML heatmap page
(:meth:`fmmlearn.Explanation.to_html`).

Sized for the documentation build (about a minute on 2 CPU cores); for real use take more data and
epochs.
"""

# %%
# Data and the masked fine-tuning
# -------------------------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from fmmlearn import FaithfulTextClassifier, TruncationWarning, explain
from fmmlearn.datasets import load_tweet_sentiment

warnings.simplefilter("ignore", TruncationWarning)  # long tweets are cut (and marked)
tweets = load_tweet_sentiment(n_samples=200, random_state=0)  # a stratified, shuffled sample
X_train, X_test, y_train, y_test = train_test_split(
    tweets.data, tweets.target, test_size=40, stratify=tweets.target, random_state=0
)
clf = FaithfulTextClassifier(model="minilm", max_masking_ratio=1.0, max_length=32, max_epochs=2,
                             learning_rate=2e-4, validation_fraction=0, random_state=0)
clf.fit(X_train, y_train)
print(f"test accuracy {clf.score(X_test, y_test):.3f} (majority class: "
      f"{pd.Series(y_test).value_counts(normalize=True).max():.3f})")
print(clf.predict(X_test[:3]), clf.predict_proba(X_test[:3]).round(2), sep="\n")

# %%
# Explain three test tweets
# -------------------------
# ``explain`` scores every token of the text for the class it is given (the gold label here; the
# predicted one without ``y``).
X_few, y_few = list(X_test[:3]), list(y_test[:3])
explanations = pd.concat([explain(clf, X_few, y_few, method="loo-sign"),
                          explain(clf, X_few, y_few, method="int-grad-sign", n_steps=10)], ignore_index=True)
print(explanations.examples[["example", "method", "gold", "predicted", "probability"]].to_string(index=False))
explanations.to_html("explanations.html")  # the interactive heatmap page, one colour scale per measure

# %%
# The scores as a heatmap
# -----------------------
# One row per measure, one column per token of the first tweet; red pushes towards the explained
# class, blue away from it.
first = explanations[explanations["example"] == 0]
table = first.pivot(index="method", columns="position", values="importance")
tokens = first.drop_duplicates("position").set_index("position")["token"].reindex(table.columns)
scale = np.nanmax(np.abs(table.to_numpy()))
fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(tokens)), 2.2))
image = ax.imshow(table.to_numpy(), cmap="RdBu_r", vmin=-scale, vmax=scale, aspect="auto")
ax.set_xticks(range(len(tokens)), tokens, rotation=60, ha="right")
ax.set_yticks(range(len(table.index)), table.index)
ax.set_title(f"Token importance for the gold label {y_few[0]!r}")
fig.colorbar(image, ax=ax, shrink=0.8)
fig.tight_layout()
plt.show()
