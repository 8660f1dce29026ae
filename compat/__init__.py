"""vllm-compat: which synthesized `vllm serve` commands can start, per vLLM release."""

__version__ = "0.1.0"
