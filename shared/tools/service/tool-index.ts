import type { ToolResource } from "../../domain/resources.ts";
import { tenantUrn } from "../../domain/urn.ts";
import { ConflictError } from "../../kernel/errors.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { StateStore } from "../../ports/state-store.ts";
import type { VectorIndex, VectorRecord } from "../../ports/vector-index.ts";
import type { ResourceStore } from "../../store/resource-store.ts";
import {
  REGISTRY_KIND,
  REGISTRY_PREFIX,
  type RegistryRecord,
  TOOL_TYPE,
  toolUrn,
  UNINDEXED,
} from "./tool-registry.ts";

/**
 * A tenant's tools made searchable by meaning (search_resources' `common.Tool` kind: "which tool
 * sends an invoice?"), each by its name and description, the text the model is shown.
 *
 * A registration that changes a tenant's set marks its record "unindexed" (tool-registry.ts); this
 * pass, run by the watchdog, takes those records: it reads the tenant's Tool resources, embeds and
 * upserts them, takes out of the index the tools it indexed last time that are gone, and marks the
 * record "indexed" with the names it holds now, on the version it read. A registration in between
 * makes that save conflict: the record stays unindexed and the next pass indexes the new set. A
 * crash before the save indexes the set again (the same keys). Off every request's path.
 */
export interface ToolIndexDeps {
  state: StateStore;
  resources: ResourceStore;
  embedder: Embedder;
  index: VectorIndex;
  clock: () => Date;
}

/** Registrations taken a pass: tenants are few, and each is one listing and one embedding call. */
const PER_PASS = 100;
/** Tools embedded in one call. */
const EMBED_BATCH = 64;

/** Indexes the tools of every registration not yet indexed; answers how many tools it indexed. */
export async function indexTools(deps: ToolIndexDeps): Promise<number> {
  const pending = await deps.state.byStatus<RegistryRecord>(REGISTRY_KIND, UNINDEXED, { limit: PER_PASS });
  let indexed = 0;
  for (const record of pending.items) {
    const tenant = record.key.slice(REGISTRY_PREFIX.length);
    const tools = (await deps.resources.children(tenantUrn(tenant), TOOL_TYPE)) as ToolResource[];
    const vectors: (Float32Array | undefined)[] = [];
    // An MCP server may bring hundreds of tools: embedded a batch at a time.
    for (let i = 0; i < tools.length; i += EMBED_BATCH)
      vectors.push(
        ...(await deps.embedder.embed(
          tools.slice(i, i + EMBED_BATCH).map((t) => `${t.function.name}\n${t.function.description}`),
        )),
      );
    const records: VectorRecord[] = tools.flatMap((t, i) => {
      const vector = vectors[i];
      return vector ? [{ key: t.meta.id, vector, type: TOOL_TYPE, metadata: {} }] : [];
    });
    if (records.length) await deps.index.upsert(records);
    const names = tools.map((t) => t.function.name).sort();
    const now = new Set(names);
    const gone = (record.data.indexed ?? []).filter((n) => !now.has(n)).map((n) => toolUrn(tenant, n));
    if (gone.length) await deps.index.delete(gone);
    try {
      await deps.state.transact([
        {
          op: "put",
          record: {
            key: record.key,
            kind: REGISTRY_KIND,
            status: "indexed",
            updatedAt: deps.clock().toISOString(),
            data: { ...record.data, indexed: names },
          },
          expectedVersion: record.version,
        },
      ]);
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error; // registered again meanwhile: the next pass
    }
    indexed += records.length;
  }
  return indexed;
}
