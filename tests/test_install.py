"""The wheel is the course: built, installed into a fresh virtual environment outside the clone, and used there.

The test builds the wheel from a copy of the clone's files, installs it with pip, offline (``--no-index``), into
a new virtual environment in a temporary folder, and then, with the clone nowhere on the path:

- copies the lessons out with ``python -m lmcourse notebooks`` and runs lessons 01 and 07 there at ``ci``;
- checks that nothing was written under the new environment's ``site-packages`` (nor under the one its
  dependencies come from), and that the cache, corpora included, went to the user's cache folder;
- loads the course model's committed AWD rung at ``cpu`` with training forbidden, so that it fails if anything
  would train that a committed run covers.

The new environment gets only lmcourse from the wheel. Its dependencies (torch and the rest, and Jupyter to run the
lessons) are the ones this test runs in, seen through a path file: installing torch afresh would take gigabytes and
minutes, and pip could only fetch it from the network. The path file names the folder, so its own path files (the
clone's editable install among them) are not read, and the clone's lmcourse never shadows the wheel's; the test
checks that too.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import lmcourse

REPO = Path(__file__).resolve().parents[1]
BUILT_FROM = ("pyproject.toml", "README.md", "LICENSE", "lmcourse", "reference_runs", "notebooks")
LESSONS = ("01", "07")

pytestmark = pytest.mark.install


def _run(argv, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _snapshot(folder: Path) -> dict:
    """Every file under ``folder``: its size and modification time."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root, name)
            try:
                stat = path.lstat()
            except FileNotFoundError:
                continue
            found[str(path.relative_to(folder))] = (stat.st_size, stat.st_mtime_ns)
    return found


def _changes(before: dict, after: dict) -> list:
    return sorted(set(before) ^ set(after) | {k for k in set(before) & set(after) if before[k] != after[k]})


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the files it is made of (the clone gets no build/ folder)."""
    work = tmp_path_factory.mktemp("build")
    source = work / "source"
    for name in BUILT_FROM:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(src, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", work / "dist", source], cwd=work)
    found, = (work / "dist").glob("lmcourse-*.whl")
    return found


@pytest.fixture(scope="module")
def env(wheel, tmp_path_factory) -> dict:
    """A fresh virtual environment outside the clone holding the wheel's lmcourse; its python, site-packages, and the
    environment variables of a user whose home is a temporary folder."""
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    import pip

    if tuple(int(x) for x in pip.__version__.split(".")[:2]) >= (22, 3):  # this pip can install into another python
        _run([sys.executable, "-m", "venv", "--without-pip", venv])
        installer = [sys.executable, "-m", "pip", "--python", python]
    else:
        _run([sys.executable, "-m", "venv", venv])
        installer = [python, "-m", "pip"]
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    _run([*installer, "install", "--quiet", "--no-index", "--no-deps", wheel])
    deps = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (site / "zz-dependencies-of-the-test.pth").write_text("".join(f"{d}\n" for d in deps))
    home = root / "home"
    home.mkdir()
    variables = {k: v for k, v in os.environ.items()
                 if not k.startswith("LMCOURSE_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME", "VIRTUAL_ENV")}
    variables.update(HOME=str(home), USERPROFILE=str(home), XDG_CACHE_HOME=str(root / "user-cache"),
                     MPLCONFIGDIR=str(root / "matplotlib"), PYTHONNOUSERSITE="1")
    return {"python": python, "site": site, "deps": [Path(d) for d in deps], "root": root, "env": variables,
            "cache": root / "user-cache" / "lmcourse"}


def test_the_wheel_holds_the_course(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    runs = json.loads((REPO / "reference_runs" / "manifest.json").read_text())["runs"]
    assert "lmcourse/_course/reference_runs/manifest.json" in names
    assert {f"lmcourse/_course/reference_runs/{r['file']}" for r in runs} <= set(names)
    lessons = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("lmcourse/_course/notebooks/")
                  and n.endswith(".ipynb")) == lessons
    assert len([n for n in names if n.startswith("lmcourse/_course/notebooks/solutions/")]) == len(lessons)
    assert {"lmcourse/corpora/english.tsv", "lmcourse/corpora/names.tsv"} <= set(names)
    sources = {str(p.relative_to(REPO)).replace(os.sep, "/") for p in (REPO / "lmcourse").rglob("*.py")}
    assert sources <= set(names), f"left out of the wheel: {sorted(sources - set(names))[:5]}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_installed_course_runs_outside_the_clone(env):
    python, site, root = env["python"], env["site"], env["root"]
    where = _run([python, "-c", "import lmcourse, lmcourse.config as c; print(lmcourse.__file__); "
                  "print(c.checkout()); print(c.cache_dir()); print(lmcourse.__version__)"],
                 env=env["env"], cwd=root).stdout.split("\n")
    assert Path(where[0]).parent == site / "lmcourse", "the clone's lmcourse shadowed the wheel's"
    assert where[1] == "None" and Path(where[2]) == env["cache"] and where[3] == lmcourse.__version__
    before = {folder: _snapshot(folder) for folder in [site, *env["deps"]]}

    copied = root / "my lessons"
    _run([python, "-m", "lmcourse", "notebooks", copied], env=env["env"], cwd=root)
    paths = [next(copied.glob(f"{n}_*.ipynb")) for n in LESSONS]
    ran = _run([python, "-m", "lmcourse.authoring.lessons", "warm", "--scale", "ci", *paths],
               env=env["env"], cwd=root, timeout=900)
    assert "all 2 lessons" in ran.stdout

    for folder, files in before.items():
        assert _changes(files, _snapshot(folder)) == [], f"the lessons wrote under {folder}"
    assert (env["cache"] / "lesson-times.json").is_file()
    assert any(p.name.startswith("embedded-") for p in env["cache"].iterdir()), "the corpora are not in the cache"
    assert sorted(p.name for p in copied.iterdir()) == sorted([*(p.name for p in copied.glob("*.ipynb")), "solutions"])


FORBIDDEN = """
import lmcourse
from lmcourse import config
from lmcourse.course.runs import course_model as CM
from lmcourse.store import reference_runs as reference

def forbidden(*args, **kwargs):
    raise SystemExit("training was asked for, and the committed run covers it")

CM.fit_on_one_thread = forbidden                     # every rung of the course model trains through it
assert config.checkout() is None and config.PACKAGE in reference.folder().parents
run, corpus = CM.course_model("AWD recipe", seed=0, scale="cpu")
assert run.loaded and config.PACKAGE in run.path.parents, run.path
assert len(run.history) == 40 and run.model.vocab is corpus.vocab
print("loaded", run.path.name)
"""


def test_the_installed_course_loads_its_committed_runs(env):
    before = _snapshot(env["site"])
    done = _run([env["python"], "-c", FORBIDDEN], env=env["env"], cwd=env["root"], timeout=600)
    assert "Loaded the stored reference run 'course-model'" in done.stdout and "committed runs are not here" \
        not in done.stdout
    assert _changes(before, _snapshot(env["site"])) == []
