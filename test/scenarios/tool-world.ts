import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalEmbedder } from "../../shared/adapters/embeddings/local-embedder.ts";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { createGuardedFetch } from "../../shared/outbound/guard.ts";
import { type OutboundSettings, outboundPolicy } from "../../shared/outbound/policy.ts";
import type { ToolContext } from "../../shared/ports/tools.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local/local.ts";
import type { ToolService } from "../../shared/tools/service/tool-service.ts";

/** What `ToolService.open` takes besides the configuration. */
export type ToolServiceOpenOptions = Parameters<typeof ToolService.open>[1];

/** The embedder the tool tests index and search with (one for all: it keeps no state that matters). */
export const embedder = new LocalEmbedder();

/**
 * The tests' peers listen on 127.0.0.1: the operator's setting that lets Arbor reach them (loopback,
 * on the ports above 1023), read the way `arbor serve` reads it. The tool tests call out through the
 * outbound guard with it, as production does, so the guard is in the path of every tool test.
 */
export const LOOPBACK_ALLOWED: OutboundSettings = (() => {
  const { outbound } = loadConfig({ ARBOR_OUTBOUND_ALLOW: "127.0.0.1", ARBOR_OUTBOUND_PORTS: "1024-65535" });
  if (!outbound) throw new Error("loadConfig gave no outbound settings");
  return outbound;
})();

/** The outbound guard with loopback allowed (what the tool tests call out with). */
export const guardedFetch = createGuardedFetch(outboundPolicy(LOOPBACK_ALLOWED));

/**
 * A tool service's surroundings for the tool tests: a local runtime (resources, audit log) and a
 * vector index in a fresh folder, and the options that open a tool service on them (a fixed clock,
 * the outbound guard with loopback allowed), with a test's own on top.
 */
export interface ToolWorld {
  dir: string;
  rt: LocalRuntime;
  index: LocalVectorIndex;
  options(extra?: Partial<ToolServiceOpenOptions>): ToolServiceOpenOptions;
  close(): Promise<void>;
}

export async function openToolWorld(prefix: string): Promise<ToolWorld> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const rt = createLocalRuntime({ mode: "local", tenant: "acme", dataDir: dir, durable: false });
  const index = await LocalVectorIndex.open(join(dir, "vectors"), {
    embedderId: embedder.id,
    dimension: embedder.dimension,
  });
  return {
    dir,
    rt,
    index,
    options: (extra = {}) => ({
      resources: rt.resources,
      state: rt.state,
      audit: rt.audit,
      clock: () => new Date("2026-06-01T09:00:00.000Z"),
      embedder,
      index,
      fetch: guardedFetch,
      ...extra,
    }),
    close: async () => {
      await rt.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A real HTTP server for HTTP tools to call, on an ephemeral port of 127.0.0.1 (`base` is its URL). */
export interface LocalHttpServer {
  base: string;
  /** Drops open connections (a request that never answers, say) and resolves once it is closed. */
  close(): Promise<void>;
}

export async function listenLocal(handler: RequestListener): Promise<LocalHttpServer> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** The task and assistant the tool tests call tools for, and a call's context (each call its own id). */
export const TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
export const ASSISTANT = `${tenantUrn("acme")}/common.Assistant.a1`;
let calls = 0;
export const ctx = (taskId = TASK): ToolContext => ({ taskId, actor: ASSISTANT, callId: `call_${++calls}` });
