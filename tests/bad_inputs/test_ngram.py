"""lmcourse.ngram: arithmetic that could overflow gives its true limit."""
import json
import math
from fractions import Fraction

import pytest
import torch

from lmcourse.lm import perplexity
from lmcourse.ngram.model import NGramLM
from lmcourse.vocab import Vocab

from .helpers import assert_one_sentence, cli, write_corpus

WORDS = ["<eos>", "<unk>", "a", "b", "c", "d"]
STREAM = torch.tensor([2, 3, 4, 0, 2, 3, 5, 0] * 5)


def exact_unigram_ppl(k: float) -> float:
    """Add-k unigram perplexity of STREAM on itself, in exact rational arithmetic."""
    counts = {w: int((STREAM == w).sum()) for w in range(len(WORDS))}
    n, V, k = len(STREAM), len(WORDS), Fraction(k)
    log_p = sum(math.log((counts[int(w)] + k) / (n + k * V)) for w in STREAM)
    return math.exp(-log_p / n)


@pytest.mark.parametrize("k", [1e-300, 0.5, 1e6, 1e100, 1e300, 1e308, 1.7976931348623157e308])
def test_add_k_unigram_matches_exact_arithmetic_for_any_finite_k(k):
    model = NGramLM(Vocab(WORDS), 1, "addk", k=k).fit(STREAM)
    assert perplexity(model, STREAM) == pytest.approx(exact_unigram_ppl(k), rel=1e-9)


@pytest.mark.parametrize("order", [2, 3, 5])
@pytest.mark.parametrize("k", [1e200, 1e308, 1.7976931348623157e308])
def test_add_k_with_a_huge_k_is_the_uniform_model_at_every_order(order, k):
    model = NGramLM(Vocab(WORDS), order, "addk", k=k).fit(STREAM)
    log_p = model.score(STREAM)  # (N,)
    assert torch.isfinite(log_p).all()
    assert perplexity(model, STREAM) == pytest.approx(len(WORDS), rel=1e-9)


@pytest.mark.parametrize("k", ["1e308", "1.7e308"])
def test_the_command_line_prints_about_v_for_a_huge_k(home, capsys, k):
    folder = write_corpus(home / "corpus")
    code, out, err = cli(capsys, ["ngram", "--data", str(folder), "--smoothing", "addk", "--k", k, "--order", "3"])
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    V = len({*"the cat sat on the mat".split()}) + 2  # the words of train, <eos> and <unk>
    assert result["valid_ppl"] == pytest.approx(V, rel=1e-6) and result["test_ppl"] == pytest.approx(V, rel=1e-6)


# ---------------------------------------------------------------------------------- the k of add-k


@pytest.mark.parametrize("k", [math.inf, math.nan, -1.0, 0, "1", True])
def test_add_k_needs_a_finite_positive_k(k):
    with pytest.raises(ValueError) as err:
        NGramLM(Vocab(WORDS), 2, "addk", k=k)
    assert_one_sentence(str(err.value), r"must be a finite number > 0")
