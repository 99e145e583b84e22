"""Explain a fine-tuned classifier's decisions on tweets and look at them as a heatmap.

Fine-tunes the bundled MiniLM with masking on a sample of the bundled tweets
(3 classes), explains a few test tweets with two importance measures
(leave-one-out and integrated gradients, both signed), and writes

* ``explanations.html``: both measures side by side over the original text,
  one colour scale per measure, predicted label and probability next to the
  gold label (the picture in ``docs/explain.md``);
* ``explanations.json``: the explanations, to be read back exactly with
  ``Explanation.read_json``.

Sized for a 2-core CPU (about 5 minutes); for real use take more data and epochs.

Run: ``python examples/explain_tweets.py [output directory]``.
"""

import sys
import time
import warnings
from pathlib import Path

import pandas as pd
from sklearn.model_selection import train_test_split

from fmmlearn import FaithfulTextClassifier
from fmmlearn.datasets import load_tweet_sentiment


def main(out: Path) -> None:
    start = time.perf_counter()
    warnings.filterwarnings("ignore", message=".*longer than max_length.*")  # long tweets are cut (and marked)
    tweets = load_tweet_sentiment(n_samples=800, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(
        tweets.data, tweets.target, test_size=40, stratify=tweets.target, random_state=0
    )
    clf = FaithfulTextClassifier(model="minilm", max_length=40, max_epochs=3, learning_rate=1e-4,
                                 max_masking_ratio=1.0, validation_fraction=0, precision="auto", random_state=0)
    clf.fit(X_train, y_train)
    print(f"fitted in {time.perf_counter() - start:.0f} s; test accuracy {clf.score(X_test, y_test):.3f}")

    pick = [0, 1, 2, 3, 5]
    X, y = [X_test[i] for i in pick], [y_test[i] for i in pick]
    explanations = pd.concat([clf.explain(X, y, method="loo-sign"),
                              clf.explain(X, y, method="int-grad-sign")], ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    explanations.to_html(out / "explanations.html", title="Why the model decided: leave-one-out vs integrated "
                                                          "gradients (gold label explained)")
    explanations.to_json(out / "explanations.json")
    print(explanations.examples[["example", "method", "gold", "predicted", "probability", "truncated"]]
          .to_string(index=False))
    print(f"wrote {out / 'explanations.html'} and {out / 'explanations.json'} "
          f"({time.perf_counter() - start:.0f} s in all)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
