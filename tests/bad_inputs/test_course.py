"""lmcourse.authoring: make warm, make runs and make book refuse what they cannot use in one sentence, stop
on Ctrl-C in one line, and keep the files they trust (the lessons' times, the results table) sealed."""
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from lmcourse.authoring import book, lessons
from lmcourse.course.results import Results

from .helpers import REPO, assert_one_sentence, child_env, files_under


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


def test_gpu_scale_without_a_gpu_says_what_it_costs_and_promises_no_time(monkeypatch):
    """Issue 42, unclear: lesson 01 at gpu, which counts n-grams as at cpu, was announced as "about 2 h"."""
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    note = lessons.gpu_on_cpu_note("gpu", lessons.lessons(["1", "2"]))
    assert_one_sentence(note.removeprefix("note: "), r"the gpu scale is sized for a GPU and this machine has none: "
                                                     r"where these 2 lessons train at gpu sizes \(each lesson's header "
                                                     r"says what that costs\) they take many times longer on the CPU")
    alone = lessons.gpu_on_cpu_note("gpu", lessons.lessons(["1"]))
    assert "this lesson" in alone and not re.search(r"\d+(\.\d+)? ?h\b", alone)
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
    assert [p.name for p in tmp_path.iterdir()] == [lessons.TIMES_FILE]  # the lock file goes with its last holder


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


# ------------------------------------------------------------------ the make targets the README documents

MODULES = {"warm": "lessons", "lessons": "lessons", "runs": "lessons", "book": "book", "slides": "deck"}
ASSIGNMENT = r'[A-Z_]+=(?:"[^"]*"|[^\s"`#]+)'
MAKE_FORM = re.compile(rf"((?:{ASSIGNMENT}\s+)*)make\s+({'|'.join(MODULES)})\b((?:\s+{ASSIGNMENT})*)")


def documented_make_forms() -> list:
    """Every ``[VAR=value ...] make TARGET [VAR=value ...]`` of the README and the pages of ``docs/`` it links, in
    their code blocks (comments included) and in their inline code, for the targets that run a module of the
    course."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    places = [line for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S) for line in block.splitlines()]
    places += re.findall(r"`([^`\n]*make [^`\n]*)`", text)
    return sorted({m.group(0).strip() for place in places for m in MAKE_FORM.finditer(place)})


def _assignments(text: str) -> dict:
    return {k: v.strip('"') for k, v in (a.split("=", 1) for a in shlex.split(text))}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_make_form_the_readme_documents_parses(monkeypatch):
    """Issue 42, defect 5: `LESSONS="5 9" make slides`, as the README documents it, ended in "unrecognized arguments:
    5 9". Each documented form is run through make (-n: the command only) and its module's argument parsing."""
    from lmcourse.authoring import deck

    monkeypatch.delenv("LMCOURSE_SCALE", raising=False)  # as the README's reader has it: the forms set it
    forms = documented_make_forms()
    assert {MAKE_FORM.fullmatch(f).group(2) for f in forms} == set(MODULES)  # the README documents every target
    assert 'LESSONS="5 9" make slides' in forms and any("LESSONS=" in f and "make warm" in f for f in forms)
    parsers = {"lessons": lessons.parse_args, "book": book.parse_args, "deck": deck.parse_args}
    for form in forms:
        before, target, after = MAKE_FORM.fullmatch(form).groups()
        env = dict(os.environ, **_assignments(before))
        dry = subprocess.run(["make", "-n", target, *shlex.split(after)], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=60)
        assert dry.returncode == 0, (form, dry.stderr)
        commands = [shlex.split(line) for line in dry.stdout.splitlines() if " -m lmcourse.authoring." in line]
        assert commands, (form, dry.stdout)
        for words in commands:
            module = words[words.index("-m") + 1].rsplit(".", 1)[-1]
            args = parsers[module](words[words.index("-m") + 2:])  # argparse ends the test on a refusal
            wanted = _assignments(before + " " + after).get("LESSONS", "").split()
            if getattr(args, "command", "build") != "fetch":
                assert [lessons.lesson_id(p) for p in lessons.lessons(args.lessons)] == \
                    [lessons.lesson_id(p) for p in lessons.lessons(wanted)], form
            if module == "lessons":
                for key, value in _assignments(before).items():
                    monkeypatch.setenv(key, value)
                assert lessons._scale(args.scale) == _assignments(before).get("LMCOURSE_SCALE", "cpu")
                for key in _assignments(before):
                    monkeypatch.delenv(key)


# ------------------------------------------------------------------ Ctrl-C: one line and status 130


def _sleeping_lesson(folder: Path) -> tuple[Path, Path]:
    """A lesson whose cell marks that it runs, then sleeps: (its path, the mark)."""
    mark = folder / "running"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"import pathlib, time\npathlib.Path({str(mark)!r}).touch()\n"
                                          "time.sleep(300)")]
    path = folder / "01_sleep.ipynb"
    nbformat.write(nb, str(path))
    return path, mark


def _children(pid: int) -> list:
    """The processes whose parent is ``pid`` (a lesson's kernel)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if f"\nPPid:\t{pid}\n" in status.read_text():
                found.append(int(status.parent.name))
        except OSError:
            pass
    return found


def _wait_for(test, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not test():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads /proc to know when to press Ctrl-C")
@pytest.mark.parametrize("when", ["while Python starts", "while the kernel starts", "while a cell runs",
                                  "while a cell runs, to the group"])
def test_ctrl_c_during_make_warm_is_one_line_and_130(tmp_path, when):
    """Issue 42, defect 6: Ctrl-C during `make warm` printed a 37-49 line traceback (DeadKernelError, then an
    AssertionError from nbclient) and ended with status 1; unclear: a raw traceback on Ctrl-C while Python starts."""
    path, mark = _sleeping_lesson(tmp_path)
    env = dict(child_env(), LMCOURSE_CACHE=str(tmp_path / "cache"))
    run = subprocess.Popen([sys.executable, "-m", "lmcourse.authoring.lessons", "warm", str(path), "--scale", "ci"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                           start_new_session=True)
    try:
        maps = Path(f"/proc/{run.pid}/maps")
        if when == "while Python starts":  # lmcourse is imported (its handler set) and torch is loading
            _wait_for(lambda: "torch" in maps.read_text())
        elif when == "while the kernel starts":
            _wait_for(lambda: _children(run.pid) or run.poll() is not None)
            assert not mark.exists()
        else:
            _wait_for(lambda: mark.exists() or run.poll() is not None)
        assert run.poll() is None, run.communicate()[1]
        kernels = _children(run.pid)
        if when.endswith("to the group"):
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert "Traceback" not in err and "Error" not in err.replace("error: interrupted", ""), err
    last = err.strip().splitlines()[-1]
    assert_one_sentence(last.removeprefix("error: "), r"^interrupted")
    _wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in kernels), 30)  # no kernel left running


def test_a_kernel_that_cannot_start_is_one_sentence(tmp_path, capsys, monkeypatch):
    """Issue 42, unclear: `make warm` gave a raw traceback when the kernel could not start."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": ["/bin/false", "{connection_file}"],
                                                  "display_name": "broken", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    path, _ = _sleeping_lesson(tmp_path)
    assert lessons.main(["warm", str(path), "--scale", "ci"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert_one_sentence(err.removeprefix("error: "), r"^The Jupyter kernel for 01_sleep\.ipynb could not start \(.+\): "
                                                     r"check that ipykernel is installed")


def _raise_interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("tool", ["deck build", "book", "results page", "registry rekey", "train", "evaluate",
                                  "word-lstm"])
def test_ctrl_c_in_every_long_tool_is_one_line_and_130(tmp_path, capsys, monkeypatch, tool):
    from lmcourse.cli import reproduce
    from lmcourse.cli import word_lstm as word_lstm_cli
    from lmcourse.cli.main import main
    from lmcourse.authoring import deck, results_page
    from lmcourse.course import registry

    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    out = str(tmp_path / "out")
    calls = {
        "deck build": (deck, "build", lambda: deck.main(["build", "--out", out, "1"])),
        "book": (book, "build", lambda: book.main(["--out", out, "1"])),
        "results page": (results_page, "write", lambda: results_page.main(["--out", out])),
        "registry rekey": (registry, "rekey_corpus", lambda: registry.main(["rekey", out])),
        "train": (reproduce, "run_train", lambda: main(["train", "--preset", "pytorch-examples", "--out", out])),
        "evaluate": (reproduce, "run_evaluate", lambda: main(["evaluate", out])),
        "word-lstm": (word_lstm_cli, "run_cli", lambda: main(["word-lstm"])),
    }
    module, name, call = calls[tool]
    monkeypatch.setattr(module, name, _raise_interrupt)
    try:
        status = call()
    except KeyboardInterrupt:  # (raised out of a test, it would stop the whole test session)
        pytest.fail(f"{tool} lets Ctrl-C out as a traceback")
    assert status == 130
    err = capsys.readouterr().err.strip()
    assert_one_sentence(err.removeprefix("error: "), r"^interrupted")


# ------------------------------------------------------------------ a lesson is replaced whole


def test_make_lessons_never_leaves_a_lesson_cut_short(tmp_path, capsys, monkeypatch):
    """Issue 42, defect 7: `ulimit -f 100; ... lessons store big.ipynb` left big.ipynb cut at 102,400 bytes."""
    resource = pytest.importorskip("resource")
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    path = good_notebook(tmp_path / "01_big.ipynb")
    before = path.read_bytes()

    def execute(lesson, scale=None, timeout=None, env=None):  # the lesson ran and printed 300 kB
        nb = nbformat.read(str(lesson), as_version=4)
        nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 300_000)]
        return nb, 1.0

    monkeypatch.setattr(lessons, "execute", execute)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100 * 1024, hard))  # ulimit -f 100
    try:
        code = lessons.main(["store", str(path), "--scale", "ci"])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert_one_sentence(err.removeprefix("error: "), r"01_big\.ipynb cannot be written: it is larger than this shell's "
                                                     r"file-size limit of 0\.1 MB \(ulimit -f\), so the file was left as "
                                                     r"it was")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


# ------------------------------------------------------------------ pages escape what would run


def _hostile_lesson(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    outputs = [nbformat.v4.new_output("display_data", data={
                   "text/html": '<b>fine</b><script>alert("output")</script><img src="x" onerror="alert(\'img\')">',
                   "text/plain": "fine"}),
               nbformat.v4.new_output("display_data", data={"application/javascript": 'alert("javascript")',
                                                            "text/plain": "js"}),
               nbformat.v4.new_output("display_data", data={"text/markdown": '<script>alert("markdown output")'
                                                                             '</script>', "text/plain": "md"})]
    nb.cells = [nbformat.v4.new_markdown_cell('# A lesson\n\nWhat it teaches.\n\n<iframe src="https://elsewhere.example/'
                                              'x"></iframe>\n\n<script>alert("markdown")</script>\n\n'
                                              '<a href="javascript:alert(1)">a link</a>'),
                nbformat.v4.new_code_cell("show()", outputs=outputs)]
    nbformat.write(nb, str(path))
    return path


def test_book_and_slide_pages_escape_scripts_and_other_sites_frames(tmp_path):
    """Issue 42, unclear: book and slide pages kept <script> from cell outputs and external <iframe>s from markdown."""
    from lmcourse.authoring import deck

    path = _hostile_lesson(tmp_path / "01_hostile.ipynb")
    book.build(tmp_path / "site", [path], mathjax=False, results=False)
    deck.build(tmp_path / "slides", [path], mathjax=False, reveal=False)
    for page in (tmp_path / "site" / "01_hostile.html", tmp_path / "slides" / "01_hostile.slides.html"):
        text = page.read_text(encoding="utf-8")
        assert "<b>fine</b>" in text and "What it teaches." in text, page  # the lesson itself is kept
        assert not re.search(r"<script[^>]*>[^<]*alert", text), page
        assert not re.search(r"<iframe", text, re.I) and "onerror" not in text and "javascript:alert" not in text, page
        assert "&lt;script&gt;alert" in text and "&lt;iframe" in text  # shown as text, not run or loaded


def test_pages_lessons_and_run_files_get_the_users_umask(tmp_path, capsys):
    """Issue 42, unclear: book pages and run files were created 0600 under umask 022."""
    from lmcourse.checksum import atomic_write
    from lmcourse.cli.main import main
    from lmcourse.corpora import embedded

    from .helpers import small_corpus, train_argv

    def modes(folder: Path) -> set:
        return {oct(stat.S_IMODE(p.stat().st_mode)) for p in folder.rglob("*") if p.is_file()}

    old = os.umask(0o022)
    try:
        book.build(tmp_path / "site", [good_notebook(tmp_path / "01_fine.ipynb")], mathjax=False, results=False)
        assert modes(tmp_path / "site") == {"0o644"}
        assert main(train_argv(small_corpus(tmp_path / "mine"), tmp_path / "run")) == 0, capsys.readouterr().err
        assert modes(tmp_path / "run") == {"0o644"}
        embedded._write_files(tmp_path / "corpus", {name: b"a b\n" for name in embedded.FILES})
        assert modes(tmp_path / "corpus") == {"0o644"}
        assert stat.S_IMODE((tmp_path / "corpus").stat().st_mode) == 0o755
        lesson = tmp_path / "01_fine.ipynb"
        lesson.chmod(0o664)
        lessons.save_notebook(nbformat.read(str(lesson), as_version=4), lesson)
        assert stat.S_IMODE(lesson.stat().st_mode) == 0o664  # a replaced file keeps its mode
        os.umask(0o077)
        assert stat.S_IMODE(atomic_write(tmp_path / "private.txt", "mine\n").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_the_registry_check_says_in_one_sentence_that_a_corpus_cannot_be_had(capsys, monkeypatch):
    """`python -m lmcourse.course.registry check` offline, with no copy of a committed run's corpus, was a traceback."""
    from lmcourse.corpora.download import DownloadError
    from lmcourse.course import registry

    def offline(*args, **kwargs):
        raise DownloadError("Could not download input.txt into data/tinyshakespeare (no network); set LMCOURSE_DATA "
                            "to a folder that already holds the files.")

    monkeypatch.setattr(registry, "problems", offline)
    assert registry.main(["check"]) == 1
    assert_one_sentence(capsys.readouterr().err.removeprefix("error: ").strip(), r"^Could not download input\.txt")
