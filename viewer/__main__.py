"""``python -m viewer``: the command line (the package viewer/cli/)."""
import sys

from viewer.cli import main

if __name__ == "__main__":
    sys.exit(main())
