"""``python -m cdk_llm_serving``: the command line lives in ``ops.cli``."""

from cdk_llm_serving.ops.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
