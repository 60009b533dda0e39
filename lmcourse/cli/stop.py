"""Ctrl-C stops the command line within a few seconds, whatever one step of training costs.

Python turns SIGINT into ``KeyboardInterrupt`` only between two bytecodes of the main thread. One
step of a paper-sized model on a CPU is a single call into torch that can last a minute, and the
exception waits for it. So while :class:`PromptStop` is active, the C-level signal handler's wakeup
byte (:func:`signal.set_wakeup_fd`) also reaches a watcher thread at once. The main thread keeps
its usual path (the trainer catches the interrupt, keeps its last finished epoch and says so); if
it has not finished ``grace_s`` seconds after the signal, the watcher prints one line and ends the
process with status 130. Nothing is lost that way: every file is written to a temporary name and
renamed whole (see :func:`lmcourse.checksum.atomic_write`), the folder's lock is an OS
lock that ends with the process, and what was not saved is only the unfinished epoch, which
``--resume`` runs again. A second Ctrl-C is never needed.
"""
from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Optional

from .. import EXIT_INTERRUPTED
from .. import exit_now  # noqa: F401 (the one way to end at once after Ctrl-C; __main__ reads it here)

GRACE_S = 2.0  # seconds the main thread has, after Ctrl-C, to stop by itself


class PromptStop:
    """``with PromptStop(note): ...``: after Ctrl-C the process ends within ``grace_s`` seconds.

    ``note`` is the line printed when the watcher has to end the process itself. Outside the main
    thread (where the wakeup fd cannot be set) it does nothing."""

    def __init__(self, note: str, grace_s: float = GRACE_S):
        self.note, self.grace_s = note, grace_s
        self._done = threading.Event()
        self._pair: Optional[tuple] = None
        self._previous = -1

    def __enter__(self) -> "PromptStop":
        if threading.current_thread() is not threading.main_thread():
            return self
        read, write = socket.socketpair()
        write.setblocking(False)
        try:
            self._previous = signal.set_wakeup_fd(write.fileno(), warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter
            read.close()
            write.close()
            return self
        self._pair = (read, write)
        threading.Thread(target=self._watch, name="lmcourse-prompt-stop", daemon=True).start()
        return self

    def _watch(self) -> None:
        read = self._pair[0]
        while not self._done.is_set():
            try:
                data = read.recv(64)
            except OSError:
                return
            if not data:  # closed: the block ended
                return
            if signal.SIGINT in data and not self._done.wait(self.grace_s):
                os.write(2, f"\nerror: interrupted; {self.note}\n".encode())
                os._exit(EXIT_INTERRUPTED)

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._pair is not None:
            signal.set_wakeup_fd(self._previous)
            for end in self._pair:
                end.close()
            self._pair = None




class deferred_interrupt:
    """``with deferred_interrupt(): ...``: a Ctrl-C during the block is raised when it ends, so a few
    renames that belong together are never cut in half (main thread only; elsewhere it does nothing)."""

    def __enter__(self) -> "deferred_interrupt":
        self.caught, self.previous = False, None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum, frame) -> None:
        self.caught = True

    def __exit__(self, kind, error, trace) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        if self.caught and kind is None:
            raise KeyboardInterrupt
