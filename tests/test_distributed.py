"""Data-parallel training: two gloo processes on the CPU reach the weights of one process that
trains on their combined batch; only rank 0 writes; a stop on one rank stops both."""
import os
import signal
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp
from test_train import TRAIN, VALID, model, weights

from lmcourse.corpora.data import batchify
from lmcourse.training import distributed
from lmcourse.training.callbacks import Callback
from lmcourse.training.trainer import TrainConfig, Trainer

TIMEOUT_S = 240
SETTINGS = dict(epochs=2, batch_size=8, eval_batch_size=4, bptt=8, lr=2.0, clip=0.25, optimizer="asgd",
                variable_bptt=True, max_seq_len_delta=4, alpha=2.0, beta=1.0, small_batch_size=2, max_batches=5,
                progress=False, live_plot=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(folder, name, callbacks=(), **kw):
    """Train the test model (dropout off) and return what the parent compares."""
    m = model()
    cfg = TrainConfig(**{**SETTINGS, **kw})
    trainer = Trainer(m, TRAIN, VALID, cfg, callbacks=list(callbacks))
    history = trainer.fit()
    return {"best": weights(m), "valid": history.column("valid_loss"), "stop": history.stop_reason,
            "rows": len(history), "columns": trainer.train_data}


class StopOnRankOne(Callback):
    def on_batch_end(self, trainer, batch_idx, loss):
        if distributed.rank() == 1 and batch_idx == 1:
            trainer.stop = True


def worker(rank, world, port, folder, on_gpu=False):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    if on_gpu:  # both ranks share the one GPU: NCCL refuses two processes on one device, gloo carries CUDA tensors
        from lmcourse.config import set_tf32
        os.environ.update(LMCOURSE_DEVICE="cuda:0", LMCOURSE_DIST_BACKEND="gloo")
        set_tf32(False)  # compared with one process in full float32
    assert distributed.init(timeout_s=TIMEOUT_S) and distributed.world_size() == world == 2
    out = {"parallel": train(folder, "parallel", out_dir=str(folder / f"run{rank}"),
                             checkpoint=str(folder / f"best{rank}.pt")),
           "stopped": train(folder, "stopped", callbacks=[StopOnRankOne()])}
    if rank == 0:
        out["last"] = torch.load(folder / "run0" / "last.pt", weights_only=True)
    distributed.shutdown()
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        del os.environ[name]
    if rank == 0:  # the reference: one process, the combined batch of 8 columns
        assert not distributed.active() and distributed.world_size() == 1
        out["single"] = train(folder, "single", out_dir=str(folder / "single"))
        out["single_last"] = torch.load(folder / "single" / "last.pt", weights_only=True)
    torch.save(out, folder / f"rank{rank}.pt")


def spawn(nprocs, folder, on_gpu=False):
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not on_gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the children train on the CPU with gloo
    try:
        context = mp.start_processes(worker, args=(nprocs, free_port(), folder, on_gpu), nprocs=nprocs, join=False,
                                     start_method="spawn")
    finally:
        if hidden is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES")
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = hidden
    deadline = time.monotonic() + TIMEOUT_S
    while not context.join(timeout=5):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"The {nprocs} training processes did not finish within {TIMEOUT_S} s.")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch build has no torch.distributed")
def test_two_gloo_processes_equal_one_process_on_the_combined_batch(tmp_path):
    spawn(2, tmp_path)
    check_ranks(tmp_path, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.distributed.is_available(), reason="this torch build has no torch.distributed")
def test_two_ranks_on_one_gpu_equal_one_process_on_the_combined_batch(tmp_path):
    spawn(2, tmp_path, on_gpu=True)  # gloo over CUDA tensors, both ranks on cuda:0
    check_ranks(tmp_path, atol=1e-4)  # GPU reductions sum in another order than one process's


def check_ranks(tmp_path, atol):
    """What each rank saved agrees with one process trained on the combined batch."""
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True, map_location="cpu") for r in range(2)]
    single = ranks[0]["single"]
    combined = batchify(TRAIN, 8)  # (T, 8)
    assert torch.equal(single["columns"], combined)
    for rank, r in enumerate(ranks):
        got = r["parallel"]
        assert torch.equal(got["columns"], combined[:, 4 * rank:4 * rank + 4])  # its own half of the batch
        assert got["stop"] == "completed" and got["rows"] == 2
        assert got["valid"] == pytest.approx(single["valid"], abs=atol)
        for k, v in single["best"].items():  # the best (averaged) weights
            torch.testing.assert_close(got["best"][k], v, rtol=0, atol=atol)
    raw, ref = ranks[0]["last"], ranks[0]["single_last"]
    for k, v in ref["state_dict"].items():  # the raw weights after the last step
        torch.testing.assert_close(raw["state_dict"][k], v, rtol=0, atol=atol)
    assert len(raw["rng"]) == 2 and len(ref["rng"]) == 1  # one set of random states per process
    # only rank 0 writes: rank 1's out_dir and checkpoint were never created
    assert (tmp_path / "run0" / "best.pt").is_file() and (tmp_path / "best0.pt").is_file()
    assert not (tmp_path / "run1").exists() and not (tmp_path / "best1.pt").exists()
    # trainer.stop set on rank 1 alone stops both ranks at the same batch, in the first epoch
    assert [r["stopped"]["stop"] for r in ranks] == ["callback", "callback"]
    assert [r["stopped"]["rows"] for r in ranks] == [1, 1]


SILENCE_S = 8  # how long the ranks wait for a silent peer in the test below


class PauseRankOne(Callback):
    """Rank 1 stops itself (SIGSTOP, as a debugger or a hung device would) after its second batch."""

    def on_batch_end(self, trainer, batch_idx, loss):
        if distributed.rank() == 1 and batch_idx == 1:
            os.kill(os.getpid(), signal.SIGSTOP)


def silent_worker(rank, world, port, folder):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    distributed.init(timeout_s=SILENCE_S)
    try:
        train(folder, "silent", callbacks=[PauseRankOne()], epochs=3, max_batches=None)
        message = "finished"
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
    (folder / f"silent{rank}.txt").write_text(message)


def stop_a_rank(folder) -> str:
    """Train with two gloo processes until rank 1 stops itself; return what rank 0 raised (one line).
    Used by tests/bad_inputs/test_rundir.py, with the other cases a user meets."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        context = mp.start_processes(silent_worker, args=(2, free_port(), folder), nprocs=2, join=False,
                                     start_method="spawn")
    finally:
        if hidden is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES")
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = hidden
    report, deadline = folder / "silent0.txt", time.monotonic() + TIMEOUT_S
    try:
        while not report.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for process in context.processes:  # rank 1 is stopped: it never ends by itself
            process.kill()
            process.join(timeout=10)
    assert report.exists(), f"rank 0 did not give up within {TIMEOUT_S} s"
    return report.read_text()


def test_helpers_without_a_process_group(monkeypatch):
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    assert distributed.init() is False and not distributed.active()
    assert (distributed.rank(), distributed.world_size(), distributed.is_main()) == (0, 1, True)
    t = torch.arange(3.0)
    assert distributed.broadcast(t) is t and distributed.all_max(t) is t
    assert distributed.broadcast_object({"a": 1}) == {"a": 1} and distributed.all_gather_object(5) == [5]
    m = torch.nn.Linear(2, 2)
    assert distributed.wrap(m) is m


def test_each_rank_takes_its_own_columns():
    assert [distributed.columns(12, r, 3) for r in range(3)] == [slice(0, 4), slice(4, 8), slice(8, 12)]
    assert distributed.columns(12) == slice(0, 12)
    with pytest.raises(ValueError, match=r"batch_size=10 does not divide among 4 processes: use a multiple of 4"):
        distributed.columns(10, 0, 4)

