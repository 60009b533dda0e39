"""What every bad-input test shares: a snapshot of the files under some folders, the one-sentence
check, a small corpus folder, and the command line run in this process."""
import hashlib
import re
from pathlib import Path

from lmcourse.__main__ import main


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
