#!/usr/bin/env bash
# Regenerate the golden files for one vLLM release by running vLLM itself.
#
#   tools/golden/make_golden.sh VERSION [--keep-venv]
#
# Creates a scratch virtualenv ${TMPDIR:-/tmp}/golden-vllm-VERSION (override
# with GOLDEN_VENV), installs vllm==VERSION from PyPI plus the extras listed
# in lib.sh, runs modelinfo.py (platform as resolved, then forced CUDA) and
# specdecode.py, writes into tests/golden/ (override with GOLDEN_OUT), and
# deletes the virtualenv (about 9-10 GB) unless --keep-venv is given.
#
# Needs: network access to PyPI, python3 (3.11; override with PYTHON), and
# gcc + nm for the forced-CUDA run (without them that run is skipped).
# No GPU, no model weights and no Hugging Face hub access are needed.
set -euo pipefail

usage() { echo "usage: $0 VERSION [--keep-venv]" >&2; exit 2; }
[ $# -ge 1 ] || usage
VERSION=$1; shift
KEEP_VENV=0
for arg in "$@"; do
  case $arg in
    --keep-venv) KEEP_VENV=1 ;;
    *) usage ;;
  esac
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python3}
VENV=${GOLDEN_VENV:-${TMPDIR:-/tmp}/golden-vllm-$VERSION}
OUT=${GOLDEN_OUT:-$REPO/tests/golden}
CONFIGS=$REPO/tests/data/hf_configs

# shellcheck source=lib.sh
. "$HERE/lib.sh"
GOLDEN_VERSION=$VERSION

log() { echo "[make_golden $VERSION] $*" >&2; }
START=$(date +%s)

golden_venv "$VERSION" "$VENV"
mkdir -p "$OUT"
# Record the exact environment next to the outputs.
"$VENV/bin/pip" freeze --all | grep -v '^-e ' | LC_ALL=C sort > "$OUT/pip-freeze-$VERSION.txt"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
VLLM_CACHE_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/golden-vllm-cache.XXXXXX")
export VLLM_CACHE_ROOT
trap 'rm -rf "$VLLM_CACHE_ROOT"' EXIT

log "modelinfo (platform as resolved)"
"$VENV/bin/python" "$HERE/modelinfo.py" --out "$OUT"

# Forced-CUDA run, with a stub libcuda.so.1 (see lib.sh).
STUB=$(golden_stub_libcuda "$VENV")
if [ -n "$STUB" ]; then
  log "modelinfo (forced CUDA platform)"
  if ! LD_LIBRARY_PATH="$STUB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
       "$VENV/bin/python" "$HERE/modelinfo.py" --out "$OUT" --platform cuda; then
    log "forced-CUDA modelinfo run failed: see README.md caveats"
  fi
else
  log "gcc/nm not found: skipping the forced-CUDA modelinfo run"
fi

log "specdecode"
"$VENV/bin/python" "$HERE/specdecode.py" --configs "$CONFIGS" --out "$OUT" --jobs 2

log "disk used by the virtualenv: $(du -sh "$VENV" | cut -f1)"
if [ "$KEEP_VENV" = 1 ]; then
  log "keeping $VENV"
else
  log "removing $VENV"
  rm -rf "$VENV"
fi
log "done in $(( $(date +%s) - START ))s"
