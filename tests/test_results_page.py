"""The book's results page: the ladder measured from the committed runs, the lessons' rows read, the papers cited."""
import json
import re
from pathlib import Path

import pytest

from lmcourse import literature as lit
from lmcourse.course.runs import lesson09 as L
from lmcourse.authoring import results_page as R
from lmcourse.authoring.lessons import lessons
from lmcourse.course.seeds import mean_sd
from lmcourse.errors import MissingFileError

LESSON_09 = next(p for p in lessons() if p.name.startswith("09_"))


@pytest.fixture(scope="module")
def ladder():
    return R.ladder_numbers()


def stored_ladder() -> dict:
    """Lesson 09's ladder as its stored notebook shows it: {rung: (test mean, test sd or None)}."""
    nb = json.loads(LESSON_09.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("data", {}).get("text/markdown", ""))
            if "| rung | valid | test (mean ± sd) |" in text:
                found = {}
                for line in text.splitlines()[2:]:
                    cells = [c.strip() for c in line.strip("|").split("|")]
                    m = re.match(r"([\d.]+)(?: ± ([\d.]+))?", cells[2]) if len(cells) > 2 else None
                    if m:
                        found[cells[0]] = (float(m[1]), float(m[2]) if m[2] else None)
                return found
    pytest.skip("lesson 09 is stored without its ladder table")


def test_the_ladder_is_measured_from_every_stored_run(ladder):
    assert list(ladder["rungs"]) == list(L.RUNGS)
    for rung, scores in ladder["rungs"].items():
        seeds = 1 if rung == "KN5" else len(L.SEEDS)
        assert len(scores["test"]) == len(scores["valid"]) == seeds, rung
    assert ladder["floor"]["test"] < min(min(s["test"]) for s in ladder["rungs"].values())
    assert "training tokens" in ladder["regime"] and "seeds" in ladder["regime"]


def test_the_ladder_agrees_with_what_lesson_09_shows(ladder):
    shown = stored_ladder()
    for rung, (mean, sd) in shown.items():
        if rung not in ladder["rungs"]:
            continue
        got_mean, got_sd = mean_sd(ladder["rungs"][rung]["test"])
        assert got_mean == pytest.approx(mean, abs=0.05), rung
        if sd is not None:
            assert got_sd == pytest.approx(sd, abs=0.05), rung


def test_the_page_holds_the_ladder_the_lessons_and_the_papers(ladder, tmp_path, monkeypatch):
    monkeypatch.setattr(R, "ladder_numbers", lambda: ladder)
    page = R.write(tmp_path).read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == [R.PAGE]
    mean, sd = mean_sd(ladder["rungs"]["MoS"]["test"])
    assert f"{mean:.2f} ± {sd:.2f}" in page and ladder["regime"] in page
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', page)) == 1
    for path in lessons():
        for row in R.headline_rows(path):
            assert row["test ppl"] in page, f"{path.name}: {row['model']}"
    for model in ("AWD-LSTM", "AWD-LSTM + MoS + dynamic evaluation", "Mogrifier LSTM"):
        row = lit.published("ptb", model)
        assert f"{row.test:.2f}" in page and row.citation in page
    assert not re.search(r"""<(?:script|link)\b[^>]*(?:src|href)=["']?(?:https?:)?//""", page)


def test_every_lesson_with_a_results_table_has_headline_numbers():
    with_table = [p for p in lessons() if "| model | lesson |" in p.read_text(encoding="utf-8")]
    assert with_table, "no lesson is stored with its results table"
    for path in with_table:
        rows = R.headline_rows(path)
        assert rows, f"{path.name} shows no row of its own"
        assert all(re.fullmatch(r"[\d,.]*", r["test ppl"]) for r in rows)


def test_headline_rows_keep_the_lessons_own_rows(tmp_path):
    table = ("**embedded**, scale `cpu`\n\n| model | lesson | regime | params | valid ppl | test ppl | note |\n"
             "|---|---|---|---:|---:|---:|---|\n| KN5 | 01 |  |  | 65.00 | 64.00 | |\n"
             "| **LSTM tied** | 04 | tiny | 1,000 | 170.00 | 171.50 | mean of 3 seeds |\n")
    nb = {"cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "",
                     "outputs": [{"output_type": "display_data", "data": {"text/markdown": table}}]}]}
    path = Path(tmp_path) / "04_weight_tying.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    rows = R.headline_rows(path)
    assert [(r["model"], r["test ppl"], r["regime"]) for r in rows] == [("LSTM tied", "171.50", "tiny")]


def test_headline_rows_read_each_regimes_table_and_skip_the_papers(tmp_path):
    from lmcourse.course.results import Results

    r = Results("ptb", "cpu", path=tmp_path / "r.json").add("KN5", "01", 65, 64, regime="1M tokens, counts")
    r.add("course model, tied", "04", 170, 171.5, params=1000, regime="course model: 40k tokens")
    r.add("course model, untied", "04", 172, 173.25, regime="course model: 40k tokens")
    table = r.markdown(lesson="04", literature=["AWD-LSTM"])
    nb = {"cells": [{"id": "a", "cell_type": "code", "metadata": {}, "source": "",
                     "outputs": [{"output_type": "display_data", "data": {"text/markdown": table}}]}]}
    rows = R.stored_table(nb)
    assert {(x["model"], x["regime"]) for x in rows} == {("KN5", "1M tokens, counts"),
                                                         ("**course model, tied**", "course model: 40k tokens"),
                                                         ("**course model, untied**", "course model: 40k tokens")}
    path = Path(tmp_path) / "04_weight_tying.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert [(x["model"], x["test ppl"]) for x in R.headline_rows(path)] == [("course model, untied", "173.25"),
                                                                            ("course model, tied", "171.50")]


def test_a_missing_run_stops_the_page_in_one_sentence(monkeypatch):
    from lmcourse.store import reference_runs

    monkeypatch.setattr(reference_runs, "load", lambda *a, **k: None)
    with pytest.raises(MissingFileError, match="make runs LESSONS=09"):
        R.ladder_numbers()


def test_the_records_since_2018_are_cited():
    since = [r for r in lit.PUBLISHED if r.note == lit.SINCE_2018]
    assert {r.dataset for r in since} == {"ptb", "wikitext-2"}
    assert all(r.source in lit.REFERENCES and "Table" in r.where for r in since)


def test_the_readmes_figure_is_what_the_committed_runs_give(ladder, tmp_path):
    """docs/ladder.png is regenerated from the committed runs (python -m lmcourse.authoring.results_page --figure):
    the numbers it draws, kept in its PNG Description, are the ones measured now, and it is the same size."""
    from PIL import Image

    committed = Path(__file__).resolve().parents[1] / "docs" / "ladder.png"
    fresh = R.write_ladder_figure(tmp_path / "ladder.png", ladder)
    assert [p.name for p in tmp_path.iterdir()] == ["ladder.png"]
    with Image.open(committed) as old, Image.open(fresh) as new:
        assert json.loads(old.text["Description"]) == json.loads(new.text["Description"]) == R.figure_numbers(ladder), \
            "docs/ladder.png is not what the committed runs give: python -m lmcourse.authoring.results_page --figure docs/ladder.png"
        assert old.size == new.size and "Software" not in new.text
    drawn = R.figure_numbers(ladder)
    assert list(drawn["rungs"]) == list(L.RUNGS) and drawn["floor"] < min(m for m, _ in drawn["rungs"].values())
