"""``python -m fastops``: the command line (see :mod:`fastops.cli`)."""
import sys

from fastops.cli import main

sys.exit(main())
