"""Model cards: save() writes a Hugging Face README.md that huggingface_hub reads back with its results."""

import copy
import json
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from huggingface_hub import EvalResult, ModelCard

from fmmlearn import FaithfulTextClassifier
from fmmlearn.study import StudyResult
from helpers.data import make_sentiment
from helpers.study_reference import REFERENCE_DIR

FIT = dict(max_epochs=2, batch_size=8, learning_rate=3e-3, warmup_ratio=0.0, validation_fraction=0,
           precision="fp32", device="cpu", random_state=0)

RACU = pd.DataFrame({"method": ["loo-sign", "inp-grad-sign"], "metric": "accuracy", "racu": [0.61, 0.12],
                     "racu_low": [0.4, -0.05], "racu_high": [0.8, 0.3], "acu": [0.25, 0.05],
                     "acu_low": [0.15, -0.02], "acu_high": [0.33, 0.11]})
IN_DISTRIBUTION = pd.DataFrame({"ratio": [0.0, 0.0, 0.5, 0.5], "threshold": [0.01, 0.05, 0.01, 0.05],
                                "proportion": [0.0, 0.04, 0.02, 0.1], "expected": [0.0, 0.047, 0.0, 0.047],
                                "simes_p": 0.5, "geomean_p": 0.5, "n_examples": 50, "method": "rand",
                                "calibration": "calibrated"})
ERASURE = pd.DataFrame({"method": "loo-sign", "removal": "mask", "mode": ["comprehensiveness", "comprehensiveness"],
                        "k": [0.2, "aopc"], "n_examples": 50, "mean": [0.3, 0.27], "ci_low": [0.2, 0.18],
                        "ci_high": [0.4, 0.35], "n_perturbed": 50, "ood_share": [0.06, 0.06],
                        "valid": pd.array([True, True], dtype="boolean")})


@pytest.fixture(scope="module")
def clf(tiny_model_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 2-epoch toy fit may predict one class; not what is tested here
        return FaithfulTextClassifier(model=tiny_model_dir, **FIT).fit(*make_sentiment(24, seed=3))


def _metric(results, metric_type, config=None):
    found = [r for r in results if r.metric_type == metric_type and r.metric_config == config]
    assert len(found) == 1, (metric_type, config, results)
    return found[0]


# --------------------------------------------------------------------------- round trip through huggingface_hub


def test_a_saved_card_round_trips_through_huggingface_hub_with_its_metadata_and_results(clf, tmp_path):
    card = clf.model_card(results=[{"accuracy": 0.875}, RACU, IN_DISTRIBUTION, ERASURE], dataset="tweet_eval")
    path = clf.save(tmp_path / "model", card=card)
    read = ModelCard.load(path / "README.md")

    assert read.data.library_name == "fmmlearn" and read.data.pipeline_tag == "text-classification"
    assert {"fmmlearn", "faithfulness", "masked-fine-tuning", "text-classification"} <= set(read.data.tags)
    assert read.data.masked_fine_tuning == {
        "max_masking_ratio": 1.0, "masking_strategy": "half-det", "epochs": 2, "learning_rate": 3e-3, "seed": 0,
        "classes": ["neg", "pos"], "fmmlearn_version": read.data.masked_fine_tuning["fmmlearn_version"]}
    assert read.data.base_model is None  # a local directory is no Hub model; the text says so
    assert "a local model directory" in read.text
    assert read.data.datasets == ["tweet_eval"]

    results = read.data.eval_results
    assert results == card.data.eval_results and all(isinstance(r, EvalResult) for r in results)
    assert {(r.task_type, r.dataset_type, r.dataset_split) for r in results} == {
        ("text-classification", "tweet_eval", "test")}
    assert _metric(results, "accuracy").metric_value == 0.875
    loo = _metric(results, "racu", "loo-sign")
    assert (loo.metric_value, loo.metric_args) == (0.61, {"ci_low": 0.4, "ci_high": 0.8})
    assert _metric(results, "acu", "inp-grad-sign").metric_value == 0.05
    half = _metric(results, "masf_flagged_share", "masking_ratio=0.5")
    assert half.metric_value == 0.1
    assert half.metric_args == {"masking_ratio": 0.5, "threshold": 0.05, "null_share": 0.047, "masked_by": "rand"}
    assert len([r for r in results if r.metric_type == "masf_flagged_share"]) == 2  # p < 0.05 rows only
    aopc = _metric(results, "comprehensiveness_aopc", "loo-sign")
    assert aopc.metric_value == 0.27 and aopc.metric_args["valid"] is True

    # the readable tables: accuracy, RACU with its CI, flagged share against the null share
    assert "| accuracy | 0.875 |" in read.text
    assert "| `loo-sign` | RACU | 0.61 | [0.4, 0.8] |" in read.text
    assert "| 0.5 | 10.0% | 4.7% |" in read.text


def test_a_card_without_results_is_a_valid_card(clf, tmp_path):
    path = clf.save(tmp_path / "model")
    read = ModelCard.load(path / "README.md")
    assert read.data.library_name == "fmmlearn" and read.data.eval_results is None
    assert "model-index" not in read.data.to_dict() and "## Results" not in read.text
    assert read.data.masked_fine_tuning["classes"] == ["neg", "pos"]
    # the manifest lists and checksums the card like every other file
    assert "README.md" in json.loads((path / "fmmlearn.json").read_text())["files"]


def test_a_plain_fine_tuned_model_is_not_tagged_as_masked(clf):
    plain = copy.copy(clf).set_params(max_masking_ratio=0.0)
    card = plain.model_card()
    assert "masked-fine-tuning" not in card.data.tags and "without masking" in card.text


@pytest.mark.parametrize("model, base", [("minilm", "sentence-transformers/all-MiniLM-L6-v2"),
                                         ("roberta-base", "roberta-base")])
def test_the_base_model_is_the_hub_name_of_the_model_fit_started_from(clf, model, base):
    assert copy.copy(clf).set_params(model=model).model_card().data.base_model == base


# --------------------------------------------------------------------------- study results


def _study(**changes):
    frames = {name: pd.read_csv(REFERENCE_DIR / f"{name}.csv")
              for name in ("performance", "racu_summary", "in_distribution", "erasure")}
    return StudyResult(metadata={"data": {"name": "toy-sentiment"}}, **{**frames, **changes})


def test_a_study_result_gives_the_rows_of_the_model_with_this_masking_ratio(clf):
    study = _study()
    results = clf.model_card(results=study).data.eval_results
    assert {r.dataset_name for r in results} == {"toy-sentiment"}  # the study's data name by default
    masked = study.performance[study.performance["model"] == "masked"].iloc[0]
    accuracy = _metric(results, "accuracy")
    assert accuracy.metric_value == round(masked["value"], 6)
    assert accuracy.metric_args["ci_low"] == round(masked["low"], 6)
    summary = study.racu_summary[study.racu_summary["model"] == "masked"].set_index("method")
    for method, row in summary.iterrows():
        assert _metric(results, "acu", method).metric_value == round(row["acu"], 6)
        assert _metric(results, "racu", method).metric_args["reliable"] == bool(row["reliable"])
    ood = study.in_distribution
    ood = ood[(ood["model"] == "masked") & np.isclose(ood["threshold"], 0.05)].set_index("ratio")
    for ratio, row in ood.iterrows():
        share = _metric(results, "masf_flagged_share", f"masking_ratio={ratio:g}")
        assert share.metric_value == round(row["proportion"], 6)
        assert share.metric_args["null_share"] == round(row["expected"], 6)
    assert any(r.metric_type.endswith("_aopc") for r in results)


def test_a_study_without_this_model_is_refused_naming_the_argument(clf):
    study = _study()
    plain_only = _study(performance=study.performance[study.performance["model"] == "plain"])
    with pytest.raises(ValueError, match=r"results is a study without .*max_masking_ratio=1"):
        clf.model_card(results=plain_only)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("results, error, match", [
    (0.9, TypeError, r"results must be .* got float"),
    ([], ValueError, r"results is an empty list"),
    ({"accuracy": "high"}, ValueError, r"results=\{'accuracy': 'high'\}.*finite numbers"),
    (pd.DataFrame({"x": [1]}), ValueError, r"results is a DataFrame with columns \['x'\]"),
    (pd.concat([RACU, RACU]), ValueError, r"results has several RACU rows per measure"),
    (IN_DISTRIBUTION[IN_DISTRIBUTION["threshold"] == 0.01], ValueError, r"without the threshold 0.05"),
    (pd.concat([IN_DISTRIBUTION, IN_DISTRIBUTION.assign(method="loo-sign")]), ValueError,
     r"in-distribution reports of several masking methods"),
    (pd.concat([RACU.assign(model="plain"), RACU.assign(model="masked")]), ValueError, r"several models"),
    (pd.DataFrame({"method": ["loo-sign"], "ratio": [0.0], "value": [1.0]}), ValueError, r"'rand' curve"),
])
def test_bad_results_are_a_clear_error_naming_the_argument(clf, results, error, match):
    with pytest.raises(error, match=match):
        clf.model_card(results=results, dataset="toy")


def test_results_need_a_dataset_name_and_save_needs_a_model_card(clf, tmp_path):
    with pytest.raises(ValueError, match=r"dataset is needed with results"):
        clf.model_card(results={"accuracy": 0.9})
    with pytest.raises(TypeError, match=r"card must be a huggingface_hub.ModelCard"):
        clf.save(tmp_path / "model", card="# my card")
    assert not (tmp_path / "model").exists()


def test_curves_with_a_rand_baseline_give_racu_and_acu(clf):
    rand = pd.DataFrame({"method": "rand", "ratio": [0.0, 0.5, 1.0], "metric": "accuracy", "value": [1.0, 0.75, 0.5]})
    loo = rand.assign(method="loo-sign", value=[1.0, 0.5, 0.5])
    results = clf.model_card(results=pd.concat([rand, loo]), dataset="toy").data.eval_results
    # ACU: the gap 0.25 at ratio 0.5, a triangle over [0, 1] -> 0.125; the area random masking leaves above
    # its end 0.5 is 0.25, so RACU = 0.125 / 0.25
    assert _metric(results, "acu", "loo-sign").metric_value == 0.125
    assert _metric(results, "racu", "loo-sign").metric_value == 0.5


# --------------------------------------------------------------------------- load keeps the card


def test_load_keeps_the_card_and_saving_again_keeps_its_results(clf, tmp_path):
    card = clf.model_card(results={"accuracy": 0.875}, dataset="toy", model_name="my-model")
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "a", card=card), device="cpu")
    assert loaded.model_card_.data.eval_results == card.data.eval_results

    again = ModelCard.load(loaded.save(tmp_path / "b") / "README.md")
    assert again.content == ModelCard.load(tmp_path / "a" / "README.md").content

    card.data.license = "mit"  # set by the user before saving
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "a", card=card), device="cpu")
    replaced = loaded.model_card(results={"accuracy": 0.5}, dataset="toy")
    assert replaced.data.model_name == "my-model" and _metric(replaced.data.eval_results, "accuracy").metric_value == 0.5
    assert replaced.data.license == "mit" and "a local model directory (`" in replaced.text
    assert json.loads((tmp_path / "b" / "fmmlearn.json").read_text())["base_model"] == str(clf.model)


def test_a_save_that_fails_writing_the_card_leaves_the_previous_save_intact(clf, tmp_path, monkeypatch):
    path = clf.save(tmp_path / "model", card=clf.model_card(results={"accuracy": 0.875}, dataset="toy"))
    before = {p.name: p.read_bytes() for p in path.iterdir()}

    def full_disk(self, filepath):
        open(filepath, "w").write("---\nlibrary_na")  # half a card, then the disk fills up
        raise OSError("No space left on device")

    monkeypatch.setattr(ModelCard, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        clf.save(path, card=clf.model_card(results={"accuracy": 0.5}, dataset="toy"))
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_loaded_classifier_pickles_with_its_card(clf, tmp_path):
    card = clf.model_card(results={"accuracy": 0.875}, dataset="toy")
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "model", card=card), device="cpu")
    restored = pickle.loads(pickle.dumps(loaded))
    assert restored.model_card_.content == loaded.model_card_.content
    assert restored.model_card().data.eval_results == card.data.eval_results


def test_a_card_edited_after_saving_is_read_not_refused(clf, tmp_path):
    path = clf.save(tmp_path / "model")
    card = ModelCard.load(path / "README.md")
    card.data.license = "mit"
    card.save(path / "README.md")  # as on the Hub, whose editor rewrites the card
    assert FaithfulTextClassifier.load(path, device="cpu").model_card_.data.license == "mit"

    (path / "README.md").write_text("---\nlicense: [mit\n---\n# broken\n")
    with pytest.warns(UserWarning, match="is not a valid model card"):
        assert FaithfulTextClassifier.load(path, device="cpu").model_card_ is None

    (path / "README.md").unlink()
    assert FaithfulTextClassifier.load(path, device="cpu").model_card_ is None


def test_fitting_again_drops_the_card_of_the_loaded_weights(clf, tmp_path):
    card = clf.model_card(results={"accuracy": 0.875}, dataset="toy")
    loaded = FaithfulTextClassifier.load(clf.save(tmp_path / "model", card=card), device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded.set_params(max_epochs=1).fit(*make_sentiment(16, seed=4))
    assert loaded.model_card_ is None and loaded.model_card().data.eval_results is None
