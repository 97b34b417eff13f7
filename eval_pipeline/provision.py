"""Provision data files the metrics need, from installed packages only (nothing is downloaded).

Run by ``make demo`` / ``make test`` / ``make ui`` through ``make provision``.
"""

from __future__ import annotations

import sys


def main() -> int:
    print("provision: nothing to provision yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
