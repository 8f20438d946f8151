"""``python -m aoi_fl.data fetch-mnist --root data`` and the other fetch commands."""

import sys

from aoi_fl.data.datasets import main

sys.exit(main())
