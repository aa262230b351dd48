#!/bin/sh
# nginx, the router's real TLS front in tests/hyperpod/test_router_proxy.py: Debian's
# `nginx-light` package (Debian 12: nginx 1.22). Run by `make nginx` when nginx is not
# installed; needs root (apt-get). Without it those tests skip with the reason.
set -eu
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "error: nginx is missing and installing it needs root: apt-get install nginx-light" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
# The package starts its own server where it can; the tests run their own.
/usr/sbin/nginx -s stop >/dev/null 2>&1 || true
/usr/sbin/nginx -v
