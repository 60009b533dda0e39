"""One lesson presented live: Run All, Alt+R starts the RISE slide show, every slide of the demo path is
stepped through with the space bar, and a code cell run on a slide answers.

The slide show is ``jupyterlab_rise`` (pinned in requirements.lock); its slides are the cells stamped by
``lmcourse/authoring/slides.py``. Checked: the key opens the show, it holds exactly the demo path's slides
(the rest is skipped), every one is reached in order, its code cells show the outputs of the run with
no error, its pictures are drawn, and Shift+Enter on a slide's code cell runs it in the lesson's kernel.
"""
import json
import re
import time

import pytest

import student
from lmcourse.authoring import slides  # the repository root is on the path: pytest runs as `python -m pytest`

LESSON = "01_ngram_baseline.ipynb"  # quick at ci; a derivation, two figures and the number on its path
LEAVES = "[...document.querySelectorAll('.reveal .slides section')].filter(s => !s.querySelector('section'))"
PRESENT_CODE = """[...document.querySelectorAll('.reveal .slides section.present .jp-CodeCell')]
    .filter(c => c.getClientRects().length && getComputedStyle(c).visibility === 'visible').map(c => ({prompt: (c.querySelector('.jp-InputPrompt') || {}).textContent
    || '', editor: [...c.querySelectorAll('.jp-InputArea-editor')].some(e => e.getClientRects().length), out: c.querySelectorAll('.jp-OutputArea-output').length, error: !!c.querySelector('[data-mime-type="application/vnd.jupyter.stderr"]') &&
    /Traceback|Error/.test(c.querySelector('[data-mime-type="application/vnd.jupyter.stderr"]').textContent)}))"""
BROKEN_IMAGES = ("[...document.querySelectorAll('.reveal img')].filter(i => i.complete && i.naturalWidth === 0)"
                 ".length")


def rise_frame(page, timeout: float = 60.0):
    """The slide show's frame (``/rise/<lesson>``) once its slides are in the page, or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = next((f for f in page.frames if "/rise/" in f.url), None)
        if frame is not None and frame.evaluate("document.querySelectorAll('.reveal .slides section').length"):
            return frame
        page.wait_for_timeout(500)  # lets Playwright see the new frame (time.sleep would block its events)
    return None


def test_one_slide_show_steps_through_the_demo_path(page, lab):
    copy = lab.root / LESSON
    nb = json.loads(copy.read_text())
    length = slides.demo_length(nb, LESSON.split("_", 1)[0])
    visit = student.Student(page, lab, copy, timeout=student.TIMEOUT)
    visit.open()
    visit.menu("Run", "runmenu:run-all")
    assert visit.wait_for_run(), "\n".join(visit.visit.problems)

    page.click(".jp-Notebook .jp-Cell >> nth=0")  # a cell in command mode: where RISE's key is bound
    page.keyboard.press("Escape")
    page.keyboard.press("Alt+r")
    frame = rise_frame(page)
    assert frame is not None, "Alt+R did not start the RISE slide show (is jupyterlab_rise installed in .venv?)"
    leaves = frame.evaluate(f"{LEAVES}.length")
    top = frame.evaluate("document.querySelectorAll('.reveal .slides > section').length")
    assert leaves == length["slides"], f"the show has {leaves} slides, the declared demo path {length['slides']}"

    frame.locator(".reveal").click()
    seen, problems, ran = [], [], None
    for _ in range(length["slides"] + length["fragments"] + 5):
        here = frame.evaluate("location.hash")
        if not seen or seen[-1] != here:
            seen.append(here)
            cells = frame.evaluate(PRESENT_CODE)
            problems += [f"{here}: an error output" for c in cells if c["error"]]
            problems += [f"{here}: a code cell that did not run" for c in cells
                         if not re.search(r"\d", c["prompt"]) and not c["out"]]  # a hidden input shows no prompt
            if ran is None and any(c["editor"] for c in cells):  # a slide whose code shows (not a hidden input)
                ran = run_one_cell(page, frame, here)
        page.keyboard.press("Space")
        page.wait_for_timeout(300)
    reached = sorted({int(m[1]) for h in seen if (m := re.match(r"#/slide-(\d+)", h))})
    assert reached == list(range(top)), f"slides reached with the space bar: {reached} of {top}"
    assert not problems, "\n".join(problems)
    assert frame.evaluate(BROKEN_IMAGES) == 0, "a picture in the slide show was not drawn"
    assert frame.evaluate("document.querySelectorAll('.reveal img').length") >= 1
    assert ran, f"Shift+Enter on a slide's code cell did not run it: {ran}"


def run_one_cell(page, frame, here: str):
    """Runs the first code cell of the present slide whose input shows, with Shift+Enter; its new prompt, or a
    sentence why not."""
    before = next(c for c in frame.evaluate(PRESENT_CODE) if c["editor"])["prompt"]
    frame.locator(".reveal .slides section.present .jp-CodeCell .jp-InputArea-editor >> visible=true").first.click()
    page.keyboard.press("Shift+Enter")
    for _ in range(120):
        page.wait_for_timeout(500)
        now = frame.evaluate(f"{PRESENT_CODE}.map(c => c.prompt)")
        numbers = [int(n) for p in now for n in re.findall(r"\d+", p)]
        if numbers and max(numbers) > max(int(n) for n in re.findall(r"\d+", before) or [0]):
            page.keyboard.press("Escape")  # command mode again: the space bar navigates
            return f"{here}: {before.strip()} -> {max(numbers)}"
    pytest.fail(f"{here}: Shift+Enter on the slide's code cell gave it no new execution count within 60 s")
