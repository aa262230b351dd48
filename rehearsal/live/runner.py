"""The live run: the serving pods as real vLLM processes, the Service in front, real requests.

Each pod gets its own network namespace on one bridge (in a namespace of its own, so nothing
is added to the host's network), with the pod's IP, a default route as a pod has, and the
rehearsal's DNS as its /etc/hosts; a private mount namespace holds each volume at its exact
mount path (Secrets, the CSI driver's files, ``emptyDir`` as tmpfs, the generated test model at
the model mounts); a PID namespace ends every process of the pod with it. The container's
``env``, ``command`` and ``args`` go through Kubernetes' ``$(VAR)`` expansion
(``rehearsal.live.expansion``), then the substitution table (``rehearsal.live.substitutions``),
and run as written, with the vLLM virtualenv's bin first on PATH.

A node namespace runs the readiness probes (the kubelet's), a load-balancer namespace forwards
the Service's port to the ready endpoints (an NLB passing TLS through), and a client namespace
resolves the Service's DNS names to it and sends the requests (``rehearsal.live.agent``), then
``cdk-llm-serving smoke``. Every failed check is a ``Finding``; a pod that exits or never gets
ready is one too, with its last log lines, and stops the run there.

Everything started is stopped and every namespace, /etc/netns entry and mount point created is
removed on the way out, on failure and on Ctrl-C too. Needs root (``ip netns``, ``mount``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..findings import Finding
from ..pods import LiveDeployment, PodRun
from . import generated_model
from .expansion import expand_argv, expand_env
from .substitutions import NOTES, TABLE, Applied, SubstitutionError, added_env, substitute

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_VENV = ROOT / ".venv" / "vllm"
#: The addresses of the rehearsal's own hosts beside the pods: RFC 2544's benchmarking range,
#: reachable only inside the namespaces the run makes.
LB_IP, CLIENT_IP, NODE_IP = "198.18.0.1", "198.18.0.2", "198.18.0.3"
#: A pod's PATH after the vLLM virtualenv's bin (ASSUMED: the image's PATH is the Debian default).
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LOG_LINES = 25
PROBE_SOURCE = "https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/"
API_KEY_SOURCE = (
    "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html (--api-key) ; "
    "cdk_llm_serving/vllm/multinode.py (the keys file the leader builds)"
)
GUARD_SOURCE = "cdk_llm_serving/vllm/route_guard.py (RouteGuard: /v1, /health, /metrics only)"
OPENAI_SOURCE = "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"
#: The routes the route guard closes, with the method each is served on by vLLM.
CLOSED_ROUTES = (
    ("/invocations", "POST"),
    ("/pause", "POST"),
    ("/abort_requests", "POST"),
    ("/docs", "GET"),
    ("/openapi.json", "GET"),
    ("/ping", "GET"),
)
OPEN_ROUTES = ("/health", "/metrics")


class LiveUnavailable(RuntimeError):
    """The live run cannot start here (no vLLM virtualenv, not root)."""


@dataclass
class LiveReport:
    """What one live run found, and how.

    :param cached: ``True`` when an earlier run of the same content answered (not run again).
    :param key: the content hash runs are cached by.
    :param timings: seconds: ``model`` (generation, absent when cached), ``ready`` (pods
        started to ready), ``requests``, ``total``.
    :param substitutions: each rewrite the table made, per pod.
    """

    findings: list[Finding]
    cached: bool
    key: str
    timings: dict[str, float] = field(default_factory=dict)
    substitutions: tuple[str, ...] = ()
    #: The checks that passed, by name (``smoke`` last), in the order they ran.
    passed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Prepared:
    pod: PodRun
    ns: str
    argv: tuple[str, ...]
    env: dict[str, str]
    applied: tuple[Applied, ...]


def _code_key() -> str:
    digest = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _pod_env(pod: PodRun, applied: tuple[Applied, ...], venv: Path) -> dict[str, str]:
    env = expand_env(pod.container.env)
    defaults = {
        "HOSTNAME": pod.hostname,  # ASSUMED: the container runtime sets HOSTNAME to the pod's hostname, as Docker/containerd do
        "HOME": "/root",  # ASSUMED: the image runs as root with root's home
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    for name, value in (*defaults.items(), *added_env(applied)):
        env.setdefault(name, value)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', IMAGE_PATH)}"
    return env


def prepare(
    deployment: LiveDeployment, venv: Path, prefix: str
) -> tuple[list[_Prepared], list[Finding]]:
    """Each pod's command line and environment as the live run starts it (expanded, then
    substituted), and a finding for each pod the table refuses."""
    prepared, findings = [], []
    for index, pod in enumerate(deployment.pods):
        container = pod.container
        expanded = expand_argv(container.command, container.args, expand_env(container.env))
        try:
            argv, applied = substitute(expanded)
        except SubstitutionError as error:
            findings.append(
                Finding(
                    "live.substitution-refused",
                    f"Pod {pod.namespace}/{pod.name}",
                    f"container {container.name}: {error}",
                    "rehearsal/live/substitutions.py (the table of what a CPU cannot run)",
                )
            )
            continue
        env = _pod_env(pod, applied, venv)
        prepared.append(_Prepared(pod, f"{prefix}{index}", argv, env, applied))
    return prepared, findings


def _digest(data: bytes) -> str:
    """A file's content for the cache key. Certificates and private keys count by what they
    say (subject, issuer, names, CA or not; a key's type and size), not by their bytes: the
    rehearsal's cert-manager issues fresh keys, serials and validity each run, and those do
    not change how the pods serve; anything else counts byte for byte."""
    if b"-----BEGIN" not in data:
        return hashlib.sha256(data).hexdigest()
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    described: list[str] = []
    try:
        for cert in x509.load_pem_x509_certificates(data):
            try:
                names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
                alt = sorted(str(n.value) for n in names.value)
            except x509.ExtensionNotFound:
                alt = []
            ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
            described.append(
                f"cert {cert.subject.rfc4514_string()} by {cert.issuer.rfc4514_string()} {alt} ca={ca}"
            )
    except ValueError:
        try:
            key = load_pem_private_key(data, password=None)
            described.append(f"key {type(key).__name__} {getattr(key, 'key_size', '')}")
        except (ValueError, TypeError):
            return hashlib.sha256(data).hexdigest()
    return hashlib.sha256("\n".join(described).encode()).hexdigest()


def _digest_files(files: dict[str, dict[str, bytes]]) -> dict[str, dict[str, str]]:
    return {
        path: {name: _digest(data) for name, data in sorted(content.items())}
        for path, content in sorted(files.items())
    }


def content_key(deployment: LiveDeployment, prepared: list[_Prepared]) -> str:
    """What a run depends on: the pods as they will run (after expansion and substitution),
    the DNS, the Service, the keys, the model's and this code's versions."""
    pods = [
        {
            "name": p.pod.name,
            "namespace": p.pod.namespace,
            "hostname": p.pod.hostname,
            "subdomain": p.pod.subdomain,
            "ip": p.pod.ip,
            "role": p.pod.role,
            "readiness": p.pod.readiness,
            "argv": p.argv,
            "env": sorted(p.env.items()),
            "files": _digest_files(p.pod.container.files),
            "model_mounts": p.pod.container.model_mounts,
            "ports": sorted(p.pod.container.ports.items()),
        }
        for p in prepared
    ]
    service = asdict(deployment.service)
    service["ca_pem"] = _digest(deployment.service.ca_pem)
    content = {
        "pods": pods,
        "dns": sorted(deployment.dns.items()),
        "service": service,
        "api_keys": deployment.api_keys,
        "model": deployment.served_model_name,
        "code": _code_key(),
        "generated_model": generated_model.content_key(),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=list).encode()).hexdigest()


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


class _Cleanup:
    """What the run made, undone in reverse order (each step tried even when one fails)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []

    def add(self, what: str, undo: Any) -> None:
        self.steps.append((what, undo))

    def run(self) -> list[str]:
        failures = []
        while self.steps:
            what, undo = self.steps.pop()
            try:
                undo()
            except Exception as error:  # noqa: BLE001 - keep undoing the rest
                failures.append(f"{what}: {error}")
        return failures


def _stop(process: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM to the process group the run started (the pod's processes), SIGKILL after
    ``grace`` seconds; the PID namespace's init going ends the rest."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)


def _netns_add(name: str, cleanup: _Cleanup) -> None:
    if Path(f"/run/netns/{name}").exists():  # left by an earlier run killed outright: ours by name
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
    _sh("ip", "netns", "add", name)
    cleanup.add(f"netns {name}", lambda: _sh("ip", "netns", "del", name))


def _etc_netns(
    name: str, hosts: dict[str, str], cleanup: _Cleanup, own: tuple[str, str] | None
) -> None:
    """/etc/netns/<name>/hosts and resolv.conf, which ``ip netns exec`` bind-mounts over
    /etc/hosts and /etc/resolv.conf (ip-netns(8): "ip netns exec automates handling of this
    configuration, file convention for network namespace unaware applications, by creating a
    mount namespace and bind mounting all of the per network namespace configure files into
    their traditional location in /etc")."""
    directory = Path("/etc/netns") / name
    directory.mkdir(parents=True, exist_ok=True)
    cleanup.add(f"/etc/netns/{name}", lambda: shutil.rmtree(directory, ignore_errors=True))
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    if own:  # the kubelet-managed hosts file names the pod itself (its IP, FQDN and hostname)
        lines.append(f"{own[0]}\t{own[1]}")
    lines += [f"{ip}\t{fqdn}" for fqdn, ip in sorted(hosts.items())]
    (directory / "hosts").write_text("\n".join(lines) + "\n")
    # No name server: a name the rehearsal's DNS lacks fails at once (nothing listens on port 53
    # in the namespace), as it would fail to resolve in the cluster.
    (directory / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")


def _network(members: dict[str, str], bridge_ns: str, cleanup: _Cleanup) -> None:
    """One bridge (in ``bridge_ns``) and a veth per member namespace: ``{ns: ip}``."""
    _netns_add(bridge_ns, cleanup)
    _sh("ip", "-n", bridge_ns, "link", "add", "br0", "type", "bridge")
    _sh("ip", "-n", bridge_ns, "link", "set", "br0", "up")
    for index, (ns, ip) in enumerate(members.items()):
        _netns_add(ns, cleanup)
        _sh(
            "ip",
            "-n",
            bridge_ns,
            "link",
            "add",
            f"v{index}",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            ns,
        )
        _sh("ip", "-n", bridge_ns, "link", "set", f"v{index}", "master", "br0", "up")
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "-n", ns, "link", "set", "eth0", "up")
        _sh("ip", "-n", ns, "addr", "add", f"{ip}/32", "dev", "eth0")
        # Every address on the bridge is on-link; the default route is a pod's (the VPC CNI
        # gives each pod one: ASSUMED, it matters only for vLLM finding its own address with a
        # connected UDP socket, vllm/utils/network_utils.py get_ip). Nothing is attached
        # beyond the bridge: no packet leaves the namespaces.
        _sh("ip", "-n", ns, "route", "add", "default", "dev", "eth0", "scope", "link")


def _mount_points(paths: list[str], cleanup: _Cleanup) -> None:
    """Create the mount points the host lacks (removed afterwards, deepest first)."""
    for path in sorted(set(paths)):
        missing = []
        current = Path(path)
        while not current.exists():
            missing.append(current)
            current = current.parent
        for directory in reversed(missing):
            directory.mkdir()
            cleanup.add(f"mount point {directory}", lambda d=directory: d.rmdir())


def _volumes(prepared: _Prepared, model: Path, root: Path) -> list[dict[str, Any]]:
    """The pod's mounts: files written under ``root``, the model copied where the arguments
    name it under each model mount (or at the mount itself)."""
    container = prepared.pod.container
    mounts: list[dict[str, Any]] = []
    for index, (target, files) in enumerate(sorted(container.files.items())):
        if not files:
            mounts.append({"kind": "tmpfs", "target": target})
            continue
        source = root / f"volume-{index}"
        source.mkdir(parents=True)
        for name, data in files.items():
            path = source / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o444)
        mounts.append({"kind": "bind", "source": str(source), "target": target, "read_only": True})
    for index, target in enumerate(container.model_mounts):
        source = root / f"model-{index}"
        named = sorted(
            {
                arg[len(target) + 1 :]
                for arg in prepared.argv
                if arg.startswith(target.rstrip("/") + "/")
            }
        )
        if not named:
            shutil.copytree(model, source)
        for relative in named:
            shutil.copytree(model, source / relative)
        mounts.append({"kind": "bind", "source": str(source), "target": target, "read_only": True})
    ordered = sorted(mounts, key=lambda m: m["target"].count("/"))
    # Last (their sources may lie under /tmp): the container's own /tmp and cache directory, so
    # the pods share nothing through the host's (vLLM keeps IPC sockets and compile caches
    # there). Not all of $HOME: the host's interpreters may live there. ASSUMED: the image's
    # /tmp and ~/.cache belong to the container (its writable layer).
    cache = f"{prepared.env.get('HOME', '/root').rstrip('/')}/.cache"
    for private in ("/tmp", cache):
        if private not in container.files and Path(private).is_dir():
            ordered.append({"kind": "tmpfs", "target": private})
    return ordered


def _tail(log: Path, lines: int = LOG_LINES) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


@contextmanager
def _interrupts() -> Iterator[None]:
    """SIGTERM as Ctrl-C, so cleanup runs either way (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(
    deployment: LiveDeployment,
    workdir: Path,
    *,
    vllm_venv: Path = DEFAULT_VENV,
    ready_budget: float = 600.0,
) -> list[Finding]:
    """The findings of a live run (empty: the service answered every request)."""
    return run_report(deployment, workdir, vllm_venv=vllm_venv, ready_budget=ready_budget).findings


def run_report(
    deployment: LiveDeployment,
    workdir: Path,
    *,
    vllm_venv: Path = DEFAULT_VENV,
    ready_budget: float = 600.0,
) -> LiveReport:
    """``run``, with whether the cache answered, the timings and the substitutions made."""
    started = time.perf_counter()
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    prepared, refused = prepare(deployment, vllm_venv, "")
    key = content_key(deployment, prepared)
    substitutions = tuple(f"{p.pod.name}: {item}" for p in prepared for item in p.applied)
    if refused:  # the input itself: nothing to run
        return LiveReport(refused, False, key, {}, substitutions)
    cache = workdir / "live-cache" / f"{key}.json"
    if cache.is_file():  # an earlier run of the same content: its answer, not a second run
        earlier = json.loads(cache.read_text())
        findings = [Finding(**item) for item in earlier["findings"]]
        took = {"total": round(time.perf_counter() - started, 1)}
        return LiveReport(findings, True, key, took, substitutions, earlier["passed"])
    python = vllm_venv / "bin" / "python"
    if not python.exists():
        raise LiveUnavailable(f"no vLLM virtualenv at {vllm_venv} (make vllm-venv)")
    if os.geteuid() != 0:
        raise LiveUnavailable("the live run needs root (network and mount namespaces)")
    prefix = f"rl{key[:6]}-"
    prepared = [
        _Prepared(p.pod, f"{prefix}p{index}", p.argv, p.env, p.applied)
        for index, p in enumerate(prepared)
    ]
    timings: dict[str, float] = {}
    passed: list[str] = []
    # The model is cached by its generator's content, beside the virtualenv it is made with.
    model, seconds = generated_model.ensure_model(vllm_venv / "rehearsal-models", python)
    if seconds is not None:
        timings["model"] = round(seconds, 1)
    findings = _play(
        deployment,
        prepared,
        model,
        workdir / "runs" / key[:16],
        prefix,
        ready_budget,
        timings,
        passed,
    )
    timings["total"] = round(time.perf_counter() - started, 1)
    cache.parent.mkdir(parents=True, exist_ok=True)
    # ASSUMED: a run that met a finding is cached too (the same input fails the same way).
    cache.write_text(
        json.dumps({"findings": [asdict(f) for f in findings], "passed": passed}, indent=1)
    )
    (workdir / "runs" / key[:16] / "report.json").write_text(
        json.dumps(
            {
                "timings": timings,
                "substitutions": substitutions,
                "findings": [asdict(f) for f in findings],
            },
            indent=1,
        )
    )
    return LiveReport(findings, False, key, timings, substitutions, passed)


def _play(
    deployment: LiveDeployment,
    prepared: list[_Prepared],
    model: Path,
    root: Path,
    prefix: str,
    ready_budget: float,
    timings: dict[str, float],
    passed: list[str],
) -> list[Finding]:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cleanup = _Cleanup()
    processes: list[subprocess.Popen[Any]] = []
    logs: dict[str, Path] = {}
    service = deployment.service
    service_resource = f"Service {service.name}"
    try:
        with _interrupts():
            lb_ns, client_ns, node_ns = f"{prefix}lb", f"{prefix}client", f"{prefix}node"
            members = {p.ns: p.pod.ip for p in prepared}
            members |= {lb_ns: LB_IP, client_ns: CLIENT_IP, node_ns: NODE_IP}
            _network(members, f"{prefix}br", cleanup)
            for p in prepared:
                own = (p.pod.ip, p.pod.hostname)
                _etc_netns(p.ns, deployment.dns, cleanup, own)
            client_names = [name for name in service.dns_names if not name.startswith("*")]
            _etc_netns(client_ns, {name: LB_IP for name in client_names}, cleanup, None)
            _etc_netns(node_ns, {}, cleanup, None)
            _etc_netns(lb_ns, {}, cleanup, None)
            targets = [
                t for p in prepared for t in (*p.pod.container.files, *p.pod.container.model_mounts)
            ]
            _mount_points(targets, cleanup)

            # The pods, all at once (LWS starts the group's pods together: startupPolicy
            # LeaderCreated only waits for the leader pod object, not its readiness).
            ready_started = time.perf_counter()
            for p in prepared:
                pod_root = root / p.pod.name
                pod_root.mkdir()
                spec = {
                    "hostname": p.pod.hostname,
                    "mounts": _volumes(p, model, pod_root),
                    "argv": list(p.argv),
                    "env": p.env,
                }
                (pod_root / "launch.json").write_text(json.dumps(spec, indent=1))
                logs[p.pod.name] = pod_root / "container.log"
                processes.append(
                    subprocess.Popen(
                        [
                            "ip",
                            "netns",
                            "exec",
                            p.ns,
                            "unshare",
                            "--mount",
                            "--uts",
                            "--pid",
                            "--fork",
                            "--kill-child",
                            "--propagation",
                            "private",
                            "--",
                            sys.executable,
                            str(HERE / "launch.py"),
                            str(pod_root / "launch.json"),
                        ],  # fmt: skip
                        stdout=logs[p.pod.name].open("wb"),
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                        env={"PATH": os.environ.get("PATH", IMAGE_PATH)},
                    )
                )
            pods = dict(zip([p.pod.name for p in prepared], processes, strict=True))
            stopped = _wait_ready(
                deployment, prepared, pods, logs, node_ns, root, ready_budget, processes
            )
            timings["ready"] = round(time.perf_counter() - ready_started, 1)
            if stopped:
                return stopped

            ready = {p.pod.ip for p in prepared if p.pod.readiness or p.pod.role == "worker"}
            endpoints = [ip for ip in service.endpoints if ip in ready]
            if not endpoints:
                return [
                    Finding(
                        "live.service-no-ready-endpoints",
                        service_resource,
                        f"the Service selects {list(service.endpoints)}; none is a ready serving pod",
                        "https://kubernetes.io/docs/concepts/services-networking/service/#services-without-selectors",
                    )
                ]
            if not service.tls_passthrough:
                return [
                    Finding(
                        "live.service-not-passthrough",
                        service_resource,
                        "the listener does not pass TLS through: the live run plays only TCP "
                        "listeners forwarding to the pods, which terminate TLS",
                        "ASSUMED: the reference's NLB is a TCP listener (the leader terminates TLS)",
                    )
                ]
            requests_started = time.perf_counter()
            forward_spec = root / "forward.json"
            forward_spec.write_text(
                json.dumps(
                    {
                        "port": service.port,
                        "target_port": service.target_port,
                        "endpoints": endpoints,
                    }
                )
            )
            forwarder = _agent(lb_ns, "forward", forward_spec, root / "forward.log", processes)
            _await_line(root / "forward.log", "listening", forwarder, 30)
            findings = _requests(
                deployment, client_names, client_ns, root, service_resource, passed
            )
            timings["requests"] = round(time.perf_counter() - requests_started, 1)
            for p in prepared:  # a pod that died while answering
                if pods[p.pod.name].poll() is not None:
                    findings.append(_exited(p.pod, pods[p.pod.name], logs[p.pod.name]))
            return findings
    finally:
        for process in reversed(processes):  # first: the namespaces and mounts are theirs
            try:
                _stop(process)
            except Exception as error:  # noqa: BLE001 - stop the others all the same
                print(f"rehearsal.live: stopping {process.args}: {error}", file=sys.stderr)
        failures = cleanup.run()
        if failures:
            print("rehearsal.live: cleanup failures: " + "; ".join(failures), file=sys.stderr)


def _agent(
    ns: str, command: str, spec: Path, log: Path, processes: list[subprocess.Popen[Any]]
) -> subprocess.Popen[Any]:
    process = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, str(HERE / "agent.py"), command, str(spec)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    processes.append(process)
    return process


def _await_line(log: Path, text: str, process: subprocess.Popen[Any], budget: float) -> None:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        if text in _tail(log, 1000):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"rehearsal.live: {log.name}: no {text!r}:\n{_tail(log)}")


def _exited(pod: PodRun, process: subprocess.Popen[Any], log: Path) -> Finding:
    return Finding(
        "live.pod-exited",
        f"Pod {pod.namespace}/{pod.name}",
        f"the {pod.role}'s container exited (code {process.returncode}); its last lines:\n{_tail(log)}",
        PROBE_SOURCE,
    )


def _wait_ready(
    deployment: LiveDeployment,
    prepared: list[_Prepared],
    pods: dict[str, subprocess.Popen[Any]],
    logs: dict[str, Path],
    node_ns: str,
    root: Path,
    budget: float,
    processes: list[subprocess.Popen[Any]],
) -> list[Finding]:
    """Wait for every pod's readiness probe (a pod without one is ready once running, as
    Kubernetes counts it); a pod that exits first, or the budget running out, is a finding."""
    probed = {
        p.pod.name: f"{p.pod.readiness[2].lower()}://{p.pod.ip}:{p.pod.readiness[1]}{p.pod.readiness[0]}"
        for p in prepared
        if p.pod.readiness
    }
    spec = root / "probe.json"
    spec.write_text(json.dumps({"urls": sorted(probed.values()), "budget": budget}))
    prober = _agent(node_ns, "probe", spec, root / "probe.log", processes)
    deadline = time.monotonic() + budget + 5
    while time.monotonic() < deadline:
        for p in prepared:
            if pods[p.pod.name].poll() is not None:
                return [_exited(p.pod, pods[p.pod.name], logs[p.pod.name])]
        if prober.poll() is not None:
            break
        time.sleep(1)
    ready_lines = _tail(root / "probe.log", 1000)
    not_ready = [
        p
        for p in prepared
        if p.pod.name in probed and f"ready {probed[p.pod.name]}" not in ready_lines
    ]
    return [
        Finding(
            "live.pod-not-ready",
            f"Pod {p.pod.namespace}/{p.pod.name}",
            f"{probed[p.pod.name]} did not answer 200 within {budget:.0f} s; the container's last lines:\n{_tail(logs[p.pod.name])}",
            PROBE_SOURCE,
        )
        for p in not_ready
    ]


def _requests(
    deployment: LiveDeployment,
    names: list[str],
    client_ns: str,
    root: Path,
    resource: str,
    passed: list[str],
) -> list[Finding]:
    service = deployment.service
    if not names:
        return [
            Finding(
                "live.service-no-dns-name",
                resource,
                "the certificate names no host a client can resolve",
                OPENAI_SOURCE,
            )
        ]
    port = "" if service.port == 443 else f":{service.port}"
    # A client in the VPC uses the load balancer's name, the most qualified one the certificate
    # carries (ASSUMED: clients use the longest name; every name is checked by the TLS handshakes all the same).
    base = f"https://{max(names, key=len)}{port}"
    spec = {
        "base_url": base,
        "port": service.port,
        "ca_pem": service.ca_pem.decode(),
        "tls_names": names,
        "model": deployment.served_model_name,
        "api_keys": list(deployment.api_keys),
        "prompt": generated_model.REASONING_PROMPT,
        "tool_prompt": generated_model.TOOL_PROMPT,
        "tool": generated_model.TOOL,
        "closed": [list(route) for route in CLOSED_ROUTES],
        "open": list(OPEN_ROUTES),
    }
    spec_path = root / "client.json"
    spec_path.write_text(json.dumps(spec))
    done = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            client_ns,
            sys.executable,
            str(HERE / "agent.py"),
            "client",
            str(spec_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    (root / "client.log").write_text(done.stdout + done.stderr)
    findings = []
    for line in done.stdout.splitlines():
        check = json.loads(line)
        if check["passed"]:
            passed.append(check["check"])
        else:
            findings.append(
                Finding(
                    _rule(check["check"]),
                    resource,
                    f"{check['check']}: {check['detail']}",
                    _source(check["check"]),
                )
            )
    if done.returncode != 0:
        findings.append(
            Finding(
                "live.client-failed",
                resource,
                done.stderr[-2000:],
                "ASSUMED: the client agent's own failure",
            )
        )
    if findings:
        return findings
    ca = root / "ca.pem"
    ca.write_bytes(service.ca_pem)
    smoke = _smoke_cli()
    done = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            client_ns,
            smoke,
            "smoke",
            "--base-url",
            f"{base}/v1",
            "--model",
            deployment.served_model_name,
            "--ca-bundle",
            str(ca),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "LLM_SERVING_API_KEY": deployment.api_keys[0]},
    )
    (root / "smoke.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        return [
            Finding(
                "live.smoke-failed",
                resource,
                f"cdk-llm-serving smoke exited {done.returncode}:\n{done.stdout[-1500:]}{done.stderr[-1500:]}",
                "cdk_llm_serving/ops/smoke.py",
            )
        ]
    passed.append("cdk-llm-serving smoke")
    return []


def _smoke_cli() -> str:
    beside = Path(sys.executable).parent / "cdk-llm-serving"
    return str(beside) if beside.exists() else shutil.which("cdk-llm-serving") or "cdk-llm-serving"


def _rule(check: str) -> str:
    for start, rule in (
        ("tls", "live.tls-unverified"),
        ("no key", "live.unauthenticated-request-served"),
        ("wrong key", "live.wrong-key-served"),
        ("api key", "live.api-key-refused"),
        ("streaming", "live.streaming-broken"),
        ("reasoning", "live.reasoning-parser-off"),
        ("tools", "live.tools-refused"),
        ("chat", "live.chat-failed"),
        ("GET /health", "live.health-closed"),
        ("GET /metrics", "live.metrics-closed"),
    ):
        if check.startswith(start):
            return rule
    if "404" in check:
        return "live.route-open"
    return "live.request-failed"


def _source(check: str) -> str:
    if check.startswith(("no key", "wrong key", "api key")):
        return API_KEY_SOURCE
    if "404" in check or check.startswith("GET /"):
        return GUARD_SOURCE
    if check.startswith("tls"):
        return "https://docs.python.org/3/library/ssl.html#ssl.SSLContext.wrap_socket (hostname and chain verified)"
    return OPENAI_SOURCE


def table() -> list[dict[str, str]]:
    """The substitution table and its notes, for the README and reports."""
    rows = [{"what": rule.flag, "why": rule.reason, "source": rule.source} for rule in TABLE]
    rows += [{"what": what, "why": why, "source": source} for what, why, source in NOTES]
    return rows
