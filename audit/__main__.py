"""``python -m audit``: see :mod:`audit.cli`."""

import sys

from audit.cli import main

if __name__ == "__main__":
    sys.exit(main())
