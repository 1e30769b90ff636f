import type {
  Chunk,
  Conversation,
  DocumentResource,
  InteractionResource,
  Message,
  TaskResource,
  ToolResource,
} from "../domain/resources.ts";
import { descendantPrefix, parentUrn, tenantUrn, type Urn } from "../domain/urn.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { VectorIndex, VectorMatch } from "../ports/vector-index.ts";
import type { ResourceStore } from "../store/resource-store.ts";
import { isCurrentChunk } from "./documents.ts";

/**
 * Search over what a tenant knows, by meaning: its documents' chunks, its earlier tasks' results,
 * its tasks, questions, requests and conversations, and its tools; one embedding of the question and one index query per kind (at once), merged by score.
 * Everything found lies under the tenant's URN: the index is asked for that prefix only. A chunk
 * of a document's older version (re-added, not yet cleaned up) is never returned.
 */
export const SEARCH_KINDS = [
  "doc.Chunk",
  "common.Message",
  "plan.Task",
  "uip.Interaction",
  "common.Conversation",
  "common.Tool",
] as const;
export type SearchKind = (typeof SEARCH_KINDS)[number];

export interface Found {
  urn: Urn;
  kind: SearchKind;
  /** Cosine similarity of the question and what was found. */
  score: number;
  text: string;
  /** For a chunk: its document and where in it. */
  document?: { urn: Urn; name: string; title?: string };
  page?: number;
  headings?: readonly string[];
}

export interface SearchDeps {
  resources: ResourceStore;
  embedder: Embedder;
  index: VectorIndex;
}

export interface SearchQuery {
  tenant: string;
  /** The question, or the vector of it when the caller embedded it already. */
  text: string | Float32Array;
  kinds?: readonly SearchKind[];
  limit: number;
  /** Below this similarity nothing is returned (default 0: the nearest, however far). */
  minScore?: number;
  /**
   * Passages re-ranked by their words as well as by meaning (default, when the question is text);
   * false: by meaning alone.
   */
  hybrid?: boolean;
  /**
   * Whose requests and conversations may be found: only those of the conversations this person
   * started (a person's own words are theirs, as their memories are). Absent: none of them.
   */
  person?: string;
}

/** A request's or a conversation's match: the conversation it is about, or undefined. */
const conversationOfMatch = (m: VectorMatch): string | undefined =>
  m.type === "common.Conversation"
    ? m.key
    : m.type === "common.Message" && typeof m.metadata.conversation === "string"
      ? m.metadata.conversation
      : undefined;

export async function searchKnowledge(deps: SearchDeps, query: SearchQuery): Promise<Found[]> {
  const kinds = query.kinds ?? SEARCH_KINDS;
  const vector = typeof query.text === "string" ? (await deps.embedder.embed([query.text]))[0] : query.text;
  if (!vector || kinds.length === 0 || query.limit <= 0) return [];
  const keyPrefix = descendantPrefix(tenantUrn(query.tenant));
  const words = typeof query.text === "string" && query.hybrid !== false ? query.text : undefined;
  const lists = await Promise.all(
    kinds.map((type) =>
      deps.index.query({ vector, topK: topKOf(type, query.limit, words !== undefined), type, keyPrefix }),
    ),
  );
  const matches = lists.flat().filter((m) => m.score >= (query.minScore ?? Number.NEGATIVE_INFINITY));
  return foundIn(deps, matches, query.limit, words, { person: query.person });
}

/**
 * How many of a kind to ask the index for: a few more chunks, as an older version's may be among
 * them; with a keyword re-ranking (`hybrid`), the candidates it ranks: HYBRID_CANDIDATES at least.
 */
export const topKOf = (kind: SearchKind, limit: number, hybrid = false) =>
  kind === "doc.Chunk" ? Math.max(limit + 4, hybrid ? HYBRID_CANDIDATES : 0) : limit;

/**
 * Passages are re-ranked among this many of the vector's nearest by their words as well
 * (`rerankByWords`): measured on the retrieval test set (test/scenarios/retrieval.test.ts), it
 * finds answers the vector alone ranks below the first five. One read of them, at once.
 */
export const HYBRID_CANDIDATES = 16;

/**
 * What the index's matches are, nearest first, at most `limit`: each resource read (a chunk with
 * its document, to drop an older version's), for a caller that queried the index itself (a leaf's
 * context asks for every kind at once, and reads only what matched). With `owner`, requests and
 * conversations are kept only when `owner.person` started their conversation (none without one).
 * The matches, their documents and those conversations are read at once.
 */
export async function foundIn(
  deps: Pick<SearchDeps, "resources">,
  matches: readonly VectorMatch[],
  limit: number,
  /** The question's words: passages are then re-ranked by them too (rerankByWords). */
  words?: string,
  owner?: { person: string | undefined },
): Promise<Found[]> {
  if (matches.length === 0) return [];
  const sorted = [...matches].sort((a, b) => b.score - a.score);
  const keys = sorted.map((m) => m.key);
  const matched = new Set(keys);
  const around = [
    ...new Set([
      ...sorted.flatMap((m) => (m.type === "doc.Chunk" ? [parentUrn(m.key) as string] : [])),
      ...(owner ? sorted.flatMap((m) => conversationOfMatch(m) ?? []) : []),
    ]),
  ].filter((urn) => !matched.has(urn));
  const [resources, others] = await Promise.all([
    deps.resources.getMany(keys),
    around.length ? deps.resources.getMany(around) : [],
  ]);
  const read = new Map(
    [...resources, ...others].flatMap((r) => (r ? [[r.meta.id as string, r] as const] : [])),
  );
  const documents = new Map(
    others.flatMap((d) =>
      d?.meta.type === "doc.Document" ? [[d.meta.id, d as DocumentResource] as const] : [],
    ),
  );
  const theirs = (conversation: string) =>
    owner?.person !== undefined &&
    (read.get(conversation) as Conversation | undefined)?.startedBy === owner.person;
  const found: Found[] = [];
  sorted.forEach((match, i) => {
    const resource = resources[i];
    if (!resource) return;
    const conversation = owner ? conversationOfMatch(match) : undefined;
    if (conversation !== undefined && !theirs(conversation)) return;
    const item = foundOf(match, resource as Searched, documents);
    if (item) found.push(item);
  });
  return (words === undefined ? found : rerankByWords(found, words)).slice(0, limit);
}

const WORD = /[\p{L}\p{N}]+/gu;
/** A text's words for matching: lower case, a plural's s dropped, three letters or more. */
const wordsOf = (text: string) =>
  (text.toLowerCase().match(WORD) ?? []).filter((w) => w.length > 2).map((w) => w.replace(/s$/, ""));

/**
 * Passages fused from two rankings by reciprocal rank (1/(60 + rank) each): the vector's, as
 * given, and the question's words' (BM25 over the candidates themselves). Earlier results keep
 * their place among them by their vector rank alone.
 */
export function rerankByWords(found: readonly Found[], question: string): Found[] {
  const passages = found.filter((f) => f.kind === "doc.Chunk");
  if (passages.length < 2) return [...found];
  const terms = new Set(wordsOf(question));
  const docs = passages.map((p) => wordsOf(p.text));
  const average = docs.reduce((n, d) => n + d.length, 0) / docs.length || 1;
  const frequency = new Map<string, number>();
  for (const d of docs)
    for (const w of new Set(d)) if (terms.has(w)) frequency.set(w, (frequency.get(w) ?? 0) + 1);
  const keyword = docs.map((d) => {
    let score = 0;
    for (const term of terms) {
      const n = frequency.get(term);
      if (!n) continue;
      let tf = 0;
      for (const w of d) if (w === term) tf++;
      const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
      score += (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * d.length) / average));
    }
    return score;
  });
  const byWords = keyword.map((_, i) => i).sort((a, b) => (keyword[b] as number) - (keyword[a] as number));
  const fused = new Map<Found, number>(found.map((f, rank) => [f, 1 / (60 + rank)]));
  byWords.forEach((i, rank) => {
    const p = passages[i] as Found;
    if ((keyword[i] as number) > 0) fused.set(p, (fused.get(p) ?? 0) + 1 / (60 + rank));
  });
  return [...found].sort((a, b) => (fused.get(b) ?? 0) - (fused.get(a) ?? 0));
}

type Searched = Chunk | Message | TaskResource | InteractionResource | Conversation | ToolResource;

function foundOf(
  match: VectorMatch,
  resource: Searched,
  documents: ReadonlyMap<string, DocumentResource>,
): Found | undefined {
  if (resource.meta.type === "doc.Chunk") {
    const chunk = resource as Chunk;
    const document = documents.get(chunk.meta.parent as string);
    if (!document || !isCurrentChunk(chunk, document)) return undefined;
    return {
      urn: chunk.meta.id as Urn,
      kind: "doc.Chunk",
      score: match.score,
      text: chunk.content,
      document: {
        urn: document.meta.id as Urn,
        name: document.meta.name,
        ...(document.title ? { title: document.title } : {}),
      },
      ...(chunk.location.page !== undefined ? { page: chunk.location.page } : {}),
      ...(chunk.location.headings?.length ? { headings: chunk.location.headings } : {}),
    };
  }
  if (resource.meta.type === "plan.Task" || resource.meta.type === "uip.Interaction") {
    // Tasks and questions (indexed from the event log, resource-index.ts): what they are about.
    const text =
      resource.meta.type === "uip.Interaction"
        ? (resource as InteractionResource).display.title
        : `${resource.meta.name}${resource.meta.purpose ? `: ${resource.meta.purpose}` : ""}`;
    return { urn: resource.meta.id as Urn, kind: resource.meta.type, score: match.score, text };
  }
  if (resource.meta.type === "common.Conversation") {
    // Indexed with what it is about (resource-index.ts): its title, else its latest request.
    const about = (resource as Conversation).title ?? match.metadata.about;
    const text = typeof about === "string" && about ? about : resource.meta.name;
    return { urn: resource.meta.id as Urn, kind: "common.Conversation", score: match.score, text };
  }
  if (resource.meta.type === "common.Tool") {
    const tool = resource as ToolResource;
    const text = `${tool.function.name}: ${tool.function.description}`;
    return { urn: resource.meta.id as Urn, kind: "common.Tool", score: match.score, text };
  }
  const message = resource as Message;
  if (message.meta.type !== "common.Message" || !message.content || message.isError) return undefined;
  return { urn: message.meta.id as Urn, kind: "common.Message", score: match.score, text: message.content };
}

/** Where a found chunk is, for a person or a model: `Refunds policy § Returns, p. 3`. */
export function placeOf(found: Found): string {
  const name = found.document?.title ?? found.document?.name ?? "";
  const headings = found.headings?.length ? ` § ${found.headings.join(" > ")}` : "";
  const page = found.page !== undefined ? `, p. ${found.page}` : "";
  return `${name}${headings}${page}`;
}

/**
 * One line of context per thing found, its URN first, so a model can cite it: the text cut to
 * `chars` on a whole character (what the leaf's prompt and the search built-in show).
 */
export function contextLine(found: Found, chars: number): string {
  const text = found.text.replace(/\s+/g, " ").trim();
  const cut = text.length > chars ? `${text.slice(0, chars).replace(/[\ud800-\udbff]$/, "")}…` : text;
  return found.kind === "doc.Chunk"
    ? `- [${found.urn}] (${placeOf(found)}) ${cut}`
    : `- [${found.urn}] ${cut}`;
}

/** The URNs a prompt gave as context (each line's `[urn]`, as `contextLine` writes them). */
export function givenUrns(prompt: string): string[] {
  return [...new Set([...prompt.matchAll(/^- \[(cld:[^\]\s]+)\]/gm)].map((m) => m[1] as string))];
}

/** The URNs an answer cites: those the prompt gave that the answer names, at most 50. */
export function citationsIn(answer: string, prompt: string): Urn[] {
  if (!answer.includes("cld:")) return [];
  return givenUrns(prompt)
    .filter((urn) => answer.includes(urn))
    .slice(0, 50) as Urn[];
}
