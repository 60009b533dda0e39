"""Where a Chromium for the browser tests is: the system's, else Playwright's own download.

Looked for in this order: ``$LMCOURSE_CHROMIUM`` (a path to the binary), ``chromium``,
``chromium-browser`` and ``google-chrome`` on ``PATH``, then the browsers that ``playwright install
chromium`` puts under ``$PLAYWRIGHT_BROWSERS_PATH`` (default ``~/.cache/ms-playwright``). Standard
library only, so ``.ci/run`` can ask before Playwright is installed::

    python3 tests_browser/find_chromium.py   # prints the path, or one sentence and exit status 1
"""
import os
import shutil
import sys
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Playwright's own builds: chromium-<build>/chrome-linux/chrome (chrome-linux64 in recent releases).
PLAYWRIGHT_BINARIES = ("chrome-linux/chrome", "chrome-linux64/chrome")
MISSING = ("No Chromium found: install one with `apt-get install -y chromium` (or `playwright install "
           "chromium`, which needs the internet), or set LMCOURSE_CHROMIUM to its path.")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def playwright_builds() -> list[Path]:
    """Chromium binaries that ``playwright install chromium`` downloaded, newest build first."""
    root = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright")
    builds = sorted(root.glob("chromium-*"), key=lambda p: p.name.split("-")[-1].zfill(8), reverse=True)
    return [b / rel for b in builds for rel in PLAYWRIGHT_BINARIES if _executable(b / rel)]


def find_chromium() -> Path | None:
    """The first usable Chromium binary, or None when this machine has none."""
    explicit = os.environ.get("LMCOURSE_CHROMIUM")
    if explicit:
        path = Path(explicit).expanduser()
        if not _executable(path):
            raise ValueError(f"LMCOURSE_CHROMIUM={explicit} is not an executable file: point it at a "
                             "Chromium binary, or unset it to search PATH.")
        return path
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    builds = playwright_builds()
    return builds[0] if builds else None


def main() -> int:
    try:
        path = find_chromium()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    if path is None:
        print(MISSING, file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
