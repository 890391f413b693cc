/**
 * The `redquorum` command line (built to dist/cli.js, the package's bin).
 * Builds the commander program, runs one command, and turns its outcome
 * into process.exitCode (see exit-codes.ts): nothing here calls
 * process.exit(), so the process ends once the connections are closed.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError } from "commander";
import { InvalidArgumentError, NotInitializedError, RedquorumError } from "../errors.js";
import { notInitializedMessage } from "../id/not-initialized.js";
import { diagnose, outputLostExitCode, watchOutputClosed } from "./common.js";
import { devCommand } from "./dev.js";
import { UsageError } from "./errors.js";
import { exitCodeHelp, exitCodeOf, exitCodes } from "./exit-codes.js";
import { fencingFloorCommand } from "./fencing-floor.js";
import { idCommand } from "./id.js";
import { initCommand } from "./init.js";
import { lockCommand } from "./lock.js";
import { membersCommand } from "./members.js";
import { serveCommand } from "./serve.js";
import { statusCommand } from "./status.js";

/**
 * The package's version, read from its package.json: the nearest one above
 * this file named "redquorum" (dist/cli.js when installed, src/cli/main.ts
 * in the repository).
 */
function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (pkg.name === "redquorum") return String(pkg.version);
    } catch {
      // No package.json here: look further up.
    }
    const parent = dirname(dir);
    if (parent === dir) return "unknown";
    dir = parent;
  }
}

export function buildProgram(childArgv: () => readonly string[]): Command {
  const program = new Command("redquorum")
    .description(
      "Redlock locks with fencing tokens and majority-agreed IDs over N Redis masters.\n" +
        "Data goes to stdout, diagnostics to stderr.",
    )
    .version(packageVersion(), "-V, --version", "print the version")
    .exitOverride()
    .showSuggestionAfterError()
    .addHelpText("afterAll", exitCodeHelp());
  program.addCommand(devCommand());
  program.addCommand(initCommand());
  program.addCommand(statusCommand());
  program.addCommand(membersCommand());
  program.addCommand(fencingFloorCommand());
  program.addCommand(idCommand());
  program.addCommand(lockCommand(childArgv));
  program.addCommand(serveCommand());
  // addCommand does not pass exitOverride down: without it a subcommand's
  // own parse errors (an invalid choice) would exit 1, not the usage code.
  const overrideExits = (command: Command): void => {
    command.exitOverride();
    for (const sub of command.commands) overrideExits(sub);
  };
  overrideExits(program);
  return program;
}

/** Runs the command line `args` (without node and the script); resolves with the exit code. */
export async function main(args: readonly string[]): Promise<number> {
  // `lock … -- <command> [args…]`: everything after the first `--` is the
  // command's, never parsed as redquorum's options.
  const dash = args.indexOf("--");
  const split = args[0] === "lock" && dash >= 0;
  const childArgv = split ? args.slice(dash + 1) : [];
  const program = buildProgram(() => childArgv);
  const own = split ? args.slice(0, dash) : args;
  process.exitCode = undefined;
  try {
    await program.parseAsync(own, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : exitCodes.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // commander has printed the help or its one-line error already.
      return error.exitCode === 0 ? exitCodes.ok : exitCodes.usage;
    }
    const code = exitCodeOf(error);
    const message =
      error instanceof InvalidArgumentError
        ? inCliTerms(error)
        : error instanceof UsageError
          ? fromEnvironment(program, error, own)
          : error instanceof NotInitializedError
            ? notInitializedMessage(error, "the same --nodes")
            : error instanceof Error
              ? error.message
              : String(error);
    // A stack only for what is not one of the typed errors (a bug).
    const typed = error instanceof RedquorumError || code !== exitCodes.unexpected;
    diagnose(typed || !(error instanceof Error) ? message : (error.stack ?? message));
    const hint = cliHints[(error as { code?: unknown }).code as string];
    if (hint) diagnose(hint);
    return code;
  }
}

/**
 * A library argument's name on the command line, where the library checks
 * what the command passed on: the user gave `--key`, not `options.key`.
 */
const cliArgumentNames: Record<string, string> = {
  "options.key": "--key",
  "options.atLeast": "<token>",
};

/** An `InvalidArgumentError` named by what the user gave on the command line, where it is one of those. */
function inCliTerms(error: InvalidArgumentError): string {
  const node = /^nodes\[(\d+)\]$/.exec(error.argument);
  if (node) {
    return `invalid --nodes (or $REDQUORUM_NODES), URL ${Number(node[1]) + 1}: ${error.detail}`;
  }
  const name = cliArgumentNames[error.argument];
  return name ? `invalid ${name}: ${error.detail}` : error.message;
}

/**
 * A usage error of an option the user set through its environment variable
 * (not typed): named as that variable too, or the user looks in vain for a
 * flag they never gave.
 */
function fromEnvironment(program: Command, error: UsageError, args: readonly string[]): string {
  const flag = error.argument;
  if (args.some((arg) => arg === flag || arg.startsWith(`${flag}=`))) return error.message;
  const names = new Set<string>();
  const visit = (command: Command): void => {
    for (const option of command.options) {
      if (option.long === flag && option.envVar && process.env[option.envVar] !== undefined) {
        names.add(option.envVar);
      }
    }
    for (const sub of command.commands) visit(sub);
  };
  visit(program);
  if (names.size !== 1) return error.message;
  const [name] = names;
  return error.message.replace(`invalid ${flag}:`, `invalid ${flag} (given as $${name}):`);
}

/** What a library error's advice (an option, a method) is on the command line. */
const cliHints: Record<string, string> = {
  ERR_NODE_DURABILITY:
    "on the command line there is no option to accept it: IDs need every node with " +
    "appendonly yes, appendfsync always and no-appendfsync-on-rewrite no",
};

watchOutputClosed();
const exitCode = await main(process.argv.slice(2));
// Lost output wins over the command's own code: what was not printed was
// not delivered (a closed stdout gives 141, as SIGPIPE would have ended a
// C tool before it exited; a failed write gives 1).
process.exitCode = outputLostExitCode() ?? exitCode;
