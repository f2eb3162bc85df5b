#!/usr/bin/env bash
# Hook of scripts/test: the deployment files of deploy/ are checked without installing or
# starting anything (docs/notes/deploy.md):
#   - every systemd unit in deploy/systemd: `systemd-analyze verify` on a copy whose ExecStart
#     runs this build's binary ($OFFHOST_TARGET/debug/offhost, which `cargo test --workspace`
#     builds) instead of /usr/local/bin/offhost; any complaint about the unit fails, also the
#     ones verify only warns about (an unknown key, a value it cannot parse);
#   - every flag the units' ExecStart and deploy/systemd/engine.env pass to `offhost engine`
#     is one that `offhost engine --help` lists (a unit that runs `offhost pet replay`, and
#     deploy/systemd/pet-replay.env, against `offhost pet replay --help`);
#   - the Kubernetes manifests in deploy/k8s: scripts/check_k8s.py (YAML, the Kubernetes
#     schema with kubernetes-validate from scripts/requirements.txt, and the references
#     between the documents and to the engine's flags).
# A few seconds; the same under --quick.
set -euo pipefail
cd "${OFFHOST_ROOT:-$(dirname "$0")/../..}"
target=${OFFHOST_TARGET:-${CARGO_TARGET_DIR:-$PWD/target}}
bin=$target/debug/offhost
installed=/usr/local/bin/offhost

fail() {
  echo "30-deploy: $*" >&2
  exit 1
}

[ -x "$bin" ] || fail "no $bin: build it (cargo build -p offhost; scripts/test's cargo test does)"
command -v systemd-analyze >/dev/null || fail "no systemd-analyze (Debian package systemd)"
engine_help=$("$bin" engine --help) || fail "$bin engine --help failed"
engine_flags=$(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$engine_help" | sort -u)
replay_help=$("$bin" pet replay --help) || fail "$bin pet replay --help failed"
replay_flags=$(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$replay_help" | sort -u)
known_flags=$engine_flags
command_name="offhost engine"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Every --flag in the text on stdin must be a flag of $command_name ($known_flags).
check_flags() {
  local where=$1 flag bad=0
  local flags
  flags=$(grep -oE -- '(^|[[:space:]"=])--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+' || true)
  for flag in $flags; do
    if ! grep -qxF -- "$flag" <<<"$known_flags"; then
      echo "30-deploy: $where: \`$command_name\` has no flag $flag" >&2
      bad=1
    fi
  done
  return "$bad"
}

shopt -s nullglob
units=(deploy/systemd/*.service deploy/systemd/*.socket)
[ ${#units[@]} -gt 0 ] || fail "no unit in deploy/systemd"
bin_sed=$(printf '%s' "$bin" | sed 's/[&#\\]/\\&/g')
for unit in "${units[@]}"; do
  name=$(basename "$unit")
  copy=$tmp/$name
  sed -E "s#^(ExecStart=[-@:+!]*)$installed( |\$)#\1$bin_sed\2#" "$unit" >"$copy"
  if grep -q '^ExecStart=' "$unit" && ! grep -qF "ExecStart=$bin" "$copy"; then
    fail "$unit: ExecStart does not run $installed"
  fi
  out=$(systemd-analyze verify --man=no "$copy" 2>&1) && rc=0 || rc=$?
  complaints=$(grep -F "$name" <<<"$out" || true)
  if [ "$rc" -ne 0 ] || [ -n "$complaints" ]; then
    echo "$out" >&2
    fail "$unit: systemd-analyze verify: exit status $rc${complaints:+, complaints above}"
  fi
  if grep -q '^ExecStart=' "$unit"; then
    # ExecStart with its continuation lines joined.
    exec_start=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$unit" | grep '^ExecStart=')
    if grep -q ' pet replay ' <<<"$exec_start"; then
      known_flags=$replay_flags command_name="offhost pet replay"
    else
      known_flags=$engine_flags command_name="offhost engine"
    fi
    check_flags "$unit" <<<"$exec_start" || fail "$unit: flags unknown to $command_name"
    echo "30-deploy: $unit: systemd-analyze verify fine, flags known"
  else
    echo "30-deploy: $unit: systemd-analyze verify fine"
  fi
done
if [ -f deploy/systemd/engine.env ]; then
  known_flags=$engine_flags command_name="offhost engine"
  check_flags deploy/systemd/engine.env <deploy/systemd/engine.env \
    || fail "deploy/systemd/engine.env: flags unknown to offhost engine"
fi
if [ -f deploy/systemd/pet-replay.env ]; then
  known_flags=$replay_flags command_name="offhost pet replay"
  check_flags deploy/systemd/pet-replay.env <deploy/systemd/pet-replay.env \
    || fail "deploy/systemd/pet-replay.env: flags unknown to offhost pet replay"
fi

manifests=(deploy/k8s/*.yaml deploy/k8s/*.yml)
[ ${#manifests[@]} -gt 0 ] || fail "no manifest in deploy/k8s"
python3 scripts/check_k8s.py --offhost "$bin" "${manifests[@]}" || fail "deploy/k8s: see above"
