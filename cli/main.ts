import { parseArgs } from "node:util";
import { isArborError } from "../shared/kernel/errors.ts";
import type { LocalRuntime, LocalRuntimeOptions } from "../shared/runtime/local/local.ts";
import { heading, note } from "./render.ts";

// Each command's code is imported when that command runs: a CLI process starts in a fraction of
// the time it takes to load every command's dependencies (the local runtime, the AWS clients, the
// policy engines), and `arbor keys` or `arbor team` are run many times in a row by scripts. The
// settings too (config.ts and zod, most of what a bare start would load): `arbor help` reads none.

const write = (line: string) => process.stdout.write(`${line}\n`);

/**
 * Runs `fn` on the local runtime. A command that writes (`demo`) holds the data folder's lock as
 * `lockAs`; one that only reads takes none, so it works beside a running `arbor serve`.
 */
async function withRuntime(
  fn: (rt: LocalRuntime) => Promise<void>,
  options: { bus?: NonNullable<LocalRuntimeOptions["bus"]>; lockAs?: string } = {},
): Promise<void> {
  const { loadConfig } = await import("../shared/runtime/config.ts");
  const config = loadConfig();
  if (config.mode !== "local")
    throw new Error("The arbor CLI runs in local mode; unset ARBOR_MODE or set it to local");
  const { createLocalRuntime } = await import("../shared/runtime/local/local.ts");
  const rt = createLocalRuntime(config, options);
  try {
    await fn(rt);
  } finally {
    await rt.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      all: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
      example: { type: "string" },
      lazy: { type: "boolean", default: false },
      yes: { type: "boolean", short: "y", default: false },
      port: { type: "string" },
      host: { type: "string" },
      "public-url": { type: "string" },
      id: { type: "string" },
      kind: { type: "string" },
      tenant: { type: "string" },
      role: { type: "string", multiple: true },
      bucket: { type: "string" },
      prefix: { type: "string" },
      queue: { type: "string" },
      bus: { type: "string" },
      "dry-run": { type: "boolean", default: false },
      max: { type: "string" },
      dead: { type: "boolean", default: false },
      status: { type: "string" },
      namespace: { type: "string" },
    },
  });
  const [command = "help", arg] = positionals;
  if (values.help || command === "help") {
    // `arbor help`, `arbor --help`: every command; `arbor <command> --help`, `arbor help <command>`: that one.
    const { commandHelp, globalHelp, helpFor } = await import("./help.ts");
    const topic =
      command !== "help" ? command : (arg ?? (values.help && positionals.length ? "help" : undefined));
    if (topic === undefined) return void process.stdout.write(globalHelp());
    const found = commandHelp(topic);
    if (!found) throw new Error(`Unknown command "${topic}". Run: arbor help`);
    return void process.stdout.write(helpFor(found));
  }
  const { loadConfig, loadOperatorSettings, loadRemoteConfig } = await import("../shared/runtime/config.ts");

  // With ARBOR_URL: a remote Arbor, through its HTTP API.
  const remoteConfig = ["run", "ls", "get", "events", "team", "notify", "tools", "graph"].includes(command)
    ? loadRemoteConfig()
    : undefined;
  if (remoteConfig) {
    const { Remote } = await import("./remote.ts");
    const remote = new Remote(remoteConfig);
    const { remoteEvents, remoteGet, remoteLs, remoteRun } = await import("./remote-commands.ts");
    switch (command) {
      case "run":
        if (values.example) throw new Error("--example runs on the local runtime: unset ARBOR_URL for it");
        process.exitCode = await remoteRun(remote, { text: arg, lazy: values.lazy, yes: values.yes });
        return;
      case "ls":
        return remoteLs(remote, arg, values.all, write);
      case "get":
        return remoteGet(remote, arg, write);
      case "events":
        if (values.prefix) {
          const { followResourceEvents } = await import("./resource-events.ts");
          return followResourceEvents(remoteConfig, values.prefix, write);
        }
        return remoteEvents(remote, arg, write);
      case "tools":
        return (await import("./tools.ts")).toolsRemote(remote, arg, values.namespace, write);
      case "graph": {
        const { GRAPH_USAGE, graphQueryRemote } = await import("./graph.ts");
        if (arg !== "query") throw new Error(GRAPH_USAGE);
        return graphQueryRemote(remote, positionals.slice(2), values.max, write);
      }
      case "notify": {
        const { notifyRemote } = await import("./notify.ts");
        process.exitCode = await notifyRemote(
          arg,
          positionals[2],
          { dead: values.dead, status: values.status, all: values.all },
          remote,
          write,
        );
        return;
      }
      default: {
        const { TEAM_USAGE, teamApplyRemote, teamShowRemote } = await import("./team.ts");
        if (arg === "show") return teamShowRemote(remote, write);
        if (arg !== "apply") throw new Error(TEAM_USAGE);
        process.exitCode = await teamApplyRemote(
          remote,
          { file: positionals[2], yes: values.yes, dryRun: values["dry-run"] },
          write,
        );
        return;
      }
    }
  }

  switch (command) {
    case "run": {
      const config = loadConfig();
      if (config.mode !== "local")
        throw new Error("arbor run uses the local runtime; unset ARBOR_MODE or set it to local");
      const { runCommand } = await import("./run.ts");
      process.exitCode = await runCommand(config, {
        text: arg,
        example: values.example,
        lazy: values.lazy,
        yes: values.yes,
      });
      return;
    }
    case "serve": {
      const config = loadConfig();
      if (config.mode !== "local")
        throw new Error("arbor serve uses the local runtime; unset ARBOR_MODE or set it to local");
      const { serveCommand } = await import("./serve.ts");
      process.exitCode = await serveCommand(config, {
        port: values.port,
        host: values.host,
        example: values.example,
        publicUrl: values["public-url"],
      });
      return;
    }
    case "keys":
      return (await import("./keys.ts")).keysCommand(
        arg,
        positionals[2],
        { id: values.id, kind: values.kind, tenant: values.tenant, roles: values.role ?? [] },
        write,
      );
    case "policy":
      return (await import("./policy.ts")).policyCommand(
        arg,
        { file: positionals[2], bucket: values.bucket, prefix: values.prefix },
        loadOperatorSettings(),
        write,
      );
    case "dlq":
      process.exitCode = await (await import("./dlq.ts")).dlqCommand(
        arg,
        { queue: values.queue, bus: values.bus, dryRun: values["dry-run"], max: values.max },
        loadOperatorSettings(),
        write,
      );
      return;
    case "team": {
      const config = loadConfig();
      if (config.mode !== "local")
        throw new Error(
          "arbor team works on the local data folder, or on a remote Arbor with ARBOR_URL and ARBOR_KEY; unset ARBOR_MODE",
        );
      const tenant = values.tenant ?? config.tenant;
      const { TEAM_USAGE, teamApplyLocal, teamShowLocal } = await import("./team.ts");
      if (arg === "show") return teamShowLocal(config, tenant, write);
      if (arg !== "apply") throw new Error(TEAM_USAGE);
      process.exitCode = await teamApplyLocal(
        config,
        tenant,
        { file: positionals[2], yes: values.yes, dryRun: values["dry-run"] },
        write,
      );
      return;
    }
    case "tools": {
      const config = loadConfig();
      if (config.mode !== "local")
        throw new Error(
          "arbor tools works on the local data folder, or on a remote Arbor with ARBOR_URL and ARBOR_KEY; unset ARBOR_MODE",
        );
      const { toolsLocal } = await import("./tools.ts");
      return toolsLocal(config, values.tenant ?? config.tenant, arg, values.namespace, write);
    }
    case "notify":
      return withRuntime(async (rt) => {
        const { notifyCommand } = await import("./notify.ts");
        process.exitCode = await notifyCommand(
          arg,
          positionals[2],
          { dead: values.dead, status: values.status, all: values.all },
          rt.state,
          () => new Date(),
          write,
        );
      });
    case "graph":
      return withRuntime(async (rt) => {
        const { GRAPH_USAGE, graphQueryLocal } = await import("./graph.ts");
        if (arg !== "query") throw new Error(GRAPH_USAGE);
        await graphQueryLocal(rt.state, values.tenant ?? rt.tenant, positionals.slice(2), values.max, write);
      });
    case "demo": {
      const { runDemo } = await import("./demo.ts");
      return withRuntime((rt) => runDemo(rt, write), { bus: { deliveries: 2 }, lockAs: "arbor demo" });
    }
    case "ls":
      return withRuntime(async (rt) => {
        const { parseUrn, tenantUrn } = await import("../shared/domain/urn.ts");
        const urn = arg ?? tenantUrn(rt.tenant);
        parseUrn(urn);
        const urns = values.all ? await rt.resources.descendantUrns(urn) : await rt.resources.childUrns(urn);
        const docs = await rt.resources.getMany(urns);
        for (const doc of docs)
          if (doc) write(`${doc.meta.type.padEnd(20)} ${doc.meta.name.padEnd(28)} ${note(doc.meta.id)}`);
        if (urns.length === 0) write(note(`Nothing below ${urn}. Try: arbor demo`));
      });
    case "get":
      return withRuntime(async (rt) => {
        if (!arg) throw new Error("Usage: arbor get <urn>");
        const doc = await rt.resources.get(arg);
        if (!doc) throw new Error(`No resource ${arg}. List what exists with: arbor ls --all`);
        write(JSON.stringify(doc, null, 2));
      });
    case "events":
      if (values.prefix) {
        const { RESOURCE_EVENTS_USAGE } = await import("./resource-events.ts");
        throw new Error(RESOURCE_EVENTS_USAGE);
      }
      return withRuntime(async (rt) => {
        if (!arg) throw new Error("Usage: arbor events <task-urn>");
        const events = await rt.state.readStream(arg);
        if (events.length === 0) write(note(`No events in stream ${arg}`));
        for (const e of events)
          write(`${String(e.seq).padStart(4)} ${e.at} ${e.type.padEnd(26)} ${e.actor.id} ${note(e.id)}`);
      });
    case "replay":
      return withRuntime(async (rt) => {
        const { readAllEvents } = await import("../shared/ports/state-store.ts");
        let events = 0;
        for await (const _ of readAllEvents(rt.state)) events++;
        const replayed = await rt.tasks.replay();
        const differ: string[] = [];
        for (const [taskId, view] of replayed) {
          if (JSON.stringify(view) !== JSON.stringify(await rt.tasks.view(taskId))) differ.push(taskId);
        }
        write(
          `${heading("Replay")}: ${events} events, ${replayed.size} task views rebuilt, ${differ.length} differ from the stored views`,
        );
        for (const d of differ) write(`  differs: ${d}`);
        if (differ.length > 0) process.exitCode = 1;
      });
    default:
      throw new Error(`Unknown command "${command}". Run: arbor help`);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  const err = e as Error;
  process.stderr.write(`arbor: ${isArborError(e) ? `${err.message} [${e.code}]` : err.message}\n`);
  process.exitCode = 1;
});
