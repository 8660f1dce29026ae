#!/usr/bin/env python3
"""Record what an installed vLLM computes for every registered architecture.

Run with the python of a virtualenv that has the vLLM release installed:

    $VENV/bin/python tools/golden/modelinfo.py --out tests/golden [--platform auto|cuda]

For every architecture in ``ModelRegistry.get_supported_archs()`` it loads the
class with ``ModelRegistry._try_load_model_cls(arch)`` and records every field
of ``vllm.model_executor.models.registry._ModelInfo.from_model_cls(cls)``,
plus a few extra capability probes (see ``EXTRA_FIELDS`` below).

``--platform auto`` keeps whatever platform vLLM resolves on this machine.
``--platform cuda`` installs a ``CudaPlatform`` instance as vLLM's current
platform *before* anything else reads it, so platform-dispatching model
packages (``vllm/models/<pkg>/__init__.py``) take their CUDA branch.

Output: ``<out>/modelinfo-<vllm version>-<platform>.json`` (sorted keys,
indent 1). Nothing here needs a GPU, network access or model weights.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import platform as py_platform
import sys
import time
import traceback

# Keep vLLM quiet and offline before it is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

# Extra keys written next to the _ModelInfo fields (documented in README.md).
EXTRA_FIELDS = (
    "class_module",
    "class_qualname",
    "registered_module",
    "registered_class",
    "supports_lora",
    "supports_eagle",
    "supports_eagle3",
    "is_moe",
    "supports_pp_in_mro",
)


def json_safe(value):
    """Convert _ModelInfo field values to JSON-compatible data."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(v) for v in value), key=repr)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


def exc_text(exc: BaseException, limit: int = 1000) -> str:
    # No machine-specific paths in the golden files.
    text = f"{type(exc).__name__}: {exc}".replace(sys.prefix, "<venv>")
    return text if len(text) <= limit else text[:limit] + "..."


# Device the forced CUDA platform pretends to be (--cuda-capability).
FAKE_CUDA_CAPABILITY = (8, 0)
FAKE_CUDA_DEVICE_NAMES = {(8, 0): "NVIDIA A100-SXM4-80GB", (9, 0): "NVIDIA H100 80GB HBM3",
                          (10, 0): "NVIDIA B200"}
FAKE_CUDA_DEVICE_NAME = FAKE_CUDA_DEVICE_NAMES[FAKE_CUDA_CAPABILITY]
FAKE_CUDA_DEVICE_COUNT = 8


def make_gpuless_cuda_platform():
    """vLLM's CudaPlatform with the device queries answered without a GPU.

    Importing ``vllm.platforms.cuda`` needs ``libcuda.so.1`` to be loadable
    (make_golden.sh builds a stub for that). Module-level code in some model
    imports asks for the device capability, which would initialise CUDA;
    these overrides answer those questions for an imaginary device of
    FAKE_CUDA_CAPABILITY instead. Nothing else of the platform is changed.

    The default capability is 8.0 (A100): with 9.0, vLLM 0.33.0's Mamba SSD
    kernels filter their Triton autotune configs at import time, which fails
    because Triton has no active driver here (37 spurious load errors).
    8.0 and 10.0 give identical results for 0.23.0 and 0.33.0.
    """
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability

    class GpulessCudaPlatform(CudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(*FAKE_CUDA_CAPABILITY)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return FAKE_CUDA_DEVICE_NAME

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return f"GPU-00000000-0000-0000-0000-00000000000{device_id}"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 80 * 1024**3

        @classmethod
        def device_count(cls) -> int:
            return FAKE_CUDA_DEVICE_COUNT

        @classmethod
        def is_fully_connected(cls, physical_device_ids) -> bool:
            return True

    GpulessCudaPlatform.__qualname__ = f"GpulessCudaPlatform({CudaPlatform.__name__})"
    return GpulessCudaPlatform


def _platform_instance(name: str):
    if name == "cuda":
        return make_gpuless_cuda_platform()()
    if name == "cpu":
        from vllm.platforms.cpu import CpuPlatform

        return CpuPlatform()
    raise SystemExit(f"unknown platform to force: {name}")


def _platforms_resolve_lazily() -> bool:
    """Whether this vLLM's `vllm.platforms` resolves `current_platform` on first access (a
    module `__getattr__` filling `_current_platform`, 0.7 on) rather than while the module
    executes (0.6). Read from the installed source, without importing vllm."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    path = os.path.join(os.path.dirname(spec.origin), "platforms", "__init__.py")
    with open(path, encoding="utf-8") as fh:
        return "_current_platform" in fh.read()


class _ReplaceEagerPlatform:
    """A meta-path finder for `vllm.platforms` whose loader, once the module has executed (and
    resolved its own `current_platform`), replaces that by the forced platform, before any
    other module can `from vllm.platforms import current_platform`."""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, fullname, path, target=None):
        if fullname != "vllm.platforms":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return None
        real_exec = spec.loader.exec_module
        name = self.name

        def exec_module(module):
            real_exec(module)
            module.resolved_platform_before_forcing = type(module.current_platform).__name__
            module.current_platform = _platform_instance(name)

        spec.loader.exec_module = exec_module
        return spec


def gpuless_pynvml():
    """A `pynvml` module answering NVML's device queries for the imaginary devices above.

    vLLM 0.6's `vllm/platforms/cuda.py` calls NVML while it imports (`warn_if_different_devices`
    asks every device's name), and `vllm/platforms/__init__.py` detects CUDA by NVML's device
    count; without a driver, `import pynvml` works but `nvmlInit` fails. This stand-in answers
    only what those modules ask (init, count, handle, name, capability, memory, P2P status);
    the capability, name and count are the ones GpulessCudaPlatform reports."""
    import types

    m = types.ModuleType("pynvml")
    m.__file__ = __file__ + ":gpuless_pynvml"  # not a package __init__: vLLM warns about that

    class NVMLError(Exception):
        pass

    class _Memory:
        total = 80 * 1024**3

    m.NVMLError = NVMLError
    m.NVML_P2P_CAPS_INDEX_NVLINK = 2
    m.NVML_P2P_STATUS_OK = 0
    m.nvmlInit = m.nvmlShutdown = lambda *a, **k: None
    m.nvmlDeviceGetCount = lambda: FAKE_CUDA_DEVICE_COUNT
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: FAKE_CUDA_DEVICE_NAME
    m.nvmlDeviceGetCudaComputeCapability = lambda h: FAKE_CUDA_CAPABILITY
    m.nvmlDeviceGetMemoryInfo = lambda h: _Memory()
    m.nvmlDeviceGetP2PStatus = lambda a, b, index: 0
    return m


def force_platform(name: str) -> None:
    """Install a platform instance before anything resolves current_platform."""
    if name not in ("cuda", "cpu"):
        raise SystemExit(f"unknown platform to force: {name}")
    if _platforms_resolve_lazily():
        import vllm.platforms as platforms

        platforms._current_platform = _platform_instance(name)
    else:
        if "vllm.platforms" in sys.modules:
            raise SystemExit("vllm.platforms was imported before the platform could be forced")
        if name == "cuda":
            sys.modules["pynvml"] = gpuless_pynvml()
        sys.meta_path.insert(0, _ReplaceEagerPlatform(name))


def describe_platform(p, forced: bool) -> dict:
    cls = type(p)
    detail = {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "device_type": getattr(p, "device_type", None),
        "device_name": getattr(p, "device_name", None),
    }
    if detail["device_type"] is None:  # vLLM 0.6's Platform has no device_type: its enum says it
        detail["enum"] = str(getattr(p, "_enum", None))
    if forced and (getattr(p, "device_type", "") == "cuda" or detail.get("enum") == "PlatformEnum.CUDA"):
        detail["assumed_device_capability"] = list(FAKE_CUDA_CAPABILITY)
        detail["assumed_device_name"] = FAKE_CUDA_DEVICE_NAME
        detail["assumed_device_count"] = FAKE_CUDA_DEVICE_COUNT
    return detail


def platform_label(p) -> str:
    device_type = getattr(p, "device_type", "") or ""
    if device_type:
        return device_type
    # UnspecifiedPlatform has an empty device_type.
    return type(p).__name__.replace("Platform", "").lower() or "unknown"


def record_arch(arch, registry, registry_mod, interfaces) -> dict:
    entry: dict = {}
    registered = registry.models.get(arch)
    if registered is not None:
        for attr, key in (("module_name", "registered_module"),
                          ("class_name", "registered_class")):
            if hasattr(registered, attr):
                entry[key] = getattr(registered, attr)

    try:
        cls = registry._try_load_model_cls(arch)
    except BaseException as exc:  # verify_model_arch may raise
        entry["load_error"] = exc_text(exc)
        return entry
    if cls is None:
        # _try_load_model_cls swallowed and logged the exception: repeat the
        # load outside its try/except to capture the message.
        try:
            registered.load_model_cls()
            entry["load_error"] = "None: _try_load_model_cls returned None"
        except BaseException as exc:
            entry["load_error"] = exc_text(exc)
        return entry

    entry["class_module"] = cls.__module__
    entry["class_qualname"] = cls.__qualname__

    try:
        info = registry_mod._ModelInfo.from_model_cls(cls)
        for key, value in dataclasses.asdict(info).items():
            entry[key] = json_safe(value)
    except BaseException as exc:
        entry["modelinfo_error"] = exc_text(exc)

    def probe(key, fn):
        try:
            entry[key] = bool(fn())
        except BaseException as exc:
            entry[key] = None
            entry.setdefault("probe_errors", {})[key] = exc_text(exc)

    if "supports_lora" not in entry:
        probe("supports_lora", lambda: interfaces.supports_lora(cls))
    if hasattr(interfaces, "supports_eagle"):
        probe("supports_eagle", lambda: interfaces.supports_eagle(cls))
    else:
        probe("supports_eagle", lambda: interfaces.SupportsEagle in cls.__mro__)
    if hasattr(interfaces, "supports_eagle3"):
        probe("supports_eagle3", lambda: interfaces.supports_eagle3(cls))
    else:
        probe("supports_eagle3", lambda: interfaces.SupportsEagle3 in cls.__mro__)
    probe("is_moe", lambda: interfaces.MixtureOfExperts in cls.__mro__)
    probe("supports_pp_in_mro", lambda: interfaces.SupportsPP in cls.__mro__)
    return entry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--platform", default="auto", choices=("auto", "cuda", "cpu"),
                    help="platform to force before importing models")
    ap.add_argument("--cuda-capability", default="8.0",
                    choices=[f"{a}.{b}" for a, b in FAKE_CUDA_DEVICE_NAMES],
                    help="device capability the forced CUDA platform reports")
    ap.add_argument("--only", nargs="*", help="restrict to these archs (debug)")
    args = ap.parse_args()
    global FAKE_CUDA_CAPABILITY, FAKE_CUDA_DEVICE_NAME
    FAKE_CUDA_CAPABILITY = tuple(int(x) for x in args.cuda_capability.split("."))
    FAKE_CUDA_DEVICE_NAME = FAKE_CUDA_DEVICE_NAMES[FAKE_CUDA_CAPABILITY]

    started = time.time()
    if args.platform != "auto":
        force_platform(args.platform)

    import torch
    import transformers
    import vllm
    from vllm.platforms import current_platform
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models import interfaces
    import vllm.model_executor.models.registry as registry_mod

    archs = sorted(ModelRegistry.get_supported_archs())
    if args.only:
        archs = [a for a in archs if a in set(args.only)]

    results = {}
    for i, arch in enumerate(archs, 1):
        t0 = time.time()
        try:
            results[arch] = record_arch(arch, ModelRegistry, registry_mod, interfaces)
        except BaseException as exc:  # never stop the sweep
            results[arch] = {"load_error": exc_text(exc),
                             "traceback": traceback.format_exc(limit=5)}
        status = "ERR" if "load_error" in results[arch] else "ok "
        print(f"[{i}/{len(archs)}] {status} {arch} ({time.time() - t0:.1f}s)",
              file=sys.stderr, flush=True)

    label = args.platform if args.platform != "auto" else platform_label(current_platform)
    doc = {
        "vllm_version": vllm.__version__,
        "platform": label,
        "platform_detail": describe_platform(current_platform, args.platform != "auto"),
        "platform_forced": args.platform != "auto",
        "python": py_platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "arch_count": len(results),
        "load_error_count": sum("load_error" in v for v in results.values()),
        "archs": results,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"modelinfo-{vllm.__version__}-{label}.json")
    with open(path, "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(results)} archs, {doc['load_error_count']} load errors, "
          f"{time.time() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
