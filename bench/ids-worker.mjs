// One process of the ID benchmark's process cells (bench/ids.mjs): one
// NextId with its own connections and one caller, as one of many
// independent client processes would be. Protocol: bench/processes.mjs.
import { NextId } from "../dist/index.js";
import { workerProtocol } from "./processes.mjs";

const { urls, options } = JSON.parse(process.argv[2]);
const rounds = { won: 0, lost: 0 };
let counting = false;
const ids = new NextId(urls, {
  ...options,
  onEvent: (event) => {
    if (event.type === "id-round" && counting) rounds[event.outcome]++;
  },
});
for (let n = 0; n < 3; n++) await ids.next(); // connect and check

const latencies = [];
let errors = 0;
let stopping = false;
await workerProtocol(() => {
  stopping = true;
  return { latencies, errors, roundsWon: rounds.won, roundsLost: rounds.lost };
});
counting = true;
while (!stopping) {
  const t0 = performance.now();
  try {
    await ids.next();
    if (!stopping) latencies.push(performance.now() - t0);
  } catch {
    errors++;
  }
}
