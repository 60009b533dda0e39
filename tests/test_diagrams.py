"""The course's diagrams: every one builds, fits a projector (its size, no text under 10 points where it shows,
no text cut off or covering other text) and renders to PNG; and the projector check itself can fail."""
import struct

import pytest

from lmcourse.course import diagrams


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_each_diagram_fits_a_projector_and_renders(name):
    build, lessons, _ = diagrams.DIAGRAMS[name]
    fig = build()
    assert diagrams.problems(fig) == [], f"{name} (lesson {lessons})"
    texts = [t for t in diagrams._texts(fig)]
    assert len(texts) >= 5, f"{name} says too little to be a diagram"
    width, height = png_size(diagrams.png(fig))
    assert (width, height) == (round(fig.get_figwidth() * 100), round(fig.get_figheight() * 100))


def test_the_ladder_stands_each_rung_at_its_number_with_its_change():
    values = dict(zip(diagrams.LADDER, [52.4, 22.8, 21.3, 20.8, 20.2, 20.3, 17.6, 16.3]))
    fig = diagrams.ladder(values)
    assert diagrams.problems(fig) == []
    shown = {t.get_text() for t in diagrams._texts(fig)}
    assert "22.8\n\u221256.5%" in shown and "20.3\n+0.5%" in shown, "each rung shows its value and its change"
    bars = sorted((p for p in fig.axes[0].patches if p.get_width() > 0.5), key=lambda p: p.get_x())
    heights = [p.get_height() for p in bars]
    assert heights[0] == max(heights) and heights[-1] == min(heights), "the steps stand at their numbers"
    with pytest.raises(ValueError, match="no value for the rungs"):
        diagrams.ladder({"KN5": 52.4})


@pytest.mark.parametrize("call, match", [(lambda: diagrams.gradient_path(steps=9), "steps = 9"),
                                         (lambda: diagrams.mos_head(K=7), "K = 7"),
                                         (lambda: diagrams.dropout_masks(p=1.0), "p = 1.0"),
                                         (lambda: diagrams.dynamic_evaluation(segments=1), "segments = 1"),
                                         (lambda: diagrams.attention_block(T=12), "T = 12")])
def test_arguments_out_of_range_are_refused_in_one_sentence(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_projector_check_finds_what_a_projector_loses():
    fig, ax = diagrams._figure(12, 7)
    ax.text(1, 1, "tiny", fontsize=7)
    ax.text(11.9, 3, "cut off at the edge", fontsize=12)
    ax.text(4, 4, "one label", fontsize=12)
    ax.text(4.1, 4, "another label", fontsize=12)
    found = diagrams.problems(fig)
    assert any("larger than" in p for p in found)
    # 7 pt on a 12-inch figure shown 10 inches wide: 7 * 10 / 12
    assert ("tiny", 5.8) in diagrams.small_text(fig) and any("'tiny' shows at 5.8 pt" in p for p in found)
    assert "cut off at the edge" in diagrams.outside_text(fig)
    assert ("one label", "another label") in diagrams.overlapping_text(fig)
    fine, ax = diagrams._figure(6, 4)
    ax.text(3, 2, "readable", fontsize=12, ha="center")
    assert diagrams.problems(fine) == []


def test_the_projector_check_reads_only_the_tick_labels_a_plot_draws():
    # a locator places ticks past each end of a plot's range (here 100 above 98.4, and 10^1 below 20 on a log
    # axis); matplotlib keeps their labels, off the axes and even off the figure, but does not draw them
    fig = diagrams._blank(5, 3.5)
    ax = fig.add_subplot()
    ax.plot([2, 3, 4, 5], [97.7, 86.1, 85.0, 84.9])
    fig.tight_layout()
    fig.canvas.draw()
    labels = {t.get_loc(): t.label1 for t in ax.yaxis.get_major_ticks()}
    assert 100 in labels and not ax.get_ylim()[0] <= 100 <= ax.get_ylim()[1]  # the undrawn tick exists
    assert diagrams.problems(fig) == []
    log = diagrams._blank(5, 3.5)
    ax = log.add_subplot()
    ax.loglog([3e-4, 3], [20, 6000])
    log.tight_layout()
    assert diagrams.problems(log) == []
    ax.set_ylabel("a label " * 12)  # a drawn text that leaves the figure is still found
    assert any("leaves the figure" in p for p in diagrams.problems(log))


def test_a_plain_plot_passes_and_only_drawn_tick_labels_are_checked():
    """Matplotlib keeps labels for ticks outside an axis's view (a log axis has many), placed off the axes and never
    drawn: they are not what a projector shows. A drawn label that leaves the figure is still found."""
    fig = diagrams._blank(10, 4.6)
    ax = fig.add_subplot()
    ax.plot([1, 2, 3, 4, 5, 6], [300, 200, 150, 140, 145, 150])
    ax.set_yscale("log")
    fig.tight_layout()
    assert diagrams.problems(fig) == []
    ax.set_xticks([1, 6], ["a long label at the left edge", "another at the right edge"], fontsize=30)
    assert "another at the right edge" in diagrams.outside_text(fig)


def test_the_editors_guide_lists_every_diagram():
    from lmcourse.course.catalog import REPO

    guide = (REPO / "docs" / "diagrams.md").read_text(encoding="utf-8")
    assert [name for name in diagrams.DIAGRAMS if f"`{name}(" not in guide] == []


def test_the_command_writes_every_diagram(tmp_path, capsys):
    assert diagrams.main(["--out", str(tmp_path), "tied_matrix", "ladder"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ladder.png", "tied_matrix.png"]
    assert "ok" in capsys.readouterr().out
    assert diagrams.main(["--out", str(tmp_path), "no_such_diagram"]) == 2
