#!/usr/bin/env bash
# The recipes' speculative-decoding configs, judged by one real vLLM release.
#
#   tools/golden/make_specdecode_recipes.sh VERSION [--keep-venv] [-- specdecode_recipes.py args]
#
# Creates (or reuses) ${TMPDIR:-/tmp}/golden-vllm-VERSION (override with GOLDEN_VENV) with
# vllm==VERSION and the extras of lib.sh, builds the stub libcuda.so.1 of lib.sh, runs
# specdecode_recipes.py on tests/data/hf_configs with vLLM's CUDA platform forced, writes
# tests/golden/specdecode-recipes-VERSION.json (override the directory with GOLDEN_OUT) and
# the venv's pip freeze (see below), then deletes the virtualenv
# unless --keep-venv is given. No GPU, no weights, no Hugging Face hub access.
set -euo pipefail

usage() { echo "usage: $0 VERSION [--keep-venv] [-- args for specdecode_recipes.py]" >&2; exit 2; }
[ $# -ge 1 ] || usage
VERSION=$1; shift
KEEP_VENV=0
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --keep-venv) KEEP_VENV=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) usage ;;
  esac
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
VENV=${GOLDEN_VENV:-${TMPDIR:-/tmp}/golden-vllm-$VERSION}
OUT=${GOLDEN_OUT:-$REPO/tests/golden}

# shellcheck source=lib.sh
. "$HERE/lib.sh"
GOLDEN_VERSION=$VERSION
START=$(date +%s)

golden_venv "$VERSION" "$VENV"
mkdir -p "$OUT"
# The venv's freeze goes to pip-freeze-VERSION.txt; when that file exists (another golden of
# the release) and this venv differs from it, to pip-freeze-specdecode-recipes-VERSION.txt.
FREEZE=$(mktemp)
"$VENV/bin/pip" freeze --all | grep -v '^-e ' | LC_ALL=C sort > "$FREEZE"
if [ ! -e "$OUT/pip-freeze-$VERSION.txt" ]; then
  mv "$FREEZE" "$OUT/pip-freeze-$VERSION.txt"
elif ! cmp -s "$FREEZE" "$OUT/pip-freeze-$VERSION.txt"; then
  mv "$FREEZE" "$OUT/pip-freeze-specdecode-recipes-$VERSION.txt"
else
  rm -f "$FREEZE"
fi
STUB=$(golden_stub_libcuda "$VENV")
[ -n "$STUB" ] || { golden_log "gcc/nm missing: the forced CUDA platform needs the stub libcuda"; exit 1; }

LD_LIBRARY_PATH="$STUB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$VENV/bin/python" "$HERE/specdecode_recipes.py" --configs "$REPO/tests/data/hf_configs" \
  --out "$OUT" --platform cuda ${EXTRA[@]+"${EXTRA[@]}"}

if [ "$KEEP_VENV" = 1 ]; then
  golden_log "keeping $VENV"
else
  golden_log "removing $VENV ($(du -sh "$VENV" | cut -f1))"
  rm -rf "$VENV"
fi
golden_log "done in $(( $(date +%s) - START ))s"
