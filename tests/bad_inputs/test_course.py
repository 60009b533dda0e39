"""lmcourse.course: make warm, make runs and make book refuse what they cannot use in one sentence, stop
on Ctrl-C in one line, and keep the files they trust (the lessons' times, the results table) sealed."""
import json
import multiprocessing
import os
import stat
from pathlib import Path

import nbformat
import pytest

from lmcourse.authoring import book, lessons
from lmcourse.course.results import Results

from .helpers import assert_one_sentence, files_under


def good_notebook(path: Path, outputs=()) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A lesson\n\nWhat it teaches."),
                nbformat.v4.new_code_cell("print(1)", outputs=list(outputs)),
                nbformat.v4.new_code_cell("1 / 0")]
    nbformat.write(nb, str(path))
    return path


BROKEN = {
    "not JSON": "{ this is not json",
    "truncated": '{"cells": [{"cell_type": "code", "source": "x"',
    "a list": "[1, 2, 3]",
    "null": "null",
    "no cells": '{"metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
    "empty file": "",
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_warm_and_book_name_a_broken_notebook(tmp_path, capsys, monkeypatch, kind):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "01_broken.ipynb"
    path.write_text(BROKEN[kind])
    for main, argv in ((lessons.main, ["warm", str(path), "--scale", "ci"]),
                       (book.main, ["--out", str(tmp_path / "site"), str(path)])):
        assert main(argv) == 1
        out, err = capsys.readouterr()
        assert_one_sentence(err.removeprefix("error: "), r"01_broken\.ipynb is not a notebook that can be read")
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("ename, evalue", [("ZeroDivisionError", "division by zero"),
                                           ("ConfigError", "LMCOURSE_SCALE='x' is not a scale"),
                                           ("KeyboardInterrupt", "")])
def test_book_refuses_a_lesson_saved_with_an_error_naming_lesson_and_cell(tmp_path, capsys, ename, evalue):
    fine = good_notebook(tmp_path / "01_fine.ipynb")
    error = nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=["Traceback ...", ename])
    failed = good_notebook(tmp_path / "02_failed.ipynb", outputs=[error])
    assert book.main(["--out", str(tmp_path / "site"), str(fine), str(failed)]) == 1
    out, err = capsys.readouterr()
    assert_one_sentence(err.removeprefix("error: "), rf"02_failed\.ipynb was saved with an error in cell 2 \({ename}")
    assert not (tmp_path / "site").exists()  # refused before any page was written


@pytest.mark.parametrize("kind", ["file", "read-only folder", "under a file"])
def test_book_out_that_cannot_hold_a_site_is_one_sentence(tmp_path, capsys, kind):
    if kind == "read-only folder" and os.geteuid() == 0:
        pytest.skip("root may write into a read-only folder")
    out = tmp_path / "site"
    if kind == "file":
        out.write_text("keep me\n")
    elif kind == "read-only folder":
        out.mkdir()
        out.chmod(stat.S_IRUSR | stat.S_IXUSR)
    else:
        (tmp_path / "notes").write_text("keep me\n")
        out = tmp_path / "notes" / "site"
    before = files_under(tmp_path)
    try:
        assert book.main(["--out", str(out), str(good_notebook(tmp_path / "01_fine.ipynb"))]) == 1
    finally:
        if kind == "read-only folder":
            out.chmod(stat.S_IRWXU)
    _, err = capsys.readouterr()
    assert_one_sentence(err.removeprefix("error: "), r"(is a file, not a folder|is read-only|cannot be made)")
    assert {k: v for k, v in files_under(tmp_path).items() if "01_fine" not in k} == before


@pytest.mark.parametrize("argv, command, ids, scale", [
    (["warm", "--scale", "ci", "1"], "warm", ["01"], "ci"),  # the order of the module's docstring
    (["warm", "1", "--scale", "ci"], "warm", ["01"], "ci"),
    (["--scale", "ci", "warm", "1", "7"], "warm", ["01", "07"], "ci"),
    (["runs", "1", "2b"], "runs", ["01", "02b"], "cpu"),
    (["store", "--scale", "gpu", "7"], "store", ["07"], "gpu"),
])
def test_options_may_come_before_or_after_the_lessons(monkeypatch, argv, command, ids, scale):
    monkeypatch.delenv("LMCOURSE_SCALE", raising=False)
    seen = []
    monkeypatch.setattr(lessons, "_run", lambda *args: seen.append(args) or 0)
    assert lessons.main(argv) == 0
    assert seen[0][0] == command and seen[0][2] == scale
    assert [lessons.lesson_id(p) for p in seen[0][1]] == ids


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def _interrupt_in_the_kernel(*args, **kwargs):
    from nbclient.exceptions import CellExecutionError
    raise CellExecutionError("KeyboardInterrupt", "KeyboardInterrupt", "")


@pytest.mark.parametrize("command", ["warm", "runs", "store"])
@pytest.mark.parametrize("where", [_interrupt, _interrupt_in_the_kernel])
def test_ctrl_c_stops_warm_and_runs_in_one_line(monkeypatch, capsys, command, where):
    monkeypatch.setattr(lessons, "warm", where)
    monkeypatch.setattr(lessons, "regenerate_runs", where)
    assert lessons.main([command, "1", "--scale", "ci"]) == 130
    out, err = capsys.readouterr()
    assert_one_sentence(err.strip().removeprefix("error: "), r"^interrupted; ")


def test_gpu_scale_without_a_gpu_says_what_it_costs(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    note = lessons.gpu_on_cpu_note("gpu", lessons.lessons(["1", "2"]))
    assert_one_sentence(note.removeprefix("note: "), r"the gpu scale is sized for a GPU and this machine has none: "
                                                     r"2 lessons that take about 4 h on a GPU")
    assert lessons.gpu_on_cpu_note("cpu", lessons.lessons(["1"])) is None


# ------------------------------------------------------------------ the files the course trusts

def _flip_a_bit_of_a_number(path: Path) -> None:
    text = path.read_text()
    i = max(text.rfind("12.5"), text.rfind("2.0"))
    assert i >= 0
    path.write_text(text[:i] + "3" + text[i + 1:])


def test_a_flipped_digit_in_the_times_file_is_not_read_as_another_time(tmp_path, capsys):
    path = tmp_path / lessons.TIMES_FILE
    lessons._record_time("ci", Path("01_a.ipynb"), 12.5, path)
    lessons._record_time("cpu", Path("01_a.ipynb"), 2.0, path)
    assert lessons.measured_times(path) == {"ci/01_a.ipynb": 12.5, "cpu/01_a.ipynb": 2.0}
    _flip_a_bit_of_a_number(path)
    assert lessons.measured_times(path) == {}
    assert "does not match the checksum stored in it" in capsys.readouterr().err
    lessons._record_time("ci", Path("02_b.ipynb"), 3.0, path)  # written afresh
    assert lessons.measured_times(path) == {"ci/02_b.ipynb": 3.0}


def _writer(path: str, index: int, count: int) -> None:
    for k in range(count):
        lessons._record_time("ci", Path(f"{index:02d}_{k:03d}.ipynb"), float(k), Path(path))


def test_writers_sharing_the_times_file_lose_nothing(tmp_path):
    path = tmp_path / lessons.TIMES_FILE
    processes = [multiprocessing.get_context("spawn").Process(target=_writer, args=(str(path), i, 15))
                 for i in range(4)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    assert len(lessons.measured_times(path)) == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([lessons.TIMES_FILE, lessons.TIMES_FILE + ".lock"])


def test_a_flipped_digit_in_the_results_file_is_moved_aside_not_read(tmp_path):
    path = tmp_path / "results.json"
    Results("embedded", "ci", path=path).add("KN5", "01", 12.5, 13.0)
    assert [r.valid_ppl for r in Results("embedded", "ci", path=path).rows] == [12.5]
    _flip_a_bit_of_a_number(path)
    with pytest.warns(RuntimeWarning, match="does not match the checksum"):
        assert Results("embedded", "ci", path=path).rows == []
    assert (tmp_path / "results.json.corrupt").is_file()


def test_a_results_file_from_before_the_seal_is_still_read(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps([{"model": "KN5", "lesson": "01", "valid_ppl": 12.5, "test_ppl": 13.0}]))
    assert [r.model for r in Results("embedded", "ci", path=path).rows] == ["KN5"]
