import pytest
import torch

from lmcourse.course.cmp import cmp
from lmcourse.course.results import Results


def test_results_persist_and_replace(tmp_path):
    path = tmp_path / "r.json"
    r = Results("embedded", "ci", path=path).add("KN5", "01", 100.123, 101.456, params=5)
    r.add("KN5", "01", 90, 91)                        # a rerun replaces its row
    again = Results("embedded", "ci", path=path).add("LSTM", "02", 80, 81)
    assert [x.model for x in again.rows] == ["KN5", "LSTM"]
    assert again.rows[0].test_ppl == 91.0
    assert again.best().model == "LSTM"
    assert "| LSTM | 02 |" in again.markdown()
    assert "141.2" in Results("ptb", "ci", path=tmp_path / "p.json").markdown()
    assert len(again.clear_lesson("02").rows) == 1


def test_rows_carry_their_regime_and_old_files_still_load(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('[{"model": "KN5", "lesson": "01", "valid_ppl": 90.0, "test_ppl": 91.0}]')
    r = Results("embedded", "cpu", path=path)
    assert r.rows[0].regime == ""
    r.add("LSTM", "03", 80, 81, regime="30k tokens, 1 x 256, 8 epochs")
    text = Results("embedded", "cpu", path=path).markdown()
    assert "**Regime:** 30k tokens, 1 x 256, 8 epochs" in text and "**Regime:** not recorded" in text
    assert "| LSTM | 03 |" in text and "| KN5 | 01 |" in text


def test_each_regime_is_its_own_table_the_lessons_first(tmp_path):
    r = Results("ptb", "cpu", path=tmp_path / "r.json")
    r.add("KN5", "01", 50, 52, regime="1M tokens, counts").add("oracle", "01", 12, 13, regime="1M tokens, counts")
    r.add("course model, tied", "04", 20, 19, regime="course model: 40k tokens")
    r.add("course model + cache", "07", 18, 17, regime="course model: 40k tokens")
    text = r.markdown(lesson="07", literature=["AWD-LSTM"])
    tables = text.split("\n\n**")[1:]                    # each heading and its table
    heads = [t.split("\n")[0] for t in tables]
    assert heads == ["Regime:** course model: 40k tokens", "Regime:** 1M tokens, counts",
                     "Published:** the papers' full-size models on ptb, another regime again"]
    course, ngrams, papers = tables
    assert "| course model, tied | 04 |" in course and "| **course model + cache** | 07 |" in course
    assert "KN5" not in course and "KN5" in ngrams and "course model" not in ngrams
    assert ngrams.index("| KN5 |") < ngrams.index("| oracle |")      # within a table: highest test first
    assert "| *AWD-LSTM* | 24M |" in papers and "AWD-LSTM" not in course + ngrams
    assert r.markdown(lesson="04").count("**Regime:**") == 2        # 07's row is later than lesson 04
    assert "course model + cache" not in r.markdown(lesson="04")


def test_cmp_passes_close_and_fails_far(capsys):
    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert cmp("same", a, a.clone()) == 0.0
    assert capsys.readouterr().out.split() == ["same", "agrees", "exactly", "(tolerance", "1e-06)"]
    assert cmp("close", a, a + 3e-9) == pytest.approx(3e-9)
    out = capsys.readouterr().out
    assert "agrees to 3e-09 (tolerance 1e-06)" in out and "exact" not in out and "False" not in out
    with pytest.raises(AssertionError, match="differs by 0.001, more than the tolerance 1e-06"):
        cmp("far", a, a + 1e-3)
    assert "far" in (out := capsys.readouterr().out) and "DIFFERS by 0.001 (tolerance 1e-06)" in out
    with pytest.raises(AssertionError, match="nan"):
        cmp("nan", a, a * float("nan"))
    assert "DIFFERS by nan" in capsys.readouterr().out
    with pytest.raises(ValueError, match="shapes differ"):
        cmp("shape", a, a[:1])


def test_cmp_takes_a_tensor_that_still_tracks_gradients(capsys):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    assert cmp("tracked", w * 2, torch.tensor([2.0, 4.0]), atol=0) == 0.0


@pytest.mark.cuda
def test_cmp_compares_a_cuda_tensor_with_a_cpu_reference(capsys):
    """A lesson compares a model's output (on CUDA) with a reference built on the CPU: no device error."""
    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert cmp("across devices", a.cuda(), a + 3e-9) == pytest.approx(3e-9)
    with pytest.raises(AssertionError, match="differs by 0.001"):
        cmp("far, across devices", a, (a + 1e-3).cuda())


def test_a_lesson_shows_its_own_and_earlier_rows(tmp_path):
    r = Results("ptb", "ci", path=tmp_path / "r.json").add("KN5", "01", 1, 2).add("LSTM", "02", 3, 4)
    r.add("MoS", "06", 5, 6)
    text = r.markdown(lesson="02", literature=["AWD-LSTM"])
    assert "| KN5 | 01 |" in text and "| **LSTM** | 02 |" in text and "MoS" not in text
    assert "Merity et al. 2018, Table 1" in text and "Zaremba" not in text
    with pytest.raises(KeyError, match="No published row"):
        r.markdown(literature=["GPT-2"])


def test_a_damaged_results_file_is_moved_aside(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{not json")
    with pytest.warns(RuntimeWarning, match="damaged"):
        r = Results("embedded", "ci", path=path)
    assert r.rows == [] and (tmp_path / "r.json.corrupt").read_text() == "{not json"
