"""Eval task files (``tasks``), read by ``cdk-llm-serving eval`` and ``StagingEndpoints.eval_gate``."""
