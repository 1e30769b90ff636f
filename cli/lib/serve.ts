import { ASSISTANTS, script } from "../../examples/offsite/scenario.ts";
import { chatChannelsOf, chatRoutes, chatSurfaces } from "../../shared/channels/chat/chat-routes.ts";
import { createServerApp, type RunningServer, startServer } from "../../shared/channels/http/http-server.ts";
import { RateLimiter } from "../../shared/channels/http/rate-limit.ts";
import type { TeamFile } from "../../shared/domain/team.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { FALLBACK_ID } from "../../shared/engine/default-team.ts";
import { toolGapMessage } from "../../shared/engine/tool-gaps.ts";
import { driveExperiments } from "../../shared/evals/driver.ts";
import { ArborError, ConfigError } from "../../shared/kernel/errors.ts";
import { componentLogger } from "../../shared/kernel/logger.ts";
import { fileChatSettings } from "../../shared/notify/chat/settings.ts";
import type { ChatSettingsSource } from "../../shared/notify/chat/types.ts";
import { releaseOrphanedLeases } from "../../shared/notify/orphans.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { createGuardedFetch } from "../../shared/outbound/guard.ts";
import { outboundPolicy } from "../../shared/outbound/policy.ts";
import type { Embedder } from "../../shared/ports/embeddings.ts";
import type { Llm } from "../../shared/ports/llm.ts";
import { type LocalConfig, MODEL_HELP, parsePublicUrl } from "../../shared/runtime/config.ts";
import { configuredSettings } from "../../shared/runtime/engine-wiring.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import {
  folderPolicy,
  keysFileNow,
  scriptedModel,
  servedKeys,
} from "../../shared/runtime/local/local-parts.ts";
import { createEmbedder, createModel } from "../../shared/runtime/models.ts";
import { startTelemetry, tracesProtocol } from "../../shared/runtime/telemetry.ts";
import { loadToolsConfig } from "../../shared/tools/service/config.ts";
import { UsageError } from "../command.ts";
import { keysFileOf } from "./keys.ts";
import { heading, note, printable } from "./render.ts";

/**
 * `arbor serve`: the local runtime and engine (built as `arbor run` builds them) behind the HTTP
 * API (shared/channels/http/http-server.ts), until SIGINT or SIGTERM. Only callers with a key from the
 * keys file get in; a tenant gets its default team at its first request (Engine.submit). It holds the data folder's lock
 * (one process per folder), so what a previous process left in flight is driven again at once;
 * from then on the watchdog drives work that has not moved for ARBOR_WATCHDOG_STALE_MS.
 *
 * Slack and Teams (/slack/..., /teams/...: shared/channels/chat/chat-routes.ts) take their settings from
 * the chat settings file (ARBOR_CHAT_SETTINGS_FILE, else <dataDir>/chat.json), which only its owner
 * may read: checked at start (a bad one stops the server, saying what to fix), then read again when
 * it changes. Without the file the chat routes answer 404 until one is written.
 */
export interface ServeOptions {
  port: string | undefined;
  host: string | undefined;
  example: string | undefined;
  /** `--public-url`: where callers reach the server (overrides ARBOR_PUBLIC_URL). */
  publicUrl?: string | undefined;
}

const WATCHDOG_EVERY_MS = 60_000;
/** ARBOR_WATCHDOG_STALE_MS's default (shared/runtime/config.ts), for a config built without it. */
const WATCHDOG_STALE_MS = 600_000;

export const noKeysHelp = (
  file: string,
) => `arbor serve lets in only callers with an API key, and ${file} has none.
Create one (the key is printed once: keep it):

  npx arbor keys add --id user_<your-name> [--tenant <tenant>] [--role <role>]

then start again: npx arbor serve
(ARBOR_API_KEYS_FILE says where the keys are kept; ARBOR_TENANT is the default tenant.)`;

export async function serveCommand(config: LocalConfig, options: ServeOptions): Promise<number> {
  const port = Number(options.port ?? "8787");
  if (!/^\d{1,5}$/.test(options.port ?? "8787") || port > 65_535)
    throw new UsageError(`--port is a port number (0-65535, 0 for any free port), not "${options.port}"`);
  const host = options.host ?? "127.0.0.1";
  // The agent card names the configured public URL, else where the server listens; never a request's Host.
  const publicUrl = options.publicUrl ? parsePublicUrl(options.publicUrl) : config.publicUrl;
  const keysFile = keysFileOf(config);
  const keysNow = keysFileNow(keysFile);
  if (keysNow.keys === 0) {
    process.stderr.write(`${noKeysHelp(keysFile)}\n`);
    return 2;
  }
  const chatSettings = config.chat
    ? fileChatSettings({ file: config.chat.file, required: config.chat.required, ttlMs: config.chat.ttlMs })
    : undefined;
  const chatChannels = await checkChatSettings(chatSettings);
  if (chatChannels === "invalid") return 2;
  const setup = chooseModel(config, options.example);
  if (!setup) {
    process.stderr.write(
      `${MODEL_HELP.replace("arbor run --example offsite", "arbor serve --example offsite")}\n`,
    );
    return 2;
  }
  const log = componentLogger("serve");
  const { tenants } = keysNow;
  // OTEL_EXPORTER_OTLP_ENDPOINT (and the SDK's other settings) turn traces on; none: nothing is loaded.
  const telemetry = await startTelemetry("arbor");
  const rt = createLocalRuntime(config, { lockAs: "arbor serve" });
  let server: RunningServer | undefined;
  let stopSteps: (() => void) | undefined;
  let watchdog: NodeJS.Timeout | undefined;
  let stopWatching: (() => void) | undefined;
  let notify: LocalNotify | undefined;
  const engine = await createLocalEngine(rt, {
    llm: setup.llm,
    // The model server's embedding model, when one is configured (ARBOR_EMBEDDING_MODEL).
    ...(setup.embedder ? { embedder: setup.embedder } : {}),
    warmIndex: true,
    // The fallback assistant is one URN for the whole engine: only safe when it serves one tenant.
    // With several, a task nobody fits is offered to its person (an assign_subtask interaction).
    settings: {
      ...(tenants.length === 1
        ? { fallbackAssistant: `${tenantUrn(tenants[0] as string)}/common.Assistant.${FALLBACK_ID}` }
        : {}),
      // The example's team is the default team; otherwise ARBOR_TEAM_FILE's, else the built-in one.
      ...(setup.team ? { defaultTeam: setup.team } : {}),
      ...configuredSettings(config),
    },
    toolsConfig: loadToolsConfig(config.toolsFile),
    // Only a configured public URL: where the server listens (127.0.0.1) no remote agent reaches.
    ...(publicUrl ? { publicUrl } : {}),
    ...(config.teamFile && !setup.team ? { teamFile: config.teamFile } : {}),
    ...(config.outbound ? { outbound: config.outbound } : {}),
    ...(config.policy?.engine === "opa" ? { policy: await folderPolicy(config.policy.dir) } : {}),
  }).catch(async (error: unknown) => {
    await rt.close();
    throw error;
  });
  try {
    // A tools file replaces the built-ins: teams that still list tools it lacks are said now (the
    // default team's in the log already, by the engine's wiring; the tenants' stored teams here).
    const gaps = await engine.toolGaps(tenants);
    for (const gap of gaps)
      if (gap.tenant) log.warn(toolGapMessage(gap), { team: gap.team, missing: gap.missing });
    const stopEngine = engine.start();
    // Experiments started over the API (shared/evals/driver.ts): moved on by their requests' events.
    const stopExperiments = driveExperiments(engine);
    stopSteps = () => {
      stopExperiments();
      stopEngine();
    };
    // Webhooks (callbackUrl, A2A push): recorded deliveries left by a previous process go out now.
    // Slack and Teams threads: their deliveries are sent through the channels' surfaces (the Teams
    // one through the notify path's guarded fetch: the service URL came from an activity).
    const surfaces = chatSettings
      ? chatSurfaces(chatSettings, {
          fetch: notifyUrls(config.outbound, { ...config.notify }).fetch,
          state: engine.deps.state,
        })
      : undefined;
    // The lock says no other process works on this folder: a delivery or a thread still held is
    // held by a process that is gone, and goes on now rather than when its lease runs out.
    await releaseOrphanedLeases(engine.deps.state, engine.deps.clock());
    notify = startLocalNotify(engine, {
      outbound: config.outbound,
      notify: config.notify,
      ...(surfaces ? { surfaces } : {}),
    });
    const drive = (staleMs: number) =>
      void engine.watchdog(staleMs).catch((error: Error) => log.error("watchdog failed", { error }));
    // This process holds the data folder's lock, so whatever was in flight when it opened the folder
    // was left by a process that is gone (a crash, kill -9): it is driven again now, not once it
    // has been still for the stale time. Every step is idempotent, so this repeats nothing done.
    drive(0);
    const staleMs = config.watchdogStaleMs ?? WATCHDOG_STALE_MS;
    watchdog = setInterval(() => drive(staleMs), WATCHDOG_EVERY_MS).unref();
    // A key added (`arbor keys add`) or removed while serving counts from the next request on; an
    // emptied or deleted file lets nobody in, an invalid one fails closed (see api-keys.ts). A
    // tenant's team: the engine gives a tenant without one the default team at its first request.
    const keys = servedKeys(keysFile, log);
    stopWatching = keys.stop;
    const app = createServerApp({
      engine,
      // The admin routes (/v1/admin/keys) write the file, and the server takes it at once.
      keys: keys.store,
      publicUrl: publicUrl ?? (() => server?.url ?? ""),
      limiter: new RateLimiter(config.rateLimits ?? {}),
      unwritable: () => rt.unwritable(), // what /healthz reports
      audit: rt.audit, // the console's timelines
      ...(config.a2aBlockingWaitMs !== undefined ? { a2aWaitMs: config.a2aBlockingWaitMs } : {}),
      notify: notify.service,
      ...(chatSettings
        ? {
            chat: chatRoutes({
              engine,
              notify: notify.service,
              settings: chatSettings,
              // The Teams signing keys: through the outbound guard, as every call out.
              fetch: createGuardedFetch(outboundPolicy(config.outbound)),
            }),
          }
        : {}),
    });
    server = await startServer(app, { port, host }).catch((error: NodeJS.ErrnoException) => {
      throw error.code === "EADDRINUSE"
        ? new ArborError("CONFLICT", `Port ${port} on ${host} is taken: choose another with --port`, {
            cause: error,
          })
        : error;
    });
    process.stdout.write(
      `${heading("Arbor's HTTP API")} on ${server.url} (model ${setup.llm.id}; ${keysNow.keys} key${keysNow.keys === 1 ? "" : "s"}, tenants ${tenants.join(", ")})\n` +
        (telemetry
          ? `${note(`Traces: OTLP ${tracesProtocol()} to ${process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT}`)}\n`
          : "") +
        `${note(`Try: curl -H "Authorization: Bearer <key>" -H "content-type: application/json" -d '{"text":"..."}' ${server.url}/v1/messages`)}\n` +
        `${note(`Console: ${server.url}/console (sign in with a key)`)}\n` +
        (chatChannels.length > 0
          ? `${note(`Chat: ${chatChannels.join(" and ")} (${chatChannels.map((c) => `${server?.url}/${c.toLowerCase()}/...`).join(", ")}; see shared/channels/chat/CHAT-DEPLOY.md)`)}\n`
          : "") +
        gaps.map((gap) => `${heading("Warning")}: ${printable(toolGapMessage(gap))}\n`).join("") +
        `${note("Ctrl-C stops it.")}\n`,
    );
    const signal = await untilStopped();
    process.stdout.write(`${signal}: stopping\n`);
    return 0;
  } finally {
    stopWatching?.();
    if (watchdog) clearInterval(watchdog);
    await server?.close();
    await notify?.stop();
    stopSteps?.();
    await engine.close();
    await rt.close();
    await telemetry?.shutdown();
  }
}

/**
 * The chat channels the settings file has, or "invalid" once the reason is printed (a file others
 * may read, not JSON, a bad field): the server does not start with settings it would refuse.
 */
async function checkChatSettings(settings: ChatSettingsSource | undefined): Promise<string[] | "invalid"> {
  if (!settings) return [];
  try {
    return chatChannelsOf(await settings());
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return "invalid";
  }
}

export function chooseModel(
  config: LocalConfig,
  example: string | undefined,
): { llm: Llm; embedder?: Embedder; team?: TeamFile } | undefined {
  if (example) {
    if (example !== "offsite") throw new UsageError(`Unknown example "${example}". Try: --example offsite`);
    const team = { assistants: ASSISTANTS.map((a) => ({ ...a, purpose: a.purpose ?? a.name })) };
    return { llm: scriptedModel(script, { keepCalls: 0 }), team };
  }
  if (!config.model) return undefined;
  const embedder = createEmbedder(config.model);
  return { llm: createModel(config.model), ...(embedder ? { embedder } : {}) };
}

/** Resolves on the first SIGINT or SIGTERM; a second one ends the process the default way. */
function untilStopped(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve(signal);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
