"""fmmlearn: faithfulness measurable text classifiers with a scikit-learn API."""

__version__ = "0.1.0"
