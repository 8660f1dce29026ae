# Shared by make_golden.sh and make_serve_args.sh (source it; bash).
#
#   golden_venv VERSION VENV     create VENV (or reuse it) with vllm==VERSION and the extras below
#   golden_stub_libcuda VENV     build VENV/golden-stub/libcuda.so.1 and print its directory
#                                (prints nothing when gcc or nm is missing)

# What each release needs on top of `pip install vllm==VERSION`.
#  0.23.0: pip resolves transformers 4.57.6 (xgrammar 0.2.5.post1 pins
#          transformers<5), which does not know GLM-5's model_type
#          `glm_moe_dsa` (added in transformers 5.9) and makes 7 more model modules
#          fail to import. 5.9.0 is allowed by vLLM 0.23.0's own requirement
#          (>=4.56, !=5.0-5.4.*, !=5.5.0) and is the oldest release knowing
#          glm_moe_dsa; newer ones (5.24) break the Pixtral-based models.
#          timm is needed by two vision models.
#  Releases before 0.20 (serve-args only): transformers as the release's own CI pins it
#  (requirements/test.txt, or requirements-test.txt before 0.8); a plain install resolves the
#  newest transformers allowed, years younger than the release.
#  0.6.2: its requirements-test.txt pins no transformers; requirements-common.txt's floor
#          (>=4.45.0, "Required for Llama 3.2"), the release current when 0.6.2 came out.
#          torch 2.4.0 / torchvision 0.19 / xformers come from vLLM's own pins (requirements-cuda.txt).
#  0.7.3, 0.12.0, 0.17.0, 0.25.0: transformers and timm as pinned by the release's own
#          test requirements (requirements-test.txt, requirements/test.txt or
#          requirements/test/cuda.txt); torch is the release's own pin (pulled by
#          `pip install vllm==VERSION`). 0.7.3 additionally pins torchvision 0.20.1 and
#          torchaudio 2.5.1 there, which the wheel's own requirements already resolve.
#          The serve-args goldens of 0.12.0 and 0.17.0 were recorded before timm was added
#          (their pip-freeze-<ver>.txt has none; argument handling does not import it); the
#          modelinfo/specdecode venvs' freezes are pip-freeze-<kind>-<ver>.txt.
golden_extras() {
  case $1 in
    0.6.2)  echo "transformers==4.45.0 numpy==1.26.4" ;;
    0.6.4)  echo "transformers==4.45.2 tokenizers==0.20.3 numpy==1.26.4" ;;
    0.7.0)  echo "transformers==4.47.0 tokenizers==0.21.0 numpy==1.26.4" ;;
    0.7.3)  echo "transformers==4.48.2 timm==1.0.11" ;;
    0.8.5)  echo "transformers==4.51.3" ;;
    0.10.0) echo "transformers==4.53.2" ;;
    0.11.0) echo "transformers==4.55.2" ;;
    0.11.1) echo "transformers==4.57.1" ;;
    0.12.0) echo "transformers==4.57.3 timm==1.0.17" ;;
    0.14.1) echo "transformers==4.57.3" ;;
    0.17.0) echo "transformers==4.57.5 timm==1.0.17" ;;
    0.23.0) echo "transformers==5.9.0 timm" ;;
    0.25.0) echo "transformers==5.5.3 timm==1.0.17" ;;
    0.33.0) echo "timm" ;;
    *)      echo "" ;;
  esac
}

golden_log() { echo "[golden ${GOLDEN_VERSION:-}] $*" >&2; }

golden_venv() {
  local version=$1 venv=$2 python=${PYTHON:-python3}
  if [ -e "$venv" ]; then
    golden_log "reusing existing virtualenv $venv"
  else
    golden_log "creating $venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q -U pip
  fi
  local extra
  extra=$(golden_extras "$version")
  # the distribution's version: the 0.6.2 wheel's vllm.__version__ says 0.6.1.dev238+ge2c6e0a82
  if ! "$venv/bin/python" -c "import sys; from importlib.metadata import version; sys.exit(version('vllm') != '$version')" 2>/dev/null; then
    # the extras in the same resolution, so that pip picks the rest to fit them
    golden_log "pip install vllm==$version $extra"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install "vllm==$version" $extra
  fi
  if [ -n "$extra" ]; then
    golden_log "pip install $extra"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install $extra
  fi
  # torchvision/torchaudio must import beside torch; drop them if they do not.
  for mod in torchvision torchaudio; do
    "$venv/bin/pip" show -q "$mod" >/dev/null 2>&1 || continue  # not installed (0.6.x: no torchaudio)
    if ! "$venv/bin/python" -c "import $mod" >/dev/null 2>&1; then
      golden_log "$mod does not import beside torch: uninstalling it"
      "$venv/bin/pip" uninstall -y "$mod"
    fi
  done
}

# vllm/platforms/cuda.py imports vllm._C, which links libcuda.so.1 (the driver
# library): a stub whose entry points all return CUDA_ERROR_NO_DEVICE lets it
# load. Nothing calls them; only the dynamic link needs them.
golden_stub_libcuda() {
  local venv=$1 stub=$1/golden-stub site syms
  command -v gcc >/dev/null && command -v nm >/dev/null || return 0
  mkdir -p "$stub"
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  syms=$(find "$site/vllm" -name '*.so' -exec nm -D --undefined-only {} + 2>/dev/null \
         | awk '{print $2}' | sed 's/@.*//' | grep -E '^cu[A-Z]' | sort -u || true)
  {
    echo "/* stub libcuda.so.1: every entry point returns CUDA_ERROR_NO_DEVICE */"
    for s in $syms cuInit cuDriverGetVersion cuDeviceGetCount; do
      echo "int $s(void) { return 100; }"
    done | sort -u
  } > "$stub/stub.c"
  gcc -shared -fPIC -o "$stub/libcuda.so.1" "$stub/stub.c"
  echo "$stub"
}
