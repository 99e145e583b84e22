"""make_babi: every answer and supporting fact re-derived by an independent reader of the text."""

import re

import numpy as np
import pandas as pd
import pytest

from fmmlearn.datasets import make_babi, train_test_split_bunch

LOCATIONS = ["garden", "hallway", "kitchen", "office", "bedroom", "bathroom"]

MOVE = re.compile(r"^(\w+) (?:moved|went|journeyed|travelled|went back) to the (\w+)\.$")
GRAB = re.compile(r"^(\w+) (?:picked up|got|grabbed|took) the (\w+)(?: there)?\.$")
DROP = re.compile(r"^(\w+) (?:dropped|discarded|put down|left) the (\w+)(?: there)?\.$")
QUESTIONS = {
    1: re.compile(r"^Where is (\w+)\?$"),
    2: re.compile(r"^Where is the (\w+)\?$"),
    3: re.compile(r"^Where was the (\w+) before the (\w+)\?$"),
}


def parse(paragraph):
    """Sentences as (kind, person, thing) with kind in move/grab/drop; fails on anything else."""
    events = []
    for sentence in re.split(r"(?<=\.) ", paragraph):
        for kind, pattern in (("move", MOVE), ("grab", GRAB), ("drop", DROP)):
            match = pattern.match(sentence)
            if match:
                events.append((kind, *match.groups()))
                break
        else:
            raise AssertionError(f"unparseable sentence {sentence!r}")
    return events


def check_story_is_possible(events):
    """Objects are only taken when free and present, and only put down by whoever holds them."""
    place, holder, lying = {}, {}, {}
    for kind, person, thing in events:
        if kind == "move":
            assert place.get(person) != thing, "moves go somewhere new"
            place[person] = thing
            continue
        assert person in place, "people handle objects only once we know where they are"
        if kind == "grab":
            assert thing not in holder and lying.get(thing, place[person]) == place[person]
            holder[thing] = person
            lying.pop(thing, None)
        else:
            assert holder.pop(thing) == person
            lying[thing] = place[person]


def last_move_before(events, person, end):
    """Index of the person's latest move among events[:end]."""
    return max(i for i in range(end) if events[i][0] == "move" and events[i][1] == person)


def where_person(events, person):
    i = last_move_before(events, person, len(events))
    return events[i][2], [i]


def where_object(events, obj):
    """Backward scan: the object's latest pick-up or put-down decides (task 2)."""
    i = max(i for i, (kind, _, thing) in enumerate(events) if kind != "move" and thing == obj)
    kind, person, _ = events[i]
    end = i if kind == "drop" else len(events)  # carried: wherever the carrier is now
    move = last_move_before(events, person, end)
    return events[move][2], sorted({i, move})


def object_timeline(events, obj):
    """[(location, fact that put it there, pick-up that carried it there)] by replaying prefixes."""
    timeline = []
    for t in range(1, len(events) + 1):
        prefix = events[:t]
        if not any(kind != "move" and thing == obj for kind, _, thing in prefix):
            continue
        location, _ = where_object(prefix, obj)
        if timeline and timeline[-1][0] == location:
            continue
        grab = max(i for i, (kind, _, thing) in enumerate(prefix) if kind == "grab" and thing == obj)
        put = t - 1 if timeline else last_move_before(events, events[grab][1], grab)
        timeline.append((location, put, grab))
    return timeline


def where_before(events, obj, location):
    timeline = object_timeline(events, obj)
    visits = [k for k, (loc, _, _) in enumerate(timeline) if loc == location]
    assert len(visits) == 1 and visits[0] >= 1, "the question must be unambiguous"
    (before, put_before, _), (_, put, grab) = timeline[visits[0] - 1], timeline[visits[0]]
    return before, sorted({put_before, grab, put})


def simulate(task, paragraph, question):
    events = parse(paragraph)
    check_story_is_possible(events)
    args = QUESTIONS[task].match(question).groups()
    return events, {1: where_person, 2: where_object, 3: where_before}[task](events, *args)


@pytest.fixture(scope="module", params=[1, 2, 3])
def generated(request):
    return request.param, make_babi(request.param, n_samples=3000, random_state=request.param)


def test_answers_and_supporting_facts_match_independent_simulation(generated):
    task, babi = generated
    for (paragraph, question), answer, facts in zip(babi.data, babi.target, babi.supporting_facts):
        _, (expected_answer, expected_facts) = simulate(task, paragraph, question)
        assert answer == expected_answer, (paragraph, question)
        assert facts == expected_facts, (paragraph, question)


def test_supporting_spans_are_the_supporting_sentences(generated):
    task, babi = generated
    for (paragraph, _), facts, spans in zip(babi.data, babi.supporting_facts, babi.supporting_spans):
        sentences = re.split(r"(?<=\.) ", paragraph)
        assert len(facts) == task  # 1, 2 or 3 supporting facts
        assert [paragraph[start:end] for start, end in spans] == [sentences[j] for j in facts]


def test_paragraphs_grow_within_a_story(generated):
    _, babi = generated
    frame = babi.frame
    for _, story in frame.groupby("story"):
        paragraphs = story["paragraph"].tolist()
        assert 1 <= len(paragraphs) <= 5
        for shorter, longer in zip(paragraphs, paragraphs[1:]):
            assert longer.startswith(shorter + " ")
    assert not frame["paragraph"].str.contains("?", regex=False).any()


def test_labels_are_the_six_locations_in_paper_order(generated):
    _, babi = generated
    assert babi.target_names == LOCATIONS
    counts = pd.Series(babi.target).value_counts(normalize=True)
    assert set(counts.index) == set(LOCATIONS)
    assert counts.min() > 0.1  # no class is rare


def test_story_lengths_resemble_babi():
    lengths = {task: [len(parse(p)) for p, _ in make_babi(task, n_samples=500, random_state=0).data]
               for task in (1, 2, 3)}
    assert max(lengths[1]) == 10 and min(lengths[1]) == 2  # 5 questions, one every 2 statements
    assert np.mean(lengths[1]) < np.mean(lengths[2]) < np.mean(lengths[3])


def test_same_seed_same_samples_other_seed_other_samples():
    first, again, other = (make_babi(3, n_samples=200, random_state=seed) for seed in (7, 7, 8))
    assert first.data == again.data and first.supporting_facts == again.supporting_facts
    assert list(first.target) == list(again.target)
    assert first.data != other.data
    generator_seeded = make_babi(3, n_samples=200, random_state=np.random.default_rng(7))
    assert generator_seeded.data == first.data


def test_bunch_layout_and_as_frame():
    babi = make_babi(2, n_samples=50, random_state=0)
    assert len(babi.data) == len(babi.target) == len(babi.supporting_facts) == len(babi.story) == 50
    assert all(isinstance(p, str) and isinstance(q, str) for p, q in babi.data)
    assert babi.target.dtype.kind == "U"
    assert babi.feature_names == ["paragraph", "question"]
    assert "task 2" in babi.DESCR
    framed = make_babi(2, n_samples=50, random_state=0, as_frame=True)
    assert list(framed.data.columns) == ["paragraph", "question"]
    assert list(framed.data.itertuples(index=False, name=None)) == babi.data
    assert framed.target.tolist() == babi.target.tolist()
    assert list(framed.frame.columns) == [
        "paragraph", "question", "label", "supporting_facts", "supporting_spans", "story"]


def test_split_keeps_supporting_facts_aligned():
    babi = make_babi(1, n_samples=400, random_state=0)
    train, test = train_test_split_bunch(babi, test_size=0.25, random_state=0)
    assert (len(train.data), len(test.data)) == (300, 100)
    for part in (train, test):
        for (paragraph, question), answer, facts in zip(part.data, part.target, part.supporting_facts):
            assert simulate(1, paragraph, question)[1] == (answer, facts)


@pytest.mark.parametrize(
    "kwargs, error",
    [({"task": 4}, ValueError), ({"task": True}, ValueError), ({"task": 1.0}, ValueError),
     ({"n_samples": 0}, ValueError), ({"n_samples": 2.5}, ValueError), ({"random_state": "seed"}, TypeError)],
)
def test_invalid_arguments_are_rejected(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        make_babi(**{"task": 1, "n_samples": 5, **kwargs})


# -- the default stories never change; distractor paragraphs (distractors=True) -----------------------------

#: SHA-256 of make_babi's default output (frame, DESCR, keys) before distractors existed (commit 94d7cca):
#: the lead's pinned studies and every seed's samples depend on it.
DEFAULT_DIGESTS = {
    1: "7db96173066190590461c0579f68853199043fb138263f551259cfe1f3b86ae9",
    2: "65cfc0f229feb8073c3c070783ec69b43fd281b013652350717a041938068eb8",
    3: "3b8ea46dc354fc973f07fd5882546232345edbe91e55cd76cac5100ddb928f9b",
    "load_babi(1, 'test')": "cc00f0e20e98cdd92324dc90e80fa3388e313b118017c758b2f6e2b01a95da36",
}


def bunch_digest(bunch):
    import hashlib
    import json

    text = bunch.frame.to_json(orient="split") + bunch.DESCR + json.dumps(sorted(bunch.keys()))
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("which", list(DEFAULT_DIGESTS))
def test_default_output_is_byte_for_byte_what_it_was(which):
    from fmmlearn.datasets import load_babi

    bunch = load_babi(1, split="test") if isinstance(which, str) else make_babi(which, n_samples=2000,
                                                                                random_state=which)
    assert bunch_digest(bunch) == DEFAULT_DIGESTS[which]
    assert bunch_digest(make_babi(1, n_samples=300, random_state=5, distractors=False)) == bunch_digest(
        make_babi(1, n_samples=300, random_state=5))


@pytest.fixture(scope="module")
def distracted():
    return make_babi(1, n_samples=4000, distractors=True, random_state=21)


def test_distractor_answers_and_supporting_facts_match_independent_simulation(distracted):
    for (paragraph, question), answer, facts, spans in zip(distracted.data, distracted.target,
                                                         distracted.supporting_facts, distracted.supporting_spans):
        _, (expected_answer, expected_facts) = simulate(1, paragraph, question)
        assert (answer, facts) == (expected_answer, expected_facts), (paragraph, question)
        sentences = re.split(r"(?<=\.) ", paragraph)
        assert [paragraph[s:e] for s, e in spans] == [sentences[j] for j in facts]


def test_every_answer_is_named_twice_by_two_people_there_now(distracted):
    """The supporting move and one distractor: another person's latest move, to the same place."""
    for (paragraph, _), answer, facts, spans, flags in zip(distracted.data, distracted.target,
                                                          distracted.supporting_facts, distracted.answer_spans,
                                                          distracted.answer_supporting):
        events = parse(paragraph)
        naming = [i for i, (_, _, where) in enumerate(events) if where == answer]
        assert len(naming) == 2 and facts[0] in naming
        other = next(i for i in naming if i != facts[0])
        person = events[other][1]
        assert person != events[facts[0]][1] and where_person(events, person) == (answer, [other])
        assert all(paragraph[s:e] == answer for s, e in spans) and len(spans) == 2
        assert flags == [i == facts[0] for i in naming]
        # all four people are present, two in each of two places
        final = [where_person(events, p)[0] for p in {p for _, p, _ in events}]
        assert len(final) == 4 and sorted(np.unique(final, return_counts=True)[1]) == [2, 2]


def test_the_distractor_comes_before_or_after_the_supporting_fact_with_probability_one_half(distracted):
    from scipy.stats import binomtest

    supporting_first = [flags[0] for flags in distracted.answer_supporting]
    assert binomtest(sum(supporting_first), len(supporting_first), 0.5).pvalue > 1e-3
    # within each place of the story, too: the question does not pick the later (or earlier) mover
    lengths = np.array([p.count(".") for p, _ in distracted.data])
    for n in (4, 6, 8):
        picked = np.asarray(supporting_first)[lengths == n]
        assert binomtest(int(picked.sum()), len(picked), 0.5).pvalue > 1e-3


def test_distractor_stories_grow_and_use_locations_once(distracted):
    frame = distracted.frame
    for _, story in frame.groupby("story"):
        paragraphs = story["paragraph"].tolist()
        assert [p.count(".") for p in paragraphs] == [4, 6, 8, 10, 12][:len(paragraphs)]
        for shorter, longer in zip(paragraphs, paragraphs[1:]):
            assert longer.startswith(shorter + " ")
    assert list(frame.columns)[-2:] == ["answer_spans", "answer_supporting"]
    assert "Distractor paragraphs" in distracted.DESCR
    again = make_babi(1, n_samples=50, distractors=True, random_state=21)
    assert again.data == distracted.data[:50] and again.answer_spans == distracted.answer_spans[:50]


def test_answer_occurrences_finds_whole_words_and_flags_the_supporting_ones():
    from fmmlearn.datasets import answer_occurrences

    paragraph = "Mary went to the garden. John moved to the gardens. Sandra went back to the garden."
    spans, flags = answer_occurrences([paragraph], ["garden"], [[(52, 83)]])
    assert spans == [[(17, 23), (76, 82)]] and flags == [[False, True]]
    assert answer_occurrences([paragraph], ["office"], [[(52, 83)]]) == ([[]], [[]])
    with pytest.raises(ValueError, match="one entry per sample"):
        answer_occurrences([paragraph], ["garden", "office"], [[]])
    babi = make_babi(1, n_samples=300, random_state=4)   # the default stories: found from the text alone
    spans, flags = answer_occurrences([p for p, _ in babi.data], babi.target, babi.supporting_spans)
    for (paragraph, _), answer, where, supporting, (fact,) in zip(babi.data, babi.target, spans, flags,
                                                                 babi.supporting_spans):
        assert len(where) == paragraph.split().count(answer + ".") and sum(supporting) == 1
        assert [fact[0] <= s and e <= fact[1] for s, e in where] == supporting


@pytest.mark.parametrize("kwargs, error, message", [
    ({"task": 2, "distractors": True}, ValueError, "task 1 only"),
    ({"task": 3, "distractors": True}, ValueError, "task 1 only"),
    ({"distractors": "yes"}, TypeError, "distractors must be a bool"),
])
def test_distractor_arguments_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        make_babi(**{"task": 1, "n_samples": 5, **kwargs})


def test_load_babi_with_distractors_carries_the_occurrences():
    from fmmlearn.datasets import load_babi

    dataset = load_babi(1, distractors=True)
    assert [len(dataset[s].data) for s in ("train", "validation", "test")] == [8000, 2000, 1000]
    for split in ("train", "test"):
        bunch = dataset[split]
        assert {"answer_spans", "answer_supporting"} <= set(bunch.frame.columns)
        assert all(sum(flags) == 1 and len(flags) == 2 for flags in bunch.answer_supporting)
    assert "answer_spans" not in load_babi(1, split="test").frame.columns
    with pytest.raises(ValueError, match="generated bAbI-1 only"):
        load_babi(2, distractors=True)
    with pytest.raises(ValueError, match="source='facebook'"):
        load_babi(1, source="facebook", distractors=True)


# -- Facebook's original bAbI (load_babi(source="facebook")) on local fixtures in its formats --------------


def babi_stories(frame):
    """The generator's examples as Facebook's stories: numbered statements with the questions in between."""
    stories = []
    for _, rows in frame.groupby("story", sort=False):
        sentences = re.split(r"(?<=\.) ", rows["paragraph"].iloc[-1])
        story = {"id": [], "type": [], "text": [], "supporting_ids": [], "answer": []}
        line_of, written = {}, 0
        for row in rows.itertuples():
            for sentence in re.split(r"(?<=\.) ", row.paragraph)[written:]:
                line_of[written] = str(len(story["id"]) + 1)
                for key, value in zip(story, (line_of[written], 0, sentence, [], "")):
                    story[key].append(value)
                written += 1
            assert sentences[:written] == re.split(r"(?<=\.) ", row.paragraph)
            for key, value in zip(story, (str(len(story["id"]) + 1), 1, row.question,
                                          [line_of[j] for j in row.supporting_facts], row.label)):
                story[key].append(value)
        stories.append(story)
    return stories


def babi_text(stories):
    """Stories in the layout of Facebook's .txt files (question lines: text, tab, answer, tab, supporting ids)."""
    lines = []
    for story in stories:
        for line_id, kind, text, support, answer in zip(*story.values()):
            lines.append(f"{line_id} {text}" if kind == 0 else f"{line_id} {text} \t{answer}\t{' '.join(support)}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def facebook_like():
    """50 train and 10 test examples of task 2, as the generator makes them (the expected result)."""
    return {"train": make_babi(2, n_samples=50, random_state=11).frame,
            "test": make_babi(2, n_samples=10, random_state=12).frame}


def assert_same_examples(bunch, frame):
    got = bunch.frame.reset_index(drop=True)
    for column in ("paragraph", "question", "label", "supporting_facts", "supporting_spans"):
        assert got[column].tolist() == frame[column].tolist(), column
    assert got["story"].tolist() == frame["story"].tolist()          # story ids of the source split


def test_facebook_text_files_give_the_generators_example_structure(tmp_path, facebook_like):
    from fmmlearn.datasets import load_babi

    folder = tmp_path / "tasks_1-20_v1-2" / "en-10k"
    folder.mkdir(parents=True)
    for split, frame in facebook_like.items():
        (folder / f"qa2_two-supporting-facts_{split}.txt").write_text(babi_text(babi_stories(frame)))
    # Another set and another task in the same archive must not be picked up.
    (tmp_path / "tasks_1-20_v1-2" / "en").mkdir()
    (tmp_path / "tasks_1-20_v1-2" / "en" / "qa2_two-supporting-facts_train.txt").write_text("1 Mary moved.\n")
    (folder / "qa1_single-supporting-fact_train.txt").write_text("1 John went to the office.\n")
    dataset = load_babi(2, source="facebook", data_dir=tmp_path)
    assert [len(dataset[s].data) for s in ("train", "validation", "test")] == [40, 10, 10]   # 80/20 of train
    assert_same_examples(dataset.train, facebook_like["train"].iloc[:40])
    assert_same_examples(dataset.validation, facebook_like["train"].iloc[40:].reset_index(drop=True))
    assert_same_examples(dataset.test, facebook_like["test"])
    assert dataset.test.target_names == LOCATIONS and dataset.primary_metric == "micro_f1"
    assert "Facebook's bAbI en-10k qa2" in dataset.test.DESCR
    for (paragraph, question), answer, facts in zip(dataset.test.data, dataset.test.target,
                                                    dataset.test.supporting_facts):
        assert simulate(2, paragraph, question)[1] == (answer, facts)      # the independent reader agrees


def hub_dataset(stories):
    """Stories as a datasets.Dataset with the features of facebook/babi_qa."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"story": datasets.Sequence({
        "id": datasets.Value("string"), "type": datasets.ClassLabel(names=["context", "question"]),
        "text": datasets.Value("string"), "supporting_ids": datasets.Sequence(datasets.Value("string")),
        "answer": datasets.Value("string")})})
    return datasets.Dataset.from_dict({"story": stories}, features=features)


def test_facebook_through_datasets_load_dataset(monkeypatch, facebook_like):
    datasets = pytest.importorskip("datasets")
    from fmmlearn.datasets import load_babi

    calls = []

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        return hub_dataset(babi_stories(facebook_like[split]))

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    dataset = load_babi(2, source="facebook", cache_dir="/tmp/babi-cache")
    assert calls == [("facebook/babi_qa", "en-10k-qa2", "train"), ("facebook/babi_qa", "en-10k-qa2", "test")]
    assert_same_examples(dataset.train, facebook_like["train"].iloc[:40])
    assert_same_examples(dataset.test, facebook_like["test"])
    generated = load_babi(2, split="test")                   # both sources: the same Bunch layout
    assert list(generated.frame.columns) == list(dataset.test.frame.columns)
    assert generated.feature_names == dataset.test.feature_names and generated.segments == dataset.test.segments


def test_facebook_in_the_hubs_parquet_layout(tmp_path, facebook_like):
    from fmmlearn.datasets import load_babi

    for split, frame in facebook_like.items():
        path = tmp_path / "en-10k-qa2" / f"{split}-00000-of-00001.parquet"
        path.parent.mkdir(exist_ok=True)
        hub_dataset(babi_stories(frame)).to_parquet(str(path))
    test = load_babi(2, split="test", source="facebook", data_dir=tmp_path)
    assert_same_examples(test, facebook_like["test"])
    files = load_babi(2, split="test",
                      data_files={"test": str(tmp_path / "en-10k-qa2" / "test-00000-of-00001.parquet")})
    assert_same_examples(files, facebook_like["test"])  # local files mean Facebook's data


def test_facebook_offline_without_a_cache_says_what_to_do(monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    from fmmlearn.datasets import DatasetUnavailableError, load_babi

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DatasetUnavailableError, match=r"'facebook/babi_qa', configuration 'en-10k-qa1'.*"
                                                      r"source='generated'.*HF_DATASETS_OFFLINE=0.*data_dir="):
        load_babi(1, split="test", source="facebook", cache_dir=tmp_path)


def test_babi_source_arguments_are_checked(tmp_path):
    from fmmlearn.datasets import load_babi, load_paper_dataset

    with pytest.raises(ValueError, match="source must be one of"):
        load_babi(1, source="tfds")
    with pytest.raises(ValueError, match="source='generated' ignores data_files"):
        load_babi(1, source="generated", data_files={"test": tmp_path / "x.txt"})
    with pytest.raises(ValueError, match="only applies to bAbI"):
        load_paper_dataset("sst2", source="facebook")
    with pytest.raises(ValueError, match="task must be 1, 2 or 3"):
        load_babi(4)
    bad = tmp_path / "qa1_single-supporting-fact_test.txt"
    bad.write_text("1 Mary moved to the office.\n2 Where is Mary? \toffice\t7\n")
    with pytest.raises(ValueError, match=r"supporting line\(s\) \['7'\] that are not statements"):
        load_babi(1, split="test", source="facebook", data_dir=tmp_path)
