// The ID server benchmark's in-process cell (bench/id-server.mjs): one
// NextId in a process of its own with `callers` concurrent callers asking
// for `count` IDs each, in a closed loop, as the server's 64 connections
// do over HTTP. Protocol: bench/processes.mjs ("ready" after a warm-up of
// `warmupSeconds`, "go", "stop", one JSON line).
import { NextId } from "../dist/index.js";
import { workerProtocol } from "./processes.mjs";

const { urls, callers, count, warmupSeconds, options } = JSON.parse(process.argv[2]);
const ids = new NextId(urls, options);
let measuring = false;
let stopping = false;
const latencies = [];
let calls = 0;
let errors = 0;
let cpuAtGo;
const loops = Array.from({ length: callers }, async () => {
  while (!stopping) {
    const t0 = performance.now();
    try {
      await ids.nextBatch(count);
      if (measuring && !stopping) {
        latencies.push(performance.now() - t0);
        calls++;
      }
    } catch {
      errors++;
    }
  }
});
await new Promise((resolve) => setTimeout(resolve, warmupSeconds * 1_000));
await workerProtocol(() => {
  stopping = true;
  const cpu = process.cpuUsage(cpuAtGo);
  latencies.sort((a, b) => a - b);
  const at = (p) =>
    latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
  return { calls, errors, p50Ms: at(50), p99Ms: at(99), cpuSeconds: (cpu.user + cpu.system) / 1e6 };
});
cpuAtGo = process.cpuUsage();
measuring = true;
await Promise.all(loops);
