"""In-memory shape of a recipes checkout.

The synthesizer we mirror (recipes `command-synthesis.js`) reads recipe YAML
with optional chaining everywhere, so recipes stay plain mappings here and only
the few parts every stage needs (taxonomy profiles, strategies) get typed
records. Problems that spoil one combination rather than the whole checkout are
collected as `Problem` values instead of exceptions, so they can become findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Taxonomy brands we can judge, and the vLLM platform each one runs on.
PLATFORM_BY_BRAND: dict[str, str] = {"NVIDIA": "cuda", "AMD": "rocm"}


@dataclass(frozen=True)
class Problem:
    """A defect confined to one recipe (or one combination of it)."""

    recipe: str  # path relative to the recipes root, '' for repository-level files
    field: str  # dotted path inside that file
    message: str

    def line(self) -> str:
        where = f"{self.recipe}: {self.field}" if self.field else self.recipe
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class HardwareProfile:
    """One taxonomy `hardware_profiles` entry."""

    id: str
    brand: str
    generation: str | None  # first entry when the taxonomy gives a list
    gpu_count: int
    vram_gb: float | None
    scalable: bool
    restricted: bool

    @property
    def platform(self) -> str | None:
        """'cuda' / 'rocm', or None for brands vLLM-compat does not judge."""
        return PLATFORM_BY_BRAND.get(self.brand)

    @property
    def brand_key(self) -> str:
        """Lower-cased brand: the brand tier of hardware-keyed maps."""
        return self.brand.lower()

    @property
    def is_nvidia(self) -> bool:
        return self.brand == "NVIDIA"


@dataclass(frozen=True)
class Strategy:
    """One `strategies/*.yaml` (or `kv_store/*.yaml`) deployment spec."""

    name: str
    path: str
    deploy_type: str
    data: Mapping[str, Any]

    @property
    def parallel_flag(self) -> str:
        flag = self.data.get("parallel_flag")
        return flag if isinstance(flag, str) and flag else "--tensor-parallel-size"

    @property
    def parallelism(self) -> str | None:
        value = self.data.get("parallelism")
        return value if isinstance(value, str) else None


@dataclass
class Recipe:
    """One `models/**/*.yaml` file, structurally checked by the loader."""

    path: str  # relative to the recipes root, e.g. models/zai-org/GLM-5.2.yaml
    data: dict[str, Any]

    @property
    def model(self) -> dict[str, Any]:
        return self.data["model"]

    @property
    def model_id(self) -> str:
        return self.data["model"]["model_id"]

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        return self.data["variants"]

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.data.get("meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def features(self) -> dict[str, Any]:
        features = self.data.get("features")
        return features if isinstance(features, dict) else {}

    @property
    def is_omni(self) -> bool:
        tasks = self.meta.get("tasks")
        return isinstance(tasks, list) and "omni" in tasks

    def section(self, key: str) -> dict[str, Any]:
        """A top-level mapping section, {} when absent or null."""
        value = self.data.get(key)
        return value if isinstance(value, dict) else {}


@dataclass
class RecipesRepo:
    """A loaded recipes checkout."""

    root: Path
    recipes: dict[str, Recipe]  # keyed by relative path, sorted
    strategies: dict[str, Strategy]  # serving strategies by name
    kv_stores: dict[str, Strategy]  # kv_store_lb deployments by name
    hardware: dict[str, HardwareProfile]  # taxonomy order
    taxonomy: dict[str, Any]
    problems: list[Problem] = field(default_factory=list)

    def recipe(self, path: str) -> Recipe:
        return self.recipes[path]

    def declared_moe(self) -> dict[str, bool]:
        """Recipe path -> its `model.architecture` (moe / dense), where it says one.

        The engine falls back to it, saying so, when a model's config gives no expert count;
        every judge of a recipe (build, bisect, fix stage) must use the same facts.
        """
        return {
            path: r.model.get("architecture") == "moe"
            for path, r in self.recipes.items()
            if r.model.get("architecture") in ("moe", "dense")
        }
