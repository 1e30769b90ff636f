import { hash } from "node:crypto";
import { trimOldest } from "../domain/bounded-map.ts";
import type { MemoryResource, MemoryScope } from "../domain/resources.ts";
import { withMeta } from "../domain/resources.ts";
import { MAX_REMEMBERED_URNS, tenantUrn, type Urn } from "../domain/urn.ts";
import { ConflictError, NotFoundError, ValidationError } from "../kernel/errors.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { VectorIndex, VectorMatch } from "../ports/vector-index.ts";
import type { ResourceStore } from "../store/resource-store.ts";

/**
 * Long-term memory: facts an assistant chooses to remember (the `remember` built-in), for the
 * person a request is from, for the whole tenant, or for itself, recalled by similarity into the
 * prompts of later requests of that scope, with where each came from.
 *
 *   cld:common.Tenant.<t>/mem.Scope.person-<h>/mem.Memory.<id>     about one person (h: their id's hash)
 *   cld:common.Tenant.<t>/mem.Scope.tenant/mem.Memory.<id>         for everyone of the tenant
 *   cld:common.Tenant.<t>/mem.Scope.assistant-<h>/mem.Memory.<id>  for one assistant
 *
 * A recall asks the index for one scope's prefix at a time (the person's, the tenant's, the
 * assistant's): another person's or tenant's memories are never among what it is given to look
 * at. The same fact remembered again is the same memory (its id is the fact's hash). At most
 * MAX_MEMORIES_PER_SCOPE per scope: the next is refused, saying to forget one. Assistants read
 * memories only through recall (the default policy keeps `mem.Memory` from their reads); the
 * person a memory is about and the tenant's admins list and delete them.
 */
export interface MemoryDeps {
  resources: ResourceStore;
  embedder: Embedder;
  index: VectorIndex;
}

export const MAX_MEMORIES_PER_SCOPE = 200;
export const MAX_FACT_CHARS = 500;

const hash16 = (text: string) => hash("sha256", text).slice(0, 16);

/** Scopes' URNs already made: every leaf's recall asks for three (its tenant's, person's, assistant's). */
const scopes = new Map<string, Urn>();

/** Where a scope's memories lie: `mem.Scope.<...>` under the tenant. */
export function scopeUrn(tenant: string, scope: MemoryScope, who?: string): Urn {
  if (scope !== "tenant" && !who)
    throw new ValidationError(`A ${scope}'s memory needs the ${scope} it is for`);
  const known = `${tenant}\u0000${scope}\u0000${who ?? ""}`;
  let urn = scopes.get(known);
  if (urn === undefined) {
    const id = scope === "tenant" ? "tenant" : `${scope}-${hash16(who as string)}`;
    urn = withMeta({ type: "mem.Scope", name: id, parent: tenantUrn(tenant), id }).id as Urn;
    scopes.set(known, urn);
    trimOldest(scopes, MAX_REMEMBERED_URNS);
  }
  return urn;
}

/** The fact as it is kept: one line, no control characters, within MAX_FACT_CHARS. */
function cleanFact(fact: string): string {
  const clean = fact
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
    .replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  if (!clean) throw new ValidationError("A memory needs a fact: say what to remember");
  if (clean.length > MAX_FACT_CHARS)
    throw new ValidationError(
      `A memory is at most ${MAX_FACT_CHARS} characters (this one has ${clean.length}): remember the fact itself, briefly`,
    );
  return clean;
}

export interface RememberInput {
  tenant: string;
  scope: MemoryScope;
  /** The person (scope person). */
  about?: string;
  /** The assistant's URN (scope assistant; also who remembers). */
  assistant: string;
  fact: string;
  /** The task whose assistant remembers it. */
  source: string;
  createdAt: string;
}

export async function remember(deps: MemoryDeps, input: RememberInput): Promise<MemoryResource> {
  const fact = cleanFact(input.fact);
  const who =
    input.scope === "person" ? input.about : input.scope === "assistant" ? input.assistant : undefined;
  const parent = scopeUrn(input.tenant, input.scope, who);
  const meta = withMeta({
    type: "mem.Memory",
    name: fact.slice(0, 200),
    parent,
    id: hash16(fact.toLowerCase()),
    createdAt: input.createdAt,
  });
  const existing = await deps.resources.getAs("mem.Memory", meta.id);
  if (!existing) {
    const held = await deps.resources.childUrns(parent, "mem.Memory");
    if (held.length >= MAX_MEMORIES_PER_SCOPE)
      throw new ConflictError(
        `This ${input.scope === "tenant" ? "tenant" : input.scope} already has ${held.length} memories, the most one scope keeps: forget one first`,
      );
  }
  const memory: MemoryResource = {
    meta: { ...meta, type: "mem.Memory" },
    fact,
    scope: input.scope,
    ...(input.scope === "person" ? { about: input.about as string } : {}),
    ...(input.scope === "assistant" ? { assistant: input.assistant as Urn } : {}),
    source: input.source as Urn,
    rememberedBy: input.assistant,
  };
  const [vector] = await deps.embedder.embed([fact]);
  await deps.resources.put(memory);
  if (vector) await deps.index.upsert([{ key: memory.meta.id, vector, type: "mem.Memory", metadata: {} }]);
  return memory;
}

export interface Recalled {
  urn: Urn;
  fact: string;
  scope: MemoryScope;
  source: string;
  score: number;
}

export interface RecallQuery {
  tenant: string;
  person?: string;
  assistant?: string;
  vector: Float32Array;
  limit: number;
}

/**
 * The index's matches of a recall (the memories nearest `vector` for a request: the person's, the
 * tenant's and the assistant's, each scope asked for on its own), one query per scope, at once.
 * `recalledIn` reads the nearest of them.
 */
export async function memoryMatches(
  deps: Pick<MemoryDeps, "index">,
  query: RecallQuery,
): Promise<VectorMatch[]> {
  if (query.limit <= 0 || deps.index.mayHold?.("mem.Memory") === false) return [];
  const scopes: Urn[] = [scopeUrn(query.tenant, "tenant")];
  if (query.person) scopes.push(scopeUrn(query.tenant, "person", query.person));
  if (query.assistant) scopes.push(scopeUrn(query.tenant, "assistant", query.assistant));
  const lists = await Promise.all(
    scopes.map((scope) =>
      deps.index.query({
        vector: query.vector,
        topK: query.limit,
        type: "mem.Memory",
        keyPrefix: `${scope}/`, // a scope URN is made whole by scopeUrn
      }),
    ),
  );
  return lists.flat();
}

/** The memories of a recall's matches, nearest first, at most `limit` (only what matched is read). */
export async function recalledIn(
  deps: Pick<MemoryDeps, "resources">,
  matches: readonly VectorMatch[],
  limit: number,
): Promise<Recalled[]> {
  if (matches.length === 0) return [];
  // Each scope gave up to `limit`: only the nearest `limit` of them all are read.
  const sorted = [...matches].sort((a, b) => b.score - a.score).slice(0, limit);
  const memories = await deps.resources.getMany(sorted.map((m) => m.key));
  const found: Recalled[] = [];
  sorted.forEach((m, i) => {
    const memory = memories[i];
    if (memory?.meta.type !== "mem.Memory" || found.length >= limit) return;
    const { fact, scope, source } = memory as MemoryResource;
    found.push({ urn: memory.meta.id as Urn, fact, scope, source, score: m.score });
  });
  return found;
}

/** A recalled memory as a line of a prompt: its URN, whose it is, where from, the fact quoted as data. */
export function memoryLine(m: Recalled): string {
  const whose =
    m.scope === "person" ? "about the person asking" : m.scope === "tenant" ? "for everyone here" : "yours";
  return `- [${m.urn}] (${whose}; remembered in ${m.source}) ${JSON.stringify(m.fact)}`;
}

/** A scope's memories, by URN. */
export async function listMemories(
  deps: Pick<MemoryDeps, "resources">,
  tenant: string,
  scope: MemoryScope,
  who?: string,
): Promise<MemoryResource[]> {
  const parent = scopeUrn(tenant, scope, who);
  return (await deps.resources.children(parent, "mem.Memory")) as MemoryResource[];
}

/** Removes a memory and its vector; NotFoundError when there is none. */
export async function forget(deps: MemoryDeps, urn: string): Promise<MemoryResource> {
  const memory = await deps.resources.getAs("mem.Memory", urn);
  if (!memory) throw new NotFoundError("Memory", urn);
  await deps.index.delete([urn]);
  await deps.resources.delete(urn);
  return memory;
}
