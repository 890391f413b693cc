// The ID floor of the ID server benchmark (bench/id-server.mjs): the least
// any ID server over majority-acknowledged writes to these nodes can do per
// request, with node:http on this machine. A bare node:http server (as
// bench/http-floor.mjs) that gathers the requests whose body came in during
// one turn of the event loop, sends ONE plain `INCRBY` for the sum of their
// counts to every node (no script, no checks), and answers them when a
// majority has replied, the IDs handed out in arrival order below the
// highest reply. Each node runs `appendfsync always`, so a reply means the
// write is on that node's disk, as a redquorum round's is.
//
// It is a cost floor, not an algorithm: no recovery after a node lost
// writes, no membership, no quarantine, no bound on a stalled node; its IDs
// are unique and rise only because it is the only writer and every node
// sees the same INCRBYs in the same order. What it measures is what the
// work itself costs here: the HTTP server, one fsynced write to each node
// per batch (each write wakes an idle redis-server) and the replies.
//
// Usage: node bench/id-floor.mjs '<JSON array of node URLs>'. Prints its URL
// as the one line `{"url": …}`; exits on SIGTERM.
import { createServer } from "node:http";
import { Redis } from "ioredis";

const urls = JSON.parse(process.argv[2] ?? "[]");
if (!Array.isArray(urls) || urls.length === 0) {
  console.error("usage: node bench/id-floor.mjs '<JSON array of node URLs>'");
  process.exit(2);
}
const key = "bench:id-floor";
const clients = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 0 }));
for (const client of clients) client.on("error", () => {});
const majority = Math.floor(urls.length / 2) + 1;
const headers = { "Content-Type": "application/json" };

/** The requests whose body came in during this turn: [res, count]. */
let waiting = [];

/** Answers `batch` (`total` IDs) with the IDs up to `highest`, in arrival order. */
function answer(batch, total, highest) {
  let next = highest - BigInt(total);
  for (const [res, count] of batch) {
    const ids = [];
    for (let i = 0; i < count; i++) ids.push(`"${++next}"`);
    res.writeHead(200, headers);
    res.end(`{"ids":[${ids.join(",")}]}`);
  }
}

function fail(batch) {
  for (const [res] of batch) {
    res.writeHead(503, headers);
    res.end('{"error":"no majority"}');
  }
}

function flush() {
  const batch = waiting;
  waiting = [];
  const total = batch.reduce((sum, [, count]) => sum + count, 0);
  let replies = 0;
  let failures = 0;
  let highest = 0n;
  let settled = false;
  for (const client of clients) {
    client.incrby(key, total).then(
      (value) => {
        if (settled) return;
        const reached = BigInt(value);
        if (reached > highest) highest = reached;
        if (++replies >= majority) {
          settled = true;
          answer(batch, total, highest);
        }
      },
      () => {
        if (!settled && ++failures > clients.length - majority) {
          settled = true;
          fail(batch);
        }
      },
    );
  }
}

const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (chunk) => {
    body += chunk;
  });
  req.once("end", () => {
    const count = Number(JSON.parse(body).count ?? 1);
    if (waiting.length === 0) setImmediate(flush);
    waiting.push([res, count]);
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }));
});
process.once("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
  for (const client of clients) client.disconnect();
});
