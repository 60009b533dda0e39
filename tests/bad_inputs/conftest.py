"""Fixtures of the bad-input tests: a fresh home, cache and data folder with no network."""

import pytest

from lmcourse.corpora import download
from lmcourse.cli.main import main
from lmcourse.corpora.download import Remote

from .helpers import small_corpus, train_argv


@pytest.fixture
def home(tmp_path, monkeypatch, closed_url):
    """A fresh HOME, cache and data folder; no network (every mirror is a closed local port)."""
    folders = {name: tmp_path / name for name in ("home", "cache", "data")}
    for folder in folders.values():
        folder.mkdir()
    monkeypatch.setenv("HOME", str(folders["home"]))
    monkeypatch.setenv("LMCOURSE_CACHE", str(folders["cache"]))
    monkeypatch.setenv("LMCOURSE_DATA", str(folders["data"]))
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("LMCOURSE_DATASET", raising=False)
    monkeypatch.delenv("LMCOURSE_SCALE", raising=False)
    monkeypatch.setattr(download, "TIMEOUT_S", 2)
    offline = {name: {f: Remote(r.sha256, (closed_url,)) for f, r in files.items()}
               for name, files in download.SOURCES.items()}
    monkeypatch.setattr(download, "SOURCES", offline)
    return tmp_path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished ci run on a small folder corpus, trained once; tests copy it."""
    root = tmp_path_factory.mktemp("trained")
    corpus = small_corpus(root / "mine")
    assert main(train_argv(corpus, root / "run")) == 0
    return corpus, root / "run"
