r"""Data-parallel training with ``torch.distributed``, started by ``torchrun``.

With :math:`W` processes (ranks) and a batch of :math:`B` columns, rank :math:`r` trains on columns
:math:`[rB/W, (r+1)B/W)`. Each computes the mean loss over its own columns; DistributedDataParallel
averages the gradients over the ranks during the backward pass,

.. math::  g = \frac{1}{W}\sum_{r=0}^{W-1} \nabla_\theta L_r
             = \nabla_\theta \frac{1}{B\,T}\sum_{b,t} -\log p(y_{t,b} \mid \cdot),

which is the gradient of the whole batch, so every rank takes the same step and the weights stay
equal. The trainer keeps the ranks in step: variable BPTT draws its window lengths from one
generator whose state rank 0 broadcasts; every decision taken from validation (the best model,
the rate decay, NT-ASGD's switch to averaging) uses rank 0's validation loss, broadcast; a stop
(``trainer.stop`` or a diverged loss) on any rank stops all of them at the same batch; only rank 0
writes checkpoints, the run directory, logs and progress bars. Launch (one process per GPU; NCCL
on GPUs, gloo on CPUs)::

    torchrun --nproc_per_node=4 -m lmcourse train ...

:func:`init` joins the process group that ``torchrun`` describes in the environment (``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``); without those variables it does
nothing, and every helper below then behaves as for a single process (rank 0 of 1).

A process that stops answering (paused, hung on a device, killed without its peers noticing)
would leave the others waiting in their next collective. They wait ``LMCOURSE_DIST_TIMEOUT``
seconds (:func:`lmcourse.config.dist_timeout`, default 300), then fail; :func:`explain` turns that
failure into one sentence naming the silent rank. To tell which one it is, every process counts
heartbeats in the job's shared key-value store from a background thread, one every
:data:`HEARTBEAT_S` seconds: after a failure, the ranks whose count no longer moves are the ones
that stopped.
"""
from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist

from ..config import device, dist_backend, dist_timeout
from ..errors import StoppedRankError, check_number

__all__ = ["init", "active", "rank", "world_size", "local_rank", "is_main", "columns", "wrap",
           "broadcast", "broadcast_object", "all_gather_object", "all_max", "barrier", "shutdown", "explain",
           "HEARTBEAT_S"]

_STARTED_HERE = False
HEARTBEAT_S = 2.0  # seconds between two heartbeats of a process
_BEAT: dict = {}  # the heartbeat thread of this process: "stop" (an Event), "thread", "store", "timeout_s"
# words of the errors gloo and NCCL raise when a peer stops answering or goes away
_SILENCE = ("timed out", "timeout", "connection closed", "connection reset", "broken pipe", "closed by peer")


def _initialised() -> bool:
    return dist.is_available() and dist.is_initialized()


def launched_by_torchrun() -> bool:
    """True when the environment describes a process group (``WORLD_SIZE`` and ``RANK`` are set)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def init(backend: Optional[str] = None, timeout_s: Optional[float] = None) -> bool:
    """Join the process group described by the environment; return True when one is active.

    Does nothing (returns False) outside ``torchrun``, and nothing more when a group already
    exists. ``backend``: ``LMCOURSE_DIST_BACKEND``, else ``nccl`` when the run's device is CUDA, else
    ``gloo``. On CUDA each process uses the GPU numbered ``LOCAL_RANK`` modulo the number of GPUs.
    ``timeout_s``: how long a collective waits for a silent peer (default ``LMCOURSE_DIST_TIMEOUT``,
    else 300 s).
    """
    global _STARTED_HERE
    if _initialised():
        return True
    if not launched_by_torchrun():
        return False
    if not dist.is_available():
        raise RuntimeError("This torch build has no torch.distributed: install a build with it, "
                           "or run without torchrun.")
    here = device()
    if backend is None:
        backend = dist_backend() or ("nccl" if here.type == "cuda" else "gloo")
    if here.type == "cuda":  # LMCOURSE_DEVICE=cuda:N, else more processes than GPUs share them in turn
        torch.cuda.set_device(here if here.index is not None else local_rank() % torch.cuda.device_count())
    timeout_s = dist_timeout() if timeout_s is None else check_number(timeout_s, "timeout_s", 0.0, low_open=True)
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    _STARTED_HERE = True
    _start_heartbeat(timeout_s)
    return True


# ------------------------------------------------------------------------------- who stopped answering

def _store():
    """The key-value store the process group was set up with (None when torch does not expose it)."""
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:
        return None


def _start_heartbeat(timeout_s: float) -> None:
    store = _store()
    if store is None or _BEAT:
        return
    stop, key = threading.Event(), f"lmcourse/heartbeat/{rank()}"

    def beat():
        while not stop.is_set():
            try:
                store.add(key, 1)
            except Exception:  # the store is gone (the job is ending): nothing left to report
                return
            stop.wait(HEARTBEAT_S)

    thread = threading.Thread(target=beat, name="lmcourse-heartbeat", daemon=True)
    _BEAT.update(stop=stop, thread=thread, store=store, timeout_s=timeout_s)
    thread.start()


def _stop_heartbeat() -> None:
    if _BEAT:
        _BEAT["stop"].set()
        _BEAT["thread"].join(timeout=2 * HEARTBEAT_S)
        _BEAT.clear()


def _counts(store, world: int) -> list:
    return [int(store.add(f"lmcourse/heartbeat/{r}", 0)) for r in range(world)]


def silent_ranks(world: Optional[int] = None) -> Optional[list]:
    """The ranks whose heartbeat did not move over three beats (about 6 s); None when the store cannot be read."""
    store = _BEAT.get("store")
    if store is None:
        return None
    world = world_size() if world is None else world
    try:
        store.set_timeout(timedelta(seconds=5 * HEARTBEAT_S))
        before = _counts(store, world)
        time.sleep(3 * HEARTBEAT_S)
        after = _counts(store, world)
    except Exception:  # the store lives in rank 0's process: it does not answer either
        return None
    return [r for r in range(world) if after[r] == before[r]]


def explain(error: BaseException) -> Optional[StoppedRankError]:
    """A :class:`~lmcourse.errors.StoppedRankError` naming the silent rank(s), when ``error`` is a collective
    that gave up waiting for a peer; None for any other error (or outside a process group)."""
    if not _initialised() or not isinstance(error, RuntimeError) or isinstance(error, StoppedRankError):
        return None
    if not any(word in str(error).lower() for word in _SILENCE):
        return None
    world, me, waited = world_size(), rank(), _BEAT.get("timeout_s", dist_timeout())
    silent = [r for r in (silent_ranks(world) or []) if r != me]
    fix = ("find out what stopped it (killed, paused, out of memory, a hung device), then start the job again with "
           "--resume; LMCOURSE_DIST_TIMEOUT sets how long the others wait")
    if silent:
        who = "rank " + ", ".join(map(str, silent)) if len(silent) == 1 else "ranks " + ", ".join(map(str, silent))
        return StoppedRankError(f"Process {who} of {world} stopped answering, and rank {me} gave up after waiting "
                                f"{waited:g} s: {fix}.")
    lost = "rank 0, which also keeps the job's shared store," if _store_lost() else "another process"
    return StoppedRankError(f"Rank {me} of {world} gave up after waiting {waited:g} s for {lost} that stopped "
                            f"answering: {fix}.")


def _store_lost() -> bool:
    store = _BEAT.get("store")
    if store is None:
        return False
    try:
        store.set_timeout(timedelta(seconds=5 * HEARTBEAT_S))
        store.add(f"lmcourse/heartbeat/{rank()}", 0)
    except Exception:
        return True
    return False


def active() -> bool:
    """True when a process group with more than one process is running."""
    return _initialised() and dist.get_world_size() > 1


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return dist.get_rank() if _initialised() else 0


def world_size() -> int:
    """The number of processes (1 without a process group)."""
    return dist.get_world_size() if _initialised() else 1


def local_rank() -> int:
    """This process's index on its machine (``LOCAL_RANK``; 0 when unset)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main() -> bool:
    """True on rank 0, the process that writes files, logs and progress bars."""
    return rank() == 0


def columns(batch_size: int, rank_: Optional[int] = None, world: Optional[int] = None) -> slice:
    """The columns ``[r B/W, (r+1) B/W)`` of a batch of ``batch_size`` columns that rank ``r`` of ``W`` trains on."""
    rank_ = rank() if rank_ is None else rank_
    world = world_size() if world is None else world
    if batch_size % world:
        raise ValueError(f"batch_size={batch_size} does not divide among {world} processes: "
                         f"use a multiple of {world} (each process takes an equal share of the columns).")
    share = batch_size // world
    return slice(rank_ * share, (rank_ + 1) * share)


def wrap(model: torch.nn.Module) -> torch.nn.Module:
    """``DistributedDataParallel(model)`` when a process group is active, else ``model`` itself."""
    if not active():
        return model
    from torch.nn.parallel import DistributedDataParallel

    on_gpu = next(model.parameters()).is_cuda
    ids = [torch.cuda.current_device()] if on_gpu else None
    return DistributedDataParallel(model, device_ids=ids)


def _device() -> torch.device:
    """Where collective tensors must live: the current GPU for NCCL, else the CPU."""
    if _initialised() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast(tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
    """Rank ``src``'s value of ``tensor`` on every rank (returned; the input is not changed)."""
    if not active():
        return tensor
    buffer = tensor.detach().to(_device(), copy=True)
    dist.broadcast(buffer, src)
    return buffer.to(tensor.device)


def broadcast_object(obj, src: int = 0):
    """Rank ``src``'s value of a picklable ``obj`` on every rank."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src, device=_device() if dist.get_backend() == "nccl" else None)
    return box[0]


def all_gather_object(obj) -> list:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank."""
    if not active():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def all_max(tensor: torch.Tensor) -> torch.Tensor:
    """The element-wise maximum of ``tensor`` over the ranks (returned; the input is not changed)."""
    if not active():
        return tensor
    buffer = tensor.detach().to(_device(), copy=True)
    dist.all_reduce(buffer, op=dist.ReduceOp.MAX)
    return buffer.to(tensor.device)


def barrier() -> None:
    """Wait until every rank gets here."""
    if active():
        dist.barrier()


def shutdown() -> None:
    """Leave the process group, if :func:`init` joined it."""
    global _STARTED_HERE
    _stop_heartbeat()
    if _STARTED_HERE and _initialised():
        dist.destroy_process_group()
    _STARTED_HERE = False
