#!/usr/bin/env bash
# Hook of scripts/test: the API documentation builds without a warning (broken or private
# links, bad markup). Skipped under --quick.
set -euo pipefail
cd "${OFFHOST_ROOT:-$(dirname "$0")/../..}"
if [ "${OFFHOST_QUICK:-0}" = 1 ]; then
  echo "20-doc: skipped under --quick"
  exit 0
fi
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
