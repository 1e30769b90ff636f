import { join } from "node:path";
import { ulid } from "ulid";
import { LocalEmbedder } from "../adapters/embeddings/local-embedder.ts";
import { BuiltinToolPort } from "../adapters/tools/builtin-tools.ts";
import { LocalVectorIndex } from "../adapters/vectors/local-vector-index.ts";
import { DEFAULT_BUDGETS } from "../domain/budgets.ts";
import type { EngineSettings, FaultInjector } from "../engine/context.ts";
import { Engine } from "../engine/engine.ts";
import { componentLogger } from "../observability/logger.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { Llm } from "../ports/llm.ts";
import type { ToolPort } from "../ports/tools.ts";
import type { LocalRuntime } from "./local.ts";

/**
 * The orchestration engine on the local runtime: the local embedder (offline), a flat vector index
 * under the data folder, the built-in tools, and whatever model the caller chose.
 */
export interface LocalEngineOptions {
  llm: Llm;
  embedder?: Embedder;
  tools?: ToolPort;
  settings?: Partial<EngineSettings>;
  faults?: FaultInjector;
  clock?: () => Date;
  newId?: () => string;
}

export const DEFAULT_SETTINGS: EngineSettings = {
  electionThreshold: 0.1,
  defaultBudgets: DEFAULT_BUDGETS,
  pricePer1kTokens: { input: 0.0008, output: 0.004 },
  contextResults: 3,
  contextChars: 12_000,
  maxConcurrentSteps: 256,
};

export async function createLocalEngine(rt: LocalRuntime, options: LocalEngineOptions): Promise<Engine> {
  const embedder = options.embedder ?? new LocalEmbedder();
  const index = await LocalVectorIndex.open(
    join(rt.dataDir, "vectors", embedder.id.replace(/[^A-Za-z0-9._-]/g, "_")),
    { embedderId: embedder.id, dimension: embedder.dimension },
    { durable: rt.durable },
  );
  return new Engine({
    resources: rt.resources,
    tasks: rt.tasks,
    state: rt.state,
    bus: rt.bus,
    llm: options.llm,
    embedder,
    index,
    tools: options.tools ?? new BuiltinToolPort(),
    clock: options.clock ?? (() => new Date()),
    newId: options.newId ?? (() => ulid()),
    untilDurable: () => rt.untilDurable(),
    log: componentLogger("engine"),
    settings: { ...DEFAULT_SETTINGS, ...options.settings },
    ...(options.faults ? { faults: options.faults } : {}),
  });
}
