"""A tiny decoder through the command line (``fmmlearn fit``/``explain``) and through the study."""

import json

import numpy as np
import pandas as pd
import pytest

from fmmlearn import FaithfulTextClassifier
from fmmlearn.cli import main
from fmmlearn.study import FaithfulnessStudy

from helpers.decoders import build_decoder
from helpers.matrix import sentiment

pytestmark = pytest.mark.filterwarnings("ignore:The level-3 fold has only:UserWarning")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return build_decoder("gpt2", tmp_path_factory.mktemp("gpt2"))


def test_cli_fit_and_explain_a_decoder(gpt2_dir, tmp_path, capsys):
    X, y = sentiment(48, seed=2)
    table = tmp_path / "train.csv"
    pd.DataFrame({"review": X, "label": y}).to_csv(table, index=False)
    model = tmp_path / "model"
    status = main(["fit", str(table), "--text-col", "review", "--out", str(model), "--model", gpt2_dir,
                   "--epochs", "2", "--learning-rate", "3e-3", "--precision", "fp32", "--device", "cpu", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert status == 0 and summary["classes"] == ["neg", "pos"]
    clf = FaithfulTextClassifier.load(model, device="cpu")
    assert type(clf.model_).__name__ == "GPT2ForSequenceClassification" and clf.tokenizer_.mask_token == "<|mask|>"

    explained = tmp_path / "expl.csv"
    status = main(["explain", str(model), str(table), "--text-col", "review", "--method", "loo-sign",
                   "--level", "word", "-o", str(explained), "--json"])
    summary = json.loads(capsys.readouterr().out)
    words = pd.read_csv(explained, keep_default_na=False)
    assert status == 0 and summary["n_examples"] == 48 and len(words) == summary["n_rows"]
    direct = clf.explain(X, method="loo-sign", level="word")
    np.testing.assert_allclose(words["importance"].to_numpy(), direct["importance"].to_numpy(), rtol=1e-6)
    assert words.loc[words["example"] == 0, "text"].tolist() == X[0].split()


def test_a_study_runs_on_a_decoder(gpt2_dir, tmp_path):
    X, y = sentiment(120, seed=4)
    study = FaithfulnessStudy(gpt2_dir, methods=["rand", "loo-sign", "inp-grad-sign"], seeds=(0,), n_train=60,
                              n_valid=30, n_test=30, max_examples={"loo-sign": 10}, device="cpu",
                              classifier_params=dict(max_epochs=2, batch_size=16, learning_rate=3e-3,
                                                     warmup_ratio=0.0, precision="fp32"),
                              cache_dir=tmp_path / "cache", n_random=1, n_bootstrap=199, verbose=0)
    result = study.run(X, y)
    assert set(result.performance["model"]) == {"plain", "masked"}
    assert {"loo-sign", "inp-grad-sign"} <= set(result.curves["method"])
    assert np.isfinite(result.curves["value"].astype(float)).all()
    assert set(result.racu["method"]) == {"loo-sign", "inp-grad-sign"}
    assert len(result.in_distribution) > 0


@pytest.mark.slow
def test_a_study_fits_lora_adapters_and_caches_them(gpt2_dir, tmp_path):
    peft = pytest.importorskip("peft")
    X, y = sentiment(100, seed=6)
    params = dict(max_epochs=2, batch_size=16, learning_rate=3e-3, warmup_ratio=0.0, precision="fp32",
                  peft_config=peft.LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    settings = dict(methods=["rand", "inp-grad-sign"], seeds=(0,), n_train=50, n_valid=25, n_test=25, device="cpu",
                    classifier_params=params, cache_dir=tmp_path / "cache", n_random=1, n_bootstrap=199, verbose=0)
    first = FaithfulnessStudy(gpt2_dir, **settings).run(X, y)
    assert list((tmp_path / "cache" / "models").glob("*/model/adapter/adapter_model.safetensors"))
    again = FaithfulnessStudy(gpt2_dir, **settings).run(X, y)  # every fit and stage read back from the cache
    pd.testing.assert_frame_equal(first.curves, again.curves)
