"""The SageMaker rehearsal's eval set: valid, and in step with the test model (fitted to smoke's
two prompts and answers: rehearsal/live/generated_model.py)."""

from __future__ import annotations

from cdk_llm_serving.evals.tasks import load_tasks
from cdk_llm_serving.ops import smoke
from rehearsal.live import generated_model
from rehearsal.sagemaker.runner import EVAL_TASKS


def test_the_rehearsal_asks_what_the_test_model_was_fitted_to():
    tasks = {task.name: task for task in load_tasks(EVAL_TASKS).tasks}
    (reasoning,) = tasks["reasoning-final-answer"].samples
    (tool,) = tasks["tool-calls"].samples
    assert reasoning.messages[-1]["content"] == smoke.REASONING_PROMPT
    assert reasoning.expect["exact"] == generated_model.ANSWER_TEXT
    assert tool.messages[-1]["content"] == smoke.TOOL_PROMPT == generated_model.TOOL_PROMPT
    assert list(tool.tools) == [smoke.TOOL] and tool.expect["name"] == smoke.TOOL_NAME
    assert "<parameter=city>\nSeattle\n" in generated_model.TOOL_ANSWER
    assert tool.expect["arguments"] == {"city": "Seattle"}
