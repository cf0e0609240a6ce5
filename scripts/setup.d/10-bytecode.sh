#!/usr/bin/env bash
# Byte-compile the venv's packages, beside the other hooks: setup.sh installs them with
# `pip --no-compile` so that this work (about 90 CPU-s, pulumi_aws's 270 MB of Python the most of
# it) overlaps the node image build and the node torch install instead of coming before them.
# It must happen at set-up: `invoke test` runs Python with PYTHONDONTWRITEBYTECODE, so a module
# without its .pyc would be compiled again by every process that imports it.
# compileall exits 1 when a file does not compile; pip's own compile ignores those (torch ships a
# Python 3.12-only test file), so only the count is said here.
set -euo pipefail
cd "$(dirname "$0")/../.."
site=(.venv/lib/python3*/site-packages)
failed=$(.venv/bin/python -m compileall -q -j 0 "${site[@]}" 2>&1 | grep -c "^\*\*\* Error compiling" || true)
echo "venv byte-compiled (${failed} file(s) that do not compile on this Python left as they are)"
