"""``python -m viewer``: the command line (the package viewer/cli/).

Run by an interpreter that lacks one of the package's own dependencies (the system ``python`` beside a
checkout whose ``make setup`` made ``.venv``), it says so in one line, with what to run, and exits 4 (a part is
not installed, docs/CLI.md), never with a traceback (issue 41: ``python -m viewer lint …`` as the README typed
it ended in ``ModuleNotFoundError: msgspec``).
"""
import sys


def missing_dependency(err: ModuleNotFoundError) -> int:
    """One line on stderr naming the missing module and what to run; the exit code 4."""
    print(f"error: this Python ({sys.executable}) lacks {err.name or 'a module'!r}, which Rollout Inspector needs: "
          "in a checkout run `make setup`, then `.venv/bin/python -m viewer …`; elsewhere `pip install .` "
          "into this Python first", file=sys.stderr)
    return 4


def _run() -> int:
    try:
        from viewer.cli import main
    except ModuleNotFoundError as e:
        return missing_dependency(e)
    return main()


if __name__ == "__main__":
    sys.exit(_run())
