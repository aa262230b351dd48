"""`python -m cdk_llm_serving smoke` against a local OpenAI-compatible server streaming SSE on loopback."""

from __future__ import annotations

import json

import pytest

from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.ops.exit_codes import EXIT_HTTP_ERROR, EXIT_UNREACHABLE, EXIT_USAGE
from cdk_llm_serving.ops.smoke import CA_BUNDLE_ENV, is_loopback, percentile
from tests.support.openai_test_server import serving


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["smoke", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_smoke_passes_and_measures_latency(capsys):
    with serving(delay=0.02) as server:
        code, out, _ = run(
            capsys, "--base-url", server.base_url, "--model", "reference-moe-nvfp4", "--json"
        )
    assert code == 0
    data = json.loads(out)
    assert [c["passed"] for c in data["checks"]] == [True, True, True, True]
    assert data["checks"][0]["detail"] == 'get_weather({"city": "Seattle"})'
    reasoning = data["requests"]["reasoning"]
    assert reasoning["model"] == "reference-moe-nvfp4"
    assert reasoning["ttft_ms"] >= 15  # the first token follows the role chunk
    assert 15 <= reasoning["itl_ms"]["p50"] <= reasoning["itl_ms"]["p99"] < 500
    assert reasoning["output_tokens"] == 5 and reasoning["tokens_per_second"] > 0


def test_text_report(capsys):
    with serving() as server:
        code, out, _ = run(capsys, "--base-url", server.base_url, "--model", "m")
    assert code == 0 and out.startswith("PASS  tool call parsed") and "itl p50/p90/p99=" in out


@pytest.mark.parametrize(
    ("behaviour", "failed", "detail"),
    [
        ("no-tools", "tool call parsed", "no tool_calls in the stream"),
        ("bad-arguments", "tool call parsed", "arguments are not JSON"),
        ("no-reasoning", "reasoning separated", "no reasoning_content"),
    ],
)
def test_broken_answers_fail_the_check(capsys, behaviour, failed, detail):
    with serving(behaviour=behaviour) as server:
        code, out, _ = run(capsys, "--base-url", server.base_url, "--model", "m", "--json")
    assert code == 1
    (check,) = [c for c in json.loads(out)["checks"] if not c["passed"]]
    assert check["name"] == failed and detail in check["detail"]


MIXED_FLEET = ("gpt-oss-20b-bf16-tp4", "gpt-oss-20b-int4-tp1")


def test_a_mixed_fleet_passes_with_the_shared_name_and_reports_each_copy(capsys):
    with serving(copies=MIXED_FLEET, shared_name="gpt-oss-20b") as server:
        code, out, _ = run(
            capsys, "--base-url", server.base_url, "--model", "gpt-oss-20b", "--json"
        )
    assert code == 0
    data = json.loads(out)
    assert all(c["passed"] for c in data["checks"])
    assert [data["requests"][r]["model"] for r in ("tools", "reasoning")] == list(MIXED_FLEET)
    assert data["copies"] == sorted(MIXED_FLEET)
    copies = {c["name"]: c["detail"] for c in data["checks"] if "answering copy" in c["name"]}
    assert copies == {
        "tools: answering copy": MIXED_FLEET[0],
        "reasoning: answering copy": MIXED_FLEET[1],
    }


def test_a_copy_name_fails_on_the_other_copies_of_a_mixed_fleet(capsys):
    """Why clients send the shared name: vLLM answers 404 for names a copy does not serve."""
    with serving(copies=MIXED_FLEET, shared_name="gpt-oss-20b") as server:
        code, _, err = run(capsys, "--base-url", server.base_url, "--model", MIXED_FLEET[1])
    assert code == EXIT_HTTP_ERROR and err.startswith("error: HTTP 404") and "does not exist" in err


def test_text_report_names_the_copy(capsys):
    with serving(copies=MIXED_FLEET[:1], shared_name="gpt-oss-20b") as server:
        code, out, _ = run(capsys, "--base-url", server.base_url, "--model", "gpt-oss-20b")
    assert code == 0 and f"copy={MIXED_FLEET[0]}" in out


def test_bearer_token_is_sent_and_http_errors_are_one_line(capsys):
    with serving(required_token="secret") as server:
        assert (
            run(capsys, "--base-url", server.base_url, "--model", "m", "--bearer-token", "secret")[
                0
            ]
            == 0
        )
        code, _, err = run(
            capsys, "--base-url", server.base_url, "--model", "m", "--bearer-token", "wrong"
        )
    assert code == EXIT_HTTP_ERROR and err.startswith("error: HTTP 401") and err.count("\n") == 1


def test_unreachable_endpoint(capsys):
    code, _, err = run(
        capsys, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "2"
    )
    assert code == EXIT_UNREACHABLE and err.startswith("error: cannot reach")


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 99)) == (
        50.0,
        90.0,
        99.0,
    )


def test_api_key_comes_from_the_environment(capsys, monkeypatch):
    """The HyperPod service requires its API key; smoke reads it from LLM_SERVING_API_KEY."""
    with serving(required_token="from-env") as server:
        monkeypatch.delenv("LLM_SERVING_API_KEY", raising=False)
        assert run(capsys, "--base-url", server.base_url, "--model", "m")[0] == EXIT_HTTP_ERROR
        monkeypatch.setenv("LLM_SERVING_API_KEY", "from-env")
        assert run(capsys, "--base-url", server.base_url, "--model", "m")[0] == 0
        # A flag wins over the environment.
        code, _, err = run(capsys, "--base-url", server.base_url, "--model", "m", "--api-key", "x")
    assert code == EXIT_HTTP_ERROR and err.startswith("error: HTTP 401")


@pytest.mark.parametrize(
    "flags", [["--api-key", "k"], ["--bearer-token", "t"]], ids=["api-key", "bearer-token"]
)
def test_no_key_goes_in_plaintext_to_another_host(capsys, monkeypatch, flags):
    """Refused before any connection (the host does not resolve: nothing could be sent)."""
    monkeypatch.delenv(CA_BUNDLE_ENV, raising=False)
    code, _, err = run(
        capsys, "--base-url", "http://llm.example.invalid/v1", "--model", "m", *flags
    )
    assert code == EXIT_USAGE
    (line,) = err.strip().splitlines()
    assert line.startswith("error: http://llm.example.invalid/v1: refusing to send")


def test_loopback_takes_a_key_over_http_and_other_hosts_are_not_loopback():
    for host in ("localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1"):
        assert is_loopback(host), host
    for host in ("10.0.0.1", "llm.example.com", "localhost.example.com", "::ffff:8.8.8.8", ""):
        assert not is_loopback(host), host
