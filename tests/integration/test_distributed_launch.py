"""Two processes under ``accelerate launch`` (gloo on the CPU) against one process (docs/scaling.md).

Each launch costs a process start-up, so one launched script does all the
library checks (data-parallel fit, saved model, explain, curves, predictions)
and one launch runs the command line (``-m fmmlearn fit``).  The scripts are
written into ``tmp_path``; their outputs come back as JSON and ``.npy`` files
and are compared here with the single-process results.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("accelerate", reason="the distributed extra is part of the test extra")

from helpers.data import make_sentiment
from helpers.launch import free_port
from helpers.models import one_thread

from fmmlearn import FaithfulTextClassifier
from fmmlearn.distributed import process_seed
from fmmlearn.faithfulness import faithfulness_curve
from fmmlearn.masking import mask_training_batch

pytestmark = pytest.mark.slow  # each launch starts two Python processes with torch (30-60 s here)

N_PROCESSES = 2
FIT = dict(max_epochs=2, batch_size=7, learning_rate=3e-3, warmup_ratio=0.1, precision="fp32", device="cpu",
           random_state=0)
# method -> parameters: small batches, so the set spans several batches per process, and a fixed
# internal_batch_size (by default a per-process timing probe sizes the passes, docs/scaling.md).
EXPLAIN = {
    "loo-sign": {"batch_size": 4, "internal_batch_size": 16},
    "int-grad-sign": {"batch_size": 4, "internal_batch_size": 16, "n_steps": 8},
    "rand": {"batch_size": 4, "random_state": 5},
}
CURVES = {"loo-sign": {"batch_size": 4, "internal_batch_size": 16}, "rand": {"batch_size": 4, "random_state": 5}}

SCRIPT = textwrap.dedent('''
    """Launched twice by tests/integration/test_distributed_launch.py: the same code on every process."""
    import hashlib
    import json
    import sys
    from pathlib import Path

    import numpy as np

    import fmmlearn.estimator as training
    from fmmlearn import FaithfulTextClassifier
    from fmmlearn.distributed import gather_objects, local_only, num_processes, process_index
    from fmmlearn.encoding import collate
    from fmmlearn.faithfulness import faithfulness_curve

    spec = json.loads(Path(sys.argv[1]).read_text())
    out = Path(spec["out"]) / f"rank{process_index()}"
    out.mkdir(parents=True)
    report = {"num_processes": num_processes(), "rank": process_index()}

    # 1. a data-parallel fit, recording every training batch this process masks
    seen = []
    collate_training = training.MaskedFineTuningNet._collate

    def recording(self, dataset, train, indices):
        x, y = collate_training(self, dataset, train, indices)
        if train:
            clean = collate(dataset.encoding, indices, self.pad_token_id)
            seen.append({"position": [int(i) for i in indices], "clean": clean.input_ids.tolist(),
                         "attention_mask": clean.attention_mask.tolist(),
                         "special_tokens_mask": clean.special_tokens_mask.tolist(),
                         "masked": x["input_ids"].tolist(), "mask_token_id": self.mask_token_id,
                         "strategy": self.masking_strategy, "max_ratio": self.max_masking_ratio})
        return x, y

    training.MaskedFineTuningNet._collate = recording
    clf = FaithfulTextClassifier(model=spec["base_model"], accelerator="auto", **spec["fit"])
    clf.fit(spec["X_train"], spec["y_train"])
    training.MaskedFineTuningNet._collate = collate_training
    state = clf.model_.state_dict()
    digest = hashlib.sha256(b"".join(state[k].detach().cpu().numpy().tobytes() for k in sorted(state)))
    report["weights"] = gather_objects(digest.hexdigest())
    report["batches"] = seen
    report["history"] = json.loads(clf.history_.reset_index().to_json(orient="records"))
    clf.save(Path(spec["out"]) / f"model-from-rank{process_index()}")
    np.save(out / "fitted_proba.npy", clf.predict_proba(spec["X_eval"]))

    # 2. a saved model: predictions, explanations and curves split across the processes
    ref = FaithfulTextClassifier.load(spec["reference"], device="cpu")
    X, y = spec["X_eval"], spec["y_eval"]
    np.save(out / "proba.npy", ref.predict_proba(X))
    for method, params in spec["explain"].items():
        np.save(out / f"explain-{method}.npy", ref.explain(X, y, method=method, **params)["importance"].to_numpy())
    for method, params in spec["curves"].items():
        curve = faithfulness_curve(ref, X, y, method, **params)
        np.save(out / f"curve-{method}.npy", curve["value"].to_numpy())
    with local_only():  # every process computes everything itself
        np.save(out / "local-rand.npy", ref.explain(X, y, method="rand", **spec["explain"]["rand"])["importance"]
                .to_numpy())
    try:  # processes given different examples must fail, not mix their rows
        ref.predict_proba(X[: 10 + process_index()])
    except ValueError as error:
        report["mismatch"] = str(error)
    (out / "report.json").write_text(json.dumps(report))
''')


#: What a process that PyTorch aborts at interpreter exit prints (docs/scaling.md, "Rules that follow").
TEARDOWN_ABORT = "terminate called without an active exception"


def accelerate_launch(*args, cwd, finished=lambda: False, clear=lambda: None, timeout=900):
    """``accelerate launch`` of two CPU processes (torchrun launcher, gloo), with this interpreter.

    A launch whose processes all wrote their final outputs (``finished()``)
    but one of which PyTorch then aborted at interpreter exit (gloo's worker
    threads outlive the process group under DistributedDataParallel; rare,
    and fmmlearn's exit barrier narrows it further) is run once more, after
    ``clear()``, with a warning that shows in the test report.  Any other
    failure, or the abort twice, fails.
    """
    env = dict(os.environ, ACCELERATE_USE_CPU="1", CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONFAULTHANDLER="1")  # a crash prints every Python thread's stack
    for attempt in (1, 2):
        command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
                   str(N_PROCESSES), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", str(free_port()), *args]
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode == 0 or attempt == 2 or TEARDOWN_ABORT not in done.stderr or not finished():
            break
        warnings.warn(f"the launch did all its work, then a process was aborted at exit; launching again:\n"
                      f"{done.stderr[-1500:]}", RuntimeWarning, stacklevel=2)
        clear()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return done


@pytest.fixture(scope="module")
def launched(tmp_path_factory, tiny_model_dir, fitted_tiny):
    """Run the script on two processes; the spec it ran with and each rank's outputs."""
    root = tmp_path_factory.mktemp("launch")
    X_train, y_train = make_sentiment(60, seed=1)
    X_eval, y_eval = make_sentiment(30, seed=2, max_words=14)
    reference = fitted_tiny.save(root / "reference")
    spec = {"out": str(root / "out"), "base_model": tiny_model_dir, "reference": str(reference), "fit": FIT,
            "X_train": X_train, "y_train": y_train.tolist(), "X_eval": X_eval, "y_eval": y_eval.tolist(),
            "explain": EXPLAIN, "curves": CURVES}
    (root / "spec.json").write_text(json.dumps(spec))
    (root / "run.py").write_text(SCRIPT)
    reports = [root / "out" / f"rank{rank}" / "report.json" for rank in range(N_PROCESSES)]
    accelerate_launch(str(root / "run.py"), str(root / "spec.json"), cwd=root,
                      finished=lambda: all(r.is_file() for r in reports),
                      clear=lambda: shutil.rmtree(root / "out"))
    ranks = []
    for rank in range(N_PROCESSES):
        folder = root / "out" / f"rank{rank}"
        ranks.append(SimpleNamespace(report=json.loads((folder / "report.json").read_text()),
                                     load=lambda name, folder=folder: np.load(folder / name)))
    return SimpleNamespace(spec=spec, ranks=ranks, out=root / "out")


def _epochs(report):
    """The recorded training batches of one rank, split into epochs."""
    batches, per_epoch = report["batches"], len(report["batches"]) // FIT["max_epochs"]
    return [batches[e * per_epoch:(e + 1) * per_epoch] for e in range(FIT["max_epochs"])]


def test_both_processes_took_part_and_end_with_the_same_weights(launched):
    reports = [r.report for r in launched.ranks]
    assert [r["num_processes"] for r in reports] == [N_PROCESSES] * N_PROCESSES
    assert [r["rank"] for r in reports] == list(range(N_PROCESSES))
    assert len(set(reports[0]["weights"])) == 1  # gradients are averaged at every step
    # validation is not split: every process selects on the same numbers
    valid = [[row["valid_loss"] for row in r["history"]] for r in reports]
    assert valid[0] == valid[1]


def test_every_epoch_is_shared_out_disjointly_with_the_same_number_of_steps(launched):
    n_train = round(len(launched.spec["X_train"]) * 0.8)  # validation_fraction=0.2
    n_batches = -(-n_train // FIT["batch_size"])
    epochs = [_epochs(r.report) for r in launched.ranks]
    for epoch in range(FIT["max_epochs"]):
        shares = [[b["position"] for b in rank[epoch]] for rank in epochs]
        assert [len(s) for s in shares] == [-(-n_batches // N_PROCESSES)] * N_PROCESSES
        seen = [set(np.concatenate(s).tolist()) for s in shares]
        assert not seen[0] & seen[1]
        assert seen[0] | seen[1] == set(range(n_train))
        # whole batches of the shared epoch (the last round re-cut), rows still length-grouped per batch
        assert all(len(p) <= FIT["batch_size"] for s in shares for p in s)


def test_each_process_masks_from_its_own_reproducible_stream(launched):
    for rank, result in enumerate(launched.ranks):
        batches = result.report["batches"]
        own = torch.Generator().manual_seed(process_seed(FIT["random_state"], rank, N_PROCESSES))
        other = torch.Generator().manual_seed(process_seed(FIT["random_state"], 1 - rank, N_PROCESSES))
        replayed, crossed = [], []
        for b in batches:
            batch = SimpleNamespace(**{k: torch.tensor(b[k]) for k in ("attention_mask", "special_tokens_mask")},
                                    input_ids=torch.tensor(b["clean"]))
            masking = dict(strategy=b["strategy"], max_ratio=b["max_ratio"], mask_token_id=b["mask_token_id"])
            replayed.append(mask_training_batch(batch, generator=own, **masking).tolist() == b["masked"])
            crossed.append(mask_training_batch(batch, generator=other, **masking).tolist() == b["masked"])
        assert all(replayed)  # the masks are a function of (seed, rank): reproducible
        assert not any(crossed)  # and not the other process's stream
        assert any(np.any(np.asarray(b["masked"]) != np.asarray(b["clean"])) for b in batches)


def test_only_the_main_process_writes_and_the_saved_model_predicts(launched):
    assert (launched.out / "model-from-rank0" / "fmmlearn.json").is_file()
    assert not (launched.out / "model-from-rank1").exists()
    loaded = FaithfulTextClassifier.load(launched.out / "model-from-rank0", device="cpu")
    assert loaded.accelerator == "auto"
    with one_thread():
        proba = loaded.predict_proba(launched.spec["X_eval"])
    for result in launched.ranks:  # predicted under the launch (split across the processes)
        np.testing.assert_array_equal(result.load("fitted_proba.npy"), proba)


def test_predictions_explanations_and_curves_equal_the_single_process_results(launched, fitted_tiny):
    X, y = launched.spec["X_eval"], np.asarray(launched.spec["y_eval"])
    with one_thread():
        proba = fitted_tiny.predict_proba(X)
        explained = {m: fitted_tiny.explain(X, y, method=m, **p)["importance"].to_numpy() for m, p in EXPLAIN.items()}
        curves = {m: faithfulness_curve(fitted_tiny, X, y, method=m, **p)["value"].to_numpy()
                  for m, p in CURVES.items()}
    for result in launched.ranks:  # every process gets every row, in the caller's order
        np.testing.assert_array_equal(result.load("proba.npy"), proba)
        for method, values in explained.items():
            np.testing.assert_array_equal(result.load(f"explain-{method}.npy"), values, err_msg=method)
        for method, values in curves.items():
            np.testing.assert_array_equal(result.load(f"curve-{method}.npy"), values, err_msg=method)
        np.testing.assert_array_equal(result.load("local-rand.npy"), explained["rand"])


def test_processes_given_different_examples_fail_instead_of_mixing_rows(launched):
    for result in launched.ranks:
        assert "different examples" in result.report["mismatch"] and "local_only" in result.report["mismatch"]


def test_the_command_line_fits_data_parallel_and_only_the_main_process_writes(tmp_path, tiny_model_dir):
    X, y = make_sentiment(40, seed=3)
    pd.DataFrame({"text": X, "label": y}).to_csv(tmp_path / "train.csv", index=False)
    done = accelerate_launch("-m", "fmmlearn", "fit", "train.csv", "--output", "model", "--model", tiny_model_dir,
                             "--max-epochs", "1", "--batch-size", "8", "--precision", "fp32", "--json", cwd=tmp_path,
                             finished=lambda: (tmp_path / "model" / "fmmlearn.json").is_file(),
                             clear=lambda: shutil.rmtree(tmp_path / "model"))
    documents = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(documents) == 1  # one report, from the main process
    assert documents[0]["model_dir"] == "model" and documents[0]["n_examples"] == 40
    saved = json.loads((tmp_path / "model" / "fmmlearn.json").read_text())
    assert saved["params"]["accelerator"] == "auto"  # chosen by the launch
    assert FaithfulTextClassifier.load(tmp_path / "model").predict(X[:5]).shape == (5,)
