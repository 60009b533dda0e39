"""The course as a static site: the lessons with their stored outputs, as HTML that works offline.

::

    python -m lmcourse.authoring.book [--out book]      # make book

writes ``index.html`` (the lessons, linked, with what each teaches) and one page per lesson, made by
nbconvert's HTML exporter (JupyterLab's look) with every picture embedded as a data URI. Nothing is
fetched from the network when a page is read:

- MathJax is copied next to the pages from the ``jupyter-server-mathjax`` package (a pinned
  dependency); without it the formulas stay as TeX source, and the build says so;
- no script is loaded from a CDN (no require.js, no widget manager): a widget is shown by the
  static copy its output carries (see :mod:`lmcourse.widgets.fallback`), which is what a reader
  without a kernel can use anyway;
- links between lessons point at the other pages;
- a cell whose input is hidden (:mod:`lmcourse.course.rendered`: a take-away built from the lesson's
  numbers) shows its output only;
- the HTML of markdown cells and outputs is sanitised (:func:`safe_html`): a ``<script>`` an output printed,
  an event handler, or an ``<iframe>`` of another site in a markdown cell is shown as text, never run or
  loaded (the index page escapes everything it takes from the lessons).

The pages show the outputs the notebooks were saved with: run ``make lessons`` first to refresh them.
A lesson saved with an error in one of its cells is refused (naming the lesson and the cell), as is a
file that is not a notebook, before any page is written; so is an ``--out`` that is a file or a folder
that cannot be written.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Optional, Sequence

from .. import EXIT_INTERRUPTED, _ctrl_c_raises
from ..checksum import atomic_write
from ..course.rendered import drop_hidden_inputs
from ..errors import LMCourseError, WriteError, sentence
from .lessons import NOTEBOOKS, NotebookError, lessons, read_notebook
from .outputs import STAMP

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# What a page keeps of the HTML in markdown cells and in outputs: text markup, tables, pictures and links. Anything
# that runs code or pulls in another page (script, iframe, object, embed, form, base, meta, link, ...) is escaped,
# so it shows as text; so are event-handler attributes (on...) and links other than http(s), mailto, data and
# relative ones.
SAFE_TAGS = frozenset("""a abbr acronym address article aside b bdi bdo big blockquote br caption center cite code col
colgroup dd del details dfn div dl dt em figcaption figure font footer h1 h2 h3 h4 h5 h6 header hr i img ins kbd li
mark nav ol p pre progress q rp rt ruby s samp section small span strike strong style sub summary sup table tbody td
tfoot th thead time tr tt u ul var wbr""".split())
SAFE_PROTOCOLS = frozenset({"http", "https", "mailto", "data"})
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"
# JupyterLab's page less the scripts it would fetch from a CDN.
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


def mathjax_source() -> Optional[Path]:
    """The folder holding ``MathJax.js`` (from ``jupyter-server-mathjax``), or None when it is not installed."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        return None
    folder = Path(jupyter_server_mathjax.__file__).parent / "static"
    return folder if (folder / "MathJax.js").is_file() else None


def _safe_attribute(tag: str, name: str, value: str) -> bool:
    return not name.lower().startswith("on") and name.lower() not in ("srcdoc", "formaction")


class _SafeStyles:
    """The CSS of a ``style`` attribute less any declaration that could load or run something (``url(...)``,
    ``expression(...)``, ``javascript:``, an escape, an at-rule); layout and colours stay as the lesson drew them."""

    RISKY = re.compile(r"url\s*\(|expression\s*\(|javascript:|\\|@|<", re.IGNORECASE)

    def sanitize_css(self, style: str) -> str:
        kept = [d.strip() for d in style.split(";") if d.strip() and ":" in d and not self.RISKY.search(d)]
        return "; ".join(kept)


def safe_html(text) -> str:
    """``text`` (HTML from a markdown cell or an output) with everything that could run code or load another page
    escaped (see :data:`SAFE_TAGS`): a ``<script>`` an output printed, or an ``<iframe>`` of another site in a
    markdown cell, shows as its text and does nothing. The pages' own scripts (MathJax, reveal.js) are not
    passed through it. Used by :func:`exporter` in place of nbconvert's ``clean_html``, which would also drop
    headings, paragraphs and pictures."""
    import bleach

    text = text.decode() if isinstance(text, bytes) else str(text)
    return bleach.clean(text, tags=SAFE_TAGS, attributes=_safe_attribute, protocols=SAFE_PROTOCOLS,
                        strip=False, strip_comments=True, css_sanitizer=_SafeStyles())


def exporter(kind: str = "html", **options):
    """nbconvert's HTML (``"html"``) or slides (``"slides"``) exporter for the course's pages, with the HTML of
    markdown cells and outputs passed through :func:`safe_html`."""
    from nbconvert import HTMLExporter, SlidesExporter

    made = (SlidesExporter if kind == "slides" else HTMLExporter)(sanitize_html=True, **options)
    made.register_filter("clean_html", safe_html)
    return made


def static_copy(nb) -> int:
    """Drop each widget's view where its output carries a static copy, and the saved widget state.

    Returns how many widget views were replaced by their copies."""
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data and set(data) - {WIDGET_VIEW, "text/plain"}:
                del data[WIDGET_VIEW]
                replaced += 1
    nb.metadata.pop("widgets", None)
    return replaced


def title_of(nb, fallback: str) -> str:
    """The lesson's first heading."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def summary_of(nb) -> str:
    """The lesson's first paragraph of prose (one that does not lead into a formula), as Markdown."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for paragraph in cell.source.split("\n\n"):
            text = re.sub(r"\s+", " ", paragraph).strip()
            if text and not text.startswith(("#", "$", "|", "<", "-", "*", ">")) and not text.endswith(":"):
                return text
    return ""


def _link_pages(page: str) -> str:
    """Links to another lesson's ``.ipynb`` point at its page."""
    return re.sub(r'href="([^"#:]+?)\.ipynb(#[^"]*)?"', lambda m: f'href="{Path(m.group(1)).name}.html{m.group(2) or ""}"',
                  page)


def stored_error(nb, path: Path) -> Optional[str]:
    """The sentence refusing a lesson saved with an error output, naming the lesson and the cell; else None."""
    for number, cell in enumerate(nb.cells, start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                what = f"{output.get('ename', 'an error')}: {' '.join(str(output.get('evalue', '')).split())}"
                return (f"{Path(path).name} was saved with an error in cell {number} ({what[:160]}): run the "
                        "lesson again (make lessons) and fix what failed, then build the book.")
    return None


def _check_out(out: Path) -> None:
    """Refuse an output folder that is a file or cannot be written, before anything is written."""
    if out.exists() and not out.is_dir():
        raise WriteError(f"--out {out} is a file, not a folder: give a folder for the site, e.g. --out book.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WriteError(f"The folder {out} cannot be made ({err.strerror or type(err).__name__}): give a folder "
                         "you may write to with --out.") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise WriteError(f"The folder {out} is read-only: give a folder you may write to with --out.")


def build(out: Path, paths: Sequence[Path] = (), mathjax: bool = True, results: bool = True) -> list[dict]:
    """Write the site into ``out``; one dict per lesson page: file, title, scale, images, widgets.

    Every lesson is read and checked first; a broken one, or one saved with an error, is a
    :class:`~lmcourse.authoring.lessons.NotebookError` and nothing is written. With ``results`` it also writes the
    results page (:mod:`lmcourse.authoring.results_page`), linked from the index."""
    import jinja2

    paths = list(paths) or lessons()
    notebooks = [read_notebook(Path(p)) for p in paths]
    for nb, path in zip(notebooks, paths):
        refused = stored_error(nb, path)
        if refused:
            raise NotebookError(refused)
    out = Path(out)
    _check_out(out)
    source = mathjax_source() if mathjax else None
    if source is not None:
        shutil.copytree(source, out / "mathjax", dirs_exist_ok=True)
    converter = exporter("html", template_name="lab", template_file="book.html.j2", embed_images=True,
                         extra_loaders=[jinja2.DictLoader({"book.html.j2": TEMPLATE})],
                         mathjax_url=f"mathjax/MathJax.js?config={MATHJAX_CONFIG}")
    pages = []
    for path, nb in zip(paths, notebooks):
        widgets = static_copy(nb)
        drop_hidden_inputs(nb)
        body, _ = converter.from_notebook_node(nb, resources={"metadata": {"name": path.stem,
                                                                           "path": str(Path(path).parent)}})
        page = out / f"{path.stem}.html"
        _write(page, _link_pages(body))
        stamp = nb.metadata.get(STAMP) or {}
        pages.append({"file": page.name, "title": title_of(nb, path.stem), "summary": summary_of(nb),
                      "scale": stamp.get("scale"), "images": len(re.findall(r'<img [^>]*src="data:image/', body)), "widgets": widgets})
    if results:
        from .results_page import write as write_results  # here: only a book with its results page loads the runs
        write_results(out)
    _write(out / "index.html", index_page(pages, mathjax=source is not None, results=results))
    return pages


def _write(path: Path, text: str) -> None:
    """Replace ``path`` whole, through a temporary name unique to this writer (two builds never collide)."""

    data = text.encode("utf-8")
    atomic_write(path, lambda f: f.write(data), needed=len(data))


def index_page(pages: list[dict], mathjax: bool, results: bool = False) -> str:
    """The site's front page: the lessons in order, each linked, with its first paragraph."""
    import mistune

    items = "".join(f'<li><a href="{html.escape(p["file"])}">{html.escape(p["title"])}</a>'
                    f'{mistune.html(html.escape(p["summary"], quote=False))}</li>' for p in pages)
    scales = sorted({p["scale"] for p in pages if p["scale"]})
    ran = (f"The outputs were produced at the {', '.join(f'<code>{s}</code>' for s in scales)} scale."
           if scales else "The outputs are those the notebooks were saved with.")
    math = (f"""<script type="text/x-mathjax-config">MathJax.Hub.Config({{tex2jax: {{inlineMath: [["$", "$"]],
processEscapes: true}}, messageStyle: "none"}});</script>
<script src="mathjax/MathJax.js?config={MATHJAX_CONFIG}"></script>""" if mathjax else "")
    note = "" if mathjax else "<p><em>MathJax was not installed when this site was built: formulas show as TeX.</em></p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>lmcourse: neural language models, from n-grams to attention</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; color: #222;
        line-height: 1.5; }}
li {{ margin-bottom: 1rem; }} li a {{ font-weight: 600; font-size: 1.1rem; }} li p {{ margin: 0.2rem 0 0; }}
code {{ background: #f3f3f3; padding: 0 3px; }}
</style>{math}</head>
<body>
<h1>Neural language models, from n-grams to attention</h1>
<p>{len(pages)} lessons, each a notebook with its outputs as stored. {ran} To run them yourself, clone the
repository and run <code>make lab</code>; the sliders and boxes shown here as pictures move there.</p>
{note}
{'<p><a href="results.html"><strong>Results</strong></a>: the course&rsquo;s ladder beside the papers&rsquo; numbers, '
 'and each lesson&rsquo;s headline numbers.</p>' if results else ''}
<ol>{items}</ol>
</body></html>
"""


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line (``make book``), options before or after the lessons."""
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.book",
                                     description="Build the course's static site from the lessons' stored outputs.")
    parser.add_argument("--out", default="book", help="the folder to write (default: book)")
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    return parser.parse_intermixed_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    _ctrl_c_raises()
    args = parse_args(argv)
    try:
        paths = lessons(args.lessons)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        pages = build(Path(args.out), paths)
    except (LMCourseError, OSError) as err:
        print(f"error: {sentence(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nerror: interrupted; the pages written so far are complete, the index may be missing.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    for p in pages:
        print(f"{p['file']:<36} {p['images']:3d} images  {p['widgets']} widgets as pictures")
    if mathjax_source() is None:
        print("MathJax is not installed (pip install jupyter-server-mathjax): formulas show as TeX.")
    print(f"open {Path(args.out) / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
