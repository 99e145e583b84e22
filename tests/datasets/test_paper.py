"""load_paper_dataset on tiny local files in the hub's layouts and column names (no network)."""

import sys

import pandas as pd
import pytest

from fmmlearn.datasets import (
    DatasetUnavailableError,
    PaperDataset,
    get_dataset_spec,
    list_paper_datasets,
    load_paper_dataset,
    make_babi,
)

LOCATIONS = ("garden", "hallway", "kitchen", "office", "bedroom", "bathroom")
NLI3 = ("entailment", "neutral", "contradiction")

# docs/datasets.md, "The paper's datasets", with the hub ids and label orders of the sources:
# name: (hub path, config, A, B, labels, primary, also logged, epochs, majority, sizes, test source split)
PAPER = {
    "babi-1": (None, None, "paragraph", "question", LOCATIONS, "micro_f1", ("accuracy",), 20, 0.149,
               (8000, 2000, 1000), "test"),
    "babi-2": (None, None, "paragraph", "question", LOCATIONS, "micro_f1", ("accuracy",), 20, 0.187,
               (8000, 2000, 1000), "test"),
    "babi-3": (None, None, "paragraph", "question", LOCATIONS, "micro_f1", ("accuracy",), 20, 0.185,
               (8000, 2000, 1000), "test"),
    "boolq": ("aps/super_glue", "boolq", "passage", "question", ("False", "True"), "accuracy", (), 15, 0.622,
              (7542, 1885, 3270), "validation"),
    "cb": ("aps/super_glue", "cb", "premise", "hypothesis", ("entailment", "contradiction", "neutral"), "macro_f1",
           ("accuracy",), 50, 0.222, (200, 50, 56), "validation"),
    "cola": ("nyu-mll/glue", "cola", "sentence", None, ("unacceptable", "acceptable"), "matthew", ("accuracy",), 15,
             0.0, (6841, 1710, 1043), "validation"),
    "imdb": ("stanfordnlp/imdb", "plain_text", "text", None, ("neg", "pos"), "macro_f1", ("accuracy",), 10, 0.333,
             (20000, 5000, 25000), "test"),
    "mimic-a": (None, None, "text", None, ("negative", "positive"), "macro_f1", ("accuracy",), 20, 0.389,
                (4262, 729, 1243), "test"),
    "mimic-d": (None, None, "text", None, ("negative", "positive"), "macro_f1", ("accuracy",), 20, 0.445,
                (8066, 1573, 1729), "test"),
    "mnli": ("nyu-mll/glue", "mnli", "premise", "hypothesis", NLI3, "accuracy", (), 10, 0.354,
             (314162, 78540, 9815), "validation_matched"),
    "mrpc": ("nyu-mll/glue", "mrpc", "sentence1", "sentence2", ("not_equivalent", "equivalent"), "macro_f1",
             ("accuracy",), 20, 0.406, (2934, 734, 408), "validation"),
    "qnli": ("nyu-mll/glue", "qnli", "sentence", "question", ("entailment", "not_entailment"), "accuracy", (), 20,
             0.505, (83794, 20949, 5463), "validation"),
    "qqp": ("nyu-mll/glue", "qqp", "question1", "question2", ("not_duplicate", "duplicate"), "macro_f1",
            ("accuracy",), 10, 0.387, (291077, 72769, 40430), "validation"),
    "rte": ("nyu-mll/glue", "rte", "sentence1", "sentence2", ("entailment", "not_entailment"), "accuracy", (), 30,
            0.473, (1992, 498, 277), "validation"),
    "snli": ("stanfordnlp/snli", "plain_text", "premise", "hypothesis", NLI3, "accuracy", ("macro_f1",), 10, 0.343,
             (549367, 9842, 9824), "test"),
    "sst2": ("nyu-mll/glue", "sst2", "sentence", None, ("negative", "positive"), "accuracy", ("macro_f1",), 10,
             0.509, (53879, 13470, 872), "validation"),
    "wnli": ("nyu-mll/glue", "wnli", "sentence1", "sentence2", ("not_entailment", "entailment"), "accuracy", (), 20,
             0.437, (508, 127, 71), "validation"),
}
TRAIN80 = [name for name, row in PAPER.items() if row[0] is not None and name != "snli"]
FORMATS = ["parquet", "jsonl", "csv", "hub-dir"]


def source_frame(name, split, n, label=lambda i, k: i % k):
    """n rows with the hub's column names; texts say where they came from."""
    _, _, a, b, labels, *_ = PAPER[name]
    columns = {a: [f"{a} {split} {i}" for i in range(n)]}
    if b:
        columns[b] = [f"{b} {split} {i}" for i in range(n)]
    columns["label"] = [label(i, len(labels)) for i in range(n)]
    columns["idx"] = list(range(n))  # hub extras are ignored
    return pd.DataFrame(columns)


def write(frame, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        frame.to_parquet(path)
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_csv(path, index=False)
    return path


def expected_rows(name, split, indices):
    _, _, a, b, labels, *_ = PAPER[name]
    data = [(f"{a} {split} {i}", f"{b} {split} {i}") if b else f"{a} {split} {i}" for i in indices]
    return data, [labels[i % len(labels)] for i in indices]


def hub_sources(name):
    """Source splits as on the hub, including splits the paper must not use."""
    test_split = PAPER[name][-1]
    sources = {"train": source_frame(name, "train", 10), test_split: source_frame(name, test_split, 3)}
    if name == "mnli":
        sources["validation_mismatched"] = source_frame(name, "validation_mismatched", 3)
    if name == "imdb":
        sources["unsupervised"] = source_frame(name, "unsupervised", 3, label=lambda i, k: -1)
    elif test_split == "validation":
        sources["test"] = source_frame(name, "test", 3, label=lambda i, k: -1)  # hidden GLUE test labels
    if name == "boolq":  # a bool label column (e.g. a JSON export) maps to "False"/"True"
        for frame in sources.values():
            frame["label"] = frame["label"].astype(bool)
    return sources


def load_from_fixture(name, fmt, tmp_path, **kwargs):
    config = PAPER[name][1]
    if fmt == "hub-dir":  # a clone of the hub repository: <config>/<split>-00000-of-00001.parquet
        for split, frame in hub_sources(name).items():
            write(frame, tmp_path / config / f"{split}-00000-of-00001.parquet")
        return load_paper_dataset(name, data_dir=tmp_path, **kwargs)
    files = {split: write(frame, tmp_path / f"{split}.{fmt}") for split, frame in hub_sources(name).items()}
    return load_paper_dataset(name, data_files=files, **kwargs)


@pytest.mark.parametrize("name", sorted(PAPER))
def test_registry_matches_spec_table(name):
    hub, config, a, b, labels, primary, also, epochs, majority, sizes, test_split = PAPER[name]
    spec = get_dataset_spec(name)
    assert (spec.hub_path, spec.hub_config) == (hub, config)
    assert spec.segments == ((a,) if b is None else (a, b))
    assert spec.target_names == labels
    assert spec.metrics == (primary, *also) and spec.max_epochs == epochs
    assert spec.majority_baseline == majority and spec.sizes == sizes
    assert spec.source_split("test") == test_split
    assert spec.source_split("validation") == ("validation" if name in ("snli", "mimic-a", "mimic-d") else "train")


def test_every_dataset_is_registered():
    assert list_paper_datasets() == sorted(PAPER)


@pytest.mark.parametrize("name, fmt", [(name, FORMATS[i % len(FORMATS)]) for i, name in enumerate(TRAIN80)])
def test_paper_splits_and_fields_from_hub_layout_files(name, fmt, tmp_path):
    dataset = load_from_fixture(name, fmt, tmp_path)
    test_split = PAPER[name][-1]
    assert isinstance(dataset, PaperDataset) and dataset.name == name
    for split, source, indices in (("train", "train", range(8)), ("validation", "train", range(8, 10)),
                                   ("test", test_split, range(3))):
        bunch = dataset[split]
        data, target = expected_rows(name, source, indices)
        assert bunch.data == data, (split, fmt)
        assert bunch.target.tolist() == target
        assert bunch.split == split and bunch.name == name
        assert bunch.primary_metric == PAPER[name][5] and bunch.segments == dataset.segments
        assert bunch.feature_names == list(dataset.segments)
        assert bunch.target_names == list(PAPER[name][4])
        assert list(bunch.frame.columns) == [*dataset.segments, "label"]
        assert PAPER[name][1] in bunch.DESCR and "80%" in bunch.DESCR


def test_snli_keeps_original_splits_and_drops_rows_without_gold_label(tmp_path):
    no_gold = {2, 5}
    files = {
        split: write(source_frame("snli", split, 7, label=lambda i, k: -1 if i in no_gold else i % k),
                     tmp_path / f"{split}.parquet")
        for split in ("train", "validation", "test")
    }
    dataset = load_paper_dataset("snli", data_files=files)
    kept = [i for i in range(7) if i not in no_gold]
    for split in ("train", "validation", "test"):
        data, target = expected_rows("snli", split, kept)
        assert dataset[split].data == data and dataset[split].target.tolist() == target


def test_snli_1_0_jsonl_columns_can_be_renamed(tmp_path):
    raw = pd.DataFrame({"sentence1": ["p0", "p1", "p2"], "sentence2": ["h0", "h1", "h2"],
                        "gold_label": ["neutral", "-", "contradiction"]})
    path = write(raw, tmp_path / "snli_1.0_test.jsonl")
    test = load_paper_dataset("snli", split="test", data_files={"test": path},
                              columns={"premise": "sentence1", "hypothesis": "sentence2", "label": "gold_label"})
    assert test.data == [("p0", "h0"), ("p2", "h2")]
    assert test.target.tolist() == ["neutral", "contradiction"]


def test_mnli_uses_validation_matched_and_imdb_its_test_split(tmp_path):
    mnli = load_from_fixture("mnli", "hub-dir", tmp_path / "mnli")
    assert mnli.test.data[0] == ("premise validation_matched 0", "hypothesis validation_matched 0")
    imdb = load_from_fixture("imdb", "hub-dir", tmp_path / "imdb")
    assert imdb.test.data == ["text test 0", "text test 1", "text test 2"]


def test_one_split_reads_only_its_source_files(tmp_path):
    path = write(source_frame("sst2", "validation", 4), tmp_path / "dev.csv")
    test = load_paper_dataset("sst2", split="test", data_files={"validation": path})
    assert test.data == expected_rows("sst2", "validation", range(4))[0]
    with pytest.raises(ValueError, match="no files for source split 'train'"):
        load_paper_dataset("sst2", split="train", data_files={"validation": path})


def test_pairs_as_frame(tmp_path):
    dataset = load_from_fixture("rte", "parquet", tmp_path, as_frame=True)
    assert list(dataset.train.data.columns) == ["sentence1", "sentence2"]
    assert dataset.train.data.iloc[0].tolist() == ["sentence1 train 0", "sentence2 train 0"]
    assert isinstance(dataset.test.target, pd.Series)


@pytest.mark.parametrize("layout", ["convert-names", "split-dirs"])
def test_other_hub_directory_layouts(layout, tmp_path):
    for split, frame in hub_sources("cb").items():
        # the hub's Parquet-export branch: cb/super_glue-train.parquet or cb/train/0000.parquet
        name = f"super_glue-{split}.parquet" if layout == "convert-names" else f"{split}/0000.parquet"
        write(frame, tmp_path / "cb" / name)
    dataset = load_paper_dataset("cb", data_dir=tmp_path)
    assert dataset.test.data == expected_rows("cb", "validation", range(3))[0]
    assert len(dataset.train.data) == 8


def test_save_to_disk_directory_uses_its_class_label_names(tmp_path):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=list(PAPER["cb"][4]))})
    splits = {split: datasets.Dataset.from_pandas(source_frame("cb", split, n).drop(columns="idx"), features=features)
              for split, n in (("train", 10), ("validation", 3))}
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "cb"))
    dataset = load_paper_dataset("cb", data_dir=tmp_path / "cb")
    assert dataset.train.target.tolist() == expected_rows("cb", "train", range(8))[1]
    # ClassLabel names that are not the paper's labels are an error, not a silent relabelling
    features["label"] = datasets.ClassLabel(names=["yes", "no", "maybe"])
    datasets.DatasetDict({"validation": datasets.Dataset.from_pandas(
        source_frame("cb", "validation", 3).drop(columns="idx"), features=features)}).save_to_disk(str(tmp_path / "x"))
    with pytest.raises(ValueError, match="unknown labels"):
        load_paper_dataset("cb", split="test", data_dir=tmp_path / "x")


def test_mimic_from_local_csv_is_cleaned(tmp_path):
    raw = pd.DataFrame({"TEXT": ["Admitted [**2101-1-1**] with Hb 7.2!!", "No anemia -- discharged home"],
                        "diagnosis": ["positive", "negative"]})
    files = {split: write(raw, tmp_path / f"{split}.csv") for split in ("train", "validation", "test")}
    columns = {"text": "TEXT", "label": "diagnosis"}
    dataset = load_paper_dataset("mimic-a", data_files=files, columns=columns)
    assert dataset.train.data == ["admitted <DE> with hb [DIGITS]", "no anemia - discharged home"]
    assert dataset.test.target.tolist() == ["positive", "negative"]
    assert dataset.primary_metric == "macro_f1"
    raw_text = load_paper_dataset("mimic-d", split="test", data_files=files, columns=columns, clean_text=False)
    assert raw_text.data == raw["TEXT"].tolist()


def test_mimic_without_files_explains_how_to_provide_them():
    with pytest.raises(DatasetUnavailableError, match="credentialed.*data_files"):
        load_paper_dataset("mimic-a")


def test_babi_comes_from_the_generator_with_paper_sizes():
    dataset = load_paper_dataset("bAbI-1")
    assert [len(dataset[s].data) for s in ("train", "validation", "test")] == [8000, 2000, 1000]
    assert dataset.primary_metric == "micro_f1" and dataset.segments == ("paragraph", "question")
    train = dataset.train
    assert len(train.supporting_facts) == 8000 and train.story[0] == 0
    start, end = train.supporting_spans[0][0]
    assert train.data[0][0][start:end].endswith(f"{train.target[0]}.")
    again = load_paper_dataset("babi-1", split="validation")
    assert again.data == dataset.validation.data  # fixed by random_state=0
    assert load_paper_dataset("babi-1", split="validation", random_state=1).data != again.data


def test_babi_from_exported_files_with_string_answers(tmp_path):
    frame = make_babi(2, n_samples=5, random_state=0).frame.rename(columns={"label": "answer"})
    path = write(frame[["paragraph", "question", "answer"]], tmp_path / "qa2_test.jsonl")
    test = load_paper_dataset("babi-2", split="test", data_files={"test": path})
    assert test.data == list(zip(frame["paragraph"], frame["question"]))
    assert test.target.tolist() == frame["answer"].tolist()


def test_offline_and_not_cached_is_a_clear_error(monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError, match="not in the Hugging Face datasets cache.*data_files"):
        load_paper_dataset("sst2", split="test", cache_dir=tmp_path)


def test_missing_datasets_package_names_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ModuleNotFoundError, match="pip install datasets"):
        load_paper_dataset("qqp", split="test")


def test_names_are_forgiving():
    assert get_dataset_spec("MIMIC-a").name == "mimic-a"
    assert get_dataset_spec("SST-2").name == "sst2"
    assert get_dataset_spec("babi_3").name == "babi-3"


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda p: load_paper_dataset("glue"), ValueError, "unknown dataset name 'glue'.*sst2"),
        (lambda p: load_paper_dataset("sst2", split="dev"), ValueError, "split must be one of"),
        (lambda p: load_paper_dataset("sst2", data_files=p, data_dir=p.parent), ValueError, "not both"),
        (lambda p: load_paper_dataset("sst2", data_files={"train": p.with_suffix(".xlsx")}), ValueError,
         "cannot read"),
        (lambda p: load_paper_dataset("rte", split="train", data_files=p), ValueError, r"lacks column\(s\)"),
        (lambda p: load_paper_dataset("sst2", split="train", data_files=p.parent / "bad_ids.csv"), ValueError,
         "label ids must be in 0..1"),
        (lambda p: load_paper_dataset("sst2", split="train", data_files=p.parent / "unlabeled.csv"), ValueError,
         "no gold label"),
        (lambda p: load_paper_dataset("sst2", split="train", data_dir=p.parent / "empty"), FileNotFoundError,
         "no .* file for source split 'train'"),
        (lambda p: get_dataset_spec(1), TypeError, "name must be a str"),
    ],
)
def test_bad_arguments_and_data_are_reported(call, error, match, tmp_path):
    path = write(source_frame("sst2", "train", 4), tmp_path / "train.csv")
    write(source_frame("sst2", "train", 4, label=lambda i, k: 5), tmp_path / "bad_ids.csv")
    write(source_frame("sst2", "train", 4, label=lambda i, k: -1), tmp_path / "unlabeled.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(error, match=match):
        call(path)
