"""``python -m fmmlearn``: the ``fmmlearn`` command (so ``accelerate launch -m fmmlearn`` works too)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
