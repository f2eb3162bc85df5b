#!/usr/bin/env bash
# Hook of scripts/test: coverage-guided fuzzing of every parser of untrusted input (scripts/fuzz;
# cargo-fuzz is installed on first use), 20 s per target, 5 s under --quick; set
# OFFHOST_FUZZ_SECONDS to choose. A crash fails the run.
set -euo pipefail
cd "${OFFHOST_ROOT:-$(dirname "$0")/../..}"
default=20
[ "${OFFHOST_QUICK:-0}" = 1 ] && default=5
exec scripts/fuzz --seconds "${OFFHOST_FUZZ_SECONDS:-$default}"
