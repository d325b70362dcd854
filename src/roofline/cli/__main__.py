"""`python -m roofline.cli`: the same command as `roofline`."""

import sys

from roofline.cli import main

sys.exit(main())
