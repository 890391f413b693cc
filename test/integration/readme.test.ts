import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { buildSync } from "esbuild";
import { exitCodeTable } from "../../src/cli/exit-codes.js";
import { LocalCluster } from "../../src/index.js";
import { finished, startCli } from "../helpers/cli.js";

const entry = resolve("src/index.ts");

/** The fenced blocks of `language` in a Markdown file's section that starts with `heading`, in order. */
function blocksOf(file: string, heading: string, language: string): string[] {
  const text = readFileSync(file, "utf8");
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `${file} has a section "${heading}"`);
  const end = text.indexOf("\n## ", start + heading.length + 2);
  const section = text.slice(start, end < 0 ? undefined : end);
  const fence = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, "g");
  return [...section.matchAll(fence)].map((match) => match[1]!);
}

/**
 * This checkout's source as CommonJS, as the package's `require` entry is
 * built (esbuild, what tsup uses; dependencies left to node_modules):
 * node 20 cannot `require()` the ES module source.
 */
function commonJsEntry(dir: string): string {
  const outfile = join(dir, "redquorum.cjs");
  buildSync({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    packages: "external",
    outfile,
    logLevel: "error",
  });
  return outfile;
}

/**
 * Runs `code` as a file of its own, with "redquorum" resolving to this
 * checkout's source (an ES module, or its CommonJS build for `require`).
 * The file lives inside the repository, so that the snippet's other
 * imports (ioredis) resolve as in a user's project.
 */
function run(
  code: string,
  dir: string,
  extension: "mts" | "cjs",
): { status: number | null; output: string } {
  const file = join(dir, `snippet-${Math.random().toString(36).slice(2)}.${extension}`);
  const source =
    extension === "cjs"
      ? code.replaceAll('require("redquorum")', `require(${JSON.stringify(commonJsEntry(dir))})`)
      : code.replaceAll('from "redquorum"', `from ${JSON.stringify(entry)}`);
  writeFileSync(file, source);
  const args = extension === "cjs" ? [file] : ["--import", "tsx", file];
  const result = spawnSync(process.execPath, args, { encoding: "utf8", timeout: 60_000 });
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` };
}

/** The ports a snippet names: `[7001, …]` and every `127.0.0.1:<port>`. */
function portsIn(text: string): number[] {
  const list = text.match(/\[(\d+(?:, \d+)*)\]\.map/)?.[1]?.split(", ") ?? [];
  const urls = [...text.matchAll(/127\.0\.0\.1:(\d+)/g)].map((match) => match[1]!);
  return [...new Set([...list, ...urls].map(Number))].sort();
}

/**
 * The README's Quick start as a newcomer follows it: the shell steps
 * initialise five brand-new redis-servers, then the ESM and the CommonJS
 * program each take a lock, fence a write and take IDs, printing what the
 * README says they print. Only the ports change (the test's nodes are on
 * free ports, not 7001–7005).
 */
describe("the README's Quick start, run as written", () => {
  const readme = "README.md";
  let dir: string;
  let fresh: LocalCluster;
  let portMap: Map<number, number>;

  const withTestPorts = (code: string) =>
    code.replace(/\b700[1-5]\b/g, (port) => String(portMap.get(Number(port))));

  before(async () => {
    mkdirSync(".tmp", { recursive: true });
    dir = mkdtempSync(join(resolve(".tmp"), "readme-"));
    // Plain new servers, as a user starts them: no marker, no counter.
    fresh = await LocalCluster.start({ nodeCount: 5, persistence: "aof-always", init: false });
    portMap = new Map(fresh.nodes.map((node, i) => [7001 + i, node.port]));
  });
  after(async () => {
    await fresh.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("names the same five ports in the servers it starts, the node list and both programs", () => {
    const [servers = "", setup = ""] = blocksOf(readme, "## Quick start", "sh");
    const programs = blocksOf(readme, "## Quick start", "js");
    const expected = [7001, 7002, 7003, 7004, 7005];
    assert.deepEqual(
      servers
        .match(/for port in ([\d ]+);/)?.[1]
        ?.trim()
        .split(" ")
        .map(Number),
      expected,
    );
    assert.deepEqual(portsIn(setup), expected);
    assert.equal(programs.length, 2, "an ESM and a CommonJS program");
    for (const program of programs) assert.deepEqual(portsIn(program), expected);
  });

  it("its setup commands initialise brand-new nodes for locks and IDs", async () => {
    const [, setup = ""] = blocksOf(readme, "## Quick start", "sh");
    const commands = setup
      .split("\n")
      .map((line) => line.replace(/#.*$/, "").trim())
      .filter((line) => line.startsWith("npx redquorum "));
    assert.deepEqual(commands, ["npx redquorum init", "npx redquorum id init"]);
    for (const command of commands) {
      const args = command.split(/\s+/).slice(2);
      // Not about node timeouts: a loaded machine misses id init's 200 ms.
      const env = { REDQUORUM_NODES: fresh.urls.join(","), REDQUORUM_NODE_TIMEOUT: "1s" };
      const result = await finished(startCli(args, env), 60_000);
      assert.equal(result.code, 0, `${command}: ${result.stderr}`);
    }
  });

  let firstIds: bigint[] = [];

  it("the ES module locks, fences a write and takes IDs, and prints what the README says", () => {
    const esm = blocksOf(readme, "## Quick start", "js").find((code) => code.includes("import {"));
    assert.ok(esm, "the Quick start has an ES module");
    const { status, output } = run(withTestPorts(esm), dir, "mts");
    assert.equal(status, 0, output);
    // "The first run prints `fencing token 1, written: true` and `IDs: 1, 2, 3`".
    assert.match(output, /^fencing token 1, written: true$/m, output);
    assert.match(output, /^IDs: 1, 2, 3$/m, output);
    firstIds = [1n, 2n, 3n];
  });

  it("the CommonJS program does the same, with higher numbers", () => {
    const cjs = blocksOf(readme, "## Quick start", "js").find((code) => code.includes("require("));
    assert.ok(cjs, "the Quick start has a CommonJS program");
    const { status, output } = run(withTestPorts(cjs), dir, "cjs");
    assert.equal(status, 0, output);
    const fence = output.match(/^fencing token (\d+), written: true$/m)?.[1];
    assert.ok(fence && BigInt(fence) > 1n, output);
    const ids =
      output
        .match(/^IDs: (.*)$/m)?.[1]
        ?.split(", ")
        .map(BigInt) ?? [];
    assert.equal(ids.length, 3, output);
    assert.ok(ids[0]! > firstIds.at(-1)! && ids[1]! > ids[0]! && ids[2]! > ids[1]!, output);
  });
});

describe("Getting started's LocalCluster block", () => {
  it("runs as written", () => {
    mkdirSync(".tmp", { recursive: true });
    const dir = mkdtempSync(join(resolve(".tmp"), "guide-"));
    try {
      const [snippet] = blocksOf(
        "docs/getting-started.md",
        "## 9. In your tests: `LocalCluster`",
        "ts",
      );
      assert.ok(snippet?.includes("LocalCluster.start"), "the guide has a LocalCluster snippet");
      const { status, output } = run(`${snippet}\nconsole.log("local: done");\n`, dir, "mts");
      assert.equal(status, 0, output);
      assert.match(output, /local: done/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the CLI guide's exit-code table", () => {
  /** Markdown and plain text alike: no code spans, escaped pipes as pipes, ASCII minus. */
  const plain = (text: string) =>
    text.replaceAll("`", "").replaceAll("\\|", "|").replaceAll("−", "-").trim();

  it("is the table --help prints: the same codes, the same meanings, in order", () => {
    const lines = readFileSync("docs/cli.md", "utf8").split("\n");
    const header = lines.findIndex((line) => line.startsWith("| exit code |"));
    assert.ok(header >= 0, "the CLI guide has an exit-code table");
    const rows: [string, string][] = [];
    for (const line of lines.slice(header + 2)) {
      if (!line.startsWith("|")) break;
      // Cells split on pipes not escaped as \|.
      const [code = "", meaning = ""] = line.slice(1, -1).split(/(?<!\\)\|/);
      rows.push([code.trim(), plain(meaning)]);
    }
    assert.deepEqual(
      rows,
      exitCodeTable.map(([code, meaning]) => [code, plain(meaning)]),
    );
  });
});
