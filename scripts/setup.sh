#!/usr/bin/env bash
# One-shot set-up on a fresh Debian/Ubuntu machine: system packages, the Python environment,
# then each part's own hook. Idempotent: a second run installs nothing new.
#
#   scripts/setup.sh          what `invoke up --stack local` needs
#   scripts/setup.sh --dev    plus what the tests and linters need
#
# Each part of the project declares what it needs in scripts/setup.d/:
#   NN-name.apt   Debian packages, one per line ('#' comments); NN-name-dev.apt only with --dev
#   NN-name.pip   pip requirement lines for the workstation venv (.venv)
#   NN-name.sh    a hook run after both, beside the other hooks (so it must not need them);
#                 gets $DEV=0|1
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0
[[ "${1:-}" == "--dev" ]] && DEV=1
export DEV

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

want_apt=()
for f in scripts/setup.d/*.apt; do
  [[ -e "$f" ]] || continue
  # files named *-dev.apt are for tests only
  [[ $DEV == 0 && "$f" == *-dev.apt ]] && continue
  while read -r pkg _; do
    [[ -z "$pkg" || "$pkg" == \#* ]] && continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || want_apt+=("$pkg")
  done < "$f"
done
if ((${#want_apt[@]})); then
  say "installing Debian packages: ${want_apt[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${want_apt[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  say "creating .venv"
  python3 -m venv .venv
fi
say "installing Python packages into .venv"
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null
extras=""
[[ $DEV == 1 ]] && extras="[dev]"
pip_files=()
for f in scripts/setup.d/*.pip; do
  [[ -e "$f" ]] || continue
  # files named *-dev.pip are for tests only
  [[ $DEV == 0 && "$f" == *-dev.pip ]] && continue
  pip_files+=(-r "$f")
done
# --no-compile: pip byte-compiles every file it installs (pulumi_aws alone is 270 MB of Python), half
# of this step's 3 minutes, one file after another; setup.d/10-bytecode.sh does it beside the other
# hooks, on every core. (The node torch of 45-roles-cluster.sh is compiled by its own pip.)
code=0
.venv/bin/pip install -q --no-compile --disable-pip-version-check -e ".${extras}" "${pip_files[@]}" 2>&1 \
  | { grep -v "^WARNING: Location" || true; } || code=$?
if ((code)); then
  echo "set-up failed: pip install into .venv exited $code (its output is above)" >&2
  exit "$code"
fi

# The hooks are independent (each writes its own folder, or the engine's image store), and most of
# their time is downloads and unpacking: they run side by side. Each one's output is printed whole
# when it ends, in file order, with its time; any failure fails the set-up after all have ended.
names=(); pids=(); logs=()
for f in scripts/setup.d/*.sh; do
  [[ -e "$f" ]] || continue
  names+=("${f##*/}")
  logs+=("$(mktemp)")
  (
    began=$SECONDS
    code=0
    bash "$f" || code=$?
    echo "$((SECONDS - began))" >"${logs[-1]}.seconds"
    exit "$code"
  ) >"${logs[-1]}" 2>&1 &
  pids+=($!)
done
say "running ${names[*]} side by side"
failed=()
for i in "${!pids[@]}"; do
  code=0
  wait "${pids[$i]}" || code=$?
  took="$(cat "${logs[$i]}.seconds" 2>/dev/null || echo '?') s"
  if ((code == 0)); then
    say "${names[$i]}: ok after $took"
  else
    say "${names[$i]}: FAILED (exit $code) after $took"
    failed+=("${names[$i]}")
  fi
  cat "${logs[$i]}"
  rm -f "${logs[$i]}" "${logs[$i]}.seconds"
done
if ((${#failed[@]})); then
  echo "set-up failed in: ${failed[*]} (their output is above)" >&2
  exit 1
fi
say "set-up done"
