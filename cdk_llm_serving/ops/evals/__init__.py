"""``cdk-llm-serving eval``: the user's own evals against one copy, a delta to a reference copy,
and a gate (``run``; task files: ``tasks``; scorers: ``scoring``)."""
