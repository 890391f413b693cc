/**
 * examples/deploy checked against the command line they run: every command,
 * flag, environment variable, port and probe path the systemd unit, the
 * Dockerfile, the compose file and the Kubernetes manifests name exists and
 * means what they assume. The flags and variables come from the CLI's own
 * option definitions (serveCommand()); what the probes and signals do is
 * seen on a real `redquorum serve` over real redis-servers, configured as
 * the manifest configures it.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Option } from "commander";
import { parse, parseAllDocuments } from "yaml";
import { exitCodes } from "../src/cli/exit-codes.js";
import { idCommand } from "../src/cli/id.js";
import { serveCommand } from "../src/cli/serve.js";
import { LocalCluster, NextId } from "../src/index.js";
import { startCli } from "./helpers/cli.js";
import { sleep } from "./helpers/sleep.js";

const root = resolve(import.meta.dirname, "..");
const deploy = join(root, "examples", "deploy");
const read = (path: string) => readFileSync(join(deploy, path), "utf8");
const packageJson = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

// --- what the command line defines ------------------------------------------------

const serveOptions: readonly Option[] = serveCommand().options;
const serveEnv = new Map(serveOptions.filter((o) => o.envVar).map((o) => [o.envVar!, o]));
const serveFlags = new Map(serveOptions.map((o) => [o.long!, o]));

/** The option `name` (REDQUORUM_… or --flag) of `redquorum serve` takes `value` as it is written. */
function assertServeSetting(name: string, value: string, where: string): void {
  const option = name.startsWith("--") ? serveFlags.get(name) : serveEnv.get(name);
  assert.ok(option, `${where}: ${name} is not an option of redquorum serve`);
  if (option.argChoices) {
    assert.ok(
      option.argChoices.includes(value),
      `${where}: ${name}=${value} not in ${option.argChoices}`,
    );
  }
  // The option's own parser (a duration, a port in range…): throws on what the CLI refuses.
  assert.doesNotThrow(
    () => option.parseArg?.(value, option.defaultValue),
    `${where}: ${name}=${JSON.stringify(value)} is refused by redquorum serve`,
  );
}

/** A setting's value as the CLI reads it (milliseconds for a duration). */
function parsed(name: string, value: string): number {
  const option = serveEnv.get(name)!;
  return option.parseArg!(value, option.defaultValue) as number;
}

/** `redquorum <command> <sub…>` exists: each word is a command of the one before. */
function assertCommand(words: readonly string[], where: string): void {
  const top = new Map([
    ["serve", serveCommand()],
    ["id", idCommand()],
  ]);
  let command = top.get(words[0]!);
  assert.ok(command, `${where}: redquorum ${words[0]} is not a command checked here`);
  for (const word of words.slice(1)) {
    command = command.commands.find((sub) => sub.name() === word);
    assert.ok(command, `${where}: redquorum ${words.join(" ")}: no subcommand ${word}`);
  }
}

/** The package's bin, as installed: dist/cli.js. */
const bin = String(packageJson.bin.redquorum).replace(/^\.\//, "");

/** Probe paths and what the test below saw them answer. */
const probeAnswers = new Map<string, { up: number; nodesDown: number; draining?: number }>();

// --- the files --------------------------------------------------------------------

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

function dockerfileInstructions(text: string): Instruction[] {
  return text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword!.toUpperCase(), args: rest.join(" ") };
    });
}

/** ENV a=b c=d, as one map. */
function envOf(instructions: readonly Instruction[]): Map<string, string> {
  const env = new Map<string, string>();
  for (const { keyword, args } of instructions) {
    if (keyword !== "ENV") continue;
    for (const pair of args.split(/\s+/)) {
      const [name, value] = pair.split("=");
      env.set(name!, value!);
    }
  }
  return env;
}

/** A systemd unit: section → key → values (a key may repeat). */
function unitOf(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let section: Map<string, string[]> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = new Map();
      sections.set(header[1]!, section);
      continue;
    }
    const [key, ...value] = line.split("=");
    section!.set(key!, [...(section!.get(key!) ?? []), value.join("=")]);
  }
  return sections;
}

/** KEY=value lines (an EnvironmentFile). */
function envFile(text: string): Map<string, string> {
  return new Map(
    text
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith("#"))
      .map((line) => {
        const at = line.indexOf("=");
        return [line.slice(0, at), line.slice(at + 1)] as [string, string];
      }),
  );
}

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML, checked field by field
type Yaml = any;

function manifests(file: string): Yaml[] {
  return parseAllDocuments(read(join("kubernetes", file))).map((doc) => {
    assert.deepEqual(doc.errors, [], `${file}: ${doc.errors.join("; ")}`);
    return doc.toJS();
  });
}

function find(docs: readonly Yaml[], kind: string, name?: string): Yaml {
  const found = docs.find(
    (doc) => doc.kind === kind && (name === undefined || doc.metadata.name === name),
  );
  assert.ok(found, `no ${kind}${name ? ` ${name}` : ""}`);
  return found;
}

/** Every key of `selector` is a label of `labels` with the same value. */
function selects(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** The Redis URLs of REDQUORUM_NODES. */
const urlsOf = (value: string) => value.split(",").map((url) => new URL(url));

/** A redis.conf's `key value` lines. */
function redisConf(text: string): Map<string, string> {
  return new Map(
    text
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith("#"))
      .map((line) => {
        const [key, ...value] = line.split(/\s+/);
        return [key!, value.join(" ")] as [string, string];
      }),
  );
}

// --- tests ------------------------------------------------------------------------

describe("examples/deploy against the command line", () => {
  let cluster: LocalCluster;

  before(async () => {
    cluster = await LocalCluster.start({ nodeCount: 3, persistence: "aof-always" });
    const ids = new NextId(cluster.urls);
    try {
      await ids.init();
    } finally {
      await ids.close();
    }
  });
  after(() => cluster.stop());

  it("redquorum serve configured as the Kubernetes Deployment: /healthz is readiness, /metrics liveness, SIGTERM drains and exits 0", async () => {
    // The Deployment's environment, but the nodes and a free port on loopback.
    const deployment = find(manifests("id-server.yaml"), "Deployment");
    const container = deployment.spec.template.spec.containers[0];
    const env: Record<string, string> = Object.fromEntries(
      container.env.map((e: { name: string; value: string }) => [e.name, e.value]),
    );
    const server = startCli(container.args, {
      ...env,
      REDQUORUM_NODES: cluster.urls.join(","),
      REDQUORUM_HOST: "127.0.0.1",
      REDQUORUM_PORT: "0",
    });
    let stderr = "";
    const exited = new Promise<number | null>((resolve) => server.once("close", resolve));
    let paused = false;
    const resume = () => {
      if (!paused) return;
      paused = false;
      cluster.resume(0);
      cluster.resume(1);
    };
    try {
      const url = await new Promise<string>((resolve, reject) => {
        server.stderr!.on("data", (chunk) => {
          stderr += chunk;
          const listening = /"msg":"listening".*?"url":"([^"]+)"/.exec(stderr);
          if (listening) resolve(listening[1]!);
        });
        void exited.then(() => reject(new Error(`serve exited: ${stderr}`)));
      });
      const status = async (path: string) => (await fetch(`${url}${path}`)).status;
      const up = { healthz: await status("/healthz"), metrics: await status("/metrics") };
      // A majority of nodes down: /healthz says so (after its 1 s cache), /metrics does not care.
      cluster.pause(0);
      cluster.pause(1);
      paused = true;
      let healthz = 200;
      for (let i = 0; i < 100 && healthz === 200; i++) {
        await sleep(100);
        healthz = await status("/healthz");
      }
      const nodesDown = { healthz, metrics: await status("/metrics") };
      resume();
      probeAnswers.set("/healthz", { up: up.healthz, nodesDown: nodesDown.healthz });
      probeAnswers.set("/metrics", { up: up.metrics, nodesDown: nodesDown.metrics });
      assert.deepEqual(up, { healthz: 200, metrics: 200 });
      assert.deepEqual(nodesDown, { healthz: 503, metrics: 200 });
      server.kill("SIGTERM");
      // The drain has nothing in flight: it ends at once, well within the drain timeout.
      assert.equal(await exited, 0, stderr);
      assert.match(stderr, /"msg":"draining".*"signal":"SIGTERM"/);
      assert.match(stderr, /"msg":"stopped"/);
    } finally {
      resume();
      server.kill("SIGKILL");
    }
  });

  it("the Dockerfile: small base, non-root, tini as PID 1 running node dist/cli.js serve, settings the CLI takes", () => {
    const instructions = dockerfileInstructions(read("docker/Dockerfile"));
    const of = (keyword: string) => instructions.filter((i) => i.keyword === keyword);
    const stages = of("FROM").map((i) => i.args);
    assert.match(stages.at(-1)!, /^node:20-alpine$/, "the image runs on Node 20 Alpine");
    const user = of("USER").at(-1)?.args;
    assert.ok(user && user !== "root" && user !== "0", `USER ${user}`);
    const entrypoint = JSON.parse(of("ENTRYPOINT").at(-1)!.args) as string[];
    const cmd = JSON.parse(of("CMD").at(-1)!.args) as string[];
    // tini is PID 1 and passes the signals to node, which runs the CLI itself (no npm between).
    assert.deepEqual(entrypoint.slice(0, 3), ["/sbin/tini", "--", "node"]);
    assert.ok(
      entrypoint[3]!.endsWith(`/${bin}`),
      `${entrypoint[3]} is not the package's bin (${bin})`,
    );
    assert.ok(
      of("RUN").some((i) => /apk add --no-cache tini/.test(i.args)),
      "tini is installed",
    );
    assertCommand(cmd, "Dockerfile CMD");
    const env = envOf(instructions);
    for (const [name, value] of env) {
      if (name.startsWith("REDQUORUM_")) assertServeSetting(name, value, "Dockerfile ENV");
    }
    assert.equal(
      of("EXPOSE").at(-1)?.args,
      env.get("REDQUORUM_PORT"),
      "EXPOSE is the port it listens on",
    );
    const healthcheck = of("HEALTHCHECK").at(-1)!.args;
    const probe = /http:\/\/127\.0\.0\.1:(\d+)(\/\w+)/.exec(healthcheck)!;
    assert.equal(probe[1], env.get("REDQUORUM_PORT"));
    assert.equal(probe[2], "/healthz");
    // What the build copies and runs is in the repository (built from its root).
    for (const copy of of("COPY").filter((i) => !i.args.startsWith("--from"))) {
      const sources = copy.args.split(/\s+/).slice(0, -1);
      for (const source of sources) assert.ok(existsSync(join(root, source)), `COPY ${source}`);
    }
    const build = of("RUN")
      .map((i) => i.args)
      .join("\n");
    assert.match(build, /npx tsup/);
    assert.match(build, /npm prune --omit=dev/);
    // The built paths the final stage copies are where the bin points.
    assert.ok(of("COPY").some((i) => /--from=build \/src\/dist \.\/dist/.test(i.args)));
  });

  it("the systemd unit: systemd-analyze verify passes; ExecStart runs serve; its environment file holds settings serve takes; stop waits out the drain", () => {
    const unitText = read("systemd/redquorum-serve.service");
    const dir = mkdtempSync(join(tmpdir(), "redquorum-unit-"));
    try {
      writeFileSync(join(dir, "redquorum-serve.service"), unitText);
      const verify = spawnSync(
        "systemd-analyze",
        ["verify", join(dir, "redquorum-serve.service")],
        {
          encoding: "utf8",
        },
      );
      assert.equal(verify.status, 0, verify.stderr);
      // Only a missing install (the user, the package) may be mentioned.
      const complaints = verify.stderr
        .split("\n")
        .filter((line) => line.trim() && !/redquorum|No such file/.test(line));
      assert.deepEqual(complaints, []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const unit = unitOf(unitText);
    const service = unit.get("Service")!;
    const [exec] = service.get("ExecStart")!;
    const [node, script, ...args] = exec!.split(/\s+/);
    assert.equal(node, "/usr/bin/node");
    assert.ok(script!.endsWith(`node_modules/redquorum/${bin}`), script);
    const flags = args.filter((a) => a.startsWith("--"));
    assertCommand(
      args.filter((a) => !a.startsWith("--")),
      "ExecStart",
    );
    for (const flag of flags)
      assertServeSetting(flag.split("=")[0]!, flag.split("=")[1] ?? "", "ExecStart");
    assert.notEqual(service.get("User")?.[0], "root");
    assert.deepEqual(service.get("KillSignal"), ["SIGTERM"]);
    // The environment file named is the one shipped beside it.
    const [environmentFile] = service.get("EnvironmentFile")!;
    assert.equal(environmentFile!.split("/").at(-1), "serve.env");
    const env = envFile(read("systemd/serve.env"));
    assert.ok(env.has("REDQUORUM_NODES"));
    for (const [name, value] of env) assertServeSetting(name, value, "serve.env");
    const drainMs = parsed("REDQUORUM_DRAIN_TIMEOUT", env.get("REDQUORUM_DRAIN_TIMEOUT")!);
    const stopMs = Number(service.get("TimeoutStopSec")![0]) * 1000;
    assert.ok(stopMs > drainMs, `TimeoutStopSec ${stopMs} ms must exceed the drain ${drainMs} ms`);
  });

  it("the compose file: 5 redis-servers with appendfsync always on volumes of their own, 2 ID servers on them, the counter made once", () => {
    const compose = parse(read("compose.yaml"), { merge: true });
    const services = compose.services as Record<string, Yaml>;
    const redis = Object.entries(services).filter(([, s]) => s.command?.[0] === "redis-server");
    assert.equal(redis.length, 5);
    const volumes = new Set<string>();
    for (const [name, service] of redis) {
      const args = service.command as string[];
      const setting = (flag: string) => args[args.indexOf(flag) + 1];
      assert.equal(setting("--appendonly"), "yes", name);
      assert.equal(setting("--appendfsync"), "always", name);
      assert.equal(setting("--maxmemory-policy"), "noeviction", name);
      const [volume, mount] = (service.volumes as string[])[0]!.split(":");
      assert.equal(mount, setting("--dir"), `${name} writes where its volume is`);
      assert.ok(volume! in compose.volumes, `${name}'s volume ${volume} is declared`);
      volumes.add(volume!);
    }
    assert.equal(volumes.size, 5, "a volume of its own each");
    const redisNames = redis.map(([name]) => name).sort();

    const idServers = Object.entries(services).filter(([, s]) => s.command?.[0] === "serve");
    assert.equal(idServers.length, 2);
    for (const [name, service] of idServers) {
      assertCommand(service.command, name);
      const env = service.environment as Record<string, string>;
      for (const [key, value] of Object.entries(env)) assertServeSetting(key, String(value), name);
      const nodes = urlsOf(env.REDQUORUM_NODES!);
      assert.deepEqual(nodes.map((url) => url.hostname).sort(), redisNames, `${name}: every node`);
      assert.ok(nodes.every((url) => url.port === "6379"));
      const [published] = service.ports as string[];
      assert.equal(published!.split(":")[1], env.REDQUORUM_PORT, `${name} publishes its port`);
      // compose writes durations as the CLI does ("30s").
      const graceMs = parsed("REDQUORUM_DRAIN_TIMEOUT", service.stop_grace_period);
      assert.ok(graceMs > parsed("REDQUORUM_DRAIN_TIMEOUT", env.REDQUORUM_DRAIN_TIMEOUT!), name);
      assert.equal(service.depends_on["id-init"].condition, "service_completed_successfully");
      // Built from the Dockerfile above, from the repository's root.
      const context = resolve(deploy, service.build.context);
      assert.equal(context, root);
      assert.ok(existsSync(join(context, service.build.dockerfile)));
    }
    const init = services["id-init"];
    const script = init.entrypoint.at(-1) as string;
    // `$$` is compose's escape for a shell's `$`.
    const shell = script.replace(/\$\$/g, "$");
    const run = /node (\S+) (id init) \|\| \[ \$\? -eq (\d+) \]/.exec(shell)!;
    assert.ok(run, shell);
    assert.equal(run[1], `/app/${bin}`);
    assertCommand(run[2]!.split(" "), "id-init");
    assert.equal(
      Number(run[3]),
      exitCodes.idCounterInUse,
      "exit 7: the counter already handed out IDs",
    );
    assert.deepEqual(init.entrypoint.slice(0, 2), ["/sbin/tini", "--"]);
    assert.deepEqual(
      urlsOf(init.environment.REDQUORUM_NODES)
        .map((u) => u.hostname)
        .sort(),
      redisNames,
    );
  });

  it("the Kubernetes manifests: redis as a StatefulSet of 5 with a volume each, one per machine; the ID server as a Deployment with probes, preStop and PDB the CLI agrees with", () => {
    const redisDocs = manifests("redis.yaml");
    const statefulSet = find(redisDocs, "StatefulSet");
    const headless = find(redisDocs, "Service", statefulSet.spec.serviceName);
    assert.equal(headless.spec.clusterIP, "None");
    const podSpec = statefulSet.spec.template.spec;
    const podLabels = statefulSet.spec.template.metadata.labels;
    assert.ok(selects(headless.spec.selector, podLabels));
    assert.equal(statefulSet.spec.replicas, 5);
    const [claim] = statefulSet.spec.volumeClaimTemplates;
    const redisContainer = podSpec.containers[0];
    const dataMount = redisContainer.volumeMounts.find((m: Yaml) => m.name === claim.metadata.name);
    assert.ok(dataMount, "the claim is mounted");
    const configMount = redisContainer.volumeMounts.find((m: Yaml) => m.name === "config");
    const configMap = find(
      redisDocs,
      "ConfigMap",
      podSpec.volumes.find((v: Yaml) => v.name === "config").configMap.name,
    );
    const [confFile] = Object.keys(configMap.data);
    assert.deepEqual(redisContainer.args, ["redis-server", `${configMount.mountPath}/${confFile}`]);
    const conf = redisConf(configMap.data[confFile!]);
    assert.equal(conf.get("appendonly"), "yes");
    assert.equal(conf.get("appendfsync"), "always");
    assert.equal(conf.get("maxmemory-policy"), "noeviction");
    assert.equal(conf.get("dir"), dataMount.mountPath, "the data lands on the claim");
    const [spread] =
      podSpec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution;
    assert.equal(spread.topologyKey, "kubernetes.io/hostname");
    assert.ok(selects(spread.labelSelector.matchLabels, podLabels), "one redis pod per machine");
    const redisPort = redisContainer.ports.find(
      (p: Yaml) => p.name === headless.spec.ports[0].targetPort,
    );
    assert.equal(redisPort.containerPort, Number(conf.get("port")));
    assert.ok(selects(find(redisDocs, "PodDisruptionBudget").spec.selector.matchLabels, podLabels));
    // The pods' stable names, as every client must list them.
    const expectedNodes = Array.from(
      { length: statefulSet.spec.replicas },
      (_, i) =>
        `${statefulSet.metadata.name}-${i}.${headless.metadata.name}:${redisPort.containerPort}`,
    );

    const idDocs = manifests("id-server.yaml");
    const deployment = find(idDocs, "Deployment");
    const pod = deployment.spec.template;
    const container = pod.spec.containers[0];
    assertCommand(container.args, "Deployment args");
    const env = new Map<string, string>(container.env.map((e: Yaml) => [e.name, e.value]));
    for (const [name, value] of env) assertServeSetting(name, value, "Deployment env");
    assert.deepEqual(
      urlsOf(env.get("REDQUORUM_NODES")!).map((u) => u.host),
      expectedNodes,
    );
    const port = container.ports.find(
      (p: Yaml) => p.containerPort === Number(env.get("REDQUORUM_PORT")),
    );
    assert.ok(port, "the container port is the one it listens on");
    // Readiness on the path that says whether IDs can be served, liveness on
    // one that answers while the process does (seen in the first test).
    const readiness = container.readinessProbe.httpGet;
    const liveness = container.livenessProbe.httpGet;
    for (const probe of [readiness, liveness]) assert.equal(probe.port, port.name);
    assert.equal(readiness.path, "/healthz");
    assert.deepEqual(probeAnswers.get(readiness.path), { up: 200, nodesDown: 503 });
    assert.deepEqual(probeAnswers.get(liveness.path), { up: 200, nodesDown: 200 });
    // preStop waits, then SIGTERM drains; the grace period covers both and a margin.
    const preStop = container.lifecycle.preStop.exec.command as string[];
    assert.equal(preStop[0], "node", "the image has node (no shell needed)");
    const waitMs = Number(/setTimeout\(\(\) => \{\}, (\d+)\)/.exec(preStop.join(" "))![1]);
    const drainMs = parsed("REDQUORUM_DRAIN_TIMEOUT", env.get("REDQUORUM_DRAIN_TIMEOUT")!);
    const graceMs = pod.spec.terminationGracePeriodSeconds * 1000;
    assert.ok(
      graceMs >= waitMs + drainMs + 5_000,
      `grace ${graceMs} ms < ${waitMs} + ${drainMs} + 5000`,
    );
    assert.ok(pod.spec.securityContext.runAsNonRoot);
    const service = find(idDocs, "Service");
    assert.ok(selects(service.spec.selector, pod.metadata.labels));
    assert.equal(service.spec.ports[0].targetPort, port.name);
    const budget = find(idDocs, "PodDisruptionBudget");
    assert.ok(selects(budget.spec.selector.matchLabels, pod.metadata.labels));
    assert.ok(budget.spec.minAvailable >= 1 && budget.spec.minAvailable < deployment.spec.replicas);

    const job = find(manifests("id-init-job.yaml"), "Job");
    const jobContainer = job.spec.template.spec.containers[0];
    const run = /node (\S+) (id init) \|\| \[ \$\? -eq (\d+) \]/.exec(jobContainer.command.at(-1))!;
    assert.ok(run, jobContainer.command.join(" "));
    assert.equal(run[1], `/app/${bin}`);
    assertCommand(run[2]!.split(" "), "Job");
    assert.equal(Number(run[3]), exitCodes.idCounterInUse);
    assert.deepEqual(
      urlsOf(jobContainer.env[0].value).map((u) => u.host),
      expectedNodes,
    );
  });
});
