"""``python -m lmcourse``: the command line, :mod:`lmcourse.cli`."""
import sys

from lmcourse.cli.main import main
from lmcourse.cli.stop import exit_now

if __name__ == "__main__":
    status = main()
    exit_now(status)  # after Ctrl-C: at once, without the interpreter's slow tear-down of torch
    sys.exit(status)
