"""What a judge tells a listener while it decides: the models and draft mappings it reads.

A judge caches across combinations (drafts per speculative config), so what one recipe's
results depend on cannot be told from what the judge computes for it; it is told here,
cache hits included. `compat.blocks.Recorder` listens, to key a recipe's cached results on
the model facts they read and to write the draft mappings a build meets in a stable order.
"""

from __future__ import annotations

from typing import Any, Protocol


class JudgeTrace(Protocol):
    def model(self, model_id: str) -> None:
        """The served model's facts were read."""

    def draft(
        self,
        version: str,
        draft_model: str | None,
        mapping: tuple[tuple[str, ...], dict[str, Any]] | None,
    ) -> None:
        """A draft was resolved (or found cached): the checkpoint it names, the mapping met."""
