#!/bin/bash
# A/B benchmark of two commits of redquorum, redquorum cells only (same cell
# code as bench/locks.mjs and bench/ids.mjs), before/after alternating
# (ABBA…), a fresh process and fresh 5-node clusters per run.
#   bench/ab/run-ab.sh <before-commit> <after-commit>     (from the repository root)
#   REPS=8 SECS=4 CELLS=L1,L64,LC,F64,I1,I64 bench/ab/run-ab.sh 42e610f 5853596
set -euo pipefail
before=$1; after=$2
root=$(pwd); work=$(mktemp -d); runs="$work/runs"; mkdir -p "$runs"
REPS=${REPS:-8}; SECS=${SECS:-4}
for v in before after; do
  rev=${!v}
  git worktree add -q "$work/$v" "$rev"
  ln -s "$root/node_modules" "$work/$v/node_modules"
  (cd "$work/$v" && npm ci --prefix bench --no-audit --no-fund >/dev/null && npx tsup >/dev/null)
done
for r in $(seq 1 "$REPS"); do
  if (( r % 2 )); then order="before after"; else order="after before"; fi
  for v in $order; do
    echo "rep $r $v $(uptime | sed 's/.*load average: //')"
    node "$root/bench/ab/ab.mjs" --dir "$work/$v" --seconds "$SECS" ${CELLS:+--cells $CELLS} --json "$runs/$v-$r.json"
  done
done
node "$root/bench/ab/analyze.mjs" "$runs"
git worktree remove --force "$work/before"; git worktree remove --force "$work/after"
