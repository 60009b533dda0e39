"""The bibliography in the package and BIBLIOGRAPHY.md say the same, and every number has a table."""
from pathlib import Path

import pytest

from lmcourse import literature as L

TEXT = (Path(__file__).resolve().parents[1] / "BIBLIOGRAPHY.md").read_text()


@pytest.mark.parametrize("key", sorted(L.REFERENCES))
def test_every_reference_is_in_the_bibliography(key):
    ref = L.REFERENCES[key]
    assert f"**{ref.short}** (`{key}`)" in TEXT and ref.url in TEXT and ref.title in TEXT


def test_every_published_number_is_listed_with_its_table():
    for row in L.PUBLISHED:
        assert row.source in L.REFERENCES
        assert "Table" in row.where or "README" in row.where, f"{row.model}: say which table it stands in."
        values = [f"{v:g}" for v in (row.valid, row.test) if v is not None]
        assert any(ln.startswith(f"| {row.model} |") and row.citation in ln and all(v in ln for v in values)
                   for ln in TEXT.splitlines()), f"{row.model} on {row.dataset} is not listed."


def test_lookups_say_what_exists():
    assert L.published("ptb", "AWD-LSTM").test == 57.3
    with pytest.raises(KeyError, match="No published row"):
        L.published("ptb", "GPT-2")
    with pytest.raises(KeyError, match="No reference"):
        L.cite("nobody2020")
