#!/bin/sh
# Makes sure redis-server is installed: the tests, the demo and the benchmark
# start their own redis-server processes on free loopback ports.
set -eu
if [ -n "${REDQUORUM_REDIS_SERVER:-}" ] && [ -x "$REDQUORUM_REDIS_SERVER" ]; then exit 0; fi
if command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "redis-server is missing: installing Debian's redis-server package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
redis-server is missing, and this script can only install it as root with apt-get.
Install it yourself, then run the command again:
  Debian/Ubuntu:  sudo apt-get install -y redis-server
  macOS:          brew install redis
or point REDQUORUM_REDIS_SERVER at a redis-server binary (Redis 6.2 or later).
MSG
exit 1
