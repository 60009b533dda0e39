"""``python -m lmcourse``: the command line, :mod:`lmcourse.cli`."""
import sys

from lmcourse.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
