#!/usr/bin/env bash
# local provider: build the container node image now (about a minute, once per machine and
# package list) so that `invoke up --stack local` and the tests start from a built image.
# Needs root (debootstrap); otherwise the first `up` says what to do.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ $(id -u) -ne 0 ]]; then
  echo "not root: skipping the node image build (run scripts/setup.sh as root, or build on first up)"
  exit 0
fi
.venv/bin/python -m clusterforge.providers.local image
