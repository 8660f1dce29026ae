#!/usr/bin/env bash
# Golden data of vLLM's own argument handling for every argv a build synthesizes.
#
#   tools/golden/make_serve_args.sh VERSION --db BUILD.db [--keep-venv]
#
# 1. export_argvs.py: every distinct argv in the build database (table `command`);
# 2. a scratch virtualenv ${TMPDIR:-/tmp}/golden-vllm-VERSION (override with
#    GOLDEN_VENV; reused when it exists) with vllm==VERSION, as make_golden.sh;
# 3. sdist_examples.py: the release's examples/ from its sdist, the working
#    directory (recipes name `--chat-template examples/...`, paths of vLLM's image);
# 4. serve_args.py with the forced CUDA platform (stub libcuda.so.1, see lib.sh)
#    writes tests/golden/serve-args-VERSION.json.gz (override with GOLDEN_OUT).
# The virtualenv (about 9-10 GB) is deleted unless --keep-venv is given.
# Re-run after the set of synthesized argvs changes; an interrupted run resumes.
set -euo pipefail

usage() { echo "usage: $0 VERSION --db BUILD.db [--keep-venv]" >&2; exit 2; }
[ $# -ge 3 ] || usage
VERSION=$1; shift
KEEP_VENV=0
DB=
while [ $# -gt 0 ]; do
  case $1 in
    --db) DB=$2; shift 2 ;;
    --keep-venv) KEEP_VENV=1; shift ;;
    *) usage ;;
  esac
done
[ -f "$DB" ] || { echo "no such database: $DB" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
VENV=${GOLDEN_VENV:-${TMPDIR:-/tmp}/golden-vllm-$VERSION}
OUT=${GOLDEN_OUT:-$REPO/tests/golden}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/golden-serve-args.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# shellcheck source=lib.sh
. "$HERE/lib.sh"
GOLDEN_VERSION=$VERSION
START=$(date +%s)

python3 "$HERE/export_argvs.py" --db "$DB" -o "$WORK/argvs.json"
golden_venv "$VERSION" "$VENV"
SDIST_ROOT=$(python3 "$HERE/sdist_examples.py" "$VERSION" "$WORK/sdist")
STUB=$(golden_stub_libcuda "$VENV")
[ -n "$STUB" ] || { golden_log "gcc and nm are needed for the CUDA platform stub"; exit 2; }

export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
VLLM_CACHE_ROOT=$WORK/vllm-cache
export VLLM_CACHE_ROOT
golden_log "serve_args.py from $SDIST_ROOT"
(cd "$SDIST_ROOT" && LD_LIBRARY_PATH="$STUB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
   "$VENV/bin/python" "$HERE/serve_args.py" --argvs "$WORK/argvs.json" --out "$OUT" \
   --checkpoint "${GOLDEN_CHECKPOINT:-${TMPDIR:-/tmp}/serve-args-$VERSION.jsonl}")
"$VENV/bin/pip" freeze --all | grep -v '^-e ' | LC_ALL=C sort > "$WORK/freeze.txt"
if [ ! -e "$OUT/pip-freeze-$VERSION.txt" ]; then
  # a release with only serve-args golden data: its environment is this one
  cp "$WORK/freeze.txt" "$OUT/pip-freeze-$VERSION.txt"
  golden_log "wrote $OUT/pip-freeze-$VERSION.txt"
elif ! cmp -s "$WORK/freeze.txt" "$OUT/pip-freeze-$VERSION.txt" 2>/dev/null; then
  golden_log "note: the environment differs from $OUT/pip-freeze-$VERSION.txt:"
  diff "$OUT/pip-freeze-$VERSION.txt" "$WORK/freeze.txt" >&2 || true
fi

if [ "$KEEP_VENV" = 1 ]; then
  golden_log "keeping $VENV"
else
  golden_log "removing $VENV"
  rm -rf "$VENV"
fi
golden_log "done in $(( $(date +%s) - START ))s"
