"""``cdk-llm-serving eval``: one copy scored on the user's tasks, deltas to a reference, a gate."""
