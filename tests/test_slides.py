"""The lessons' slide shows: the committed stamps are the declared demo paths, and stamping is idempotent."""
import copy
import json
import re

import pytest

from lmcourse.authoring import slides
from lmcourse.authoring.lessons import lesson_id, lessons

LESSONS = lessons()


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_committed_stamps_are_the_declared_ones(path):
    nb = read(path)
    assert slides.differences(nb, lesson_id(path)) == [], (
        f"{path.name}'s slide types differ from lmcourse/authoring/slides.py: run "
        "python -m lmcourse.authoring.slides stamp")


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
            {"output_type": "stream", "name": "stderr", "text": "fit: 100%|####| 3/3 [00:05<00:00]\n"},
            {"output_type": "stream", "name": "stdout", "text": "9 settings in 2.0 s\n"}]},  # the longer: 5 s
        {"id": "c", "cell_type": "markdown", "metadata": {}, "source": ""},
        {"id": "d", "cell_type": "markdown", "metadata": {}, "source": ""}]}
    slides.DEMO["zz"] = (("a", slides.SLIDE), ("b", slides.ON), ("c", slides.FRAGMENT), ("d", slides.SUB))
    try:
        n = slides.demo_length(nb, "zz")
    finally:
        del slides.DEMO["zz"]
    assert (n["slides"], n["fragments"], n["live"], n["wait_s"]) == (2, 1, 1, 5.0)
    talk = slides.SPEAKING_S[slides.SLIDE] + slides.SPEAKING_S[slides.FRAGMENT] + slides.SPEAKING_S[slides.SUB]
    assert n["minutes"] == round((talk + 5) / 60, 1)


# --- the static decks (make slides) ---------------------------------------------------------------

def demo_images(nb, lesson):
    """Pictures in the outputs of the cells on the demo path (a widget's output carries its picture)."""
    path = dict(slides.DEMO[lesson])
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] if c["id"] in path for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    from lmcourse.authoring import deck

    out = tmp_path_factory.mktemp("slides")
    chosen = [p for p in LESSONS if lesson_id(p) in ("01", "05", "09")]  # a widget in 05, a leaderboard in 09
    return out, chosen, deck.build(out, chosen, reveal=False)


def test_each_deck_holds_the_demo_path_and_its_figures(decks):
    out, chosen, built = decks
    assert [d["file"] for d in built] == [f"{p.stem}.slides.html" for p in chosen]
    for path, d in zip(chosen, built):
        nb = read(path)
        length = slides.demo_length(nb, lesson_id(path))
        assert d["slides"] == length["slides"], f"{d['file']}: {d['slides']} slides, the demo path has {length['slides']}"
        assert d["images"] == demo_images(nb, lesson_id(path)) > 0, f"{d['file']}: figures missing"
        page = (out / d["file"]).read_text(encoding="utf-8")
        for cell_id, kind in slides.DEMO[lesson_id(path)]:
            cell = next(c for c in nb["cells"] if c["id"] == cell_id)
            first = "".join(cell["source"]).splitlines()[:1]
            if cell["cell_type"] == "markdown" and first and first[0].startswith("#"):
                words = re.match(r"[\w ,]*", first[0].lstrip("#").strip())[0]  # the heading up to its first sign
                assert words.strip() in page, f"{d['file']}: the slide of cell {cell_id} is missing"
        assert "Exercise 1" not in page, f"{d['file']}: a skipped cell is in the deck"


def test_decks_fetch_nothing(decks):
    out, _, built = decks
    for d in built:
        page = (out / d["file"]).read_text(encoding="utf-8")
        assert d["remote"] == [], f"{d['file']} loads {d['remote']}"
        assert 'src="reveal.js/dist/reveal.js"' in page and 'href="reveal.js/dist/reveal.css"' in page
        assert not re.search(r"""<(?:script|link)\b[^>]*(?:src|href)=["']?(?:https?:)?//""", page)
    assert (out / "index.html").is_file()


def test_reveal_is_unpacked_only_when_its_digest_matches(tmp_path, monkeypatch):
    import hashlib
    import io
    import tarfile

    from lmcourse.authoring import deck

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("package/dist/reveal.js", "package/plugin/notes/notes.js", "package/README.md",
                     "package/dist/../../escape.js"):
            data = name.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tarball = buffer.getvalue()
    with pytest.raises(ValueError, match="sha256"):
        deck.unpack_reveal(tarball, tmp_path / "reveal")
    assert not (tmp_path / "reveal").exists()
    monkeypatch.setattr(deck, "REVEAL_SHA256", hashlib.sha256(tarball).hexdigest())
    home = deck.unpack_reveal(tarball, tmp_path / "reveal")
    files = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert files == ["dist/reveal.js", "plugin/notes/notes.js"]
    assert not (tmp_path / "escape.js").exists()
    monkeypatch.setenv("LMCOURSE_REVEAL", str(home))
    built = deck.build(tmp_path / "out", LESSONS[:1], mathjax=False)
    assert (tmp_path / "out" / deck.REVEAL_DIR / "dist" / "reveal.js").read_text() == "package/dist/reveal.js"
    assert built[0]["remote"] == []


def test_make_lessons_stamps_course_lessons_only_and_never_loses_a_run(tmp_path, monkeypatch):
    path = LESSONS[0]
    nb = read(path)
    for cell in nb["cells"]:
        cell["metadata"].pop("slideshow", None)
    assert slides.stamp_lesson(nb, tmp_path / path.name) is None  # not a course lesson: left alone
    assert all("slideshow" not in c["metadata"] for c in nb["cells"])
    assert slides.stamp_lesson(nb, path) is None and slides.differences(nb, lesson_id(path)) == []
    gone = slides.DEMO[lesson_id(path)][0][0]
    nb["cells"] = [c for c in nb["cells"] if c["id"] != gone]
    assert gone in slides.stamp_lesson(nb, path)
