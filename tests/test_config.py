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


# ------------------------------------------------------------------------------------ LMCOURSE_DEVICE

@pytest.mark.parametrize("cuda", [False, True])
def test_the_device_follows_cuda_unless_named(monkeypatch, cuda):
    monkeypatch.delenv("LMCOURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert config.device().type == ("cuda" if cuda else "cpu")
    monkeypatch.setenv("LMCOURSE_DEVICE", "cpu")  # a student on a GPU machine may still run on the CPU
    assert config.device() == torch.device("cpu")


def test_a_named_gpu_is_used_when_the_machine_has_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LMCOURSE_DEVICE", "cuda:1")
    assert config.device() == torch.device("cuda", 1)
    monkeypatch.setenv("LMCOURSE_DEVICE", "cuda")
    assert config.device() == torch.device("cuda")


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "cpu:0", "cuda:", "tpu"])
def test_a_bad_device_is_one_sentence(monkeypatch, value):
    monkeypatch.setenv("LMCOURSE_DEVICE", value)
    with pytest.raises(ConfigError, match=rf"LMCOURSE_DEVICE='{value}' is not a device: set it to cpu, cuda or cuda:N"):
        config.device()
    with pytest.raises(ConfigError, match="LMCOURSE_DEVICE"):
        config.check_environment()


def test_an_apple_gpu_is_used_where_torch_reports_one(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setenv("LMCOURSE_DEVICE", "mps")
    assert config.device() == torch.device("mps")
    monkeypatch.delenv("LMCOURSE_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert config.device() == torch.device("cpu"), "the Apple GPU is used only when named"


def test_an_apple_gpu_that_torch_does_not_report_is_one_sentence(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setenv("LMCOURSE_DEVICE", "mps")
    with pytest.raises(ConfigError, match=r"^LMCOURSE_DEVICE='mps' names an Apple GPU, and torch reports none on "
                                          r"this machine .*: set it to cpu, or unset it\.$"):
        config.device()
    with pytest.raises(ConfigError, match="LMCOURSE_DEVICE"):
        config.check_environment()
    monkeypatch.setenv("LMCOURSE_DEVICE", "mps:0")
    with pytest.raises(ConfigError, match=r"is not a device: .* or mps \(an Apple GPU\)"):
        config.device()


def test_a_missing_gpu_is_one_sentence(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("LMCOURSE_DEVICE", "cuda:3")
    with pytest.raises(ConfigError, match=r"names a GPU this machine lacks \(it has no CUDA GPU\)"):
        config.device()


def test_host_gives_numpy_of_any_tensor():
    t = torch.arange(6.0, requires_grad=True).view(2, 3) * 2  # (2, 3), part of a graph
    a = config.host(t)
    assert a.shape == (2, 3) and a.dtype.name == "float32" and a[1, 2] == 10.0
    assert config.host([1, 2]).tolist() == [1, 2]
    if torch.cuda.is_available():
        assert config.host(t.cuda())[1, 2] == 10.0


def test_tf32_is_an_explicit_setting():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        config.set_tf32(True)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        config.set_tf32(False)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        with pytest.raises(TypeError, match="set_tf32 takes True or False"):
            config.set_tf32("yes")
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_the_process_group_backend_is_named_or_default(monkeypatch):
    monkeypatch.delenv("LMCOURSE_DIST_BACKEND", raising=False)
    assert config.dist_backend() is None
    monkeypatch.setenv("LMCOURSE_DIST_BACKEND", "GLOO")
    assert config.dist_backend() == "gloo"
    monkeypatch.setenv("LMCOURSE_DIST_BACKEND", "mpi")
    with pytest.raises(ConfigError, match=r"LMCOURSE_DIST_BACKEND='mpi' is not a backend: set it to nccl or gloo"):
        config.dist_backend()
