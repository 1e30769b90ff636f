import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalEmbedder } from "../../shared/adapters/embeddings/local-embedder.ts";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { loadConfig } from "../../shared/config.ts";
import { createGuardedFetch } from "../../shared/outbound/guard.ts";
import { type OutboundSettings, outboundPolicy } from "../../shared/outbound/policy.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local.ts";
import type { ToolService } from "../../shared/tools/tool-service.ts";

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
