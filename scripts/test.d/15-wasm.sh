#!/usr/bin/env bash
# Hook of scripts/test: the WebAssembly side of the `wasm` task. Builds the example modules
# (examples/wasm/build.sh: Rust through offhost-wasm-guest for wasm32-unknown-unknown, C with
# clang and wasm-ld), lints the guest crate and the Rust examples for that target, and runs
# offhost-wasm's tests that need the modules (a pipeline mixing them with built-ins gives the
# built-ins' bytes), which `cargo test --workspace` leaves out as ignored.
set -euo pipefail
cd "${OFFHOST_ROOT:-$(dirname "$0")/../..}"
target="${OFFHOST_TARGET:-${CARGO_TARGET_DIR:-target}}"
for tool in clang wasm-ld; do
  command -v "$tool" >/dev/null || { echo "15-wasm.sh: no $tool (scripts/test installs clang and lld)" >&2; exit 1; }
done
rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
  || { echo "15-wasm.sh: no wasm32-unknown-unknown target (scripts/test adds it)" >&2; exit 1; }

echo "--- wasm: building examples/wasm"
dir="$target/wasm-examples"
CARGO_TARGET_DIR="$target" examples/wasm/build.sh "$dir"

echo "--- wasm: clippy of the guest crate and the Rust examples for wasm32-unknown-unknown"
cargo clippy --quiet -p offhost-wasm-guest --target wasm32-unknown-unknown -- -D warnings
cargo clippy --quiet --locked --manifest-path examples/wasm/rust/Cargo.toml \
  --target wasm32-unknown-unknown --target-dir "$target/wasm-guest" -- -D warnings
cargo fmt --manifest-path examples/wasm/rust/Cargo.toml --all -- --check

# --workspace, as scripts/test's `cargo test`, so that the test binaries it built (with the
# workspace's features: the CLI turns on offhost-bench-suite's `wasm`) are run, not rebuilt.
echo "--- wasm: the example modules beside built-ins, and bench engine --wasm on them"
export OFFHOST_WASM_EXAMPLES="$dir"
cargo test --quiet --workspace --test examples -- --ignored
cargo test --quiet --workspace --lib wasm::tests -- --ignored
