import { join } from "node:path";
import { LocalEmbedder } from "../adapters/embeddings/local-embedder.ts";
import { ThreadedVectorIndex } from "../adapters/vectors/threaded-vector-index.ts";
import type { Engine } from "../engine/engine.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { Llm } from "../ports/llm.ts";
import { type EngineOptions, engineOn, openTools } from "./engine-wiring.ts";
import type { LocalRuntime } from "./local.ts";

/**
 * The orchestration engine on the local runtime: the local embedder (offline), a libSQL vector
 * index (DiskANN) in its own file under the data folder (migrated from the flat index an older
 * version left there) on a worker thread of its own (ThreadedVectorIndex: an insertion's 2-8 ms of
 * CPU never holds the event loop that serves requests), the built-in tools, and whatever model the
 * caller chose. The 202's link reads "accepted" until the root task is planned (acceptedView), so
 * an election that waits for the thread delays no answer.
 */
export interface LocalEngineOptions extends EngineOptions {
  llm: Llm;
  embedder?: Embedder;
}

export async function createLocalEngine(rt: LocalRuntime, options: LocalEngineOptions): Promise<Engine> {
  const embedder = options.embedder ?? new LocalEmbedder();
  const index = await ThreadedVectorIndex.open(
    join(rt.dataDir, "vectors"),
    embedder.id.replace(/[^A-Za-z0-9._-]/g, "_"),
    { embedderId: embedder.id, dimension: embedder.dimension },
  );
  const tools = await openTools(rt, { embedder, index }, options);
  return engineOn(rt, { llm: options.llm, embedder, index, tools }, options);
}
