"""The scale a lesson runs at when nobody says: ``cpu`` on every machine, ``gpu`` only by name."""
import pytest
import torch

from lmcourse import config
from lmcourse.errors import ConfigError


@pytest.mark.parametrize("cuda", [False, True])
def test_the_default_scale_is_cpu_with_or_without_cuda(monkeypatch, cuda):
    monkeypatch.delenv("LMCOURSE_SCALE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert config.scale() == "cpu"


@pytest.mark.parametrize("cuda", [False, True])
@pytest.mark.parametrize("name", ["ci", "cpu", "gpu"])
def test_a_named_scale_is_used_as_named(monkeypatch, cuda, name):
    monkeypatch.setenv("LMCOURSE_SCALE", name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert config.scale() == name


def test_an_empty_setting_means_the_default(monkeypatch):
    monkeypatch.setenv("LMCOURSE_SCALE", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert config.scale() == "cpu"


def test_by_scale_follows_the_default(monkeypatch):
    monkeypatch.delenv("LMCOURSE_SCALE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delattr(config, "SCALE")  # read the environment now, as on a fresh import
    assert config.by_scale(ci=1, cpu=2, gpu=3) == 2


def test_an_unknown_scale_is_one_sentence(monkeypatch):
    monkeypatch.setenv("LMCOURSE_SCALE", "paper")
    with pytest.raises(ConfigError, match=r"LMCOURSE_SCALE='paper' is not a scale: set it to one of ci, cpu, gpu"):
        config.scale()
