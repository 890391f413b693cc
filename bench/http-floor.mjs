// The floor of the ID server benchmark (bench/id-server.mjs): a bare
// node:http server that reads the request body and answers a constant
// {"ids":["1"]}, with the headers `redquorum serve` sends (Content-Type,
// Content-Length), and nothing else: what any HTTP server on this machine
// costs per request before it does any work. Prints its URL as the one
// line `{"url": …}`; exits on SIGTERM.
import { createServer } from "node:http";

const body = '{"ids":["1"]}';
const headers = { "Content-Type": "application/json", "Content-Length": body.length };
const server = createServer((req, res) => {
  req.resume();
  req.once("end", () => {
    res.writeHead(200, headers);
    res.end(body);
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }));
});
process.once("SIGTERM", () => {
  server.close();
  server.closeAllConnections();
});
