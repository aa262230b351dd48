"""``smoke`` over HTTPS: verification is on, against ``--ca-bundle`` / ``CDK_LLM_SERVING_CA_BUNDLE``.

A throwaway CA and a certificate for ``localhost`` signed by it are made with ``openssl`` (the
``cryptography`` package is not installed) for a real TLS server on loopback; a second,
unrelated CA stands for the wrong bundle.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from cdk_llm_serving.ops.cli import main
from cdk_llm_serving.ops.exit_codes import EXIT_UNREACHABLE, EXIT_USAGE
from cdk_llm_serving.ops.smoke import CA_BUNDLE_ENV
from tests.support.openai_test_server import serving

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """``ca.crt`` signing ``server.crt`` (localhost, 127.0.0.1); ``other-ca.crt`` signs nothing."""
    directory = tmp_path_factory.mktemp("pki")
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    (directory / "san.cnf").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.crt",
        cwd=directory,
    )  # fmt: skip
    return directory


@pytest.fixture
def server_tls(pki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.crt", pki / "server.key")
    return context


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["smoke", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_verifies_against_the_given_ca_bundle(capsys, pki, server_tls):
    with serving(tls=server_tls) as server:
        assert server.base_url.startswith("https://")
        code, out, _ = run(
            capsys, "--base-url", server.base_url, "--model", "m", "--json",
            "--ca-bundle", str(pki / "ca.crt"),
        )  # fmt: skip
    assert code == 0 and all(c["passed"] for c in json.loads(out)["checks"])


def test_the_ca_bundle_comes_from_the_environment(capsys, monkeypatch, pki, server_tls):
    monkeypatch.setenv(CA_BUNDLE_ENV, str(pki / "ca.crt"))
    with serving(tls=server_tls) as server:
        code, _, _ = run(capsys, "--base-url", server.base_url, "--model", "m")
    assert code == 0


def test_refuses_a_certificate_from_another_ca(capsys, pki, server_tls):
    with serving(tls=server_tls) as server:
        code, _, err = run(
            capsys, "--base-url", server.base_url, "--model", "m",
            "--ca-bundle", str(pki / "other-ca.crt"),
        )  # fmt: skip
    assert code == EXIT_UNREACHABLE
    (line,) = err.strip().splitlines()
    assert line.startswith("error: TLS:") and "--ca-bundle" in line


def test_verification_is_on_without_a_bundle(capsys, monkeypatch, server_tls):
    """The system's CAs do not include the throwaway CA: refused, not silently accepted."""
    monkeypatch.delenv(CA_BUNDLE_ENV, raising=False)
    with serving(tls=server_tls) as server:
        code, _, err = run(capsys, "--base-url", server.base_url, "--model", "m")
    assert code == EXIT_UNREACHABLE and "does not verify" in err


def test_an_unreadable_bundle_is_bad_input(capsys, tmp_path, server_tls):
    bogus = tmp_path / "not-pem.crt"
    bogus.write_text("not a certificate")
    with serving(tls=server_tls) as server:
        code, _, err = run(
            capsys, "--base-url", server.base_url, "--model", "m", "--ca-bundle", str(bogus)
        )
    assert code == EXIT_USAGE and err.startswith("error: CA bundle")


def test_the_bundle_adds_to_the_system_cas(capsys, monkeypatch, pki, server_tls):
    """The system's store (``SSL_CERT_FILE``, OpenSSL's default verify file) holds the server's
    CA, the bundle an unrelated one: verified, so one shell setting reaches both kinds of URL."""
    monkeypatch.setenv("SSL_CERT_FILE", str(pki / "ca.crt"))
    with serving(tls=server_tls) as server:
        code, _, err = run(
            capsys, "--base-url", server.base_url, "--model", "m",
            "--ca-bundle", str(pki / "other-ca.crt"),
        )  # fmt: skip
    assert code == 0, err


def test_a_tls_error_mid_stream_is_one_line(capsys, pki, server_tls):
    with serving(tls=server_tls, behaviour="corrupt-tls-record") as server:
        code, _, err = run(
            capsys, "--base-url", server.base_url, "--model", "m",
            "--ca-bundle", str(pki / "ca.crt"),
        )  # fmt: skip
    assert code == EXIT_UNREACHABLE
    (line,) = err.strip().splitlines()
    assert line.startswith("error: TLS: the connection to") and "mid-answer" in line


@pytest.mark.parametrize("from_env", [False, True])
def test_a_ca_bundle_with_an_http_url_is_bad_input(capsys, monkeypatch, pki, from_env):
    """A bundle verifies TLS: with http:// the URL is a mistyped https:// (nothing is sent)."""
    flags = ["--ca-bundle", str(pki / "ca.crt")]
    if from_env:
        monkeypatch.setenv(CA_BUNDLE_ENV, str(pki / "ca.crt"))
        flags = []
    with serving() as server:
        assert server.base_url.startswith("http://")
        code, _, err = run(capsys, "--base-url", server.base_url, "--model", "m", *flags)
    assert code == EXIT_USAGE
    (line,) = err.strip().splitlines()
    assert "https://" in line and CA_BUNDLE_ENV in line
