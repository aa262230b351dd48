"""Kubernetes' $(VAR) expansion of env, command and args, as the live run applies it."""

from __future__ import annotations

from rehearsal.live.expansion import expand, expand_argv, expand_env


def test_a_defined_variable_is_replaced_and_an_undefined_one_kept() -> None:
    env = {"LWS_LEADER_ADDRESS": "lws-0.lws.inference"}
    assert expand("$(LWS_LEADER_ADDRESS):$(NOPE)", env) == "lws-0.lws.inference:$(NOPE)"


def test_double_dollar_escapes() -> None:
    env = {"A": "x"}
    assert expand('u="$$(umask)"; $$(A) $$$(A) $$$$', env) == 'u="$(umask)"; $(A) $x $$'


def test_an_expansion_is_not_expanded_again() -> None:
    assert expand("$(A)", {"A": "$(B)", "B": "no"}) == "$(B)"


def test_env_sees_only_earlier_variables() -> None:
    env = expand_env([("A", "1"), ("B", "$(A)-$(C)"), ("C", "3"), ("D", "$(C)")])
    assert env == {"A": "1", "B": "1-$(C)", "C": "3", "D": "3"}


def test_command_then_args() -> None:
    argv = expand_argv(["/bin/sh", "-c", 'exec vllm "$$@"'], ["vllm", "--rank", "$(I)"], {"I": "1"})
    assert argv == ("/bin/sh", "-c", 'exec vllm "$@"', "vllm", "--rank", "1")
