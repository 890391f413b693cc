#!/bin/sh
# Does libfaketime work with this redis-server? (clock.ts records the answer
# on the machine the fault suite was built on: no, redis-server hangs at
# start.) Needs Debian's `faketime` package; prints "works" or "fails".
set -u
lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
server=${REDQUORUM_REDIS_SERVER:-redis-server}
if [ ! -e "$lib" ]; then echo "no libfaketime at $lib (apt-get install -y faketime)"; exit 2; fi
dir=$(mktemp -d)
port=$(( 40000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
# The preload goes on redis-server only (timeout itself must not load it).
timeout -s KILL 5 env LD_PRELOAD="$lib" FAKETIME="+1h" "$server" --port "$port" --bind 127.0.0.1 \
  --save '' --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
sleep 2
if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
  echo "works: redis TIME $(redis-cli -p "$port" time | head -1), real $(date +%s)"
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1
  status=0
else
  echo "fails: redis-server did not answer PING under libfaketime; its output:"
  head -c 400 "$dir/log"; echo
  status=1
fi
wait
rm -rf "$dir"
exit $status
