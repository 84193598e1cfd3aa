"""Generation engines behind one interface (:class:`~rlvr_scaling.engines.base.Engine`)."""

# Names the config may use; the implementation modules are imported only when a run builds one, so the
# optional vLLM dependency is never imported for an HF run.
ENGINE_NAMES = ("hf", "vllm")
