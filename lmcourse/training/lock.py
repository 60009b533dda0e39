"""The package's one file lock: one training run per folder at a time, and one writer of a shared file.

``DIR/.lock`` is an OS file lock (``flock``; ``msvcrt.locking`` on Windows) that a run holds for
its whole life and releases on any exit; the system drops it when the process dies, however it
dies. A second run in the same folder stops at once with one sentence naming the process that
holds it; a lock file left by a process that was killed is taken over with a note. Under
``torchrun`` rank 0 holds it and every rank raises the same sentence when it cannot
(:func:`claim_on_every_rank`). The same class, with ``wait=True`` and a lock file of its own name,
makes the writers of a shared file (the lessons' measured times) take turns instead of refusing.

A lock file is never followed through a link: a ``.lock`` that is a symbolic link (planted to make a
run overwrite the file it points to) is refused in one sentence, and the file is opened with
``O_NOFOLLOW``, so a link put there in between is refused too.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional

from ..checksum import new_file_mode
from ..errors import RunDirError, sentence
from . import distributed
from .checkpoint import check_writable_dir

LOCK = ".lock"
__all__ = ["LOCK", "RunLock", "claim_on_every_rank"]

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

_HELD: dict = {}  # resolved folder -> [file descriptor, depth, folders made]: the locks this process holds


def _try_lock(fd: int, wait: bool = False) -> Optional[bool]:
    """Take the OS lock on the open file ``fd`` (waiting for it with ``wait``): True when taken, False when
    another process holds it, None when the file system has no locks."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        else:
            msvcrt.locking(fd, msvcrt.LK_LOCK if wait else msvcrt.LK_NBLCK, 1)
    except OSError as error:
        return False if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK) else None
    return True


def _holder(fd: int) -> dict:
    """What the lock file says about the process that wrote it (empty when nothing readable)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode() or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _describe(info: dict) -> str:
    if not info.get("pid"):
        return "a process that left no details"
    started = info.get("started")
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"process {info['pid']} on {info.get('host', '?')}, started {since}"


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX: opening a link fails (ELOOP) instead of following it


class RunLock:
    """The lock of the run directory ``folder``: ``with RunLock(folder): ...`` (see the module docstring).

    Re-entrant within a process: an inner ``with`` on a lock this process already holds passes.
    A folder held by another process raises a :class:`~lmcourse.errors.RunDirError` at once; with
    ``wait=True`` the lock is waited for instead (a short turn at a shared file, such as the
    lessons' times: ``RunLock(folder, name="times.json.lock", wait=True)``). ``name`` is the lock
    file's name in ``folder`` (default ``.lock``).
    """

    def __init__(self, folder, what: str = "TrainConfig.out_dir", name: str = LOCK, wait: bool = False):
        self.folder, self.what, self.wait = Path(folder), what, wait
        self.path = self.folder / name
        self.note: Optional[str] = None  # set when a lock left by a killed process was taken over

    def _key(self) -> str:
        return str(self.folder.resolve() / self.path.name)

    def _open(self) -> int:
        """The lock file, opened (created when missing) without ever following a link."""
        link = f"{self.path} is a symbolic link, and a lock file is never followed: remove the link, then run again."
        if self.path.is_symlink():
            raise RunDirError(link)
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW, new_file_mode())
        except OSError as error:
            if error.errno == errno.ELOOP or self.path.is_symlink():
                raise RunDirError(link) from None
            raise RunDirError(f"The lock file {self.path} cannot be opened ({error.strerror or error}): choose a "
                              f"folder you may write to for {self.what}.") from None

    def acquire(self) -> "RunLock":
        key = self._key()
        if key in _HELD:
            _HELD[key][1] += 1
            return self
        missing = [p for p in (self.folder, *self.folder.parents) if not p.exists()]  # made here; removed if empty
        check_writable_dir(self.folder, self.what)
        while True:
            fd = self._open()
            try:
                taken = _try_lock(fd, self.wait)
            except BaseException:  # Ctrl-C while waiting for the lock
                os.close(fd)
                raise
            if taken is None:
                print(f"note: the file system of {self.folder} offers no file locks, so a second run started in it "
                      "would not be stopped; give each run its own folder.", file=sys.stderr, flush=True)
                break
            if not taken:
                info = _holder(fd)
                os.close(fd)
                raise RunDirError(f"{self.folder} is in use by another run ({_describe(info)}): wait for it to end, "
                                  f"or give this run another {self.what}.")
            try:  # the holder removes the file as it lets go: lock the file that is there now (never a link)
                same = os.fstat(fd).st_ino == os.lstat(self.path).st_ino
            except OSError:
                same = False
            if same:
                break
            os.close(fd)
        left = _holder(fd)
        if not self.wait and left.get("pid") and (left.get("pid"), left.get("host")) != (os.getpid(),
                                                                                          socket.gethostname()):
            self.note = (f"note: took over the lock of {self.folder}, left by {_describe(left)}, which ended "
                         "without releasing it.")
            print(self.note, file=sys.stderr, flush=True)
        mine = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, mine)
        _HELD[key] = [fd, 1, missing]
        return self

    def release(self) -> None:
        key = self._key()
        entry = _HELD.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _HELD[key]
        try:
            os.unlink(self.path)  # removed while still held, so no other process locks a file about to vanish
        except OSError:
            pass
        os.close(entry[0])  # closing the descriptor releases the OS lock
        for folder in entry[2]:  # folders the lock made, when nothing was written in them
            try:
                folder.rmdir()
            except OSError:
                break

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def claim_on_every_rank(run, prepare, what: str = "TrainConfig.out_dir") -> Optional[RunLock]:
    """Rank 0 takes the lock of the folder ``run.path`` and calls ``prepare()`` (clean, clear or refuse);
    a failure there is raised on every rank with the same sentence, so no rank waits for a run that
    will not start. Returns the lock, held, on rank 0 and None elsewhere."""
    lock, error = None, None
    if distributed.is_main():
        try:
            lock = RunLock(run.path, what).acquire()
            prepare()
        except Exception as err:  # raised below, on every rank
            error = err
            if lock is not None:
                lock.release()
                lock = None
    if distributed.active():
        message = distributed.broadcast_object(None if error is None else sentence(error))
        if message is not None and error is None:
            error = RunDirError(message)
    if error is not None:
        raise error
    return lock
