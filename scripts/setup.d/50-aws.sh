#!/usr/bin/env bash
# AWS stacks: say whether the Pulumi CLI is there. Nothing to install from the package
# registries: the CLI and its aws provider plugin download from get.pulumi.com, which these
# machines cannot reach. The tests do not need them (Pulumi mocks, moto); `invoke preview`,
# and `invoke up/down` on an AWS stack, do.
set -euo pipefail
if command -v pulumi >/dev/null 2>&1; then
  echo "pulumi CLI: $(pulumi version 2>/dev/null || echo present)"
else
  echo "pulumi CLI: not found. Only needed for AWS stacks (invoke preview/up/down --stack prod):"
  echo "  curl -fsSL https://get.pulumi.com | sh && pulumi login && pulumi plugin install resource aws"
fi
