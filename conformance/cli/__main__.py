"""``python -m conformance.cli``: the same commands as the ``conformance`` script."""

import sys

from conformance.cli import main

sys.exit(main())
