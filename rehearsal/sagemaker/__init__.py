"""The SageMaker container rehearsal: every pool copy of the reference app's pool endpoint
started as SageMaker starts it (AWS's own entrypoint scripts, unmodified, into real vLLM on a
CPU), asked what clients ask, its metrics stored as detailed observability stores them and the
construct's PromQL evaluated on them by promtool. ``python -m rehearsal.sagemaker``; see
rehearsal/README.md, "The SageMaker container rehearsal"."""
