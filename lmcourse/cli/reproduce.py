r"""The reproduction path: ``train`` a paper's recipe (or any registered model kind), ``evaluate`` what it trained.

::

    python -m lmcourse train --preset awd-lstm-ptb [--data ptb] [--scale gpu] [--out DIR] [--resume | --overwrite]
                             [--set key=value ...] [--from RUN_DIR] [--quiet]
    python -m lmcourse train --kind KIND --set epochs=N [--set key=value ...] [--data ...] [--out DIR] ...
    python -m lmcourse evaluate RUN_DIR_OR_CHECKPOINT [--data ...] [--cache] [--dyneval] [--tune-on valid]
    torchrun --nproc_per_node=8 -m lmcourse train --preset awd-lstm-ptb      # data-parallel, one GPU each

``train`` builds the preset's settings (:mod:`lmcourse.training.presets`: the recipe, shrunk for ``--scale``,
then ``--set``), trains with :class:`lmcourse.training.trainer.Trainer` into a run directory
(:mod:`lmcourse.training.rundir`: config, history, best and last state with the optimizer's averages and
every random state, the curves) plus ``preset.json`` (the preset, scale, corpus and every setting),
then scores the best weights on valid and test. ``--resume`` continues the run exactly where its
last finished epoch left it. A finetuning preset starts from the best weights of the run it
continues (``--from``, by default that preset's own default folder). ``--kind`` trains a registered model
kind with its config's defaults (:func:`lmcourse.training.presets.uncited`): no paper's recipe, so nothing is
cited, no scale shrinks it, and ``preset.json`` says so (``"cited": false``).

A run holds the lock of its folder from the first check to the last line (a second ``train`` on
the same ``--out`` stops at once, see :class:`lmcourse.training.rundir.RunLock`), and a new run never
starts in a folder holding files of another: continue it with ``--resume``, or delete them with
``--overwrite``. ``preset.json`` records a checksum of the corpus's token streams, so a resume on a
corpus whose files changed since is refused.

Nothing is deleted before every check has passed: the settings, the corpus (read, or downloaded), the
model's size and the trainer's batches are all checked first. Then ``--overwrite`` moves the earlier
run's files into ``DIR/.overwritten/``; they are put back if the new run fails or is stopped before
it saves its first epoch (and deleted once it has), so a typo never loses a finished run. A refused
fresh run leaves no file behind. ``--from`` and ``--out`` may not be the same run.

``evaluate`` scores a run's best weights (or a checkpoint) on valid and test, alone and with the
neural cache (Grave et al. 2017) and/or dynamic evaluation (Krause et al. 2018) on top. Their
settings are the papers' for the preset (:data:`lmcourse.training.presets.Preset.evaluation`), the packages'
defaults without one, or tuned on the validation text with ``--tune-on valid``.

Each command prints a progress bar and one line per epoch, and its last line is JSON:
``{"valid_ppl": ..., "test_ppl": ..., "seconds": ..., ...}``. Perplexities here score each split as
one stream (batch size 1), the way the papers report test perplexity.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

from ..adapt.evaluate import evaluate_model
from ..checksum import digest
from ..config import SCALES, device, seed_everything
from ..config import dataset as default_dataset
from ..config import scale as default_scale
from ..corpora.data import load_corpus
from ..errors import LMCourseError, MissingFileError, sentence
from ..lm import MODELS, perplexity
from ..training import distributed, presets
from ..training.callbacks import Callback, ProgressBar
from ..training.checkpoint import load_checkpoint
from ..training.compat import kind_of
from ..training.rundir import (BEST, CURVES, HISTORY, LAST, RUN_FILES, RunDir, atomic_write_bytes,
                               claim_on_every_rank)
from ..training.settings import build
from ..training.trainconfig import History
from ..training.trainer import Trainer
from .output import print_json
from .stop import PromptStop, deferred_interrupt

__all__ = ["add_cli", "run_train", "run_evaluate", "default_out", "read_meta", "META"]

META = "preset.json"
ASIDE = ".overwritten"  # where --overwrite keeps the earlier run until the new one has saved an epoch
FORMAT = 1
DONE = ("completed", "non-monotone", "converged")
BY_ITS_RULE = ("non-monotone", "converged")  # a run that stopped itself before its last epoch


# ------------------------------------------------------------------------------- the command line

def add_cli(subparsers) -> None:
    """Add ``train`` and ``evaluate``."""
    listing = "\n".join("  " + presets.describe(p) for p in presets.PRESETS.values())
    p = subparsers.add_parser(
        "train", help="train a paper's recipe (a preset), or any model kind, into a run directory",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a preset: the paper's recipe at --scale gpu, shrunk in sizes, data and epochs "
                    "(never in the recipe) at ci and cpu. Or train a registered model kind with its config's "
                    "defaults (uncited) and --set on top. The last line printed is JSON.",
        epilog="presets:\n" + listing + f"\n\nkinds: {', '.join(sorted(MODELS))}\n\nData-parallel on N GPUs (or "
               "CPU processes with gloo): torchrun --nproc_per_node=N -m lmcourse train --preset NAME ...")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--preset", choices=list(presets.PRESETS), metavar="NAME", help="the recipe (listed below)")
    what.add_argument("--kind", metavar="KIND", help="a registered model kind, with its config's defaults "
                                                     "(uncited; give --set epochs=N and any other field)")
    p.add_argument("--data", default=None, help="corpus name or folder (default: the preset's corpus)")
    p.add_argument("--scale", default=None, choices=SCALES,
                   help="gpu: the paper's recipe; ci, cpu: shrunk (default: $LMCOURSE_SCALE, else cpu)")
    p.add_argument("--out", default=None, type=_folder, help="the run directory (default: runs/<preset>-<scale>)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--resume", action="store_true", help="continue the run in --out exactly where it stopped")
    start.add_argument("--overwrite", action="store_true",
                       help="delete the files of an earlier run in --out and start afresh")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any setting, e.g. --set epochs=3 --set dropouti=0.5 (repeatable)")
    p.add_argument("--from", dest="source", default=None, metavar="RUN_DIR",
                   help="finetuning presets: the trained run to start from (default: runs/<its preset>-<scale>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (the per-epoch lines stay)")
    p.set_defaults(run=run_train)

    e = subparsers.add_parser("evaluate", help="score a trained run on valid and test, with the cache and/or "
                                               "dynamic evaluation")
    e.add_argument("target", help="a run directory written by train (its best.pt), or a checkpoint file")
    e.add_argument("--data", default=None, help="corpus (default: the run's, else $LMCOURSE_DATASET, else embedded)")
    e.add_argument("--cache", action="store_true", help="add the neural cache (Grave et al. 2017)")
    e.add_argument("--dyneval", action="store_true", help="add dynamic evaluation (Krause et al. 2018)")
    e.add_argument("--tune-on", default=None, choices=("valid",),
                   help="tune theta and lambda (cache) and the rate and decay (dynamic evaluation) on valid")
    e.set_defaults(run=run_evaluate)


# ------------------------------------------------------------------------------- shared pieces

def _folder(text: str) -> str:
    """An argparse type: a folder path that is not empty."""
    if not text.strip():
        raise ValueError("empty")
    return text


_folder.__name__ = "folder path (not empty)"


def default_out(preset: presets.Preset, data: str, scale: str) -> Path:
    """``runs/<preset>-<scale>`` (a kind's name for an uncited one), with the corpus's name in it when it is not
    the preset's own."""
    if data == preset.data:
        return Path("runs") / f"{preset.name}-{scale}"
    label = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(str(data)).name) or "data"
    return Path("runs") / f"{preset.name}-{label}-{scale}"


def read_meta(folder) -> Optional[dict]:
    """The ``preset.json`` of a run directory (checked field by field), or None when it has none."""
    record = read_record(folder)
    return None if record is None else record[0]


def read_record(folder) -> Optional[tuple]:
    """``(meta, preset)``: the ``preset.json`` of a run directory, checked field by field, and the preset it names
    (a paper's, or the defaults of its model kind); None when the folder has no record."""
    path = Path(folder) / META
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        raise LMCourseError(f"{path} cannot be read as JSON: restore it, or start the run again in a new --out.")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or "settings" not in meta:
        raise LMCourseError(f"{path} is not a train command's record: give the run directory train wrote.")
    edited = f"{path} was changed by hand, so the run it describes is unknown"
    cited = meta.get("cited", True)  # records written before --kind: a paper's preset
    name = (str, type(None)) if cited is False else str
    wrong = next((key for key, kind in (("preset", name), ("scale", str), ("data", str), ("settings", dict),
                                        ("out", str), ("cited", bool)) if not isinstance(meta.get(key, cited), kind)),
                 None)
    if wrong:
        raise LMCourseError(f"{edited} (its {wrong!r} entry is missing or malformed): restore it, or start the run "
                            "again in a new --out.")
    if (cited and meta["preset"] not in presets.PRESETS) or meta["scale"] not in SCALES:
        what = f"preset {meta['preset']!r}" if meta["scale"] in SCALES else f"scale {meta['scale']!r}"
        raise LMCourseError(f"{edited} (there is no {what}): restore it, or start the run again in a new --out.")
    try:
        presets.check(meta["settings"])
        preset = presets.of_record(meta)
    except (TypeError, ValueError) as error:
        raise LMCourseError(f"{edited} ({sentence(error).rstrip('.')}): restore it, or start the run again in a new "
                            "--out.") from None
    return meta, preset


def _splits(data: str, settings: dict):
    """The corpus and its three streams, cut to the recipe's ``*_tokens`` (None: whole)."""
    corpus = load_corpus(data)
    cut = lambda tokens, n: tokens if n is None else tokens[:n]  # noqa: E731
    return (corpus, cut(corpus.train, settings.get("train_tokens")), cut(corpus.valid, settings.get("valid_tokens")),
            cut(corpus.test, settings.get("test_tokens")))


def _ppl(model, tokens) -> float:
    return round(perplexity(model, tokens), 3)


class EpochLog(Callback):
    """One line per epoch (when the progress bar, which prints the same line, is off); times epochs."""

    def __init__(self, bar_shown: bool):
        self.bar_shown, self.seconds, self._t = bar_shown, [], None

    def on_epoch_begin(self, trainer, epoch: int) -> None:
        self._t = time.perf_counter()

    def on_epoch_end(self, trainer, row: dict) -> None:
        self.seconds.append(time.perf_counter() - self._t)
        if not self.bar_shown and distributed.is_main():
            print(f"epoch {row['epoch']:3d} | train ppl {row['train_ppl']:.2f} | valid ppl {row['valid_ppl']:.2f} | "
                  f"lr {row['lr']:.4g} | {row['optimizer']} | {self.seconds[-1]:.1f} s", flush=True)


# ------------------------------------------------------------------------------- train

def _model(preset, settings: dict, vocab, source: Optional[Path]):
    """A fresh model of the settings' kind (built through the one adapter, :func:`lmcourse.training.settings.build`),
    or the best weights of ``source`` for a finetuning preset."""
    if preset.finetune_of is None:
        seed_everything(settings["seed"])
        model = build(settings, len(vocab))  # a model too big for this machine: one sentence before anything is allocated
    else:
        best = source / "best.pt"
        if not best.is_file():
            raise LMCourseError(f"{preset.name} continues a trained {preset.finetune_of} run, but {best} does not "
                                f"exist: train it first (python -m lmcourse train --preset {preset.finetune_of} ...) "
                                "or point --from at its run directory.")
        model, _ = load_checkpoint(best, vocab=vocab)
        trained = model.config.as_dict()
        wanted = presets.model_config(settings, len(vocab)).as_dict()
        diff = next((k for k in wanted if wanted[k] != trained.get(k)), None)
        if diff or model.kind != settings["kind"]:
            diff = diff or "kind"
            then, now = (model.kind, settings["kind"]) if diff == "kind" else (trained.get(diff), wanted[diff])
            raise LMCourseError(f"The run in {source} has {diff}={then!r} but {preset.name} at this scale "
                                f"has {diff}={now!r}: finetune with the scale and --set values it was "
                                "trained with.")
    model.vocab = vocab
    return model


NAMES = RUN_FILES + (META,)


def _claim(out: Path, resume: bool, overwrite: bool):
    """Rank 0 takes the lock of ``out`` (held until the command ends), removes what writes killed mid-way
    left there, settles an ``--overwrite`` that a killed process left half done, and makes sure a fresh
    run finds no files of another unless ``--overwrite`` (which deletes nothing yet: see :class:`Aside`);
    when it cannot, every rank raises the same sentence. Returns the lock (None on other ranks)."""
    run = RunDir(out)

    def prepare():
        run.clean(NAMES)
        Aside(out).settle(started=False)
        if not resume and not overwrite:
            run.refuse_fresh_start(NAMES, resume_hint="--resume", overwrite_hint="--overwrite")
    return claim_on_every_rank(run, prepare, "--out")


class Aside:
    """The start of a fresh run in ``out``, undone if it fails before saving its first epoch.

    :meth:`move` moves the earlier run's files into ``out/.overwritten/`` (renames: nothing is copied
    or deleted). :meth:`settle`, called however the run ends: when the new run has saved an epoch
    (its ``last.pt``), the earlier files are deleted; otherwise the new run's files are removed and the
    earlier ones put back, so a refused or stopped start leaves the folder as it found it. Both hold
    Ctrl-C back until they are done, and a marker file (``.moving``, ``.restoring``) tells the next
    command how to finish one that a killed process left half done."""

    MOVING, RESTORING = ".moving", ".restoring"

    def __init__(self, out: Path):
        self.out, self.folder = Path(out), Path(out) / ASIDE

    def _refuse_links(self) -> None:
        """A link where the folder or its markers are expected is refused, never followed."""
        for path in (self.folder, self.folder / self.MOVING, self.folder / self.RESTORING):
            if path.is_symlink():
                raise LMCourseError(f"{path} is a symbolic link, and a run folder's {path.name} is its own, never "
                                    "followed: nothing was moved; remove the link, then run the command again.")

    def _mark(self, name: str) -> None:
        os.close(os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644))

    def move(self) -> list:
        self._refuse_links()
        present = RunDir(self.out).run_files(NAMES)
        if present:
            with deferred_interrupt():
                self.folder.mkdir(exist_ok=True)
                self._mark(self.MOVING)
                for name in present:
                    os.replace(self.out / name, self.folder / name)
                (self.folder / self.MOVING).unlink()
        return present

    def _epoch_files(self) -> list:
        """The files of the new run in ``out`` that show it finished an epoch (its best weights, its curves,
        a history with rows), whether or not it saved a ``last.pt`` to resume from."""
        found = [name for name in (BEST, CURVES) if (self.out / name).exists()]
        try:
            rows = json.loads((self.out / HISTORY).read_text()).get("rows")
        except (OSError, ValueError, AttributeError):
            rows = None
        return found + ([HISTORY] if rows else [])

    def settle(self, started: bool = True) -> bool:
        """``started``: this process began the new run; False when the lock is taken, to finish what a
        killed process left (only when it left ``.overwritten/``). True when the new run was kept.

        A killed process's new run that finished an epoch but has no ``last.pt`` (deleted since) is not
        deleted to put the earlier run back: that is refused, naming both, and nothing changes."""
        self._refuse_links()
        if not started and not self.folder.is_dir():
            return False
        with deferred_interrupt():
            if (self.folder / self.MOVING).exists() or (self.folder / self.RESTORING).exists():
                self._put_back()  # a move or a restore cut short: no file of a new run is left to remove
            elif RunDir(self.out).has_run():  # the new run kept an epoch: the earlier one is replaced for good
                shutil.rmtree(self.folder, ignore_errors=True)
                return True
            else:
                newer = [] if started else self._epoch_files()
                if newer:
                    raise LMCourseError(
                        f"{self.out} holds a newer run that finished an epoch ({', '.join(newer)}) but has no "
                        f"{LAST} to resume from, beside the earlier run an --overwrite set aside in {self.folder} "
                        f"before it was stopped; nothing was deleted: keep the newer run by deleting {self.folder}, "
                        f"or the earlier one by deleting the newer run's files and moving {self.folder}'s back.")
                for name in RunDir(self.out).run_files(NAMES):  # the new run's, none of which is worth keeping
                    (self.out / name).unlink()
                if self.folder.is_dir():
                    self._mark(self.RESTORING)
                    self._put_back()
        return False

    def _put_back(self) -> None:
        for path in self.folder.iterdir():
            if path.name not in (self.MOVING, self.RESTORING):
                os.replace(path, self.out / path.name)
        shutil.rmtree(self.folder)


def corpus_checksum(corpus) -> str:
    """The checksum of a corpus's vocabulary and three token streams (:mod:`lmcourse.checksum`)."""
    return digest([list(corpus.vocab.itos), corpus.train, corpus.valid, corpus.test])


def _check_resume(out: Path, meta_now: dict, resume: bool) -> Optional[dict]:
    """The saved record when resuming, checked against this command; None for a fresh run."""
    run = RunDir(out)
    if not resume:
        return None
    saved = read_meta(out)
    if saved is None or not run.has_run():
        found = run.run_files(NAMES)
        what = (f"it holds {', '.join(found)} but no {LAST if saved is not None else META}, so nothing can be resumed"
                if found else "it holds no run")
        raise LMCourseError(f"There is no run to resume in {out} ({what}): train once without --resume, start over "
                            "with --overwrite, or check --out.")
    for key in ("preset", "data", "scale"):
        if saved[key] != meta_now[key]:
            raise LMCourseError(f"The run in {out} was trained with {key} {saved[key]!r}, not {meta_now[key]!r}: "
                                "resume with the same command.")
    then, now = {"kind": kind_of(saved["settings"]), **saved["settings"]}, meta_now["settings"]
    diff = next((k for k in sorted(set(then) | set(now)) if k != "epochs" and then.get(k) != now.get(k)), None)
    if diff:
        raise LMCourseError(f"The run in {out} was trained with {diff}={then.get(diff)!r}, not {now.get(diff)!r}: "
                            "resume with the same --set values (only epochs may change).")
    return saved


UNCITED = ("the model kind's config defaults and TrainConfig's, with the --set values on top: no paper's recipe, "
           "nothing cited, nothing shrunk by the scale")


def _plan(args) -> tuple:
    """``(meta, preset)``: everything the command line decides before any file is read (preset or kind, scale,
    settings, folders), and the preset it trains."""
    scale = args.scale or default_scale()
    if args.kind is not None:
        try:
            preset = presets.uncited(args.kind, args.data or default_dataset())
        except ValueError as error:
            raise LMCourseError(f"--kind {args.kind}: {sentence(error)}") from None
        if not any(pair.partition("=")[0].strip() == "epochs" for pair in args.set):
            raise LMCourseError(f"--kind {args.kind} trains with its config's defaults, and TrainConfig has none for "
                                "the number of epochs: add --set epochs=N.")
    else:
        preset = presets.get(args.preset)
    if args.source is not None and not preset.finetune_of:
        raise LMCourseError(f"--from names the trained run a finetuning preset starts from, and {preset.name} trains "
                            "from scratch: drop --from, or choose a -finetune preset.")
    settings = presets.resolve(preset, scale, presets.parse_overrides(args.set, preset.kind))
    presets.check(settings)  # bad values stop here, before any file
    data = args.data or preset.data
    source = None
    if preset.finetune_of:
        source = Path(args.source) if args.source else default_out(presets.get(preset.finetune_of), data, scale)
    out = Path(args.out) if args.out else default_out(preset, data, scale)
    if source is not None and source.resolve() == out.resolve():
        raise LMCourseError(f"--from and --out are the same folder ({out}): the finetuned run would replace the run "
                            "it starts from; give --out another folder.")
    meta = {"format": FORMAT, "preset": preset.name if preset.cited else None, "scale": scale, "data": data,
            "settings": settings, "overrides": list(args.set), "from": None if source is None else str(source),
            "out": str(out)}
    if not preset.cited:
        meta.update(cited=False, note=UNCITED)
    return meta, preset


def run_train(args) -> Optional[dict]:
    """The ``train`` command; returns the JSON's dict on rank 0 (None on the other ranks)."""
    t0 = time.perf_counter()
    meta, preset = _plan(args)
    out = Path(meta["out"])
    distributed.init()  # joins torchrun's process group; nothing outside torchrun
    lock = _claim(out, args.resume, args.overwrite)
    note = (f"the run in {out} keeps its last finished epoch (the unfinished one is run again by the same command "
            "with --resume).")
    try:
        with PromptStop(note):  # Ctrl-C ends the process within seconds, even inside a long step
            return _train(args, meta, preset, t0)
    finally:
        if lock is not None:
            lock.release()


def _train(args, meta: dict, preset, t0: float) -> Optional[dict]:
    """``train`` once the folder is claimed."""
    settings, out = meta["settings"], Path(meta["out"])
    saved = _check_resume(out, meta, args.resume)
    main = distributed.is_main()
    corpus, train, valid, test = _splits(meta["data"], settings)
    meta["corpus_sha256"] = corpus_checksum(corpus)
    if saved is not None and saved.get("corpus_sha256", meta["corpus_sha256"]) != meta["corpus_sha256"]:
        raise LMCourseError(f"The corpus {meta['data']} is not the one the run in {out} started on (its tokens "
                            "changed since): resume with the files it was trained on, or start afresh with "
                            "--overwrite or another --out.")
    model = _model(preset, settings, corpus.vocab, meta["from"] and Path(meta["from"]))
    finished = saved is not None and _finished(out, settings["epochs"])
    bar = not args.quiet and main and not finished
    config = presets.train_config(settings, out_dir=str(out), progress=bar, live_plot=False)
    log = EpochLog(bar_shown=bar)
    trainer = Trainer(model, train, valid, config, callbacks=[ProgressBar(enabled=bar), log], vocab=corpus.vocab)
    aside = Aside(out) if main and saved is None else None  # every check has passed: now the folder changes
    if aside is not None:
        out.mkdir(parents=True, exist_ok=True)
        aside.move()
        try:
            atomic_write_bytes(out / META, json.dumps(meta, indent=1).encode())
        except BaseException:
            aside.settle()
            raise
        print(f"{preset.name} at scale {meta['scale']} on {corpus.name}: {model.name}, {model.num_parameters():,} "
              f"parameters, {len(train):,} training tokens, {config.epochs} epochs -> {out}", flush=True)
        _gpu_scale_note(meta["scale"], config.epochs)
    elif main:
        print(f"{preset.name}: resuming {out}" + (", which already finished" if finished else ""), flush=True)
    kept = True  # a resumed run keeps what it had, whatever happens now
    try:
        history = _history_of(out) if finished else trainer.fit(resume=bool(args.resume))
    finally:
        if aside is not None:
            kept = aside.settle()
    distributed.shutdown()
    if not main:
        return None
    if history.stop_reason == "interrupted" or not (kept and (out / "best.pt").is_file()):
        _raise_if_stopped(history.stop_reason, out, kept)  # no score for weights that were not saved
        if kept and not (out / "best.pt").is_file():
            start = (history.start or {}).get("valid_ppl")
            was = f" (valid ppl {start:.2f})" if isinstance(start, (int, float)) else ""
            print(f"note: no epoch of the run in {out} did better on the validation text than the weights it started "
                  f"from{was}, so no best.pt was saved and the scores below are those of the starting weights: raise "
                  "the rate or train longer (--set lr=... --set epochs=...).", file=sys.stderr, flush=True)
    if finished:
        model, _ = load_checkpoint(out / "best.pt", vocab=corpus.vocab)
    result = {"preset": meta["preset"], **({} if preset.cited else {"kind": preset.kind}), "scale": meta["scale"], "data": corpus.name, "out": str(out),
              "stop_reason": history.stop_reason, "epochs": len(history.rows),
              "best_epoch": (history.best or {}).get("epoch"), "params": model.num_parameters(),
              "valid_ppl": _ppl(model, valid), "test_ppl": _ppl(model, test),
              "seconds_per_epoch": round(sum(log.seconds) / len(log.seconds), 3) if log.seconds else None,
              "world_size": config_world(out), "device": str(device()), "seconds": round(time.perf_counter() - t0, 3)}
    print_json(result)
    _raise_if_stopped(history.stop_reason, out)
    return result


def _gpu_scale_note(scale: str, epochs: int) -> None:
    """Say what the paper-sized recipe costs when it is about to run on a CPU."""
    if scale == "gpu" and device().type == "cpu":
        print(f"note: --scale gpu is the paper's recipe ({epochs} epochs), sized for a GPU, and this machine has "
              "none: on the CPU it takes days; use --scale cpu for minutes, or Ctrl-C to stop (the last finished "
              "epoch is kept).", file=sys.stderr, flush=True)


def config_world(out: Path) -> int:
    """The number of processes the run in ``out`` trained with (its config.json), 1 when unknown."""
    try:
        return int(RunDir(out).read_config().get("world_size", 1))
    except ValueError:
        return 1


def _finished(out: Path, epochs: int) -> bool:
    """True when the run in ``out`` already ended by itself (all epochs, or a stop by its rule: non-monotone, converged)."""
    history = _history_of(out)
    return history.stop_reason in BY_ITS_RULE or (history.stop_reason in DONE and len(history.rows) >= epochs)


def _history_of(out: Path):
    """The run's ``history.json`` (an empty History when there is none yet); one sentence when it was edited."""
    path = out / HISTORY
    if not path.is_file():
        return History()
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        state = None
    if not (isinstance(state, dict) and isinstance(state.get("rows", []), list)
            and all(isinstance(row, dict) for row in state.get("rows", []))
            and isinstance(state.get("best") or {}, dict) and isinstance(state.get("stop_reason") or "", str)):
        raise LMCourseError(f"{path} is not the history a run wrote (changed by hand?): restore it, or start the run "
                            "again in a new --out.")
    return History(rows=state.get("rows", []), best=state.get("best"), stop_reason=state.get("stop_reason"),
                   start=state.get("start"))


def _raise_if_stopped(reason: Optional[str], out: Path, kept: bool = True) -> None:
    """End the command for a run that stopped early; ``kept``: the folder holds this command's run."""
    if reason == "interrupted":
        what = (f"the run in {out} keeps its last finished epoch; continue it with the same command and --resume"
                if kept and RunDir(out).has_run() else f"no epoch had finished, so {out} is as it was before "
                "this command")
        print(f"note: {what}.", file=sys.stderr)
        raise KeyboardInterrupt
    if reason in ("nan", "diverged"):
        where = (f"the best weights so far are in {out / 'best.pt'}" if kept and (out / "best.pt").is_file()
                 else "no epoch gave weights worth keeping")
        raise LMCourseError(f"Training diverged (stop reason {reason!r}); {where}: lower the rate with --set lr=... "
                            "and train again in a new --out.")


# ------------------------------------------------------------------------------- evaluate

def _check_run_model(folder: Path, path: Path, kind: str, stored: dict) -> None:
    """One sentence when the checkpoint ``path`` holds another model than the run in ``folder`` trained."""
    run = RunDir(folder)
    if not run.file("config.json").is_file():
        return
    config = run.read_config()
    trained = {"kind": kind_of(config), **config["model"]}
    stored = {"kind": kind, **stored}
    diff = next((k for k in sorted(set(trained) | set(stored)) if trained.get(k) != stored.get(k)), None)
    if diff:
        raise LMCourseError(f"{path} holds a model with {diff}={stored.get(diff)!r}, but the run in {folder} trained "
                            f"one with {diff}={trained.get(diff)!r} (its config.json): evaluate the run's own best.pt, "
                            "or move the checkpoint out of the run directory.")


def _no_best(target: Path, folder: Path) -> str:
    """Why a run directory has no ``best.pt``, in one sentence that tells a finished run from a running one."""
    if not target.is_dir():
        return f"{target} does not exist: give a run directory written by train, or a checkpoint file."
    try:
        reason = _history_of(folder).stop_reason
    except LMCourseError:
        reason = None
    if reason in ("nan", "diverged"):
        return (f"{target} holds no best.pt: its run diverged before any epoch gave weights worth keeping; train "
                "again with a lower rate (--set lr=...) in a new --out.")
    if reason is not None:
        return (f"{target} holds no best.pt: its run ended ({reason}) without saving best weights; train it again "
                "in a new --out, or give a checkpoint file.")
    return f"{target} holds no best.pt yet: let the run finish an epoch, or give a checkpoint file."


def run_evaluate(args) -> dict:
    """The ``evaluate`` command; returns the JSON's dict."""
    t0 = time.perf_counter()
    if args.tune_on and not (args.cache or args.dyneval):
        raise LMCourseError(f"--tune-on {args.tune_on} tunes the settings of the cache and of dynamic evaluation: "
                            "add --cache and/or --dyneval.")
    target = Path(args.target)
    if not target.exists():
        raise MissingFileError(f"{target} does not exist: give a run directory written by train, or a checkpoint file.")
    folder = target if target.is_dir() else target.parent  # a checkpoint inside a run directory is that run's
    meta, preset = read_record(folder) or (None, None)
    path = target / "best.pt" if target.is_dir() else target
    if not path.is_file():
        raise MissingFileError(_no_best(target, folder))
    data = args.data or (meta["data"] if meta else default_dataset())
    settings = meta["settings"] if meta and data == meta["data"] else {}
    corpus, train, valid, test = _splits(data, settings)
    model, info = load_checkpoint(path, vocab=corpus.vocab)
    if meta is not None:
        _check_run_model(folder, path, info["kind"], info["config"].as_dict())
    model.vocab = corpus.vocab
    evaluation = preset.evaluation if meta and data == meta["data"] else {}
    scores = evaluate_model(model, train, valid, test, cache=args.cache, dyneval=args.dyneval,
                            tune=args.tune_on == "valid", evaluation=evaluation)
    wrappers = [w for w, on in (("dyneval", args.dyneval), ("cache", args.cache)) if on]
    result = {"model": str(path), "preset": meta["preset"] if meta and data == meta["data"] else None,
              "data": corpus.name,
              "wrappers": wrappers, **scores, "params": model.num_parameters(),
              "seconds": round(time.perf_counter() - t0, 3)}
    label = " + ".join([model.name] + wrappers)
    print(f"{label} on {corpus.name}: valid ppl {result['valid_ppl']:.2f}, test ppl {result['test_ppl']:.2f} "
          f"(alone {result['base_valid_ppl']:.2f} / {result['base_test_ppl']:.2f})")
    print_json(result)
    return result
