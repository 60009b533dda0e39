"""Lessons 01 and 02 and the corpus they read: each prints, in its parameter cell, the one sentence
(catalog.corpus_note) saying it follows LMCOURSE_DATASET; lesson 01 shows its 5-gram on Penn Treebank beside the
published KN5, and that 5-gram, as the lesson fits it (stream mode), lands within 1% of the published 141.2."""
import json
import re

import pytest

from lmcourse.authoring import slides
from lmcourse.course import catalog
from lmcourse.literature import published


def cells(lesson: str) -> list[dict]:
    path = next(p for p in slides.lessons() if slides.lesson_id(p) == lesson)
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("lesson", ["01", "02"])
def test_the_parameter_cell_prints_which_corpus_the_lesson_reads(lesson):
    code = [c for c in cells(lesson) if c["cell_type"] == "code"]
    parameters = next((c for c in code if re.search(r"from lmcourse\.config import .*\bDATASET\b", source(c))), None)
    assert parameters is not None, f"lesson {lesson} never imports DATASET from lmcourse.config"
    assert f'print(corpus_note("{lesson}", DATASET))' in source(parameters), (
        f"lesson {lesson}'s parameter cell does not print corpus_note({lesson!r}, DATASET)")
    # the lesson reads the corpus the setting names, so the note must say it follows the setting
    assert lesson in catalog.HONOURS_DATASET
    note = catalog.corpus_note(lesson, "ptb")
    assert "ptb" in note and "as LMCOURSE_DATASET says" in note
    # and it reads that corpus: every load_corpus call of its code cells is given DATASET (01's real-text section
    # reads Penn Treebank through ptb_model.load, whatever the setting, and says so)
    calls = re.findall(r"load_corpus\(([^)]*)\)", "".join(source(c) for c in code))
    assert calls and all(arg == "DATASET" for arg in calls), calls


def test_lesson_01_shows_its_5_gram_on_penn_treebank_beside_the_published_kn5():
    lesson = cells("01")
    path = {cell for cell, _ in slides.DEMO["01"]}
    section = [c for c in lesson if "ptb_model.load()" in source(c)]
    assert len(section) == 1 and section[0]["id"] in path, "the PTB 5-gram should be one cell, on the demo path"
    text = source(section[0])
    assert 'smoothing="mkn"' in text and "order=5" in text and 'mode="stream"' in text
    assert 'published("ptb", "KN5")' in text and "corpus_card(" in text
    assert published("ptb", "KN5").test == 141.2


@pytest.mark.real_data
def test_the_5_gram_as_lesson_01_fits_it_on_penn_treebank_is_within_1_percent_of_the_published_kn5(real_data_dir):
    from lmcourse.corpora.data import load_corpus
    from lmcourse.lm import perplexity
    from lmcourse.ngram.model import NGramLM

    ptb = load_corpus("ptb", data_dir=real_data_dir)
    kn5 = NGramLM(ptb.vocab, order=5, smoothing="mkn", mode="stream").fit(ptb.train)
    ours, paper = perplexity(kn5, ptb.test), published("ptb", "KN5").test
    assert abs(ours / paper - 1) < 0.01, f"the stream-mode KN5 scores {ours:.2f} on PTB's test split, the paper {paper}"
