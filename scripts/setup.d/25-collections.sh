#!/usr/bin/env bash
# Ansible collections the project uses, without Galaxy (unreachable from these machines):
# take them from the `ansible` PyPI wheel, which bundles them, and copy only the folders we
# need into .clusterforge/collections (ANSIBLE_COLLECTIONS_PATH points there).
#   containers.podman / community.docker: connection plugins for the local container nodes
#   ansible.posix, community.general: sysctl, mount, modprobe, ... used by the roles
#   amazon.aws, community.aws: inventory and the SSM connection for AWS stacks
# Idempotent: skips when the wanted version is already in place.
set -euo pipefail
cd "$(dirname "$0")/../.."
# ansible 12.x bundles the collection versions tested with ansible-core 2.19 (pyproject pins >=2.16).
ANSIBLE_WHEEL_VERSION="12.3.0"
WANT=(containers/podman community/docker ansible/posix community/general amazon/aws community/aws)
dest=.clusterforge/collections
stamp="$dest/.from-ansible-$ANSIBLE_WHEEL_VERSION-$(printf '%s\n' "${WANT[@]}" | sha256sum | cut -c1-12)"
if [[ -e "$stamp" ]]; then
  echo "collections already installed ($dest)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/pip download -q --disable-pip-version-check --no-deps "ansible==$ANSIBLE_WHEEL_VERSION" -d "$tmp" 2>&1 \
  | grep -v "^WARNING: Location" || true
wheel=$(ls "$tmp"/ansible-*.whl)
mkdir -p "$dest"
.venv/bin/python - "$wheel" "$dest" "${WANT[@]}" <<'PY'
import shutil
import sys
import zipfile
from pathlib import Path

wheel, dest, wanted = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
with zipfile.ZipFile(wheel) as zf:
    for name in wanted:
        prefix = f"ansible_collections/{name}/"
        members = [m for m in zf.namelist() if m.startswith(prefix)]
        if not members:
            sys.exit(f"collection {name} is not in {wheel}")
        shutil.rmtree(dest / prefix, ignore_errors=True)  # no stale files from another version
        zf.extractall(dest, members)
        print(f"  {name.replace('/', '.')}: {len(members)} files")
PY
rm -f "$dest"/.from-ansible-*
touch "$stamp"
