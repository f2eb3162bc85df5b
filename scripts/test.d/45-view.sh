#!/usr/bin/env bash
# Hook of scripts/test: the live view in a real browser. Playwright (from PyPI, in the test
# virtual environment) drives Debian's chromium, headless, against the offhost binary: a
# running PET scan's page (every task, counters that advance, the sinogram and the image as
# they change, the final numbers once it has ended) and a daemon's (its pipelines, the error
# of a failed one on its task). Screenshots go to $target/view-shots.
set -euo pipefail
cd "${OFFHOST_ROOT:-$(dirname "$0")/../..}"
root=$PWD
target="${OFFHOST_TARGET:-${CARGO_TARGET_DIR:-$root/target}}"
venv="${OFFHOST_VENV:-$target/py}"
chromium=$(command -v chromium || true)
[ -n "$chromium" ] || { echo "45-view.sh: no chromium (scripts/test installs it)" >&2; exit 1; }
"$venv/bin/python" -c "import playwright" 2>/dev/null \
  || { echo "45-view.sh: no playwright in $venv (scripts/requirements.txt)" >&2; exit 1; }

# The binary as `cargo test --workspace` builds it (see 40-bindings.sh for why not -p).
cargo test --workspace --no-run --quiet
echo "--- view: the page in chromium (screenshots in $target/view-shots)"
OFFHOST_BIN="$target/debug/offhost" OFFHOST_ROOT="$root" OFFHOST_SHOTS="$target/view-shots" \
  CHROMIUM="$chromium" "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/view/tests/browser
