#!/bin/sh
# promtool, the real PromQL engine of the SageMaker rehearsal: Debian's `prometheus` package
# (Debian 12: Prometheus 2.42). Run by `make promtool` when promtool is not on PATH; needs root
# (apt-get). Fails with one clear line when it cannot install it: the rehearsal never skips the
# PromQL step silently.
set -eu
# Both from the one package: promtool (test rules, queries) and the server it queries for
# native histograms (rehearsal/sagemaker/native.py).
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "error: promtool is missing and installing it needs root: apt-get install prometheus" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || {
    echo "error: Debian's prometheus package installed no promtool/prometheus on PATH" >&2
    exit 2
}
promtool --version | head -1
