"""What every bad-input test shares: a snapshot of the files under some folders, the one-sentence
check, small corpora and models, the command line run in this process, and another process holding a
run folder's lock."""
import contextlib
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from lmcourse.cli.main import main
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.vocab import Vocab

REPO = Path(__file__).resolve().parents[2]
WORDS = ["the", "cat", "sat", "on", "mat", "<eos>"]


def files_under(*folders) -> dict:
    """Every file under ``folders`` with its sha256: equal snapshots mean nothing written or lost."""
    out = {}
    for folder in folders:
        for p in Path(folder).rglob("*"):
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_one_sentence(message: str, pattern: str) -> None:
    text = message.strip()
    assert "Traceback" not in text and "\n" not in text, f"not one line: {message!r}"
    assert text.endswith("."), f"not a sentence: {text!r}"
    assert re.search(pattern, text), f"{pattern!r} not in {text!r}"
    assert "weights_only=False" not in text
    assert not re.search(r"\.py:\d+", text), f"a source file and line in {text!r}"


def write_corpus(folder: Path, train="the cat sat\non the mat\n", valid="the cat\n", test="a cat sat\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in (("train", train), ("valid", valid), ("test", test)):
        if text is not None:
            (folder / f"{split}.txt").write_text(text, encoding="utf-8")
    return folder


def cli(capsys, argv) -> tuple:
    """Run ``python -m lmcourse argv`` in this process: (exit status, stdout, stderr)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def tiny_model() -> RNNLM:
    torch.manual_seed(0)
    model = RNNLM(LMConfig(vocab_size=len(WORDS), emb_size=4, hidden_size=5, num_layers=1))
    model.vocab = Vocab(WORDS)
    return model


def small_corpus(folder: Path) -> Path:
    """About 6,000 tokens of 30 word types, enough for a preset at ci."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    lines = lambda n: "".join(" ".join(rng.choices(words, k=rng.randint(3, 10))) + "\n" for _ in range(n))  # noqa
    return write_corpus(folder, train=lines(700), valid=lines(100), test=lines(100))


def train_argv(corpus, out, *more) -> list:
    return ["train", "--quiet", "--scale", "ci", "--preset", "pytorch-examples", "--data", str(corpus),
            "--out", str(out), "--set", "epochs=1", *more]


def copy_run(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained[1], tmp_path / "run"))


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMCOURSE_")}
    env.update(PYTHONPATH=str(REPO), CI="1")
    return env


HOLD = ("import sys; from lmcourse.training.rundir import RunLock; lock = RunLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); sys.stdin.read(); lock.release()")


@contextlib.contextmanager
def held_elsewhere(folder: Path):
    """Another process holding the lock of ``folder`` until the block ends; yields its pid."""
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=60)

