#!/usr/bin/env bash
# Hook of scripts/test: coverage-guided fuzzing of every parser of untrusted input, 20 s per
# target (seven targets: about two and a half minutes of fuzzing, plus the instrumented build).
# A crash fails the run (see scripts/fuzz).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec scripts/fuzz --seconds "${OFFHOST_FUZZ_SECONDS:-20}"
