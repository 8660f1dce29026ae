"""Recipes checkout -> every `vllm serve` command the recipes site can synthesize.

`load_repo` reads a checkout, `enumerate_combinations` replays the site's
command synthesizer over it, `parse_serve_args` reads a resulting argv the way
vLLM will.
"""

from compat.recipes.argv import FlagUse, ServeArgs, parse_serve_args, parsed_serve_args
from compat.recipes.enumerate import (
    Combination,
    Enumeration,
    enumerate_combinations,
    enumerate_recipe,
    enumerate_repo,
)
from compat.recipes.loader import load_repo
from compat.recipes.repo import Problem, RecipesRepo

__all__ = [
    "Combination",
    "Enumeration",
    "FlagUse",
    "Problem",
    "RecipesRepo",
    "ServeArgs",
    "enumerate_combinations",
    "enumerate_recipe",
    "enumerate_repo",
    "load_repo",
    "parse_serve_args",
    "parsed_serve_args",
]
