#!/usr/bin/env bash
# cluster roles: torch for the container nodes, installed ONCE on the workstation and mounted
# read-only into every local node at /opt/clusterforge/torch (validators_runtime_torch=shared),
# never once per node. Nodes run Debian 12's python3.11, the same as this machine.
# Idempotent: a stamp names the version installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
TORCH_VERSION="2.13.0"
dest=.clusterforge/node-torch
# numpy: torch.distributed.checkpoint needs it when checkpoint-restart runs more than one rank.
stamp="$dest/.clusterforge-torch-$TORCH_VERSION-numpy"
if [[ -e "$stamp" ]]; then
  echo "node torch $TORCH_VERSION already installed ($dest)"
  exit 0
fi
if [[ -e "$dest/.clusterforge-torch-$TORCH_VERSION" ]]; then
  # An older folder without numpy: add it in place (running nodes may have the folder mounted).
  .venv/bin/pip install -q --disable-pip-version-check --no-input --target "$dest" \
    --python-version 3.11 --only-binary=:all: numpy 2>&1 | grep -v "^WARNING: Location" || true
  python3 -c "import sys; sys.path.insert(0, '$dest'); import numpy, torch; print('node torch', torch.__version__, 'numpy', numpy.__version__)"
  touch "$stamp"
  exit 0
fi
py_minor=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
if [[ "$py_minor" != "3.11" ]]; then
  echo "warning: this machine's python3 is $py_minor, Debian 12 nodes run 3.11: torch's compiled parts may not load there" >&2
fi
rm -rf "$dest.tmp"
# The CPU build: this machine's package sources carry torch==$TORCH_VERSION+cpu.
.venv/bin/pip install -q --disable-pip-version-check --no-input --target "$dest.tmp" \
  --python-version 3.11 --only-binary=:all: "torch==$TORCH_VERSION" numpy 2>&1 | grep -v "^WARNING: Location" || true
python3 -c "import sys; sys.path.insert(0, '$dest.tmp'); import numpy, torch; print('node torch', torch.__version__, 'numpy', numpy.__version__)"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
touch "$stamp"
