"""Eval task files (``tasks``): plain Python, read by ``cdk-llm-serving eval`` (``ops.evals``)
and validated at synth time by ``StagingEndpoints.eval_gate``."""
