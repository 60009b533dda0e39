"""JupyterLab started the way ``make lab`` starts it, on a throw-away copy of the lessons.

The command is the ``lab`` target's recipe read from the Makefile (same binary, same options), with
the ``notebooks/`` argument pointed at a temporary copy and these options added: a free port on
127.0.0.1, a random token, no browser, ``--ServerApp.root_dir`` on the copy, and a private settings
folder in which autosave is off, every cell stays in the page (``windowingMode: none``, so off-screen
outputs can be inspected) and the news feed is not fetched. The committed notebooks are never
opened, so nothing the browser does can rewrite them.
"""
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}


def lab_recipe(makefile: Path = REPO / "Makefile") -> str:
    """The shell line of the Makefile's ``lab:`` target."""
    lines = makefile.read_text().splitlines()
    for line, recipe in zip(lines, lines[1:]):
        if re.match(r"lab\s*:", line) and recipe.startswith("\t"):
            return recipe.strip()
    raise ValueError(f"{makefile} has no `lab:` target with a recipe: the browser test starts JupyterLab "
                     "with that target's command, so restore it.")


def lab_command(recipe: str, bin_dir: Path, root: Path) -> str:
    """``recipe`` as bash would run it from make, serving ``root`` instead of ``notebooks/``."""
    unknown = set(re.findall(r"(?<!\$)\$\(([A-Za-z_]+)\)", recipe)) - {"BIN", "VENV"}
    if unknown:
        raise ValueError(f"The lab target uses $({sorted(unknown)[0]}), which the browser test cannot expand: "
                         "use $(BIN) or $(VENV) there, or teach tests_browser/labserver.py the new variable.")
    cmd = recipe.replace("$(BIN)", str(bin_dir)).replace("$(VENV)", str(bin_dir.parent)).replace("$$", "$")
    cmd, n = re.subn(r"(?<=\s)notebooks/?(?=\s|$)", lambda _: shlex.quote(str(root)), cmd)
    if n != 1:
        raise ValueError(f"The lab target `{recipe}` does not open notebooks/ exactly once: the browser "
                         "test swaps that argument for a temporary copy, so keep it in the recipe.")
    return cmd


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """One JupyterLab server for a test session, serving a copy of ``notebooks/`` at ``LMCOURSE_SCALE=ci``."""

    def __init__(self, workdir: Path, notebooks: Path = REPO / "notebooks", bin_dir: Path | None = None):
        self.workdir = Path(workdir)
        self.root = self.workdir / "notebooks"
        shutil.copytree(notebooks, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        self.settings = self.workdir / "settings"
        for name, value in SETTINGS.items():
            (self.settings / name).parent.mkdir(parents=True, exist_ok=True)
            (self.settings / name).write_text(json.dumps(value))
        self.bin_dir = bin_dir or Path(sys.executable).parent
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.workdir / "lab.log"
        self.proc: subprocess.Popen | None = None

    def command(self) -> str:
        extra = ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
                 "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
                 f"--ServerApp.root_dir={self.root}", f"--LabApp.user_settings_dir={self.settings}",
                 f"--LabApp.workspaces_dir={self.workdir / 'workspaces'}"]
        return "exec " + lab_command(lab_recipe(), self.bin_dir, self.root) + " " + shlex.join(extra)

    def start(self, timeout: float = 120.0) -> "LabServer":
        env = dict(os.environ, LMCOURSE_SCALE="ci", JUPYTER_RUNTIME_DIR=str(self.workdir / "runtime"))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(["bash", "-c", self.command()], cwd=REPO, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with status {self.proc.returncode} before serving; its "
                                   f"log ends:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer on {self.url} within {timeout:.0f} s; its log ends:\n"
                           f"{self.log_tail()}")

    def api(self, method: str, path: str):
        """One REST call to the server; the decoded JSON answer (None when empty)."""
        req = urllib.request.Request(self.url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def lesson_url(self, relpath: str) -> str:
        """The lesson opened in a fresh workspace (``reset``), logged in with the token."""
        return f"{self.url}/lab/tree/{relpath}?reset&token={self.token}"

    def kernel_connected(self, relpath: str) -> bool:
        """True when the notebook has a kernel that the page is connected to and that is idle."""
        for session in self.api("GET", "/api/sessions") or []:
            kernel = session.get("kernel") or {}
            if session.get("path") == relpath and kernel.get("connections", 0) > 0:
                return kernel.get("execution_state") == "idle"
        return False

    def shutdown_kernels(self) -> None:
        """Ends every kernel session, so the next lesson starts on an idle machine."""
        for session in self.api("GET", "/api/sessions") or []:
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""

    def stop(self) -> None:
        """Stops the server and its kernels (the process group this object started)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
