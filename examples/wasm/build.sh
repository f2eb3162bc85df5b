#!/usr/bin/env bash
# Builds the example modules: the Rust ones (offhost-wasm-guest, wasm32-unknown-unknown) and
# the C one (clang and wasm-ld). Writes pass.wasm, mulaw.wasm and mulaw_c.wasm into DIR
# (default: $CARGO_TARGET_DIR/wasm-examples, else target/wasm-examples).
# usage: examples/wasm/build.sh [DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
out="${1:-$target/wasm-examples}"
mkdir -p "$out"

cargo build --quiet --release --locked --target wasm32-unknown-unknown \
  --manifest-path "$here/rust/Cargo.toml" --target-dir "$target/wasm-guest"
built="$target/wasm-guest/wasm32-unknown-unknown/release"
cp "$built/offhost_example_pass.wasm" "$out/pass.wasm"
cp "$built/offhost_example_mulaw.wasm" "$out/mulaw.wasm"

clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wall -Werror \
  -Wl,--no-entry -o "$out/mulaw_c.wasm" "$here/c/mulaw.c"

ls -l "$out"/*.wasm
