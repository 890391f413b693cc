// The summary of the lock and ID benchmarks, in one run: one worker (bench/cycle-cost.mjs),
// independent contenders on one resource (bench/contention.mjs) and 16 ID
// processes (bench/ids.mjs), each benchmark in a fresh process on its own
// fresh 5 local nodes, one after the other. redquorum beside node-redlock
// and the floors of each case, measured in the same run:
//   - the bare floor: SET NX on every node, then a compare-and-delete;
//   - the checked floor: the bare floor with the commands redquorum's checks
//     send (bench/cycle-cost.mjs);
//   - the fair floor: a ring of contenders fixed in advance, each grant
//     handed to the next (bench/floor.mjs);
//   - the queue floor: a fair queue on every node and nothing else
//     (bench/queue-floor.mjs);
//   - the handover floor: the queue floor whose release hands the key to
//     the head itself, with no round of the heir's own
//     (bench/handover-floor.mjs): what the fair-floor goals would allow a
//     queue of processes that come and go at best.
// Prints the README's table, then each of the project's performance goals
// with what this run measured, and writes bench/results/summary-<time>.json.
//
//   npm run bench -- summary --seconds 2 --reps 5
//   (or, built: node bench/summary.mjs --seconds 2 --reps 5)
//   (the contention cells run twice as long: a grant there takes several ms;
//   each after 6 s of warm-up in its fresh processes)
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchArgs, fmt, writeResults } from "./report.mjs";

const { cellMs, reps, json } = benchArgs();
const seconds = String(cellMs / 1_000);
const stamp = new Date().toISOString().replace(/[:.]/g, "-");

/** Runs one benchmark (its tables go to this terminal) and returns its JSON summary. */
function run(script, args) {
  const file = join(
    tmpdir(),
    `redquorum-summary-${process.pid}-${script.replace(/\W/g, "-")}.json`,
  );
  const result = spawnSync(process.execPath, [script, ...args, "--json", file], {
    stdio: "inherit",
  });
  if (result.status !== 0) {
    console.error(`${script} failed (exit ${result.status}): no summary`);
    process.exit(result.status ?? 1);
  }
  const { summary } = JSON.parse(readFileSync(file, "utf8"));
  rmSync(file, { force: true });
  return summary;
}

const oneWorker = run("bench/cycle-cost.mjs", ["--seconds", seconds, "--reps", String(reps)]);
const contention = run("bench/contention.mjs", [
  "--seconds",
  String((2 * cellMs) / 1_000),
  "--warmup",
  "6",
  "--reps",
  String(reps),
  "--only",
  "8x10,64x10",
  "--libraries",
  "redquorum;node-redlock, caller retries;fair floor;queue floor;handover floor",
]);
const ids = run("bench/ids.mjs", [
  "--seconds",
  seconds,
  "--reps",
  String(reps),
  "--workload",
  "16 processes",
]);

const cycle = (name) => {
  const row = oneWorker.find((r) => r.cycle === name);
  if (!row) throw new Error(`cycle-cost: no ${name} row`);
  return row;
};
const cell = (workload, library) => {
  const row = contention.find((r) => r.workload === workload && r.library === library);
  if (!row) throw new Error(`contention: no ${library} row at ${workload}`);
  return row;
};
const idRow = (contender) => {
  const row = ids.find((r) => r.contender === contender);
  if (!row) throw new Error(`ids: no ${contender} row`);
  return row;
};

const ours = cycle("redquorum");
const unfenced = cycle("redquorum, fencing off");
const redlock = cycle("node-redlock 5.0.0-beta.2");
const checked = cycle("checked floor");
const x = (n) => `${fmt(n, 2)}×`;
const rows = [];
const goal = (name, measured, met) => rows.push({ goal: name, measured, met });

goal(
  "1 worker: ≥ 0.9× node-redlock's cycles/s",
  `${x(ours.perSecond / redlock.perSecond)} (${fmt(ours.perSecond)} against ${fmt(redlock.perSecond)}); the checked floor ${x(checked.perSecond / redlock.perSecond)}`,
  ours.perSecond >= 0.9 * redlock.perSecond,
);
goal(
  "1 worker, fencing off: ≥ 1.0× node-redlock's cycles/s",
  `${x(unfenced.perSecond / redlock.perSecond)} (${fmt(unfenced.perSecond)})`,
  unfenced.perSecond >= redlock.perSecond,
);
goal(
  "1 worker: Redis CPU per cycle ≤ 1.2× node-redlock's",
  `${x(ours.redisCpuUs / redlock.redisCpuUs)} (${fmt(ours.redisCpuUs)} against ${fmt(redlock.redisCpuUs)} µs, 5 processes); ` +
    `inside commands ${x(ours.redisUs / redlock.redisUs)}; the checked floor ${x(checked.redisCpuUs / redlock.redisCpuUs)}`,
  ours.redisCpuUs <= 1.2 * redlock.redisCpuUs,
);
const at64 = cell("64x10", "redquorum");
const redlock64 = cell("64x10", "node-redlock, caller retries");
goal(
  "64 independent contenders: ≥ 5× node-redlock, Jain ≥ 0.95, every contender granted",
  `${x(at64.perSecond / redlock64.perSecond)} (${fmt(at64.perSecond)} against ${fmt(redlock64.perSecond)} grants/s), Jain ${fmt(at64.jain, 2)}, fewest grants ${fmt(at64.grantsMin)}`,
  at64.perSecond >= 5 * redlock64.perSecond && at64.jain >= 0.95 && at64.grantsMin > 0,
);
for (const [workload, ratio] of [
  ["8x10", 0.9],
  ["64x10", 0.8],
]) {
  const mine = cell(workload, "redquorum");
  const fair = cell(workload, "fair floor");
  const queue = cell(workload, "queue floor");
  const handover = cell(workload, "handover floor");
  goal(
    `${workload.split("x")[0]} contenders: ≥ ${ratio}× the fair floor's grants/s`,
    `${x(mine.perSecond / fair.perSecond)} (${fmt(mine.perSecond)} against ${fmt(fair.perSecond)}); ` +
      `the queue floor ${x(queue.perSecond / fair.perSecond)}, redquorum ${x(mine.perSecond / queue.perSecond)} of it; ` +
      `the handover floor ${x(handover.perSecond / fair.perSecond)}`,
    mine.perSecond >= ratio * fair.perSecond,
  );
}
const at8 = cell("8x10", "redquorum");
const fair8 = cell("8x10", "fair floor");
const queue8 = cell("8x10", "queue floor");
goal(
  "8 contenders: Redis commands per grant ≤ 2× the fair floor's",
  `${fmt(at8.commandsPerGrant)} against ${fmt(fair8.commandsPerGrant)} (${x(at8.commandsPerGrant / fair8.commandsPerGrant)}); the queue floor ${fmt(queue8.commandsPerGrant)}, the handover floor ${fmt(cell("8x10", "handover floor").commandsPerGrant)}`,
  at8.commandsPerGrant <= 2 * fair8.commandsPerGrant,
);
const clock = idRow("range, clock proposals");
const dense = idRow("range");
const seed = idRow("seed");
goal(
  "IDs, 16 processes: ≥ 2× the seed algorithm (IDs/s)",
  `clock proposals ${x(clock.perSecond / seed.perSecond)} (${fmt(clock.perSecond)} against ${fmt(seed.perSecond)}); dense proposals ${x(dense.perSecond / seed.perSecond)}`,
  clock.perSecond >= 2 * seed.perSecond,
);

// The README's table: each case beside node-redlock and its floor.
const floor = cycle("floor");
const redlockAt = (workload) => cell(workload, "node-redlock, caller retries");
const withJain = (row) => `${fmt(row.perSecond)} (${fmt(row.jain, 2)})`;
const contended = (workload, label) => {
  const mine = cell(workload, "redquorum");
  const theirs = redlockAt(workload);
  const fair = cell(workload, "fair floor");
  const queue = cell(workload, "queue floor");
  return [
    label,
    withJain(mine),
    withJain(theirs),
    `fair ${fmt(fair.perSecond)}, queue ${fmt(queue.perSecond)}`,
    x(mine.perSecond / theirs.perSecond),
    `${x(mine.perSecond / fair.perSecond)}, ${x(mine.perSecond / queue.perSecond)}`,
  ];
};
/** A one-worker row: `row`'s `field` beside node-redlock's (when `beside`) and the bare and checked floors'. */
const workerRow = (label, row, field, beside) => [
  label,
  fmt(row[field]),
  beside ? fmt(redlock[field]) : "",
  beside ? `bare ${fmt(floor[field])}, checked ${fmt(checked[field])}` : "",
  x(row[field] / redlock[field]),
  `${x(row[field] / floor[field])}, ${x(row[field] / checked[field])}`,
];
const table = [
  [
    "workload (5 nodes)",
    "redquorum",
    "node-redlock v5",
    "floor",
    "redquorum ÷ node-redlock",
    "redquorum ÷ floor",
  ],
  workerRow("1 worker, uncontended (cycles/s)", ours, "perSecond", true),
  workerRow("the same, fencing off", unfenced, "perSecond", false),
  workerRow("1 worker, Redis CPU per cycle (µs, 5 servers)", ours, "redisCpuUs", true),
  contended("8x10", "8 contenders, 1 resource (grants/s, Jain)"),
  contended("64x10", "64 contenders, 1 resource (grants/s, Jain)"),
  [
    "16 ID processes (IDs/s)",
    `${fmt(clock.perSecond)} (clock proposals)`,
    "",
    `seed algorithm ${fmt(seed.perSecond)}`,
    "",
    x(clock.perSecond / seed.perSecond),
  ],
];
console.log("\n## The README's table\n");
for (const [i, columns] of table.entries()) {
  console.log(`| ${columns.join(" | ")} |`);
  if (i === 0) console.log(`|${columns.map(() => "---").join("|")}|`);
}

console.log("\n## Goals, one run\n");
console.log("| goal | measured | met |\n|---|---|---|");
for (const row of rows)
  console.log(`| ${row.goal} | ${row.measured} | ${row.met ? "yes" : "no"} |`);
writeResults({
  setup: "one worker, 8 and 64 contenders in child processes, 16 ID processes; 5 local nodes each",
  file: json ?? `bench/results/summary-${stamp}.json`,
  cellMs,
  reps,
  summary: { goals: rows, table },
  results: { oneWorker, contention, ids },
});
