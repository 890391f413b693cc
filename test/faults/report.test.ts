import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { HistoryBuilder } from "./checkers/history-builder.js";
import { checkMutualExclusion } from "./checkers/index.js";
import { escapeHtml, ticks } from "./report/svg.js";
import { renderReport, writeReport } from "./report.js";

const overlapping = () =>
  new HistoryBuilder()
    .hold("lock-1", "x", 0, 100)
    .hold("lock-2", "x", 50, 150)
    .acquire("lock-3", "x", [10, 400], { type: "info" })
    .use("lock-1", "x", [20, 30], { type: "none" })
    .fault("pause", "node-3", 40, 120)
    .fault("kill", "node-1", 130)
    .build();

describe("renderReport", () => {
  it("is self-contained: no script, no link, no external reference", () => {
    const html = renderReport({ title: "L4 seed 7", events: overlapping(), results: [] });
    assert.doesNotMatch(html, /<script|<link|<img|<iframe|src=|href=|url\(|@import/i);
    // The only URL is the SVG namespace, which browsers never fetch.
    const urls = html.match(/https?:\/\/[^"\s]*/g) ?? [];
    assert.deepEqual([...new Set(urls)], ["http://www.w3.org/2000/svg"]);
  });

  it("shows each checker's verdict, stats and violations", () => {
    const events = overlapping();
    const html = renderReport({
      title: "L4",
      events,
      results: [checkMutualExclusion(events)],
      meta: { row: "L4", seed: 7 },
    });
    assert.match(html, /<span class="verdict violation">MX: violation<\/span>/);
    assert.match(html, /overlaps: 1/);
    assert.match(html, /overlap on x: lock-1 op 0 held x/);
    assert.match(html, /<th>seed<\/th><td>7<\/td>/);
  });

  it("draws one lane per process, a bar per operation, the holds and the faults", () => {
    const html = renderReport({ title: "t", events: overlapping(), results: [] });
    for (const lane of ["lock-1", "lock-2", "lock-3"])
      assert.match(html, new RegExp(`class="lane">${lane}<`));
    assert.equal(html.match(/<title>lock-\d op \d+: [^<]*→/g)?.length, 6);
    assert.equal(html.match(/<title>hold of x by /g)?.length, 2);
    assert.match(html, /class="fault">pause node-3</);
    assert.match(html, /class="instant"\/><text [^>]*class="fault">kill node-1</);
    // The use that never completed is drawn dashed to the end.
    assert.match(
      html,
      /stroke-dasharray="3,2"><title>lock-1 op 2: use x info, 20\.000 → never completed/,
    );
  });

  it("summarises each operation's outcomes and latency percentiles", () => {
    const html = renderReport({ title: "t", events: overlapping(), results: [] });
    assert.match(html, /<tr><td>acquire<\/td><td>2<\/td><td>0<\/td><td>1<\/td><td>1\.00<\/td>/);
  });

  it("outlines the operations a violation names", () => {
    const events = overlapping();
    const html = renderReport({ title: "t", events, results: [checkMutualExclusion(events)] });
    assert.equal(html.match(/stroke="#000"/g)?.length, 2);
  });

  it("escapes every text from the history", () => {
    const evil = "<script>alert('x')</script>&\"";
    const events = new HistoryBuilder()
      .op(evil, "acquire", evil, [0, 5], {}, { type: "fail", code: evil })
      .fault(evil, evil, 1, 2)
      .build();
    const html = renderReport({
      title: evil,
      events,
      results: [{ checker: evil, verdict: "ok", violations: [evil], stats: { [evil]: 1 } }],
      meta: { [evil]: evil },
    });
    assert.doesNotMatch(html, /<script|alert\('/);
    assert.match(html, /&lt;script&gt;alert\(&#39;x&#39;\)&lt;\/script&gt;&amp;&quot;/);
  });

  it("samples the ok operations of a big history, keeping every fail and info, with a note", () => {
    const builder = new HistoryBuilder();
    for (let i = 0; i < 12000; i++) builder.ids(`ids-${i % 8}`, [i, i + 0.5], [i]);
    builder.ids("ids-0", [20000, 20001], "fail").ids("ids-1", [20002, 20003], "info");
    const html = renderReport({ title: "big", events: builder.build(), results: [], maxOps: 1000 });
    assert.match(html, /Showing 1000 of 12002 operations/);
    assert.match(html, /ids-0 op \d+: ids fail/);
    assert.match(html, /ids-1 op \d+: ids info/);
    assert.ok(html.length < 2_000_000, `report of ${html.length} bytes`);
  });

  it("renders an empty history", () => {
    const html = renderReport({ title: "empty", events: [], results: [] });
    assert.match(html, /No checker ran/);
    assert.match(html, /No faults injected/);
  });
});

describe("writeReport", () => {
  it("writes the HTML to the path", () => {
    const dir = mkdtempSync(join(tmpdir(), "redquorum-report-"));
    try {
      const path = join(dir, "report.html");
      writeReport(path, { title: "written", events: overlapping(), results: [] });
      assert.match(readFileSync(path, "utf8"), /^<!doctype html>/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("report helpers", () => {
  it("escapes the five HTML-special characters", () => {
    assert.equal(escapeHtml(`<a href="x">&'`), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  });

  it("picks round ticks", () => {
    assert.deepEqual(ticks(0, 1000, 5), [0, 200, 400, 600, 800, 1000]);
    assert.deepEqual(ticks(5, 5, 5), [5]);
  });
});
