/**
 * `npm run docs:check` (scripts/check-links.mjs), run as CI runs it, on
 * Markdown files written here: a link to a missing file or to a heading
 * that is not there fails it, naming the file and line; links in code,
 * links out of the repository and headings slugged as GitHub slugs them
 * pass.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";

const script = resolve("scripts/check-links.mjs");

function check(...files: string[]): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [script, ...files], { encoding: "utf8" });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe("docs:check", () => {
  let dir: string;
  let guide: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "redquorum-links-"));
    mkdirSync(join(dir, "docs"));
    guide = join(dir, "docs", "guide.md");
    writeFileSync(
      guide,
      [
        "# Guide",
        "## `redlock.acquire(resources, ttlMs)` → `Lock`",
        "## A node restarted",
        "## A node restarted",
        '<a id="custom"></a>',
        "",
      ].join("\n"),
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("passes links to files and headings that exist, and ignores code and outside links", () => {
    const readme = join(dir, "README.md");
    writeFileSync(
      readme,
      [
        "[guide](docs/guide.md) [acquire](docs/guide.md#redlockacquireresources-ttlms--lock)",
        "[second](docs/guide.md#a-node-restarted-1) [custom](docs/guide.md#custom)",
        "[out](https://example.com/missing) [self](#top)",
        "# Top",
        "`[not a link](nowhere.md)`",
        "```md",
        "[in a fence](nowhere.md)",
        "```",
      ].join("\n"),
    );
    const { status, output } = check(readme);
    assert.equal(status, 0, output);
    assert.match(output, /6 links in 1 files, none broken/);
  });

  it("fails on a missing file, naming the file and line", () => {
    const readme = join(dir, "missing.md");
    writeFileSync(readme, "fine\n[gone](docs/gone.md)\n");
    const { status, output } = check(readme);
    assert.equal(status, 1, output);
    assert.match(output, /missing\.md:2: docs\/gone\.md: no such file/);
  });

  it("fails on an anchor that no heading of the target has", () => {
    const readme = join(dir, "anchor.md");
    writeFileSync(
      readme,
      "[restart](docs/guide.md#a-node-rebooted)\n[third](docs/guide.md#a-node-restarted-2)\n",
    );
    const { status, output } = check(readme);
    assert.equal(status, 1, output);
    assert.match(output, /anchor\.md:1: .*no heading #a-node-rebooted/);
    assert.match(output, /anchor\.md:2: .*no heading #a-node-restarted-2/);
    assert.match(output, /2 broken link\(s\)/);
  });
});
