#!/usr/bin/env bash
# Regenerate constraints.txt: what pip picks today for `.[test]` in a fresh venv, pinned.
# .ci/run installs from it (reproducible CI); its second step installs the newest allowed
# versions instead, so drift in a dependency shows up in CI before it reaches users.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/v"
"$tmp/v/bin/pip" install -q -U pip
cp -r compat data schema site pyproject.toml README.md "$tmp/" && "$tmp/v/bin/pip" install -q "$tmp[test]"  # a copy: no build/ left here
{
  echo "# Pinned by tools/update_constraints.sh from a fresh venv on $(date -u +%Y-%m-%d)."
  echo "# pip install -e '.[test]' -c constraints.txt"
  "$tmp/v/bin/pip" freeze --exclude vllm-compat
} > constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) pins)"
