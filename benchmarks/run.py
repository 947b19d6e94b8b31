"""Entry point of `make bench`: `python benchmarks/run.py [--quick] [--help]`."""

import sys
from pathlib import Path


def main() -> None:
    # Run as a script, Python puts benchmarks/ on the path, not the repository root that
    # holds the `benchmarks` package.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.suite import main as run_suite

    run_suite()


if __name__ == "__main__":
    main()
