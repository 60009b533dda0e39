"""The lessons as static reveal.js decks, from their stored outputs, readable offline.

::

    python -m lmcourse.authoring.deck fetch                 # once, at install time (make slides does it)
    python -m lmcourse.authoring.deck build [--out slides] [LESSON ...]  # make slides, LESSONS="5 9" make slides

``build`` writes one ``<lesson>.slides.html`` per lesson with nbconvert's slides exporter: the cells of the
lesson's demo path (their ``slideshow`` stamps, see :mod:`lmcourse.authoring.slides`), with the outputs the
notebook was saved with, every picture embedded; cells stamped ``skip`` are left out, and so is the input of a
cell whose input is hidden (:mod:`lmcourse.course.rendered`: a take-away shows its Markdown only). Nothing is fetched
when a deck is read:

- reveal.js is a copy of the pinned npm tarball (:data:`REVEAL_URL`, checked against
  :data:`REVEAL_SHA256`), unpacked once by ``fetch`` into the environment (``.venv/share/lmcourse``, or
  ``$LMCOURSE_REVEAL``) and copied next to the decks; nbconvert's own template would load it, jQuery
  and require.js from a CDN, so the decks use the template below instead;
- MathJax is copied from ``jupyter-server-mathjax``, as :mod:`lmcourse.authoring.book` does;
- a widget shows the picture of its first state that its output carries;
- the HTML of markdown cells and outputs is sanitised as the book's is (:func:`lmcourse.authoring.book.safe_html`).
"""
from __future__ import annotations

import argparse
import hashlib
import html
import io
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Optional, Sequence

from .. import EXIT_INTERRUPTED, _ctrl_c_raises
from ..checksum import atomic_write
from ..course.rendered import drop_hidden_inputs
from .book import MATHJAX_CONFIG, exporter, mathjax_source, static_copy, title_of
from .lessons import lessons

REVEAL_VERSION = "4.6.1"
REVEAL_URL = f"https://registry.npmjs.org/reveal.js/-/reveal.js-{REVEAL_VERSION}.tgz"
REVEAL_SHA256 = "4f4121ef2b8e7e9398bdecd7b3b6ce5e0ee3a2f5af221708eb6c4ce03bcae6be"
REVEAL_FILES = ("dist/", "plugin/notes/")  # what a deck reads of the package
REVEAL_DIR = "reveal.js"  # the copy's folder beside the decks
# nbconvert's reveal page less what it would fetch (jQuery, require.js, mermaid, the widget manager), with
# reveal.js and its notes plugin read from the copy beside the deck, and long slides scrolling.
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_css -%}
<style>.reveal .slides > section, .reveal .slides > section > section { height: 100%; overflow-y: auto; }</style>
{%- endblock html_head_css -%}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({controls: true, progress: true, history: true, slideNumber: "c/t", center: false,
                   transition: "{{ resources.reveal.transition }}", width: 1200, height: 800,
                   plugins: [RevealNotes]});
Reveal.on("slidechanged", function (event) {
  if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(["Typeset", MathJax.Hub, event.currentSlide]); }
});
</script>
{% endblock footer_js %}
"""
REMOTE = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)


def reveal_home() -> Path:
    """Where the unpacked reveal.js lives: ``$LMCOURSE_REVEAL``, else ``<environment>/share/lmcourse/reveal.js-V``."""
    folder = os.environ.get("LMCOURSE_REVEAL")
    return Path(folder) if folder else Path(sys.prefix) / "share" / "lmcourse" / f"reveal.js-{REVEAL_VERSION}"


def unpack_reveal(tarball: bytes, home: Path) -> Path:
    """Check ``tarball`` against :data:`REVEAL_SHA256` and unpack its :data:`REVEAL_FILES` into ``home``
    (whole or not at all: through a temporary folder renamed at the end)."""
    digest = hashlib.sha256(tarball).hexdigest()
    if digest != REVEAL_SHA256:
        raise ValueError(f"The reveal.js {REVEAL_VERSION} tarball has sha256 {digest}, not the pinned {REVEAL_SHA256}: "
                         "the download was damaged or altered; run the command again.")
    home = Path(home)
    home.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home.parent) as tmp, tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/")
            if member.isfile() and name.startswith(REVEAL_FILES) and ".." not in Path(name).parts:
                target = Path(tmp) / "reveal" / name
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(target, tar.extractfile(member).read())
        if home.exists():
            shutil.rmtree(home)
        os.replace(Path(tmp) / "reveal", home)
    return home


def fetch_reveal(home: Optional[Path] = None) -> Path:
    """Download the pinned reveal.js from the npm registry and unpack it (see :func:`unpack_reveal`)."""
    home = Path(home) if home else reveal_home()
    if (home / "dist" / "reveal.js").is_file():
        return home
    try:
        with urllib.request.urlopen(REVEAL_URL, timeout=60) as response:
            tarball = response.read()
    except OSError as err:
        raise ConnectionError(f"Could not download reveal.js from {REVEAL_URL} ({err}): check the network and run "
                              "make slides again.") from err
    return unpack_reveal(tarball, home)


def _exporter():
    import jinja2

    return exporter("slides", template_file="deck.html.j2",
                    extra_loaders=[jinja2.DictLoader({"deck.html.j2": TEMPLATE})], reveal_url_prefix=REVEAL_DIR,
                    reveal_theme="white", reveal_transition="none",
                    mathjax_url=f"mathjax/MathJax.js?config={MATHJAX_CONFIG}")


def build(out: Path, paths: Sequence[Path] = (), mathjax: bool = True, reveal: bool = True) -> list[dict]:
    """Write the decks into ``out``; one dict per deck: file, title, slides (sections), images, remote
    (scripts or style sheets it would fetch: none)."""
    import nbformat

    paths = list(paths) or lessons()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = mathjax_source() if mathjax else None
    if source is not None:
        shutil.copytree(source, out / "mathjax", dirs_exist_ok=True)
    home = reveal_home()
    if reveal and (home / "dist" / "reveal.js").is_file():
        shutil.copytree(home, out / REVEAL_DIR, dirs_exist_ok=True)
    exporter = _exporter()
    decks = []
    for path in paths:
        nb = nbformat.read(str(path), as_version=4)
        static_copy(nb)
        drop_hidden_inputs(nb)
        body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem,
                                                                          "path": str(Path(path).parent)}})
        deck = atomic_write(out / f"{path.stem}.slides.html", body)
        decks.append({"file": deck.name, "title": title_of(nb, path.stem), "slides": count_slides(body),
                      "images": len(re.findall(r'<img [^>]*src="data:image/', body)),
                      "remote": REMOTE.findall(body)})
    atomic_write(out / "index.html", index_page(decks))
    return decks


def count_slides(page: str) -> int:
    """The slides of a deck: its innermost ``<section>`` elements (a slide, or a subslide below one)."""
    return len(re.findall(r"<section\b(?:(?!<section\b).)*?</section>", page, flags=re.DOTALL))


def index_page(decks: list[dict]) -> str:
    items = "".join(f'<li><a href="{html.escape(d["file"])}">{html.escape(d["title"])}</a> ({d["slides"]} slides)</li>'
                    for d in decks)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lmcourse: the lessons as slides</title>
<style>body {{ font-family: system-ui, sans-serif; max-width: 48rem; margin: 2rem auto; line-height: 1.6; }}</style>
</head><body><h1>The lessons as slides</h1>
<p>Each deck is a lesson's demo path with the outputs the notebook was saved with. Arrow keys move, S opens the
speaker view, Esc shows every slide. To run the cells live, open the lesson in JupyterLab and press Alt+R.</p>
<ol>{items}</ol></body></html>
"""


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line, options before or after the lessons (``make slides`` passes ``build --out slides 5 9``)."""
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.deck", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("fetch", "build"))
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    parser.add_argument("--out", default="slides", help="the folder to write (default: slides)")
    return parser.parse_intermixed_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    _ctrl_c_raises()
    args = parse_args(argv)
    try:
        if args.command == "fetch":
            print(f"reveal.js {REVEAL_VERSION} in {fetch_reveal()}")
            return 0
        paths = lessons(args.lessons)
    except (ValueError, FileNotFoundError, ConnectionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nerror: interrupted; reveal.js is unpacked whole or not at all, so run the command again.",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        decks = build(Path(args.out), paths)
    except KeyboardInterrupt:
        print("\nerror: interrupted; every deck written so far is complete (each is replaced whole), the index "
              "may be missing: run the command again.", file=sys.stderr)
        return EXIT_INTERRUPTED
    for d in decks:
        print(f"{d['file']:<44} {d['slides']:3d} slides {d['images']:3d} images")
    if not (reveal_home() / "dist" / "reveal.js").is_file():
        print(f"reveal.js is not unpacked in {reveal_home()}: run python -m lmcourse.authoring.deck fetch (make slides "
              "does), else the decks show as one long page.")
    print(f"open {Path(args.out) / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
