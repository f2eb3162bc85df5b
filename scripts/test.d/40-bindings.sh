#!/usr/bin/env bash
# The Python and C bindings (bindings/python, bindings/c): installs the `offhost` package
# into the test virtual environment under the build directory (target/py, created here if
# scripts/test has not), builds the C examples with cc against the C library, and runs the
# pytest suite (cross-language round trip included). Quick when nothing changed: the
# package is rebuilt only when its sources or the crates changed.
#
# Run it under the shared cargo lock like any cargo command (it builds with cargo):
#   flock /tmp/offhost-cargo.lock bash scripts/test.d/40-bindings.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
venv=$target/py

if [ ! -x "$venv/bin/python" ]; then
  echo "--- bindings: creating $venv"
  python3 -m venv "$venv"
fi
export PATH="$venv/bin:$PATH"
if ! python -c "import numpy, pytest, matplotlib" 2>/dev/null || [ ! -x "$venv/bin/maturin" ]; then
  echo "--- bindings: installing numpy, pytest, matplotlib and maturin into $venv"
  python -m pip install --quiet --disable-pip-version-check numpy pytest matplotlib 'maturin>=1.9,<2'
fi

# What the tests run beside the package: the offhost binary (echo, engine, pet) and the C
# library, as `cargo test --workspace` builds them (nothing to do after scripts/test's). Not
# `cargo build -p offhost -p offhost-c`: cargo unifies the dependencies' features over the
# packages it is asked for, so that set builds them with other features than the workspace's
# tests do, and a fresh machine compiled most of the tree a second time (5.6 minutes).
cargo test --workspace --no-run --quiet

# The package (a debug build: figures come from `maturin build --release`, see
# bindings/python/README.md), reinstalled only when something it is built from changed.
stamp=$venv/.offhost-installed
changed() {
  [ ! -f "$stamp" ] || [ -n "$(find bindings/common bindings/python/src bindings/python/python \
    bindings/python/Cargo.toml bindings/python/pyproject.toml crates Cargo.toml Cargo.lock \
    -newer "$stamp" -type f -print -quit)" ]
}
if changed || ! python -c "import offhost" 2>/dev/null; then
  echo "--- bindings: installing the offhost package into $venv"
  touch "$stamp.new"
  MATURIN_PEP517_ARGS="--profile dev" python -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall ./bindings/python
  mv "$stamp.new" "$stamp"
fi

# The C examples, against include/offhost.h and liboffhost_c.so (where `cargo test` leaves it).
cdir=$target/c-examples
mkdir -p "$cdir"
for x in relay pipeline; do
  cc -std=c11 -Wall -Wextra -Werror -I bindings/c/include "examples/c/$x.c" \
    -L "$target/debug/deps" -loffhost_c -Wl,-rpath,"$target/debug/deps" -o "$cdir/$x"
done

echo "--- bindings: pytest"
OFFHOST_BIN="$target/debug/offhost" OFFHOST_C_EXAMPLES="$cdir" \
  python -m pytest -q -p no:cacheprovider bindings/python/tests
