import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { exitCodeTable } from "../../src/cli/exit-codes.js";
import { LocalCluster } from "../../src/index.js";

const entry = resolve("src/index.ts");

/** The ```ts blocks of the README's Quick start, in order. */
function quickStartBlocks(): string[] {
  const readme = readFileSync("README.md", "utf8");
  const section = readme.slice(readme.indexOf("## Quick start"), readme.indexOf("## API"));
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

/** Runs `code` as a module of its own, importing this checkout for "redquorum". */
function run(code: string, dir: string): { status: number | null; output: string } {
  const file = join(dir, `snippet-${Math.random().toString(36).slice(2)}.mts`);
  writeFileSync(file, code.replaceAll('from "redquorum"', `from ${JSON.stringify(entry)}`));
  const result = spawnSync(process.execPath, ["--import", "tsx", file], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` };
}

/**
 * Issue 10, item 1: the README's Quick start, copied verbatim, takes a lock
 * on brand-new redis-servers (started seconds ago, never used), and the
 * LocalCluster snippet runs as written.
 */
describe("the README's Quick start, run as written", () => {
  let dir: string;
  let fresh: LocalCluster;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "redquorum-readme-"));
    // Plain new servers, as a user would start them: no marker on them.
    fresh = await LocalCluster.start({ nodeCount: 5, persistence: "none", init: false });
  });
  after(async () => {
    await fresh.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the Redlock snippet takes and releases a lock on five brand-new nodes", () => {
    const snippet = quickStartBlocks()[0] ?? "";
    assert.ok(snippet.includes("new Redlock(["), "the Quick start has a Redlock snippet");
    // Only the addresses change: the snippet's five URLs become the local nodes'.
    const urls = snippet.match(/"redis:\/\/[^"]+"/g) ?? [];
    assert.equal(urls.length, 5);
    let code = snippet;
    urls.forEach((url, i) => {
      code = code.replace(url, JSON.stringify(fresh.urls[i]));
    });
    code += '\nconsole.log("quick start: done");\n';
    const { status, output } = run(code, dir);
    assert.equal(status, 0, output);
    assert.match(output, /quick start: done/);
  });

  it("the LocalCluster snippet runs as written", () => {
    const [, snippet] = quickStartBlocks();
    assert.ok(
      snippet?.includes("LocalCluster.start"),
      "the Quick start has a LocalCluster snippet",
    );
    const { status, output } = run(`${snippet}\nconsole.log("local: done");\n`, dir);
    assert.equal(status, 0, output);
    assert.match(output, /local: done/);
  });
});

describe("the README's exit-code table", () => {
  /** Markdown and plain text alike: no code spans, escaped pipes as pipes, ASCII minus. */
  const plain = (text: string) =>
    text.replaceAll("`", "").replaceAll("\\|", "|").replaceAll("−", "-").trim();

  it("is the table --help prints: the same codes, the same meanings, in order", () => {
    const lines = readFileSync("README.md", "utf8").split("\n");
    const header = lines.findIndex((line) => line.startsWith("| exit code |"));
    assert.ok(header >= 0, "the README has an exit-code table");
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
