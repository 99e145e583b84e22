"""
The plain-vs-masked study
=========================

:class:`fmmlearn.study.FaithfulnessStudy` runs the paper's comparison in one call: it fine-tunes the
encoder with and without masking, and for each model measures the clean performance, the accuracy
under random masking, the faithfulness curves and RACU/ACU per importance measure, the MaSF
in-distribution test, and the erasure metrics, into tidy frames, a plain-language summary, figures
and an HTML report (``docs/quickstart.md``).

Sized for the documentation build: 160 training, 60 validation and 40 test tweets, one epoch, two
measures and 4 masking ratios; the verdicts of the summary say so when these sizes cannot decide.
"""

# %%
import matplotlib.pyplot as plt

from fmmlearn.study import FaithfulnessStudy

study = FaithfulnessStudy(
    "minilm",
    masking_ratios=(0.0, 1.0),  # plain and masked fine-tuning
    methods=["rand", "inp-grad-sign"],
    ratios=(0.0, 0.25, 0.5, 1.0),
    n_train=160, n_valid=60, n_test=40,
    classifier_params={"max_epochs": 1, "learning_rate": 3e-4, "max_length": 32},
    erasure_k=(0.1, 0.5),
    n_explain=2,
    n_bootstrap=999,
    verbose=0,
)
result = study.run("tweets")
print(result.summary())

# %%
# RACU and ACU per measure and model
# ----------------------------------
print(result.racu_summary[["model", "method", "racu", "acu"]].round(3).to_string(index=False))
result.plot_racu()
plt.show()

# %%
# Accuracy under random masking
# -----------------------------
result.plot_random_masking()
plt.show()

# %%
# The in-distribution test of both models
# ---------------------------------------
result.plot_in_distribution()
plt.show()
