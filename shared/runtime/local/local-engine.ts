import { join } from "node:path";
import { LocalEmbedder } from "../../adapters/embeddings/local-embedder.ts";
import { openLocalVectorIndex } from "../../adapters/vectors/open-local-index.ts";
import type { Engine } from "../../engine/engine.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { Llm } from "../../ports/llm.ts";
import type { ToolPort } from "../../ports/tools.ts";
import { type EngineOptions, engineOn, openTools } from "../engine-wiring.ts";
import type { LocalRuntime } from "./local.ts";

/**
 * The orchestration engine on the local runtime: the local embedder (offline), the local vector
 * index in its own file under the data folder (SqliteVectorIndex: exact in memory while small, a
 * DiskANN graph once large; migrated from the flat index an older version left there), the
 * built-in tools, and whatever model the caller chose. Opening the index reads a few numbers from
 * its file (and refuses one written for another embedding space); its records are read at the
 * first query, or, with `warmIndex` (a server), from the start, behind its first steps: a server
 * that has answered 10,000 requests holds some 85,000 outputs there, a second or more of CPU to
 * read, which its first requests would otherwise wait for.
 */
export interface LocalEngineOptions extends EngineOptions {
  llm: Llm;
  embedder?: Embedder;
  /** Reads the vector index's records into memory now, a slice per event-loop turn (see above). */
  warmIndex?: boolean;
  /** Puts something around the tools the engine calls (an experiment's recording or replay: shared/evals/). */
  wrapTools?: (tools: ToolPort) => ToolPort;
}

export async function createLocalEngine(rt: LocalRuntime, options: LocalEngineOptions): Promise<Engine> {
  const embedder = options.embedder ?? new LocalEmbedder();
  const index = await openLocalVectorIndex(
    join(rt.dataDir, "vectors"),
    embedder.id.replace(/[^A-Za-z0-9._-]/g, "_"),
    { embedderId: embedder.id, dimension: embedder.dimension },
  );
  const opened = await openTools(rt, { embedder, index }, options);
  const tools = options.wrapTools ? options.wrapTools(opened) : opened;
  const engine = engineOn(
    rt,
    { llm: options.llm, embedder, index, tools },
    // Each embedder has an index of its own: a new one (or one whose folder was lost) gets each
    // tenant's stored team at the tenant's first request.
    { ...options, settings: { reindexTeams: index.size === 0, ...options.settings } },
  );
  if (options.warmIndex) void index.warm();
  return engine;
}
