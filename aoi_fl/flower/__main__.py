"""``python -m aoi_fl.flower check|run [APP]`` (:mod:`aoi_fl.flower.cli`)."""

import sys

from aoi_fl.flower.cli import main

sys.exit(main())
