#!/bin/bash
# A/B benchmark of two commits of redquorum, redquorum cells only (the
# workloads of bench/locks.mjs and bench/ids.mjs, bench/ab/cells.mjs).
# By default a fresh process and fresh 5-node clusters per build and run,
# before/after alternating (ABBA…). INTERLEAVED=1: both builds in one
# process on the same clusters, alternating cell by cell (interleaved.mjs):
# pairs seconds apart, for a machine whose speed drifts between runs.
#   bench/ab/run-ab.sh <before-commit> <after-commit>     (from the repository root)
#   REPS=8 SECS=4 CELLS=L1,L64,LC,F64,I1,I64 bench/ab/run-ab.sh 42e610f 5853596
#   INTERLEAVED=1 REPS=10 SECS=2 CELLS=L1,LC bench/ab/run-ab.sh 512fdf8 c5399cf
set -euo pipefail
before=$1; after=$2
root=$(pwd); work=$(mktemp -d); runs="$work/runs"; mkdir -p "$runs"
REPS=${REPS:-8}; SECS=${SECS:-4}
for v in before after; do
  rev=${!v}
  git worktree add -q "$work/$v" "$rev"
  ln -s "$root/node_modules" "$work/$v/node_modules"
  (cd "$work/$v" && npx tsup >/dev/null)
done
if [[ -n "${INTERLEAVED:-}" ]]; then
  node "$root/bench/ab/interleaved.mjs" --before "$work/before" --after "$work/after" \
    --seconds "$SECS" --reps "$REPS" ${CELLS:+--cells $CELLS} --out "$runs"
else
  for r in $(seq 1 "$REPS"); do
    if (( r % 2 )); then order="before after"; else order="after before"; fi
    for v in $order; do
      echo "rep $r $v $(uptime | sed 's/.*load average: //')"
      node "$root/bench/ab/ab.mjs" --dir "$work/$v" --seconds "$SECS" ${CELLS:+--cells $CELLS} --json "$runs/$v-$r.json"
    done
  done
fi
node "$root/bench/ab/analyze.mjs" "$runs"
git worktree remove --force "$work/before"; git worktree remove --force "$work/after"
