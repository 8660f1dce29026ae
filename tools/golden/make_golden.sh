#!/usr/bin/env bash
# Regenerate the golden files for one vLLM release by running vLLM itself.
#
#   tools/golden/make_golden.sh VERSION [--keep-venv]
#
# Creates a scratch virtualenv ${TMPDIR:-/tmp}/golden-vllm-VERSION (override
# with GOLDEN_VENV), installs vllm==VERSION from PyPI plus the extras listed
# below, runs modelinfo.py (platform as resolved, then forced CUDA) and
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

# What each release needs on top of `pip install vllm==VERSION`.
#  0.23.0: pip resolves transformers 4.57.6 (xgrammar 0.2.5.post1 pins
#          transformers<5), which does not know GLM-5's model_type
#          `glm_moe_dsa` (added in transformers 5.9) and makes 7 more model modules
#          fail to import. 5.9.0 is allowed by vLLM 0.23.0's own requirement
#          (>=4.56, !=5.0-5.4.*, !=5.5.0) and is the oldest release knowing
#          glm_moe_dsa; newer ones (5.24) break the Pixtral-based models.
#          timm is needed by two vision models.
case $VERSION in
  0.23.0) EXTRA=("transformers==5.9.0" "timm") ;;
  0.33.0) EXTRA=("timm") ;;
  *)      EXTRA=() ;;
esac

log() { echo "[make_golden $VERSION] $*" >&2; }
START=$(date +%s)

if [ -e "$VENV" ]; then
  log "reusing existing virtualenv $VENV"
else
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q -U pip
fi
log "pip install vllm==$VERSION"
"$VENV/bin/pip" install "vllm==$VERSION"
if [ ${#EXTRA[@]} -gt 0 ]; then
  log "pip install ${EXTRA[*]}"
  "$VENV/bin/pip" install "${EXTRA[@]}"
fi
# torchvision/torchaudio must import beside torch; drop them if they do not.
for mod in torchvision torchaudio; do
  if ! "$VENV/bin/python" -c "import $mod" >/dev/null 2>&1; then
    log "$mod does not import beside torch: uninstalling it"
    "$VENV/bin/pip" uninstall -y "$mod"
  fi
done
mkdir -p "$OUT"
# Record the exact environment next to the outputs.
"$VENV/bin/pip" freeze --all | grep -v '^-e ' | LC_ALL=C sort > "$OUT/pip-freeze-$VERSION.txt"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
VLLM_CACHE_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/golden-vllm-cache.XXXXXX")
export VLLM_CACHE_ROOT
trap 'rm -rf "$VLLM_CACHE_ROOT"' EXIT

log "modelinfo (platform as resolved)"
"$VENV/bin/python" "$HERE/modelinfo.py" --out "$OUT"

# Forced-CUDA run. vllm/platforms/cuda.py imports vllm._C, which links
# libcuda.so.1 (the driver library): give it a stub whose entry points all
# return CUDA_ERROR_NO_DEVICE. Nothing calls them; only the import needs them.
STUB=$VENV/golden-stub
if command -v gcc >/dev/null && command -v nm >/dev/null; then
  mkdir -p "$STUB"
  SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  SYMS=$(find "$SITE/vllm" -name '*.so' -exec nm -D --undefined-only {} + 2>/dev/null \
         | awk '{print $2}' | sed 's/@.*//' | grep -E '^cu[A-Z]' | sort -u || true)
  {
    echo "/* stub libcuda.so.1: every entry point returns CUDA_ERROR_NO_DEVICE */"
    for s in $SYMS cuInit cuDriverGetVersion cuDeviceGetCount; do
      echo "int $s(void) { return 100; }"
    done | sort -u
  } > "$STUB/stub.c"
  gcc -shared -fPIC -o "$STUB/libcuda.so.1" "$STUB/stub.c"
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
