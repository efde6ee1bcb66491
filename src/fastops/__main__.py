"""``python -m fastops``: the command line (see :mod:`fastops.apps.cli`)."""
import sys

from fastops.apps.cli import main

sys.exit(main())
