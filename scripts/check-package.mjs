// Checks the package as a user gets it: packs it (prepack builds dist/),
// installs the tarball into scratch projects, with the oldest and the newest
// ioredis and node-redis (`redis`) that redquorum supports, and checks that
//  - the tarball holds the build, and its .d.ts no @internal member;
//  - @arethetypeswrong/cli finds no problem (node16 profile: ESM and CJS);
//  - an ESM project (import) and a CommonJS one (require) see the exports,
//    also those of the node-redlock drop-in (redquorum/node-redlock), and a
//    node-redlock program runs on it from each;
//  - a TypeScript consumer passing its own ioredis and node-redis clients
//    type-checks with moduleResolution node16 (from ESM and CJS) and bundler;
//  - a real lock, its fence, a waiter woken by the release and NextId IDs
//    work through the user's own clients of each version, and through URLs
//    (redquorum's own ioredis, deduplicated with the user's), on a
//    LocalCluster of the tarball's (3 redis-servers on free loopback ports).
// One line per check; exits 1 on any failure. Run: node scripts/check-package.mjs
// (needs redis-server: sh scripts/ensure-redis.sh). KEEP_SCRATCH=1 keeps the
// scratch directory.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const rootPackage = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const tsc = join(root, "node_modules/typescript/bin/tsc");
const attw = join(root, "node_modules/@arethetypeswrong/cli/dist/index.js");

/**
 * The ends of the supported ranges. ioredis: package.json's dependency range
 * ("^5.2.5 || ^6.0.0"; 5.2.5 is the first 5.x that exports the `Redis` class
 * by name). node-redis (`redis`): 4.0.1 up to 5.x. 4.0.0 allowed
 * @node-redis/client 1.0.0, which throws from its socket handler on a
 * message for a channel just unsubscribed (fixed in 1.0.1); 6.x talks RESP3
 * by default, where CONFIG GET replies are objects that redquorum does not
 * read yet (NextId's durability check fails; `RESP: 2` clients work).
 * The oldest set pins redis 4.0.1's own dependencies to their lowest versions.
 */
const matrix = [
  {
    name: "oldest",
    dependencies: { ioredis: "5.2.5", redis: "4.0.1" },
    overrides: {
      "@node-redis/client": "1.0.1",
      "@node-redis/json": "1.0.1",
      "@node-redis/search": "1.0.1",
      "@node-redis/time-series": "1.0.0",
    },
  },
  { name: "newest", dependencies: { ioredis: "6.0.0", redis: "5.12.1" }, overrides: {} },
];

const startedAt = performance.now();
const failures = [];
const scratch = mkdtempSync(join(tmpdir(), "redquorum-check-package-"));

/** One line per check ("ok" or "FAIL", name, detail); a failure's output tail follows it, indented. */
function report(ok, name, detail = "") {
  console.log(`${ok ? "ok  " : "FAIL"}  ${name}${detail ? `: ${detail}` : ""}`);
  if (!ok) failures.push(name);
  return ok;
}

/** Runs a command; returns its output, or throws with the output's tail. */
function run(command, args, options = {}) {
  const result = spawnSync(command, args, {
    cwd: options.cwd ?? root,
    encoding: "utf8",
    timeout: options.timeoutMs ?? 120_000,
    env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0", ...options.env },
    maxBuffer: 64 * 1024 * 1024,
  });
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
  if (result.error || result.status !== 0) {
    const why = result.error
      ? result.error.message
      : result.signal
        ? `killed by ${result.signal}`
        : `exit ${result.status}`;
    const tail = output.trim().split("\n").slice(-25).join("\n    ");
    throw new Error(`${command} ${args.join(" ")} failed (${why})\n    ${tail}`);
  }
  return output;
}

function check(name, fn) {
  try {
    const detail = fn();
    return report(true, name, typeof detail === "string" ? detail : "");
  } catch (error) {
    return report(false, name, error instanceof Error ? error.message : String(error));
  }
}

// --- scratch projects -----------------------------------------------------
function checkProject({ name, dependencies, overrides }) {
  const dir = join(scratch, name);
  mkdirSync(dir);
  const label = `${name} (ioredis ${dependencies.ioredis}, redis ${dependencies.redis})`;
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify(
      {
        name: `redquorum-check-${name}`,
        private: true,
        // No "type": a CommonJS project; the ESM checks use .mjs / .mts files.
        dependencies: {
          redquorum: `file:${tarball}`,
          ...dependencies,
          "@types/node": rootPackage.devDependencies["@types/node"],
        },
        overrides,
      },
      null,
      2,
    )}\n`,
  );
  for (const [file, text] of Object.entries(projectFiles)) writeFileSync(join(dir, file), text);

  const installed = check(`${label}: npm install of the tarball`, () => {
    run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: dir,
      timeoutMs: 180_000,
    });
    const version = (path) => {
      try {
        return JSON.parse(readFileSync(join(dir, "node_modules", path, "package.json"), "utf8"))
          .version;
      } catch {
        return undefined;
      }
    };
    const nested = version("redquorum/node_modules/ioredis");
    const client = version("@redis/client") ?? version("@node-redis/client");
    return (
      `ioredis ${version("ioredis")} (redquorum's own: ${nested ? `${nested}, nested` : "the same, deduplicated"}), ` +
      `redis ${version("redis")} (client ${client})`
    );
  });
  if (!installed) return;

  check(`${label}: ESM import`, () => run(process.execPath, ["esm.mjs"], { cwd: dir }).trim());
  check(`${label}: CommonJS require`, () =>
    run(process.execPath, ["cjs.cjs"], { cwd: dir }).trim(),
  );
  check(`${label}: a node-redlock program on redquorum/node-redlock, ESM and CommonJS`, () =>
    ["node-redlock.mjs", "node-redlock.cjs"]
      .map(
        (file) =>
          `${file}: ${run(process.execPath, [file], { cwd: dir, timeoutMs: 60_000 }).trim()}`,
      )
      .join("; "),
  );
  check(`${label}: tsc --noEmit, moduleResolution node16 (.mts and .cts)`, () => {
    run(process.execPath, [tsc, "--noEmit", "-p", "tsconfig.node16.json"], { cwd: dir });
  });
  check(`${label}: tsc --noEmit, moduleResolution bundler`, () => {
    run(process.execPath, [tsc, "--noEmit", "-p", "tsconfig.bundler.json"], { cwd: dir });
  });
  check(`${label}: locks, fences, wake-up and NextId on real redis-servers`, () =>
    run(process.execPath, ["runtime.mjs"], { cwd: dir, timeoutMs: 90_000 }).trim(),
  );
  check(`${label}: the installed bin`, () => {
    // What `npx redquorum` runs: the bin link npm made from the tarball.
    const bin = join(dir, "node_modules", ".bin", "redquorum");
    const version = run(bin, ["--version"], { cwd: dir }).trim();
    if (version !== rootPackage.version) throw new Error(`--version printed ${version}`);
    const help = run(bin, ["--help"], { cwd: dir });
    for (const command of ["dev", "init", "status", "id", "lock", "serve"]) {
      if (!help.includes(`\n  ${command}`)) throw new Error(`--help lists no ${command}`);
    }
    return `redquorum --version: ${version}; --help lists dev, init, status, id, lock, serve`;
  });
}

// The consumer's code, type-checked as ESM (.mts), CommonJS (.cts) and for a bundler (.ts).
const consumer = `import { Redis } from "ioredis";
import { createClient } from "redis";
import { type Lock, LocalCluster, NextId, Redlock } from "redquorum";
import NodeRedlock, { ExecutionError, type Lock as NodeRedlockLock } from "redquorum/node-redlock";

export async function main(): Promise<bigint> {
  const cluster: LocalCluster = await LocalCluster.start({ nodeCount: 3, persistence: "none" });
  // The user's own ioredis clients (and a URL redquorum connects itself).
  const redlock = new Redlock([new Redis(), new Redis(6380, "127.0.0.1"), "redis://127.0.0.1:6381"]);
  const lock: Lock = await redlock.acquire(["printer"], 5_000);
  const fence: bigint | undefined = lock.fence;
  await lock.extend(5_000);
  // @ts-expect-error internal: not in the published types
  lock.limitValidity(0);
  await lock.release();
  // The user's own node-redis clients.
  const client = createClient();
  await client.connect();
  const ids = new NextId([client, createClient({ url: "redis://127.0.0.1:6380" }), new Redis(6381)]);
  const id: bigint = await ids.next();
  const mixed = new Redlock([client, new Redis(6380)], { fencing: true });
  await mixed.close();
  // node-redlock's API, from the drop-in, on the user's ioredis clients.
  const dropIn = new NodeRedlock([new Redis(), new Redis(6380)], { retryCount: 0 });
  dropIn.on("error", (error: unknown) => void error);
  let held: NodeRedlockLock = await dropIn.acquire(["printer"], 5_000, { retryJitter: 50 });
  const expires: Date = new Date(held.expiration);
  held = await held.extend(5_000);
  await held.release().catch((error: unknown) => error instanceof ExecutionError);
  const done: string = await dropIn.using(["printer"], 5_000, { retryCount: 1 }, async (signal) => {
    if (signal.aborted) throw signal.error;
    return expires.toISOString();
  });
  await dropIn.quit();
  await ids.close();
  await redlock.close();
  await cluster.stop();
  return (fence ?? 0n) + id;
}
`;

/**
 * node-redlock's README program (acquire, extend, release; using; the
 * try-lock idiom; the error event) with only its import line changed, on a
 * LocalCluster of the tarball's. `kind`: "esm" (import) or "cjs" (require).
 */
function nodeRedlockProgram(kind) {
  const imports =
    kind === "esm"
      ? `import { Redis } from "ioredis";
import { LocalCluster } from "redquorum";
import Redlock, { ResourceLockedError } from "redquorum/node-redlock";
`
      : `const { Redis } = require("ioredis");
const { LocalCluster } = require("redquorum");
const { default: Redlock, ResourceLockedError } = require("redquorum/node-redlock");
`;
  const body = `const deadline = setTimeout(() => {
  console.error("node-redlock program timed out after 45 s");
  process.exit(1);
}, 45_000);
const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "none", init: false });
try {
  const redlock = new Redlock(cluster.urls.map((url) => new Redis(url)), { retryCount: 10 });
  const errors = [];
  redlock.on("error", (error) => {
    if (error instanceof ResourceLockedError) return;
    errors.push(error);
  });
  let lock = await redlock.acquire(["a"], 5000);
  try {
    lock = await lock.extend(5000);
  } finally {
    await lock.release();
  }
  const value = await redlock.using(["a"], 1000, async (signal) => {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    if (signal.aborted) throw signal.error;
    return "kept";
  });
  const held = await redlock.acquire(["b"], 5000);
  let busy = false;
  try {
    await redlock.acquire(["b"], 5000, { retryCount: 0 });
  } catch {
    busy = true;
  }
  await held.release();
  await redlock.quit();
  if (value !== "kept" || !busy) throw new Error("using: " + value + ", busy: " + busy);
  // As node-redlock's read: a bundler renames classes whose names collide.
  const names = [redlock.constructor.name, lock.constructor.name];
  if (names.join() !== "Redlock,Lock") throw new Error("class names: " + names.join());
  // Node errors are told, not thrown (a busy machine may time a node out).
  console.log("acquire, extend, release, using past its duration, try-lock (" + errors.length + " node errors told)");
} finally {
  await cluster.stop();
  clearTimeout(deadline);
}
`;
  return kind === "esm"
    ? imports + body
    : `${imports}(async () => {\n${body}})().catch((error) => {\n  console.error(error);\n  process.exit(1);\n});\n`;
}

const compilerOptions = {
  strict: true,
  noEmit: true,
  target: "ES2022",
  lib: ["ES2022", "ESNext.Disposable"],
  types: ["node"],
  skipLibCheck: false,
};

const projectFiles = {
  "esm.mjs": `import { LocalCluster, NextId, Redlock } from "redquorum";
for (const [name, value] of Object.entries({ Redlock, NextId, LocalCluster })) {
  if (typeof value !== "function") throw new Error(name + " is " + typeof value);
}
console.log("Redlock, NextId, LocalCluster imported");
`,
  "cjs.cjs": `const redquorum = require("redquorum");
const names = ["Redlock", "NextId", "LocalCluster"];
for (const name of names) {
  if (typeof redquorum[name] !== "function") throw new Error(name + " is " + typeof redquorum[name]);
}
console.log(Object.keys(redquorum).length + " exports required, " + names.join(", ") + " among them");
`,
  "node-redlock.mjs": nodeRedlockProgram("esm"),
  "node-redlock.cjs": nodeRedlockProgram("cjs"),
  "consumer.mts": consumer,
  "consumer.cts": consumer,
  "consumer.ts": consumer,
  "tsconfig.node16.json": JSON.stringify({
    compilerOptions: { ...compilerOptions, module: "node16", moduleResolution: "node16" },
    files: ["consumer.mts", "consumer.cts"],
  }),
  "tsconfig.bundler.json": JSON.stringify({
    compilerOptions: { ...compilerOptions, module: "esnext", moduleResolution: "bundler" },
    files: ["consumer.ts"],
  }),
  "runtime.mjs": `import { Redis } from "ioredis";
import { createClient } from "redis";
import { LocalCluster, NextId, Redlock } from "redquorum";

const deadline = setTimeout(() => {
  console.error("runtime check timed out after 60 s");
  process.exit(1);
}, 60_000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
function expect(condition, message) {
  if (!condition) throw new Error(message);
}

// AOF always: NextId reads appendonly/appendfsync through the user's clients.
const cluster = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always" });
const ioredis = cluster.urls.map((url) => new Redis(url));
const nodeRedis = cluster.urls.map((url) => createClient({ url }));
const seen = [];
const failed = [];
try {
  for (const client of [...ioredis, ...nodeRedis]) client.on("error", () => {});
  await Promise.all(nodeRedis.map((client) => client.connect()));
  // Not about node timeouts: not the 50 ms default, which a loaded machine
  // exceeds (an extend failed so in CI at 687ae61, with two cores busy and
  // every write fsynced).
  const nodeTimeoutMs = 1_000;
  for (const [label, nodes] of [["ioredis", ioredis], ["node-redis", nodeRedis], ["urls", cluster.urls]]) {
    const holder = new Redlock(nodes, { nodeTimeoutMs });
    const waiter = new Redlock(nodes, { nodeTimeoutMs });
    const ids = new NextId(nodes, { key: "check:ids:" + label, nodeTimeoutMs });
    try {
      const resource = "check:" + label;
      const first = await holder.acquire([resource], 5_000);
      // Waits for the lock, woken by the release (pub/sub on a duplicate connection).
      const waiting = waiter.acquire([resource], 5_000, { waitMs: 10_000 });
      await sleep(100);
      await first.extend(5_000);
      expect(first.remainingMs() > 4_000, "extend gave " + first.remainingMs() + " ms");
      const released = performance.now();
      await first.release();
      const second = await waiting;
      const wokenMs = performance.now() - released;
      expect(typeof first.fence === "bigint" && second.fence > first.fence,
        "fences " + first.fence + " then " + second.fence);
      await second.release();
      const status = await holder.status();
      expect(status.every((node) => node.reachable && node.appendfsync === "always"),
        "status() " + JSON.stringify(status.map((n) => ({ reachable: n.reachable, appendfsync: n.appendfsync, error: n.error }))));
      await ids.init();
      const a = await ids.next();
      const [b, c] = await ids.nextBatch(2);
      expect(a < b && b < c, "ids " + a + ", " + b + ", " + c);
      seen.push(label + " (fences " + first.fence + "<" + second.fence + ", woken in " +
        wokenMs.toFixed(0) + " ms, ids " + a + ".." + c + ")");
    } catch (error) {
      failed.push(label + ": " + (error instanceof Error ? error.message : String(error)));
    } finally {
      await Promise.all([holder.close(), waiter.close(), ids.close()]);
    }
  }
} finally {
  for (const client of ioredis) client.disconnect();
  for (const client of nodeRedis) {
    if (typeof client.destroy === "function") client.destroy();
    else await client.disconnect().catch(() => {});
  }
  await cluster.stop();
  clearTimeout(deadline);
}
console.log(seen.join("; "));
if (failed.length > 0) {
  console.error(failed.join("; "));
  process.exit(1);
}
`,
};

// --- pack ---------------------------------------------------------------
let tarball;
check("npm pack (prepack builds dist/)", () => {
  const dest = join(scratch, "pack");
  mkdirSync(dest);
  run("npm", ["pack", "--pack-destination", dest, "--loglevel=error"], { timeoutMs: 180_000 });
  const [file] = readdirSync(dest).filter((name) => name.endsWith(".tgz"));
  if (!file) throw new Error("npm pack made no .tgz");
  tarball = join(dest, file);
  return file;
});

if (tarball) {
  check("tarball contents", () => {
    const files = run("tar", ["-tzf", tarball])
      .split("\n")
      .filter(Boolean)
      .map((path) => path.replace(/^package\//, ""));
    const needed = [
      "package.json",
      "README.md",
      "LICENSE",
      "CHANGELOG.md",
      "dist/index.js",
      "dist/index.cjs",
      "dist/index.d.ts",
      "dist/index.d.cts",
      "dist/node-redlock.js",
      "dist/node-redlock.cjs",
      "dist/node-redlock.d.ts",
      "dist/node-redlock.d.cts",
    ];
    const missing = needed.filter((path) => !files.includes(path));
    if (missing.length > 0) throw new Error(`missing ${missing.join(", ")}`);
    const stray = files.filter((path) => /^(src|test|examples|scripts|bench)\//.test(path));
    if (stray.length > 0) throw new Error(`ships ${stray.slice(0, 5).join(", ")}`);
    return `${files.length} files`;
  });

  check("public .d.ts: no @internal member, no import of ioredis' types", () => {
    const extract = join(scratch, "extract");
    mkdirSync(extract);
    run("tar", ["-xzf", tarball, "-C", extract]);
    const problems = [];
    const declarations = readdirSync(join(extract, "package/dist")).filter((name) =>
      /\.d\.c?ts$/.test(name),
    );
    for (const name of declarations) {
      const text = readFileSync(join(extract, "package/dist", name), "utf8");
      for (const member of ["extendLock(", "releaseLock(", "limitValidity(", "onValidityChange"]) {
        if (text.includes(member)) problems.push(`${name} declares ${member.replace("(", "")}`);
      }
      if (/from ['"](ioredis|redis|@redis\/client)['"]/.test(text)) {
        problems.push(`${name} imports a Redis client's types`);
      }
    }
    if (problems.length > 0) throw new Error(problems.join("; "));
  });

  // Profile node16: node16 resolution from ESM and from CJS, and bundler
  // (node10 is checked by "strict" only). No rule is ignored.
  check("attw --profile node16", () => {
    run(
      process.execPath,
      [attw, tarball, "--profile", "node16", "--no-definitely-typed", "--no-color", "--no-emoji"],
      { timeoutMs: 120_000 },
    );
    return "no problems";
  });

  for (const entry of matrix) checkProject(entry);
}

// --- end ------------------------------------------------------------------
if (process.env.KEEP_SCRATCH) console.log(`scratch kept in ${scratch}`);
else rmSync(scratch, { recursive: true, force: true });
const seconds = ((performance.now() - startedAt) / 1000).toFixed(0);
if (failures.length > 0) {
  console.log(`check-package: ${failures.length} check(s) failed in ${seconds} s`);
  process.exit(1);
}
console.log(`check-package: all checks passed in ${seconds} s`);
