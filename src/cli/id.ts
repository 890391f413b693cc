/** `redquorum id init` and `redquorum id next`: NextId's counter. */
import { Command, Option } from "commander";
import { AlreadyInitializedError } from "../errors.js";
import { NextId } from "../id/next-id.js";
import type { IdProposals } from "../id/options.js";
import { idDefaults, idLimits } from "../limits.js";
import {
  diagnose,
  idKeyOption,
  jsonOption,
  type NodesOptions,
  nodesFrom,
  nodesOption,
  nodeTimeoutOption,
  onWarning,
  printData,
  printJson,
  proposalsOption,
} from "./common.js";
import { CounterInUseError } from "./errors.js";
import { parseInteger } from "./integer.js";

interface IdOptions extends NodesOptions {
  key: string;
  nodeTimeout: number;
}

interface NextOptions extends IdOptions {
  count: number;
  proposals: IdProposals;
  json?: boolean;
}

const countMax = idLimits.batchCountMax;

const parseCount = (text: string) => parseInteger(text, "--count", 1, countMax);

const keyOption = () => idKeyOption("the counter's Redis key");

const idNodeTimeoutOption = () =>
  nodeTimeoutOption(idDefaults.nodeTimeoutMs, " (longer on a busy or shared machine)");

async function withNextId<T>(
  options: IdOptions & { proposals?: IdProposals },
  run: (ids: NextId) => Promise<T>,
): Promise<T> {
  const ids = new NextId(nodesFrom(options), {
    key: options.key,
    proposals: options.proposals,
    nodeTimeoutMs: options.nodeTimeout,
    // Lines of the CLI's own, not Node's process warnings (NextId's default).
    onWarning,
    onRepair: (event) =>
      diagnose(
        `repaired the ID counter on ${event.endpoint} (it had lost its data, or may have come ` +
          `back older) to ${event.value}`,
      ),
  });
  try {
    return await run(ids);
  } finally {
    await ids.close();
  }
}

export function idCommand(): Command {
  const id = new Command("id").description(
    "strictly increasing IDs agreed by a majority (needs appendonly yes + appendfsync always)",
  );
  id.command("init")
    .description(
      "initialise the counter on a new cluster (needs every node; exit 7 when it already " +
        "handed out IDs: it is not reset)",
    )
    .addOption(nodesOption())
    .addOption(keyOption())
    .addOption(idNodeTimeoutOption())
    .action(async (options: IdOptions) => {
      await withNextId(options, async (ids) => {
        try {
          await ids.init();
        } catch (error) {
          if (!(error instanceof AlreadyInitializedError)) throw error;
          throw new CounterInUseError(error.key, error.endpoints, nodesFrom(options).length);
        }
      });
      diagnose(`initialised the ID counter ${JSON.stringify(options.key)}`);
    });
  id.command("next")
    .description("take new IDs, printed one per line as decimal strings")
    .addOption(nodesOption())
    .addOption(keyOption())
    .addOption(
      new Option("--count <n>", `how many IDs (1 to ${countMax})`).default(1).argParser(parseCount),
    )
    .addOption(proposalsOption())
    .addOption(idNodeTimeoutOption())
    .addOption(jsonOption())
    .action(async (options: NextOptions) => {
      const batch = await withNextId(options, (ids) => ids.nextBatch(options.count));
      const strings = batch.map(String);
      if (options.json) printJson(strings);
      else printData(strings.join("\n"));
    });
  return id;
}
