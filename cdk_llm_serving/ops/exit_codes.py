"""The command line's exit statuses: one per kind of failure, documented in the README and
in ``--help``. Bad input never shows a traceback: one ``error:`` line on stderr (and JSON on
stdout under ``--json``)."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_CHECK_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_FALLBACK: Final = 3
EXIT_THROTTLED: Final = 4
EXIT_ACCESS_DENIED: Final = 5
EXIT_NOT_FOUND: Final = 6
EXIT_INVALID: Final = 7
EXIT_AWS_OTHER: Final = 8
EXIT_NO_CREDENTIALS: Final = 9
EXIT_NO_REGION: Final = 10
EXIT_UNREACHABLE: Final = 11
EXIT_HTTP_ERROR: Final = 12
EXIT_ADDON_NOT_OFFERED: Final = 13
EXIT_OUTPUT_CLOSED: Final = 14
EXIT_GATE_FAILED: Final = 15

#: Each status's meaning, as ``--help`` and the README list them.
MEANINGS: Final = {
    EXIT_OK: "success",
    EXIT_CHECK_FAILED: "a check or job failed",
    EXIT_USAGE: "bad input (option, value or file)",
    EXIT_FALLBACK: "running on a fallback pool (fleet --fail-on-fallback)",
    EXIT_THROTTLED: "AWS throttled the request",
    EXIT_ACCESS_DENIED: "AWS denied access",
    EXIT_NOT_FOUND: "the AWS resource does not exist",
    EXIT_INVALID: "AWS refused the request's parameters",
    EXIT_AWS_OTHER: "another AWS error",
    EXIT_NO_CREDENTIALS: "no AWS credentials",
    EXIT_NO_REGION: "no AWS region (give --region or set AWS_REGION)",
    EXIT_UNREACHABLE: "the endpoint or AWS cannot be reached",
    EXIT_HTTP_ERROR: "the endpoint answered with an HTTP error",
    EXIT_ADDON_NOT_OFFERED: "a pinned EKS add-on version is not offered (addons check)",
    EXIT_OUTPUT_CLOSED: "the output was closed before it was all written (e.g. piped to head)",
    EXIT_GATE_FAILED: "a copy missed an eval threshold (eval)",
}


def epilog() -> str:
    """The exit statuses as ``--help`` shows them."""
    return "exit statuses:\n" + "\n".join(f"  {code:>2}  {text}" for code, text in MEANINGS.items())
