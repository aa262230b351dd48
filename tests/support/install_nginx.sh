#!/bin/sh
# nginx, the router's real TLS front in tests/hyperpod/test_router_proxy.py and the wake
# proxy's TCP pass-through in tests/hyperpod/test_wake_proxy.py: Debian's `nginx-light`
# package (Debian 12: nginx 1.22) and its stream module, `libnginx-mod-stream` (a dynamic
# module in Debian). Run by `make nginx` when either is missing; needs root (apt-get).
# Without them those tests skip with the reason.
set -eu
if { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } &&
    [ -f /usr/lib/nginx/modules/ngx_stream_module.so ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "error: nginx is missing and installing it needs root: apt-get install nginx-light libnginx-mod-stream" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends nginx-light libnginx-mod-stream >/dev/null
# The package starts its own server where it can; the tests run their own.
/usr/sbin/nginx -s stop >/dev/null 2>&1 || true
/usr/sbin/nginx -v
