r"""Lesson 03's runs: branches of the course model (:mod:`.course_model`) that differ in their dropout only.

The regime is the course model's with two documented changes of size and a longer schedule
(:func:`lesson_shared`): the word vectors are :data:`NARROW` times narrower (E = 32 at ``cpu``), the LSTM layer is
:data:`WIDTH` times as wide as they are (H = 8 E = 256 at ``cpu``; the course model has H = E = 64), and training
runs :data:`LONGER` times as many epochs (80 at ``cpu``). Then the recurrent matrix :math:`W_{hh}` holds most of
the parameters (the AWD-LSTM's: about half), so a regulariser of the recurrent connection has much to act on. In
the course model's own regime the word tables hold most of the parameters, and such a regulariser has little to act
on. Measured at ``cpu`` (three seeds, test perplexity of the best epoch; the lesson prints them):

- at H = E (the course model) and at H = 3 E, E = 64, 40 epochs: neither weight drop alone nor its removal from the
  full model moved test perplexity beyond the seeds' spread;
- at H = 8 E, E = 32, over the course model's 40 epochs: each regulariser of the recurrent connection alone beat no
  dropout beyond the spread, but the full model's best epochs were 36, 39 and 40, so it was still improving when
  the schedule stopped, and it came out *behind* the full model without weight drop, beyond the spread
  (21.97 ± 0.14 against 21.62 ± 0.18); a 160-epoch run of the pair gave seed 0's numbers of the 80-epoch run
  exactly (its best epochs come before the 80th), so 80 epochs is converged, and the lesson trains 80;
- at 80 epochs (this lesson): the single regularisers keep their 40-epoch numbers (their best epochs are before
  the 40th), and the full model and its ablation end within each other's spread;
- in every regime tried, including a rate of 0.75, a fresh mask on :math:`h_{t-1}` at every step did no worse than
  a locked one (an explanation often given: the LSTM's cell :math:`c_t`, which the mask never touches, carries the
  memory). A mask on :math:`c_{t-1}` itself, tried with a prototype as a test of that explanation, is not a fair
  comparison: scaled by :math:`1/(1-p)` at every step it compounds along the cell's own recurrence (the fresh mask
  diverged at the learning rate 8, the locked one ended at 39.7). A plain tanh RNN (its memory is :math:`h_t`; a
  prototype outside the package) at the learning rate 2 and p = 0.5, trained 80 epochs, ranked the masks the
  other way round *beyond* the spread: fresh 22.81 ± 0.46, locked 23.95 ± 0.52 (three seeds; seed 0 without
  dropout 23.74). So the cell is not the whole story.

Every variant is a rung's settings (:func:`.course_model.rung_settings`, rungs "LSTM" and "+ dropouts") with a
change to its ``model`` dict (:func:`variant_changes`), trained by :func:`.course_model.train_rung` under the name
``03-dropout``:

- "no dropout": the rung "LSTM"; "full model": the rung "+ dropouts" (the AWD-LSTM's dropouts at the course's
  ``dropout_scale``: word types of the embedding, the embeddings, the output, and weight drop on :math:`W_{hh}`);
- dropout on the recurrent connection :math:`z_t = u_t + W_{hh} (m_t \odot h_{t-1})`, a fresh mask at every
  step, or one locked mask per sequence (Gal & Ghahramani 2016), in the from-the-equations cell (cuDNN
  cannot drop :math:`h_{t-1}`);
- weight drop alone (DropConnect on :math:`W_{hh}`, Merity et al. 2018);
- the full model without weight drop (the ablation of Merity et al. 2018, Table 4);
- the full model with its weight drop replaced by dropout on :math:`h_{t-1}` at the same rate, a fresh mask per
  step or a locked one (Gal & Ghahramani's own setting: the recurrent mask beside locked masks on the inputs and
  outputs).

The three single regularisers of the recurrent connection drop at one rate, the AWD-LSTM's weight-drop rate
(:func:`p_recurrent`: 0.5; the full model's weight drop is the course model's, that rate times
``dropout_scale``), so they differ only in what one draw of the mask covers (measured: at the full model's
rate, 0.25, none of the three moved test perplexity beyond the seeds' spread). The lesson reads only numbers of
these runs (their histories, and the validation and test perplexities of the weights the trainer keeps, measured
right after training), so they are stored as numbers
(:func:`lmcourse.store.stored_numbers.compute_or_load`), not weights.
"""
from __future__ import annotations

from typing import Optional

from ... import config
from ...lm import perplexity
from ...store.stored_numbers import compute_or_load
from .course_model import AWD_PTB_DROPOUTS, SEEDS, rung_settings, shared_settings, train_rung

__all__ = ["RUNS", "LESSON", "NAME", "DATASET", "SEEDS", "NARROW", "WIDTH", "LONGER", "RUNGS", "VARIANTS", "BRANCHES",
           "lesson_shared", "p_recurrent", "variant_changes", "variant_settings", "measure", "variant_numbers"]

LESSON = "03"
NAME = "03-dropout"
# The corpus the runs read: the course model's variant of the embedded corpus, whatever LMCOURSE_DATASET says, so
# that their stored numbers are keyed by it (the variant itself is in the key through the corpus fingerprint).
DATASET = config.EMBEDDED
NARROW = 2  # the word vectors are this many times narrower than the course model's
WIDTH = 8  # hidden units per word-vector number (the course model has 1)
LONGER = 2  # epochs, as a multiple of the course model's: the wider LSTM converges later
BRANCHES = ("h(t-1) dropout, fresh mask per step", "h(t-1) dropout, locked mask", "weight drop alone",
            "full model − weight drop", "full model, fresh h(t-1) mask for weight drop",
            "full model, locked h(t-1) mask for weight drop")
RUNGS = {"no dropout": "LSTM", "full model": "+ dropouts"}  # the variants that are the course model's rungs, unchanged
VARIANTS = ("no dropout",) + BRANCHES[:3] + ("full model",) + BRANCHES[3:]  # the lesson's order


def lesson_shared(scale: str) -> dict:
    """The course model's shared settings at ``scale`` (:func:`.course_model.shared_settings`) with the lesson's two
    changes of size, ``emb_size`` = E / :data:`NARROW` and ``hidden_size`` = :data:`WIDTH` times that (E the course
    model's), and its schedule :data:`LONGER` times as many epochs, so that every variant converges."""
    course = shared_settings(scale)
    emb_size = max(1, course["emb_size"] // NARROW)
    return shared_settings(scale, emb_size=emb_size, hidden_size=WIDTH * emb_size, epochs=LONGER * course["epochs"])


def p_recurrent(shared: dict) -> float:
    """The one rate of the single recurrent regularisers: the AWD-LSTM's weight drop on Penn Treebank, 0.5 (the
    same at every scale; ``shared`` is read for nothing else, so a regime may change it)."""
    return float(shared.get("p_recurrent", AWD_PTB_DROPOUTS["wdrop"]))


def variant_changes(variant: str, shared: dict) -> tuple[str, dict]:
    """``(rung, changes)``: the course model's rung a variant starts from and what it changes in its ``model``."""
    p = p_recurrent(shared)
    full = rung_settings("+ dropouts", 0, shared)["model"]["wdrop"]  # the full model's rate on the recurrent connection
    table = {
        "no dropout": ("LSTM", {}),
        BRANCHES[0]: ("LSTM", dict(cell="equations", dropoutr=p, recurrent_kind="step")),
        BRANCHES[1]: ("LSTM", dict(cell="equations", dropoutr=p, recurrent_kind="locked")),
        BRANCHES[2]: ("LSTM", dict(wdrop=p)),
        "full model": ("+ dropouts", {}),
        BRANCHES[3]: ("+ dropouts", dict(wdrop=0.0)),
        BRANCHES[4]: ("+ dropouts", dict(wdrop=0.0, cell="equations", dropoutr=full, recurrent_kind="step")),
        BRANCHES[5]: ("+ dropouts", dict(wdrop=0.0, cell="equations", dropoutr=full, recurrent_kind="locked")),
    }
    if variant not in table:
        raise ValueError(f"{variant!r} is not a variant of lesson 03: pick one of {', '.join(VARIANTS)}.")
    return table[variant]


def variant_settings(variant: str, seed: int, shared: dict) -> dict:
    """The settings of one variant: its rung's (:func:`.course_model.rung_settings`) with the variant's ``model``
    changes, and its name under ``variant``."""
    rung, changes = variant_changes(variant, shared)
    s = rung_settings(rung, seed, shared)
    return dict(s, variant=variant, model={**s["model"], **changes})


def measure(settings: dict, corpus, progress: Optional[bool] = None, plot: bool = False,
            floor: Optional[float] = None) -> dict:
    """Train one branch (:func:`.course_model.train_rung`, nothing stored) and keep its numbers: the history
    and the validation and test perplexities of the weights the trainer keeps (the best epoch's)."""
    run = train_rung(settings, corpus, floor=floor, plot=plot, progress=progress, store=False, name=NAME,
                     lesson=LESSON)
    model = run.model.eval()
    return dict(history=run.history, valid=perplexity(model, corpus.valid), test=perplexity(model, corpus.test))


def variant_numbers(variant: str, seed: int, corpus, scale: str, progress: Optional[bool] = None,
                    plot: bool = False, floor: Optional[float] = None, dataset: str = DATASET,
                    retrain: Optional[bool] = None) -> dict:
    """The stored numbers of one variant at ``scale`` (committed, then the user's cache), trained when there are
    none or ``retrain`` (or ``LMCOURSE_RETRAIN=1``) asks; ``"loaded"`` says which. ``dataset`` names the corpus
    in the key: :data:`DATASET`, the one the runs read (never ``LMCOURSE_DATASET``'s)."""
    settings = variant_settings(variant, seed, lesson_shared(scale))
    return compute_or_load(NAME, settings, lambda: measure(settings, corpus, progress, plot, floor), corpus.vocab,
                           scale=scale, dataset=dataset, recompute=retrain,
                           lesson=LESSON)


def _variants(scale: str) -> list:
    """Lesson 03: every variant once per seed, seed by seed; stored as numbers."""
    shared = lesson_shared(scale)
    return [variant_settings(v, seed, shared) for seed in SEEDS for v in VARIANTS]


RUNS = {NAME: _variants}
