"""The course as a static site: the lessons with their stored outputs, as HTML that works offline.

::

    python -m lmcourse.course.book [--out book]      # make book

writes ``index.html`` (the lessons, linked, with what each teaches) and one page per lesson, made by
nbconvert's HTML exporter (JupyterLab's look) with every picture embedded as a data URI. Nothing is
fetched from the network when a page is read:

- MathJax is copied next to the pages from the ``jupyter-server-mathjax`` package (a pinned
  dependency); without it the formulas stay as TeX source, and the build says so;
- no script is loaded from a CDN (no require.js, no widget manager): a widget is shown by the
  static copy its output carries (see :mod:`lmcourse.widgets.fallback`), which is what a reader
  without a kernel can use anyway;
- links between lessons point at the other pages.

The pages show the outputs the notebooks were saved with: run ``make lessons`` first to refresh them.
"""
from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Optional, Sequence

from .lessons import NOTEBOOKS, lessons
from .outputs import STAMP

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
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


def build(out: Path, paths: Sequence[Path] = (), mathjax: bool = True) -> list[dict]:
    """Write the site into ``out``; one dict per lesson page: file, title, scale, images, widgets."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    paths = list(paths) or lessons()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = mathjax_source() if mathjax else None
    if source is not None:
        shutil.copytree(source, out / "mathjax", dirs_exist_ok=True)
    exporter = HTMLExporter(template_name="lab", template_file="book.html.j2", embed_images=True,
                            extra_loaders=[jinja2.DictLoader({"book.html.j2": TEMPLATE})],
                            mathjax_url=f"mathjax/MathJax.js?config={MATHJAX_CONFIG}")
    pages = []
    for path in paths:
        nb = nbformat.read(str(path), as_version=4)
        widgets = static_copy(nb)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem,
                                                                          "path": str(Path(path).parent)}})
        page = out / f"{path.stem}.html"
        page.write_text(_link_pages(body), encoding="utf-8")
        stamp = nb.metadata.get(STAMP) or {}
        pages.append({"file": page.name, "title": title_of(nb, path.stem), "summary": summary_of(nb),
                      "scale": stamp.get("scale"), "images": len(re.findall(r'<img [^>]*src="data:image/', body)), "widgets": widgets})
    (out / "index.html").write_text(index_page(pages, mathjax=source is not None), encoding="utf-8")
    return pages


def index_page(pages: list[dict], mathjax: bool) -> str:
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
<ol>{items}</ol>
</body></html>
"""


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.course.book",
                                     description="Build the course's static site from the lessons' stored outputs.")
    parser.add_argument("--out", default="book", help="the folder to write (default: book)")
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    args = parser.parse_args(argv)
    try:
        paths = lessons(args.lessons)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    pages = build(Path(args.out), paths)
    for p in pages:
        print(f"{p['file']:<36} {p['images']:3d} images  {p['widgets']} widgets as pictures")
    if mathjax_source() is None:
        print("MathJax is not installed (pip install jupyter-server-mathjax): formulas show as TeX.")
    print(f"open {Path(args.out) / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
