"""Saving and loading a trained neural language model (any model keeping the contract of :mod:`lmcourse.lm`).

A checkpoint is one ``torch.save`` file holding only plain data, so it loads with
``torch.load(..., weights_only=True)`` (no pickled code runs on load)::

    {"format": 2, "kind": "rnnlm", "config": {...config.as_dict()...}, "state_dict": {...},
     "vocab": [itos] or None, "history": [rows], "extra": {...}, "sha256": c}

The model is rebuilt by the ``build`` registered for its ``kind`` (:func:`lmcourse.lm.register_model`);
a file without ``kind`` (every run saved before there was more than one model) holds an ``"rnnlm"``
(:mod:`lmcourse.training.compat`).

where ``c`` is the checksum of everything else in the file, its tensors included
(:mod:`lmcourse.checksum`). torch does not check the CRCs of the zip it reads, so the checksum is
what tells a flipped bit or a zeroed block inside a weight from the weights that were saved.

Writes are atomic, through the package's one :func:`lmcourse.checksum.atomic_write` (named here too): the
file goes to a temporary name in the same folder and is then renamed over the target, so an interrupted
save never leaves a half-written checkpoint behind. A write that fails (no space left, no permission, a
file-size limit) is one sentence naming the target, never the temporary file.
:func:`check_writable` tells before a long training run whether the path can be written at all.

Loading checks everything it reads: a file that is truncated, damaged (its checksum does not
match), of another kind, or holding anything but tensors and plain data is refused with a
:class:`~lmcourse.errors.CheckpointError` (never by running its code), as is a stored vocabulary
that does not fit the model.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import torch

from ..checksum import _write_failed, atomic_write, free_bytes, seal, verify  # noqa: F401 (named here too)
from ..config import device as default_device
from ..errors import CheckpointError, MissingFileError
from ..lm import MODELS, check_neural, model_builder
from ..networks import NeuralLM  # importing the package registers its models' kinds
from ..vocab import Vocab
from .compat import kind_of

FORMAT = 2  # 2: the file carries its checksum
DAMAGED = ("is damaged or is not an lmcourse checkpoint ({why}): train the model again, or copy the file "
           "again from where it was saved")


def _plain(value):
    """Paths become strings; containers are rebuilt so only plain types remain."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def copy_state(model: torch.nn.Module, device=None) -> dict:
    """A detached copy of ``model.state_dict()`` (on ``device`` if given); a tensor that several keys
    share, such as a tied embedding and decoder, is copied once and stays shared."""
    copies, state = {}, {}
    for key, value in model.state_dict().items():
        ident = (value.data_ptr(), value.dtype, tuple(value.shape), value.stride())
        if ident not in copies:
            copies[ident] = value.detach().to(device, copy=True) if device is not None else value.detach().clone()
        state[key] = copies[ident]
    return state


def _check_path(path) -> Path:
    """``path`` as a Path that names a file whose folder exists or can be made (no file in the way)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"A checkpoint path must be a string or a Path, got {type(path).__name__}.")
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder: give the checkpoint a file name, such as {path / 'model.pt'}.")
    for place in path.parents:
        if place.exists():
            if not place.is_dir():
                raise CheckpointError(f"{place} is a file, so nothing can be saved under it: choose another "
                                      f"checkpoint path than {path}.")
            break
    return path


def check_writable(path) -> Path:
    """Make sure a checkpoint can be written at ``path`` (its folder is created); a :class:`CheckpointError` if not.

    Call it before a long run, so that a bad path fails in a second rather than after an epoch.
    """
    path = _check_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.remove(probe)
    except OSError as err:
        raise CheckpointError(f"No checkpoint can be written in {path.parent} ({err.strerror or err}): choose a "
                              "folder you may write to.") from None
    return path


def _probe(folder: Path) -> Optional[str]:
    """None when a file can be created in ``folder`` (made if missing), else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".write-test.", dir=folder)
        os.close(fd)
        os.remove(tmp)
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


def check_writable_dir(path, what: str) -> Path:
    """Make sure files can be written in the folder ``path`` (created if missing), else one ValueError sentence."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what}={str(path)!r} is a file, not a folder: give a folder path.")
    why = _probe(path)
    if why:
        raise ValueError(f"{what}={str(path)!r} cannot be written ({why}): choose a folder you can write to.")
    return path


def check_writable_file(path, what: str) -> Path:
    """Make sure the file ``path`` can be written (its folder is created if missing), else one ValueError sentence."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what}={str(path)!r} is a folder: give a file path such as {str(path / 'best.pt')!r}.")
    why = _probe(path.parent)
    if why:
        raise ValueError(f"{what}={str(path)!r} cannot be written, its folder is not writable ({why}): "
                         "choose a path in a folder you can write to.")
    return path


def tensor_bytes(obj) -> int:
    """The bytes of the tensors inside ``obj`` (dicts and lists walked; a shared tensor counted once)."""
    seen, stack, total = set(), [obj], 0
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            key = (value.data_ptr(), value.numel(), value.dtype)
            if key not in seen:
                seen.add(key)
                total += value.numel() * value.element_size()
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return total


def atomic_save(obj, path) -> Path:
    """``torch.save(obj, path)`` through :func:`atomic_write`."""
    path = _check_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _write_failed(path, error, 0) from None
    return atomic_write(path, lambda f: torch.save(obj, f), needed=tensor_bytes(obj))


def save_checkpoint(path, model: NeuralLM, vocab: Optional[Vocab] = None, history=None, extra=None) -> Path:
    """Write ``model`` (kind, settings and weights), its vocabulary, the history rows and ``extra`` to ``path``."""
    check_neural(model, "checkpoint")
    vocab = vocab if vocab is not None else getattr(model, "vocab", None)
    if vocab is not None and (not isinstance(vocab, Vocab) or len(vocab) != model.config.vocab_size):
        size = f"{len(vocab)} tokens" if isinstance(vocab, Vocab) else f"a {type(vocab).__name__}"
        raise CheckpointError(f"The vocabulary to save is {size}, but the model has vocab_size="
                              f"{model.config.vocab_size}: pass the Vocab the model was trained with.")
    rows = getattr(history, "rows", history)
    payload = {
        "format": FORMAT,
        "kind": model.kind,
        "config": model.config.as_dict(),
        "state_dict": copy_state(model, "cpu"),
        "vocab": list(vocab.itos) if vocab is not None else None,
        "history": _plain(list(rows or [])),
        "extra": _plain(extra or {}),
    }
    return atomic_save(seal(payload), path)


def vocab_mismatch(stored: list, given: list) -> Optional[str]:
    """One sentence saying how two vocabularies differ, or None when they are equal."""
    if stored == given:
        return None
    first = next((i for i, (a, b) in enumerate(zip(stored, given)) if a != b), min(len(stored), len(given)))
    at = lambda itos: repr(itos[first]) if first < len(itos) else "nothing"  # noqa: E731
    return (f"The checkpoint's vocabulary ({len(stored)} tokens) differs from the one given ({len(given)} tokens), "
            f"first at id {first} ({at(stored)} vs {at(given)}): load with the corpus it was trained on.")


def _read(path: Path) -> dict:
    """The payload of a checkpoint file, read with ``weights_only=True``; a :class:`CheckpointError` if unreadable."""
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file: give the path of the .pt file.")
    if not path.is_file():
        raise MissingFileError(f"No checkpoint at {path}: train a model with TrainConfig(checkpoint=...) first.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about pickle protocols of foreign files
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as err:
        raise CheckpointError(f"{path} cannot be read ({err.strerror or err}): check that you may read it.") from None
    except Exception as err:  # torch's own messages would advise unsafe loading: none of them is shown
        kind = type(err).__name__
        why = ("it holds objects other than tensors and plain data, which are never loaded"
               if "Unpickl" in kind or "weights_only" in str(err) else f"reading it failed with {kind}")
        raise CheckpointError(f"{path} {DAMAGED.format(why=why)}.") from None
    if isinstance(payload, dict) and payload.get("format") == 1:
        raise CheckpointError(f"{path} was saved by an earlier lmcourse without a checksum, so it cannot be told "
                              "from a damaged file: train the model again to save it with one.")
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} {DAMAGED.format(why='it lacks the format mark of save_checkpoint')}.")
    if not verify(payload):
        raise CheckpointError(f"{path} {DAMAGED.format(why='its contents do not match the checksum saved with them')}.")
    return payload


def _check_payload(path: Path, payload: dict) -> tuple:
    """``(build, settings)``: the stored model's builder and settings, once every field save_checkpoint
    writes is checked."""
    fields = {"config": dict, "state_dict": dict, "vocab": (list, type(None)), "history": list, "extra": dict,
              "kind": str}
    payload["kind"] = kind_of(payload)
    for key, kind in fields.items():
        if not isinstance(payload.get(key, ...), kind):
            raise CheckpointError(f"{path} {DAMAGED.format(why=f'its {key!r} entry is missing or malformed')}.")
    try:
        build = model_builder(payload["kind"])
    except ValueError:
        raise CheckpointError(f"{path} holds a model of kind {payload['kind']!r}, which no module registers (known: "
                              f"{', '.join(sorted(MODELS)) or 'none'}): add the module that defines it to "
                              "lmcourse/networks/, or import it before loading.") from None
    stored = payload["vocab"]
    if stored is not None:
        if not all(isinstance(t, str) for t in stored) or len(set(stored)) != len(stored):
            raise CheckpointError(f"{path} {DAMAGED.format(why='its vocabulary is not a list of distinct strings')}.")
    return build, payload["config"]


def _skeleton(path: Path, build, settings: dict, state: dict, stored_vocab) -> NeuralLM:
    """The model ``build(settings)`` on the ``meta`` device (no memory), once the stored vocabulary and the
    weights' names and shapes are checked against it: settings asking for a huge model are refused
    before anything is allocated."""
    try:
        with torch.device("meta"):
            skeleton = build(dict(settings))
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path} {DAMAGED.format(why=f'its model settings are invalid: {err}')}.") from None
    size = skeleton.config.vocab_size
    if stored_vocab is not None and len(stored_vocab) != size:
        why = f"its vocabulary has {len(stored_vocab)} tokens for a model of {size}"
        raise CheckpointError(f"{path} {DAMAGED.format(why=why)}.")
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    got = {k: tuple(v.shape) if isinstance(v, torch.Tensor) else None for k, v in state.items()}
    if got != expected:
        wrong = sorted(k for k in set(expected) | set(got) if got.get(k) != expected.get(k))
        why = f"its weights do not fit its model settings, first at {wrong[0]!r}"
        raise CheckpointError(f"{path} {DAMAGED.format(why=why)}.")
    return skeleton


def load_checkpoint(path, vocab: Optional[Vocab] = None, map_location=None):
    """Rebuild the model saved at ``path``; return ``(model, info)``.

    ``info`` holds ``kind``, ``config``, ``vocab``, ``history`` (rows) and ``extra``. When ``vocab`` is given
    it must equal the stored one (or, for a checkpoint saved without one, have the model's
    ``vocab_size`` tokens). The model goes to ``map_location`` (default: the run's device). A file
    that is damaged, foreign or inconsistent raises a :class:`~lmcourse.errors.CheckpointError`.
    """
    if vocab is not None and not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a lmcourse Vocab, got {type(vocab).__name__}: pass corpus.vocab.")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"A checkpoint path must be a string or a Path, got {type(path).__name__}.")
    path = Path(path)
    payload = _read(path)
    build, settings = _check_payload(path, payload)
    stored = payload["vocab"]
    size = _skeleton(path, build, settings, payload["state_dict"], stored).config.vocab_size
    if vocab is not None and stored is not None:
        message = vocab_mismatch(stored, list(vocab.itos))
        if message:
            raise CheckpointError(message)
    if vocab is not None and len(vocab) != size:
        raise CheckpointError(f"The vocabulary given has {len(vocab)} tokens but the model in {path} has "
                              f"{size}: load it with the corpus it was trained on.")
    target = torch.device(map_location) if map_location is not None else default_device()
    model = build(dict(settings))
    model.load_state_dict(payload["state_dict"])
    model.to(target).eval()
    model.vocab = Vocab(stored) if stored is not None else vocab
    info = {"kind": payload["kind"], "config": model.config, "vocab": model.vocab, "history": payload["history"],
            "extra": payload["extra"]}
    return model, info
