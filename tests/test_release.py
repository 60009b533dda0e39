"""The course outside its repository: the wheel's package list, the version in one place, each lesson's set-up cell
and licence footer, copying the lessons out, where the course's files are found and where its cache goes, and the
front page. (tests/test_install.py builds and installs the wheel itself.)"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import setuptools

import lmcourse
from lmcourse import config
from lmcourse.cli.main import main as cli_main
from lmcourse.authoring import release
from lmcourse.course.catalog import check_writable, copy_lessons, lessons
from lmcourse.errors import ConfigError, WriteError
from lmcourse.store import reference_runs as reference

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None

REPO = Path(__file__).resolve().parents[1]
LESSONS = lessons()


def pyproject() -> dict:
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs Python 3.11's tomllib")
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------- the wheel's contents

def test_the_wheel_lists_every_package_and_maps_the_course_into_it():
    tool = pyproject()["tool"]["setuptools"]
    found = set(setuptools.find_packages(where=str(REPO), include=["lmcourse", "lmcourse.*"]))
    listed = set(tool["packages"])
    assert found - listed == set(), (f"pyproject.toml's [tool.setuptools] packages lacks {sorted(found - listed)}: "
                                     "add them, or they are left out of the wheel.")
    assert tool["package-dir"] == {"lmcourse._course.reference_runs": "reference_runs",
                                   "lmcourse._course.notebooks": "notebooks"}
    assert listed - found == set(tool["package-dir"])
    data = pyproject()["tool"]["setuptools"]["package-data"]
    assert {"manifest.json", "*.pt"} <= set(data["lmcourse._course.reference_runs"])
    assert {"*.ipynb", "solutions/*.py"} <= set(data["lmcourse._course.notebooks"])
    assert "*.tsv" in data["lmcourse.corpora"]


def test_the_version_is_written_once_and_followed():
    project = pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "lmcourse.__version__"}
    version = lmcourse.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version) and version != "0.1.0"
    first = re.search(r"^## (\d+\.\d+\.\d+)\b", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert first and first[1] == version, "CHANGELOG.md's latest entry is not lmcourse.__version__"
    cff = (REPO / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(rf'^version: "{re.escape(version)}"$', cff, re.M), "CITATION.cff names another version"
    assert re.search(r"^cff-version: 1\.2\.0$", cff, re.M) and "license: MIT" in cff


def test_the_licence_names_both_parts():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in text and "Permission is hereby granted" in text
    assert "CC BY 4.0" in text and "creativecommons.org/licenses/by/4.0" in text
    assert pyproject()["project"]["license"] == "MIT"


# ------------------------------------------------------------------------------ the set-up cell and the footer

def test_the_repository_the_lessons_install_from_is_the_projects():
    assert pyproject()["project"]["urls"]["Source"] == release.SOURCE
    assert release.INSTALL_FROM.startswith(release.SOURCE + "/") and release.INSTALL_FROM in release.SETUP_SOURCE


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_lesson_opens_with_the_set_up_cell_and_ends_with_the_licence(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert release.problems(nb) == [], f"{path.name}: run python -m lmcourse.authoring.release stamp"
    first, last = nb["cells"][0], nb["cells"][-1]
    assert first["cell_type"] == "code" and first["outputs"] == []  # it prints nothing where lmcourse is installed
    assert first["metadata"]["slideshow"] == {"slide_type": "skip"} == last["metadata"]["slideshow"]
    assert last["cell_type"] == "markdown" and "CC BY 4.0" in "".join(last["source"])
    assert "MIT" in "".join(last["source"])
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids)
    assert len(release.SETUP_SOURCE.splitlines()) <= 8, "the set-up cell stays a few lines a student can read"


def _run_setup_cell(monkeypatch, importable: bool) -> list:
    """Execute the set-up cell's code with lmcourse importable or not; the commands it ran."""
    import importlib.util

    ran = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (real(name, *a) if importable else None) if name == "lmcourse" else real(name, *a))
    monkeypatch.setattr(subprocess, "run", lambda cmd, check=False, **kw: ran.append((cmd, check)))
    exec(compile(release.SETUP_SOURCE, "setup-cell", "exec"), {})
    return ran


def test_the_set_up_cell_does_nothing_where_lmcourse_is_installed(monkeypatch):
    assert _run_setup_cell(monkeypatch, importable=True) == []


def test_the_set_up_cell_installs_lmcourse_where_it_is_missing(monkeypatch):
    ran = _run_setup_cell(monkeypatch, importable=False)
    assert ran == [([sys.executable, "-m", "pip", "install", "-q", release.INSTALL_FROM], True)]


def _notebook(cells) -> dict:
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3"}, "lmcourse": {"scale": "cpu"}},
            "nbformat": 4, "nbformat_minor": 5}


def test_stamping_adds_both_cells_once_and_keeps_the_rest():
    body = [{"cell_type": "markdown", "id": "c000", "metadata": {"slideshow": {"slide_type": "slide"}},
             "source": ["# Lesson\n"]},
            {"cell_type": "code", "execution_count": 3, "id": "c001", "metadata": {}, "outputs": [],
             "source": ["x = 1\n"]}]
    nb = _notebook(json.loads(json.dumps(body)))
    assert release.problems(nb) and release.stamp(nb)
    assert release.problems(nb) == []
    assert [c["id"] for c in nb["cells"][1:-1]] == ["c000", "c001"] and nb["cells"][1:-1] == body
    assert nb["metadata"] == _notebook([])["metadata"]
    setup, footer = nb["cells"][0]["id"], nb["cells"][-1]["id"]
    assert len({setup, footer, "c000", "c001"}) == 4
    assert not release.stamp(nb), "a second stamp changes nothing"
    nb["cells"][0]["source"] = ["# Set-up: an older text\n"]  # found again by its first words, its id kept
    nb["cells"].insert(1, nb["cells"].pop())                  # a footer that wandered
    assert release.stamp(nb) and release.problems(nb) == []
    assert (nb["cells"][0]["id"], nb["cells"][-1]["id"]) == (setup, footer) and len(nb["cells"]) == 4


def test_the_stamp_command_refuses_the_installed_copy(monkeypatch, tmp_path):
    package = tmp_path / "site-packages" / "lmcourse"
    lesson = package / "_course" / "notebooks" / "01_x.ipynb"
    lesson.parent.mkdir(parents=True)
    lesson.write_text(json.dumps(_notebook([])))
    monkeypatch.setattr(config, "PACKAGE", package.resolve())
    with pytest.raises(ConfigError, match=r"is the copy installed with the package, which is never written to: run"):
        release.stamp_files([lesson])
    assert json.loads(lesson.read_text()) == _notebook([])
    check_writable([tmp_path / "elsewhere.ipynb"])  # anywhere else is fine


# ------------------------------------------------------------------------------------- copying the lessons out

def test_the_lessons_and_solutions_are_copied_out(tmp_path, capsys):
    dest = tmp_path / "my lessons"
    assert cli_main(["notebooks", str(dest)]) == 0
    assert "copied 11 lessons and 11 solution files" in capsys.readouterr().out
    assert sorted(p.name for p in dest.glob("*.ipynb")) == [p.name for p in LESSONS]
    assert sorted(p.name for p in (dest / "solutions").glob("*.py")) == [f"{p.stem}.py" for p in LESSONS]
    for path in LESSONS:
        assert (dest / path.name).read_bytes() == path.read_bytes()
    assert not list(dest.rglob(".*.tmp"))


def test_copying_over_the_students_files_is_refused_in_one_sentence(tmp_path, capsys):
    dest = tmp_path / "lessons"
    (dest / "solutions").mkdir(parents=True)
    mine = dest / LESSONS[3].name
    mine.write_text("my own notes\n")
    (dest / "solutions" / f"{LESSONS[0].stem}.py").write_text("# mine\n")
    assert cli_main(["notebooks", str(dest)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "add --force to replace them" in err
    assert f"already holds {mine.name} and 1 more" in err
    assert mine.read_text() == "my own notes\n" and len(list(dest.rglob("*"))) == 3  # nothing was written
    assert cli_main(["notebooks", str(dest), "--force"]) == 0
    assert mine.read_bytes() == LESSONS[3].read_bytes()


def test_copying_the_lessons_never_writes_through_a_planted_link(tmp_path):
    """Issue 42: every file the tools write goes through the one atomic write. The copy used a fixed temporary name
    (``.NAME.tmp``) and wrote through whatever was there, so a link planted under that name sent a lesson into
    the file it points to."""
    dest = tmp_path / "lessons"
    dest.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (dest / f".{LESSONS[0].name}.tmp").symlink_to(victim)
    written = copy_lessons(dest)
    assert victim.read_text() == "keep me\n"
    assert (dest / LESSONS[0].name).read_bytes() == LESSONS[0].read_bytes() and not (dest / LESSONS[0].name).is_symlink()
    assert dest / LESSONS[0].name in written


def test_a_file_named_as_the_folder_is_refused(tmp_path):
    (tmp_path / "notes").write_text("x")
    with pytest.raises(WriteError, match=r"is a file, not a folder: give a folder for the lessons"):
        copy_lessons(tmp_path / "notes")


# ------------------------------------------------------------------- where the course's files are, and the cache

def test_a_clone_is_recognised_by_its_pyproject(tmp_path):
    assert config.checkout() == REPO and config.course_folder("notebooks") == REPO / "notebooks"
    assert config.course_folder("reference_runs") == REPO / "reference_runs" == reference.folder()
    installed = tmp_path / "site-packages" / "lmcourse"
    installed.mkdir(parents=True)
    assert config.checkout(installed) is None
    other = tmp_path / "other" / "lmcourse"
    other.mkdir(parents=True)
    (other.parent / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    assert config.checkout(other) is None
    (other.parent / "pyproject.toml").write_text('[project]\nname = "lmcourse"\n')
    assert config.checkout(other) == other.parent
    with pytest.raises(ValueError, match="is not a folder of the course"):
        config.course_folder("data")


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """The package as a wheel installs it: under site-packages, no clone around, the cache in the user's folder."""
    package = tmp_path / "site-packages" / "lmcourse"
    package.mkdir(parents=True)
    monkeypatch.setattr(config, "PACKAGE", package.resolve())
    monkeypatch.setattr(config, "checkout", lambda package=None: None)
    monkeypatch.setattr(config, "REPO_DATA", None)
    for name in ("LMCOURSE_CACHE", "LMCOURSE_DATA", "LMCOURSE_REFERENCE_RUNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return package.resolve()


def test_an_installed_package_finds_its_course_under_itself(installed):
    assert config.course_folder("reference_runs") == installed / "_course" / "reference_runs" == reference.folder()
    assert config.course_folder("notebooks") == installed / "_course" / "notebooks"


def test_an_installed_package_keeps_its_cache_in_the_users_cache_folder(installed, tmp_path, monkeypatch):
    assert config.cache_dir() == tmp_path / "xdg" / "lmcourse" == config.data_dir()
    assert installed not in config.cache_dir().parents
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "mine"))
    assert config.cache_dir() == tmp_path / "mine"


def test_an_unwritable_cache_folder_is_one_sentence(installed, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    with pytest.raises(ConfigError, match=r"^The cache folder .* cannot be written to: set LMCOURSE_CACHE to a "
                                          r"writable folder\.$"):
        config.cache_dir()


def test_the_installed_copy_of_the_runs_is_never_written(installed, monkeypatch):
    folder = reference.folder()
    with pytest.raises(ConfigError, match=r"never written to: regenerate them in a clone"):
        reference.write_manifest([], folder)
    with pytest.raises(ConfigError, match="never written to"):
        reference.prune("06", 0.0)
    assert not folder.exists()


@pytest.mark.parametrize("platform, environ, expected", [
    ("linux", {"XDG_CACHE_HOME": "/srv/cache"}, "/srv/cache/lmcourse"),
    ("linux", {"XDG_CACHE_HOME": "relative/cache"}, "/home/ada/.cache/lmcourse"),  # the spec ignores a relative one
    ("linux", {}, "/home/ada/.cache/lmcourse"),
    ("darwin", {"XDG_CACHE_HOME": "/srv/cache"}, "/home/ada/Library/Caches/lmcourse"),
    ("win32", {"LOCALAPPDATA": r"C:\Users\ada\AppData\Local"}, r"C:\Users\ada\AppData\Local/lmcourse/Cache"),
    ("win32", {}, "/home/ada/AppData/Local/lmcourse/Cache"),
])
def test_the_users_cache_folder_is_the_platforms(platform, environ, expected):
    assert str(config.user_cache_dir(platform, environ, Path("/home/ada"))) == expected


# -------------------------------------------------------------------------------------------------- the front page

def test_the_readme_is_a_front_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 8000, f"README.md has {len(text)} characters; at most 8,000 (move the rest to docs/)"
    for path in LESSONS:
        assert f"](notebooks/{path.name})" in text, f"README.md does not link {path.name}"
    assert "![" in text and "](docs/ladder.png)" in text and (REPO / "docs" / "ladder.png").is_file()
    assert "make lab" in text and "make test" in text
    for link in re.findall(r"\]\(((?!https?:)[^)#]+)", text):
        assert (REPO / link).exists(), f"README.md links {link}, which is not in the repository"
    for page in ("students", "instructors", "practitioners", "maintainers"):
        assert f"](docs/{page}.md)" in text
    for name in ("LICENSE", "CITATION.cff", "CHANGELOG.md"):
        assert (REPO / name).is_file()


def test_the_docs_link_only_to_what_exists():
    for page in sorted((REPO / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for link in re.findall(r"\]\(((?!https?:)[^)#]+)", text):
            assert (page.parent / link).exists(), f"{page.name} links {link}, which does not exist"
        for anchor in re.findall(r"\]\(([a-z]+\.md)?#([a-z0-9_-]+)\)", text):
            target = (page.parent / anchor[0]) if anchor[0] else page
            slugs = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
                     for h in re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)}
            assert anchor[1] in slugs, f"{page.name} links #{anchor[1]} in {target.name}, which has no such heading"


def test_the_package_floors_are_written_once():
    tables = [p for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "lmcourse" / "README.md"]
              if re.search(r"^\| floor \| where \|", p.read_text(encoding="utf-8"), re.M)]
    assert tables == [REPO / "lmcourse" / "README.md"]
