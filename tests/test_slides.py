"""The lessons' slide shows: the committed stamps are the declared demo paths, and stamping is idempotent."""
import copy
import json

import pytest

from lmcourse.course import slides
from lmcourse.course.lessons import lesson_id, lessons

LESSONS = lessons()


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_committed_stamps_are_the_declared_ones(path):
    nb = read(path)
    assert slides.differences(nb, lesson_id(path)) == [], (
        f"{path.name}'s slide types differ from lmcourse/course/slides.py: run "
        "python -m lmcourse.course.slides stamp")


@pytest.mark.parametrize("lesson", sorted(slides.DEMO))
def test_each_demo_path_is_well_formed(lesson):
    path = slides.DEMO[lesson]
    ids = [c for c, _ in path]
    assert len(ids) == len(set(ids)), f"lesson {lesson} names a cell twice"
    assert path[0][1] == slides.SLIDE, "a demo path opens with a new slide"
    assert {kind for _, kind in path} <= set(slides.TYPES) - {slides.SKIP}
    assert sum(kind == slides.SLIDE for _, kind in path) >= 5, "a ten-minute path has several slides"


def test_every_lesson_has_a_demo_path():
    assert {lesson_id(p) for p in LESSONS} <= set(slides.DEMO)


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_the_demo_path_is_in_notebook_order(path):
    nb = read(path)
    order = [c["id"] for c in nb["cells"]]
    declared = [c for c, _ in slides.DEMO[lesson_id(path)]]
    assert declared == sorted(declared, key=order.index), "the declared cells run out of the notebook's order"


def test_stamping_is_idempotent_and_skips_the_rest():
    path = LESSONS[0]
    nb = read(path)
    for cell in nb["cells"]:
        cell["metadata"].pop("slideshow", None)
    bare = copy.deepcopy(nb)
    assert slides.stamp(nb, lesson_id(path)) == len(nb["cells"])
    assert slides.stamp(nb, lesson_id(path)) == 0
    path_ids = dict(slides.DEMO[lesson_id(path)])
    for cell in nb["cells"]:
        assert cell["metadata"]["slideshow"]["slide_type"] == path_ids.get(cell["id"], slides.SKIP)
    assert [c["source"] for c in nb["cells"]] == [c["source"] for c in bare["cells"]]


def test_a_vanished_cell_id_is_named():
    path = LESSONS[0]
    nb = read(path)
    gone = slides.DEMO[lesson_id(path)][1][0]
    nb["cells"] = [c for c in nb["cells"] if c["id"] != gone]
    with pytest.raises(KeyError, match=gone):
        slides.stamp(nb, lesson_id(path))


def test_an_undeclared_lesson_is_refused_in_one_sentence():
    with pytest.raises(KeyError, match="no demo path"):
        slides.declared("99", ["c000"])


def test_stamp_file_writes_atomically_in_nbformat_layout(tmp_path):
    src = LESSONS[0]
    target = tmp_path / src.name
    nb = read(src)
    for cell in nb["cells"]:
        cell["metadata"].pop("slideshow", None)
    target.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    assert slides.stamp_file(target) == len(nb["cells"])
    assert target.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")
    assert slides.stamp_file(target) == 0
    assert [p.name for p in tmp_path.iterdir()] == [src.name]


def test_demo_length_counts_slides_and_stored_waits():
    nb = {"cells": [
        {"id": "a", "cell_type": "markdown", "metadata": {}, "source": ""},
        {"id": "b", "cell_type": "code", "metadata": {}, "source": "", "outputs": [
            {"output_type": "stream", "name": "stderr", "text": "fit: 100%|####| 3/3 [00:07<00:00]\n"}]},
        {"id": "c", "cell_type": "markdown", "metadata": {}, "source": ""},
        {"id": "d", "cell_type": "markdown", "metadata": {}, "source": ""}]}
    slides.DEMO["zz"] = (("a", slides.SLIDE), ("b", slides.ON), ("c", slides.FRAGMENT), ("d", slides.SUB))
    try:
        n = slides.demo_length(nb, "zz")
    finally:
        del slides.DEMO["zz"]
    assert (n["slides"], n["fragments"], n["live"], n["wait_s"]) == (2, 1, 1, 7.0)
    talk = slides.SPEAKING_S[slides.SLIDE] + slides.SPEAKING_S[slides.FRAGMENT] + slides.SPEAKING_S[slides.SUB]
    assert n["minutes"] == round((talk + 7) / 60, 1)
