"""`python -m ctxbase`: the same command line as `ctxbase`."""

import sys

from .cli import main

sys.exit(main())
