"""HF model id -> config facts (architectures, model_type, MTP layers, experts) with provenance.

`ModelResolver(hf_config_dir, allow_hub, trees, curated).resolve(model_id)` returns a
`ModelFacts` ("resolved" with source and provenance, or "unknown" with the reasons);
`.coverage(ids)` counts resolutions per source and lists the unknown ids.
"""

from compat.hf.facts import ModelFacts, facts_from_config
from compat.hf.resolver import SOURCES, ModelResolver

__all__ = ["SOURCES", "ModelFacts", "ModelResolver", "facts_from_config"]
