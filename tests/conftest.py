"""Shared test set-up: the real corpora come from LMCOURSE_DATA, or ../shared/data beside the repo."""
import os
import socket
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parents[1]
_SHARED = REPO.parent / "shared" / "data"
if "LMCOURSE_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["LMCOURSE_DATA"] = str(_SHARED)


def _has(folder: Path, name: str) -> bool:
    d = folder / name
    return d.is_dir() and any(d.iterdir())


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The folder holding ptb/, wikitext-2/ and tinyshakespeare/; skips when they are absent."""
    env = os.environ.get("LMCOURSE_DATA")
    folder = Path(env) if env else None
    if folder is None or not (_has(folder, "ptb") or _has(folder, "wikitext-2")):
        pytest.skip("The real corpora are not here: set LMCOURSE_DATA to a folder holding ptb/ and wikitext-2/ "
                    "(CI uses ../shared/data).")
    return folder


CUDA_REASON = "needs a CUDA GPU, and this machine has none (make gpu-check runs these where one is)."


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` skip, with their reason, where torch sees no GPU."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=CUDA_REASON)
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _cuda_tests_in_full_float32(request):
    """A test marked ``cuda`` compares with float32 on the CPU: TF32 is off while it runs, then restored."""
    if request.node.get_closest_marker("cuda") is None:
        yield
        return
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture
def closed_url():
    """An address on this machine where nothing listens: a download from it fails at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/file.txt"
