import { createHash } from "node:crypto";
import { type DocumentType, documentNameProblem, documentTypeOf } from "../domain/documents.ts";
import { eventIdFor } from "../domain/events.ts";
import { type Chunk, type DocumentResource, withMeta } from "../domain/resources.ts";
import { isWithin, tenantOf, tenantUrn, type Urn } from "../domain/urn.ts";
import { ConflictError, NotFoundError, ValidationError } from "../kernel/errors.ts";
import type { ArborLogger } from "../kernel/logger.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { EventBus } from "../ports/event-bus.ts";
import { listAllKeys, type ObjectStore } from "../ports/object-store.ts";
import type { StateRecord, StateStore } from "../ports/state-store.ts";
import type { VectorIndex } from "../ports/vector-index.ts";
import type { ResourceStore } from "../store/resource-store.ts";

/**
 * The tenant's documents: added (a file, a page), read into text, cut into chunks by their
 * structure, each chunk embedded and stored under its document, so a leaf's context and the
 * search built-in find them and cite them by URN.
 *
 *   cld:common.Tenant.<t>/doc.Document.<id>                       what it is (once searchable)
 *   cld:common.Tenant.<t>/doc.Document.<id>.source.<gen>          its bytes, as added (each version's)
 *   cld:common.Tenant.<t>/doc.Document.<id>/doc.Chunk.<gen>-<n>   its chunks, <gen> = sha256[0..12)
 *   record document#<urn>  (parent: the tenant)                   its state: pending, processing,
 *                                                                 ready, failed, deleting
 *
 * Adding stores the bytes and the record (pending) and sends DOCUMENT_ADDED; the `documents` step
 * (engine/routes.ts) processes it. Every change of the record is a put on its version, so two adds,
 * an add and a step, or two deliveries of one command never both win: the loser sees what won.
 * Re-adding a changed document writes a new generation of chunks; once it is ready, the chunks of
 * every other generation go (and their vectors). The watchdog (`repairDocuments`) sends again what
 * a crash left pending or processing, and finishes a delete a crash cut short; a document whose
 * processing stopped MAX_ATTEMPTS times (a process killed by its memory, say) is failed, saying so.
 */
export interface KnowledgeDeps {
  resources: ResourceStore;
  objects: ObjectStore;
  state: StateStore;
  bus: EventBus;
  embedder: Embedder;
  index: VectorIndex;
  clock: () => Date;
  log: ArborLogger;
  /**
   * This process's id when it works alone on the store (a local data folder's lock): a run another
   * holder left processing was left by a process that is gone, and is taken over at once.
   */
  soleWorker?: string;
}

export type DocumentStatus = "pending" | "processing" | "ready" | "failed" | "deleting";

export interface DocumentState {
  urn: Urn;
  name: string;
  contentType: DocumentType;
  size: number;
  sha256: string;
  addedBy: string;
  addedAt: string;
  /** Processing runs started (a crash leaves one unfinished). */
  attempts: number;
  /** The process running it (KnowledgeDeps.soleWorker), where one process works alone. */
  holder?: string;
  chunks?: number;
  /** Chunks embedded and stored so far, while processing. */
  embedded?: number;
  pages?: number;
  title?: string;
  error?: string;
  readyAt?: string;
}

export interface DocumentSummary extends DocumentState {
  status: DocumentStatus;
  updatedAt: string;
}

export const DOCUMENT_ADDED = "DOCUMENT_ADDED";
export const DOCUMENTS_SOURCE = "arbor.engine";
/** Processing runs a document gets before it is failed (each one cut short by a crash). */
export const MAX_ATTEMPTS = 3;
/** A processing run not heard of for this long was cut short: the watchdog starts another. */
export const PROCESSING_STALE_MS = 5 * 60_000;

const KIND = "document";
export const documentKey = (urn: string) => `document#${urn}`;
/**
 * Where one version's bytes are: each version its own key, so two adds of one name at once never
 * leave the record naming bytes the other wrote (the loser's are removed with the older versions').
 */
export const sourceKey = (urn: string, sha256: string) => `${urn}.source.${generationOf(sha256)}`;
const sourcePrefix = (urn: string) => `${urn}.source.`;
export const generationOf = (sha256: string) => sha256.slice(0, 12);
export const sha256Of = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** The URN of the tenant's document named `name`: adding the same name again replaces it. */
export const documentUrn = (tenant: string, name: string): Urn =>
  withMeta({ type: "doc.Document", name, parent: tenantUrn(tenant) }).id as Urn;

export interface AddDocumentInput {
  tenant: string;
  /** The actor adding it (its key id). */
  actor: string;
  /** Its file name or URL: the document's name in the tenant. */
  name: string;
  bytes: Uint8Array;
  /** What the caller says it is; else its name's extension decides. */
  contentType?: string;
}

export interface AddedDocument {
  urn: Urn;
  status: DocumentStatus;
  /** The same bytes were there already: nothing was done. */
  unchanged: boolean;
}

/** Stores a document and asks for its processing; refuses what is not a document, saying why. */
export async function addDocument(deps: KnowledgeDeps, input: AddDocumentInput): Promise<AddedDocument> {
  const problem = documentNameProblem(input.name);
  if (problem) throw new ValidationError(problem);
  const contentType = documentTypeOf(input.name, input.bytes, input.contentType);
  const urn = documentUrn(input.tenant, input.name);
  const sha256 = sha256Of(input.bytes);
  const key = documentKey(urn);
  const current = await deps.state.get<DocumentState>(key);
  if (current?.status === "deleting")
    throw new ConflictError(`${input.name} is being deleted: add it again in a moment`, { urn });
  if (current && current.data.sha256 === sha256 && current.status !== "failed")
    return { urn, status: current.status as DocumentStatus, unchanged: true };
  await deps.objects.put(sourceKey(urn, sha256), input.bytes, { contentType });
  const now = deps.clock().toISOString();
  const state: DocumentState = {
    urn,
    name: input.name,
    contentType,
    size: input.bytes.length,
    sha256,
    addedBy: input.actor,
    addedAt: now,
    attempts: 0,
  };
  await putState(deps, urn, "pending", state, current?.version ?? 0).catch((e: unknown) => {
    throw e instanceof ConflictError
      ? new ConflictError(`${input.name} is being added by someone else at the same moment: try again`, {
          urn,
        })
      : e;
  });
  await requestProcessing(deps, urn, sha256);
  return { urn, status: "pending", unchanged: false };
}

/** Sends the command that processes a document (its id is the document's version: sent twice, taken once). */
async function requestProcessing(deps: KnowledgeDeps, urn: string, sha256: string): Promise<void> {
  await deps.bus.publish([
    {
      id: eventIdFor(DOCUMENT_ADDED, urn, sha256),
      source: DOCUMENTS_SOURCE,
      detailType: DOCUMENT_ADDED,
      detail: { urn },
      resources: [urn],
    },
  ]);
}

export function putState(
  deps: KnowledgeDeps,
  urn: string,
  status: DocumentStatus,
  data: DocumentState,
  expectedVersion: number,
): Promise<unknown> {
  const tenant = tenantOf(urn) as string;
  return deps.state.transact([
    {
      op: "put",
      record: {
        key: documentKey(urn),
        kind: KIND,
        parent: tenantUrn(tenant),
        status,
        updatedAt: deps.clock().toISOString(),
        data,
      },
      expectedVersion,
    },
  ]);
}

/** Moves the record on from the version read; undefined when someone else changed it first. */
export async function advance(
  deps: KnowledgeDeps,
  record: StateRecord<DocumentState>,
  status: DocumentStatus,
  changes: Partial<DocumentState>,
): Promise<StateRecord<DocumentState> | undefined> {
  const data = { ...record.data, ...changes };
  try {
    await putState(deps, record.data.urn, status, data, record.version);
  } catch (e) {
    if (e instanceof ConflictError) return undefined;
    throw e;
  }
  return { ...record, status, data, version: record.version + 1, updatedAt: deps.clock().toISOString() };
}

/** The URNs of a document's chunks, every generation. */
async function chunkUrns(deps: KnowledgeDeps, urn: string): Promise<Urn[]> {
  return deps.resources.childUrns(urn, "doc.Chunk");
}

async function removeChunks(deps: KnowledgeDeps, urns: readonly Urn[]): Promise<void> {
  for (let at = 0; at < urns.length; at += 100) {
    const batch = urns.slice(at, at + 100);
    await deps.index.delete(batch);
    await Promise.all(batch.map((u) => deps.resources.delete(u)));
  }
}

const generationOfChunk = (urn: string) => /doc\.Chunk\.([0-9a-f]{12})-\d+$/.exec(urn)?.[1];

export async function dropGeneration(deps: KnowledgeDeps, urn: string, generation: string): Promise<void> {
  await removeChunks(
    deps,
    (await chunkUrns(deps, urn)).filter((c) => generationOfChunk(c) === generation),
  );
}

export async function dropOtherGenerations(
  deps: KnowledgeDeps,
  urn: string,
  generation: string,
): Promise<void> {
  await removeChunks(
    deps,
    (await chunkUrns(deps, urn)).filter((c) => generationOfChunk(c) !== generation),
  );
  const current = `${sourcePrefix(urn)}${generation}`;
  for (const key of await listAllKeys(deps.objects, sourcePrefix(urn)))
    if (key !== current) await deps.objects.delete(key);
}

/** One document of the tenant, as its record says; NotFoundError for none (or another tenant's). */
export async function getDocument(
  deps: Pick<KnowledgeDeps, "state">,
  tenant: string,
  urn: string,
): Promise<DocumentSummary> {
  const record = isWithin(urn, tenantUrn(tenant))
    ? await deps.state.get<DocumentState>(documentKey(urn))
    : undefined;
  if (!record) throw new NotFoundError("Document", urn);
  return summaryOf(record);
}

/** A document's state as its readers see it (which process runs it is the engine's). */
const summaryOf = (r: StateRecord<DocumentState>): DocumentSummary => {
  const { holder: _, ...data } = r.data;
  return { ...data, status: r.status as DocumentStatus, updatedAt: r.updatedAt };
};

/** The tenant's documents, a page at a time, by URN. */
export async function listDocuments(
  deps: Pick<KnowledgeDeps, "state">,
  tenant: string,
  options: { cursor?: string; limit?: number } = {},
): Promise<{ documents: DocumentSummary[]; cursor?: string }> {
  const page = await deps.state.byParent<DocumentState>(tenantUrn(tenant), {
    limit: options.limit ?? 100,
    ...(options.cursor ? { cursor: options.cursor } : {}),
  });
  return {
    documents: page.items.filter((r) => r.kind === KIND).map(summaryOf),
    ...(page.cursor ? { cursor: page.cursor } : {}),
  };
}

/** Removes a document, its chunks, their vectors and its bytes. NotFoundError when there is none. */
export async function deleteDocument(deps: KnowledgeDeps, tenant: string, urn: string): Promise<void> {
  let record = isWithin(urn, tenantUrn(tenant))
    ? await deps.state.get<DocumentState>(documentKey(urn))
    : undefined;
  if (!record) throw new NotFoundError("Document", urn);
  if (record.status !== "deleting") {
    record = await advance(deps, record, "deleting", {});
    if (!record) throw new ConflictError(`The document ${urn} changed meanwhile: delete it again`, { urn });
  }
  await finishDelete(deps, record);
}

async function finishDelete(deps: KnowledgeDeps, record: StateRecord<DocumentState>): Promise<void> {
  const { urn } = record.data;
  await removeChunks(deps, await chunkUrns(deps, urn));
  await deps.resources.delete(urn);
  for (const key of await listAllKeys(deps.objects, sourcePrefix(urn))) await deps.objects.delete(key);
  await deps.state
    .transact([{ op: "delete", key: documentKey(urn), expectedVersion: record.version }])
    .catch((e: unknown) => {
      if (!(e instanceof ConflictError)) throw e;
    });
}

/**
 * The watchdog's part: sends again the processing of documents left pending or processing since
 * `before` (a lost command, a run cut short), and finishes deletes a crash cut short. Answers how
 * many it took up.
 */
export async function repairDocuments(deps: KnowledgeDeps, before: string): Promise<number> {
  let taken = 0;
  for (const status of ["pending", "processing", "deleting"] as const) {
    const page = await deps.state.byStatus<DocumentState>(KIND, status, {
      updatedBefore: before,
      limit: 100,
    });
    for (const record of page.items) {
      taken++;
      if (status === "deleting") await finishDelete(deps, record);
      else await requestProcessing(deps, record.data.urn, `${record.data.sha256}#${record.version}`);
    }
  }
  return taken;
}

/** Whether a chunk is of its document's current generation (a stale one is never cited). */
export function isCurrentChunk(chunk: Chunk, document: DocumentResource | undefined): boolean {
  return !!document && chunk.meta.hash.startsWith(`${document.generation}-`);
}
