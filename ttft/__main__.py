"""``python -m ttft``: the ``ttft`` command."""

import sys

from .tui.cli import main

sys.exit(main())
