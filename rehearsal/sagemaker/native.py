"""PromQL over native (exponential) histograms with Debian's Prometheus 2.42: a throw-away
``prometheus`` server (``--enable-feature=native-histograms``, ``--web.enable-remote-write-receiver``)
fed by remote write, queried with ``promtool query instant``.

promtool 2.42's ``test rules`` reads no native histograms, but its server stores and queries them
(``histogram_quantile``, ``rate`` and ``sum`` on native histograms: Prometheus 2.40+ behind the
flag; prometheus/prometheus v2.42.0 ``storage/remote/write_handler.go`` appends a remote-written
``Histogram``). The messages are encoded here by hand from v2.42.0's ``prompb/types.proto`` and
``prompb/remote.proto`` (protobuf wire format: https://protobuf.dev/programming-guides/encoding/),
snappy-framed as the remote-write spec asks (https://prometheus.io/docs/specs/remote_write_spec/:
block format) with literal-only blocks (valid snappy: https://github.com/google/snappy
``format_description.txt``, "Literals"). Standard library only.

An explicit-bucket histogram becomes an exponential one the way CloudWatch's page allows ("might
reduce the scale ... preserving the total count and sum",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/metrics-otel-histograms.html): each
classic bucket's observations go to the exponential bucket holding its upper bound, at schema 3
(ASSUMED: the resolution CloudWatch keeps; quantiles move within one bucket, 9 %).
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SCHEMA = 3


@dataclass(frozen=True)
class NativeHistogram:
    """One cumulative native histogram: per-bucket counts by bucket index, count, sum."""

    buckets: Mapping[int, int]
    count: int
    sum: float


def bucket_index(value: float, schema: int = SCHEMA) -> int:
    """The exponential bucket holding ``value``: bucket ``i`` is
    ``(2**((i-1)/2**schema), 2**(i/2**schema)]`` (Prometheus native histograms)."""
    return int(math.ceil(math.log2(value) * 2**schema - 1e-9))


def from_classic(cumulative: Mapping[float, float], total_sum: float) -> NativeHistogram:
    """``le -> cumulative count`` (``+Inf`` included) as a native histogram."""
    buckets: dict[int, int] = {}
    previous = 0.0
    finite = sorted(b for b in cumulative if math.isfinite(b))
    for bound in sorted(cumulative):
        count = cumulative[bound] - previous
        previous = cumulative[bound]
        if count <= 0:
            continue
        upper = bound if math.isfinite(bound) else (finite[-1] * 2 if finite else 1.0)
        index = bucket_index(max(upper, 1e-9))
        buckets[index] = buckets.get(index, 0) + int(round(count))
    return NativeHistogram(buckets, int(round(previous)), total_sum)


# --- protobuf, by hand ------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _double(field: int, value: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", value)


def _uint(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _sint(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(_zigzag(value))


def _histogram(h: NativeHistogram, timestamp_ms: int) -> bytes:
    indices = sorted(i for i, c in h.buckets.items() if c)
    spans: list[tuple[int, int]] = []
    previous_end = None
    for index in indices:
        if previous_end is not None and index == previous_end:
            offset, length = spans[-1]
            spans[-1] = (offset, length + 1)
        else:
            spans.append((index if previous_end is None else index - previous_end, 1))
        previous_end = index + 1
    out = _uint(1, h.count) + _double(3, h.sum) + _sint(4, SCHEMA) + _double(5, 2.0**-128)
    out += _uint(6, 0)
    for offset, length in spans:
        out += _bytes(11, _sint(1, offset) + _uint(2, length))
    last = 0
    deltas = b""
    for index in indices:
        deltas += _varint(_zigzag(h.buckets[index] - last))
        last = h.buckets[index]
    if deltas:
        out += _bytes(12, deltas)  # packed repeated sint64
    return out + _uint(15, timestamp_ms)


def write_request(
    series: Sequence[tuple[Mapping[str, str], Sequence[tuple[int, NativeHistogram | float]]]],
) -> bytes:
    """``WriteRequest`` of series: (labels incl. ``__name__``, [(ms, histogram or float)])."""
    out = b""
    for labels, points in series:
        ts = b""
        for name, value in sorted(labels.items()):
            ts += _bytes(1, _bytes(1, name.encode()) + _bytes(2, value.encode()))
        for timestamp_ms, point in points:
            if isinstance(point, NativeHistogram):
                ts += _bytes(4, _histogram(point, timestamp_ms))
            else:
                ts += _bytes(2, _double(1, point) + _uint(2, timestamp_ms))
        out += _bytes(1, ts)
    return out


def snappy_literal(data: bytes) -> bytes:
    """Snappy block format with literal elements only (a valid, uncompressed encoding)."""
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), 65536):
        chunk = data[start : start + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


# --- the server ---------------------------------------------------------------------------------


def prometheus_path() -> str | None:
    return shutil.which("prometheus")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str

    def write(self, payload: bytes) -> None:
        request = urllib.request.Request(
            f"{self.url}/api/v1/write",
            data=snappy_literal(payload),
            headers={
                "Content-Encoding": "snappy",
                "Content-Type": "application/x-protobuf",
                "X-Prometheus-Remote-Write-Version": "0.1.0",
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.status // 100 != 2:
                raise RuntimeError(f"remote write answered {response.status}")

    def query(self, expr: str, at: float, promtool: str) -> tuple[int, str]:
        """``promtool query instant`` at ``at`` (Unix seconds): (exit status, output)."""
        done = subprocess.run(
            [promtool, "query", "instant", f"--time={at:.3f}", self.url, expr],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, (done.stdout + done.stderr).strip()


@contextmanager
def server(binary: str | None = None) -> Iterator[Server]:
    """A ``prometheus`` on 127.0.0.1 with an empty TSDB in a temporary directory; stopped after."""
    tool = binary or prometheus_path()
    if tool is None:
        raise FileNotFoundError("no prometheus server binary (Debian's prometheus package)")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="smrehearse-prometheus-") as tmp:
        config = Path(tmp) / "prometheus.yml"
        config.write_text("global: {}\n")
        log = (Path(tmp) / "prometheus.log").open("wb")
        process = subprocess.Popen(
            [
                tool,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-remote-write-receiver",
                "--enable-feature=native-histograms",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    error = (Path(tmp) / "prometheus.log").read_text(errors="replace")[-800:]
                    raise RuntimeError(f"prometheus did not start: {error}")
                time.sleep(0.3)
            yield Server(url)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, 15)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, 9)
                    process.wait()
