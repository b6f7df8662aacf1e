"""``python -m viewer``: the command line (see viewer/cli.py)."""
import sys

from viewer.cli import main

if __name__ == "__main__":
    sys.exit(main())
