import { DOCUMENT_LIMITS } from "../domain/documents.ts";
import type { Chunk, DocumentResource } from "../domain/resources.ts";
import { withMeta } from "../domain/resources.ts";
import { tenantOf, tenantUrn } from "../domain/urn.ts";
import { TooLargeError, ValidationError } from "../kernel/errors.ts";
import type { StateRecord } from "../ports/state-store.ts";
import type { VectorRecord } from "../ports/vector-index.ts";
import { CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS, type ChunkDraft, chunkText } from "./chunking.ts";

/** Chunks embedded and stored at a time (one embedding request, one vector write). */
const BATCH = 32;

import {
  advance,
  type DocumentState,
  documentKey,
  dropGeneration,
  dropOtherGenerations,
  generationOf,
  type KnowledgeDeps,
  MAX_ATTEMPTS,
  PROCESSING_STALE_MS,
  sha256Of,
  sourceKey,
} from "./documents.ts";

/**
 * The `documents` step: reads the document, cuts it into chunks, embeds and stores them in batches
 * (the record counts them, so its reader sees progress), then writes the Document resource and
 * marks it ready, and removes the chunks of other generations. Idempotent: a second delivery finds
 * it taken or done; a run after a crash writes the same chunks again.
 */
export async function processDocument(deps: KnowledgeDeps, urn: string): Promise<void> {
  const key = documentKey(urn);
  const record = await deps.state.get<DocumentState>(key);
  if (!record || (record.status !== "pending" && record.status !== "processing")) return;
  const age = deps.clock().getTime() - Date.parse(record.updatedAt);
  // Another run is at it, unless it was this folder's previous process (gone: its lock is ours now).
  const leftByTheGone = deps.soleWorker !== undefined && record.data.holder !== deps.soleWorker;
  if (record.status === "processing" && age < PROCESSING_STALE_MS && !leftByTheGone) return;
  const doc = record.data;
  if (doc.attempts >= MAX_ATTEMPTS) {
    await fail(
      deps,
      record,
      `processing stopped ${doc.attempts} times before it finished: the document may need more memory or time than a step has; split it into parts`,
    );
    return;
  }
  const taken = await advance(deps, record, "processing", {
    attempts: doc.attempts + 1,
    ...(deps.soleWorker ? { holder: deps.soleWorker } : {}),
  });
  if (!taken) return; // someone else took it
  const run = { record: taken };
  try {
    await processTaken(deps, urn, doc, run);
  } catch (error) {
    // A failure that is not the document's (the embedder or a store unavailable, throttled): the
    // document is handed back as pending, so that this delivery's retry (Lambda's, the bus's)
    // takes it at once, not once the run is stale; and the attempt is not counted (the attempts
    // count runs that died, which is what MAX_ATTEMPTS fails a document for). An outage is
    // retried by the deliveries, then by the watchdog, until it is over.
    await advance(deps, run.record, "pending", { attempts: doc.attempts }).catch(() => undefined);
    throw error;
  }
}

/** The rest of a run that took the document (`run.record`: the record as this run last wrote it). */
async function processTaken(
  deps: KnowledgeDeps,
  urn: string,
  doc: DocumentState,
  run: { record: StateRecord<DocumentState> },
): Promise<void> {
  let record: StateRecord<DocumentState> | undefined = run.record;
  const bytes = await deps.objects.get(sourceKey(urn, doc.sha256));
  if (!bytes || sha256Of(bytes) !== doc.sha256) return; // a newer add is being written: its command follows
  let drafts: ChunkDraft[];
  let extracted: Awaited<ReturnType<typeof read>>;
  try {
    extracted = await read(doc, bytes);
    drafts = extracted.drafts;
  } catch (error) {
    if (!(error instanceof ValidationError || error instanceof TooLargeError)) throw error;
    await fail(deps, record, error.message);
    return;
  }
  const generation = generationOf(doc.sha256);
  for (let at = 0; at < drafts.length; at += BATCH) {
    const batch = drafts.slice(at, at + BATCH);
    await storeChunks(deps, urn, doc, generation, batch, at, extracted.title);
    const embedded = at + batch.length;
    if (embedded < drafts.length) {
      record = await advance(deps, record, "processing", { chunks: drafts.length, embedded });
      if (!record) return dropGeneration(deps, urn, generation); // re-added or deleted meanwhile
      run.record = record;
    }
  }
  const title = extracted.title ?? doc.name;
  const resource: DocumentResource = {
    meta: {
      ...withMeta({ type: "doc.Document", name: doc.name, parent: tenantUrn(tenantOf(urn) as string) }),
      type: "doc.Document",
      purpose: `A document of the tenant: ${title}`,
      createdAt: doc.addedAt,
    },
    source: doc.name,
    contentType: doc.contentType,
    size: doc.size,
    sha256: doc.sha256,
    ...(extracted.title ? { title: extracted.title } : {}),
    ...(extracted.pages ? { pages: extracted.pages } : {}),
    chunks: drafts.length,
    generation,
    addedBy: doc.addedBy,
  };
  await deps.resources.put(resource);
  const ready = await advance(deps, record, "ready", {
    chunks: drafts.length,
    embedded: drafts.length,
    ...(extracted.pages ? { pages: extracted.pages } : {}),
    ...(extracted.title ? { title: extracted.title } : {}),
    readyAt: deps.clock().toISOString(),
  });
  if (!ready) return; // re-added meanwhile: that run removes this generation when it is done
  await dropOtherGenerations(deps, urn, generation);
  deps.log.info("document ready", { urn, chunks: drafts.length, pages: extracted.pages });
}

/** The document's text and chunks; ValidationError or TooLargeError for what cannot be read. */
async function read(doc: DocumentState, bytes: Uint8Array) {
  const { extractText } = await import("./extract.ts");
  const extracted = await extractText(doc.name, doc.contentType, bytes);
  const { tokenCounter } = await import("../engine/window/tokens.ts");
  const counter = await tokenCounter("openai:text-embedding-3-small");
  const drafts = chunkText(extracted.text, extracted.blocks, {
    maxTokens: CHUNK_TOKENS,
    overlapTokens: CHUNK_OVERLAP_TOKENS,
    count: (t) => counter.count(t),
  });
  if (drafts.length === 0) throw new ValidationError(`${doc.name} has no text to read`);
  if (drafts.length > DOCUMENT_LIMITS.chunks)
    throw new TooLargeError(
      `${doc.name} makes ${drafts.length} chunks; a document may make at most ${DOCUMENT_LIMITS.chunks}: split it into parts`,
    );
  return {
    drafts,
    ...(extracted.title ? { title: extracted.title } : {}),
    ...(extracted.pages ? { pages: extracted.pages } : {}),
  };
}

/** What is embedded of a chunk: where it is (the document, its headings), then its text. */
export const chunkEmbeddingText = (title: string, chunk: Pick<Chunk, "content" | "location">) =>
  `${[title, ...(chunk.location.headings ?? [])].join(" > ")}\n\n${chunk.content}`;

async function storeChunks(
  deps: KnowledgeDeps,
  urn: string,
  doc: DocumentState,
  generation: string,
  batch: readonly ChunkDraft[],
  first: number,
  title: string | undefined,
): Promise<void> {
  const chunks: Chunk[] = batch.map((d, i) => ({
    meta: {
      ...withMeta({
        type: "doc.Chunk",
        name: `chunk ${first + i + 1}`,
        parent: urn,
        id: `${generation}-${first + i}`,
      }),
      type: "doc.Chunk",
    },
    content: d.content.slice(0, 20_000),
    index: first + i,
    location: {
      ...(d.page !== undefined ? { page: d.page } : {}),
      ...(d.headings.length ? { headings: d.headings.map((h) => h.slice(0, 300)) } : {}),
      start: d.start,
      end: d.end,
    },
    tokens: d.tokens,
  }));
  const vectors = await deps.embedder.embed(chunks.map((c) => chunkEmbeddingText(title ?? doc.name, c)));
  await Promise.all(chunks.map((c) => deps.resources.put(c)));
  const records: VectorRecord[] = chunks.flatMap((c, i) => {
    const vector = vectors[i];
    return vector ? [{ key: c.meta.id, vector, type: "doc.Chunk", metadata: { document: urn } }] : [];
  });
  await deps.index.upsert(records);
}

async function fail(deps: KnowledgeDeps, record: StateRecord<DocumentState>, reason: string): Promise<void> {
  const { error: _, ...rest } = record.data;
  if (await advance(deps, record, "failed", { ...rest, error: reason.slice(0, 2000) }))
    deps.log.warn("document failed", { urn: record.data.urn, reason });
  await dropGeneration(deps, record.data.urn, generationOf(record.data.sha256));
}
