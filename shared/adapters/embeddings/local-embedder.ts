import { ValidationError } from "../../kernel/errors.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import { CONCEPTS_V1 } from "./concepts-v1.ts";
import { stem, type Token, tokenize, words } from "./text-features.ts";

/**
 * An Embedder that runs offline: no model download, no network, deterministic (the same text
 * always gives the same vector, whatever else was embedded before).
 *
 * A text becomes four channels of sparse features:
 *   - concepts: groups of the hand-written lexicon (concepts-v1.ts) the text mentions, plus their
 *     broader domains, so that tasks phrased without an assistant's key words still meet it;
 *   - words: stemmed content words;
 *   - bigrams: consecutive content words within a clause;
 *   - trigrams: character trigrams of content words (spelling variants, compounds).
 * Term frequencies are dampened (1 + ln tf), stopwords carry no weight, and words after "not for"
 * ("Not for bookkeeping or tax") are excluded, so what an assistant is not for does not attract
 * those tasks. Each channel is projected to `dimension` floats with signed feature hashing and
 * L2-normalised; the channels are then weighted, summed and normalised again. The cosine of two
 * vectors is therefore a weighted mean of per-channel cosines, dominated by shared concepts.
 */
export interface LocalEmbedderOptions {
  /** Output dimension (default 512). Part of the id: vectors of different dimensions never mix. */
  dimension?: number;
}

/** Bump when the lexicon, the stemmer or any weight changes: it changes every vector. */
export const LOCAL_EMBEDDER_VERSION = "concepts-v1";

const CHANNEL_WEIGHTS = { concept: 1, word: 0.6, bigram: 0.3, trigram: 0.1 } as const;
type Channel = keyof typeof CHANNEL_WEIGHTS;
const CHANNELS = Object.keys(CHANNEL_WEIGHTS) as Channel[];
/** Weight of a domain reached through a concept, relative to the concept itself. */
const PARENT_WEIGHT = 0.6;
/** Factor applied to the words in a "not for ..." scope. */
const EXCLUSION_FACTOR = 0;

interface ConceptGroup {
  readonly id: string;
  readonly weight: number;
  readonly parents: readonly string[];
}
interface LexiconEntry {
  /** Stemmed words of the term. */
  readonly stems: readonly string[];
  readonly groups: ConceptGroup[];
}
/** Terms indexed by their first stem; longest first. */
type Lexicon = ReadonlyMap<string, readonly LexiconEntry[]>;

const LINE = /^([a-z0-9.-]+)(?:\*([0-9.]+))?(?:\s*>\s*([a-z0-9.\s-]+?))?\s*:\s*(.+)$/;

/** Parses the lexicon text format (see concepts-v1.ts). Throws on a malformed line. */
export function parseLexicon(source: string): Lexicon {
  const byKey = new Map<string, LexiconEntry>();
  for (const [n, rawLine] of source.split("\n").entries()) {
    const line = rawLine.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m)
      throw new ValidationError(
        `Concept lexicon line ${n + 1} is malformed: ${line.slice(0, 80)} (write "<id>[*<weight>][ > <parents>]: <words>", see concepts-v1.ts)`,
      );
    const group: ConceptGroup = {
      id: m[1] as string,
      weight: m[2] === undefined ? 1 : Number(m[2]),
      parents: m[3] ? m[3].split(/\s+/).filter(Boolean) : [],
    };
    for (const term of (m[4] as string).split(",")) {
      const stems = words(term).map(stem);
      if (stems.length === 0) continue;
      const key = stems.join(" ");
      const entry = byKey.get(key) ?? { stems, groups: [] };
      if (!entry.groups.some((g) => g.id === group.id)) entry.groups.push(group);
      byKey.set(key, entry);
    }
  }
  const index = new Map<string, LexiconEntry[]>();
  for (const entry of byKey.values()) {
    const first = entry.stems[0] as string;
    const list = index.get(first) ?? [];
    list.push(entry);
    index.set(first, list);
  }
  for (const list of index.values()) list.sort((a, b) => b.stems.length - a.stems.length);
  return index;
}

let defaultLexicon: Lexicon | undefined;
function lexiconV1(): Lexicon {
  defaultLexicon ??= parseLexicon(CONCEPTS_V1);
  return defaultLexicon;
}

const NO_ENTRIES: readonly LexiconEntry[] = [];

type Bag = Map<string, number>;
const add = (bag: Bag, feature: string, weight: number) => {
  if (weight !== 0) bag.set(feature, (bag.get(feature) ?? 0) + weight);
};

/** The sparse features of a text, per channel, before hashing. Exposed for tests and tuning. */
export function textFeatures(text: string, lexicon: Lexicon = lexiconV1()): Record<Channel, Bag> {
  const tokens = tokenize(text, EXCLUSION_FACTOR);
  const bags: Record<Channel, Bag> = {
    concept: new Map(),
    word: new Map(),
    bigram: new Map(),
    trigram: new Map(),
  };

  // Concepts: longest terms first; a multi-word term hides the single-word terms inside it.
  const covered = new Array<boolean>(tokens.length).fill(false);
  const hits: { start: number; length: number; entry: LexiconEntry }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    for (const entry of lexicon.get((tokens[i] as Token).stem) ?? NO_ENTRIES) {
      // A single-word term never matches a stopword ("may" the month is not "we may").
      if (entry.stems.length === 1 && (tokens[i] as Token).stop) continue;
      if (matchesAt(tokens, i, entry.stems)) hits.push({ start: i, length: entry.stems.length, entry });
    }
  }
  hits.sort((a, b) => b.length - a.length || a.start - b.start);
  for (const hit of hits) {
    if (hit.length === 1 && covered[hit.start]) continue;
    // Plain loops over the span: this runs for every hit of every text.
    const end = hit.start + hit.length;
    let factor = Number.POSITIVE_INFINITY;
    for (let k = hit.start; k < end; k++) {
      covered[k] = true;
      factor = Math.min(factor, (tokens[k] as Token).factor);
    }
    for (const g of hit.entry.groups) {
      add(bags.concept, g.id, g.weight * factor);
      for (const p of g.parents) add(bags.concept, p, g.weight * factor * PARENT_WEIGHT);
    }
  }

  // Words, bigrams and trigrams of content words.
  let previous: Token | undefined;
  for (const t of tokens) {
    if (t.stop || t.stem.length < 2) continue;
    add(bags.word, t.stem, t.factor);
    if (previous && previous.clause === t.clause) {
      add(bags.bigram, `${previous.stem} ${t.stem}`, Math.min(previous.factor, t.factor));
    }
    previous = t;
    const padded = `<${t.raw}>`;
    for (let k = 0; k + 3 <= padded.length; k++) add(bags.trigram, padded.slice(k, k + 3), t.factor);
  }
  return bags;
}

function matchesAt(tokens: readonly Token[], start: number, stems: readonly string[]): boolean {
  if (start + stems.length > tokens.length) return false;
  for (let k = 0; k < stems.length; k++) {
    const t = tokens[start + k] as Token;
    if (t.stem !== stems[k] || (k > 0 && t.clause !== (tokens[start] as Token).clause)) return false;
  }
  return true;
}

const FNV_OFFSET = 0x811c9dc5;
const SIGN_SEED = 0x9e3779b9;

/** FNV-1a over the UTF-16 code units of `s`, continuing from state `h`. */
function fnv1a(h: number, s: string): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h;
}

/** murmur3's fmix32, for avalanche. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** 32-bit FNV-1a over UTF-16 code units, finished with murmur3's fmix32 for avalanche. */
function hash32(s: string, seed: number): number {
  return fmix32(fnv1a((FNV_OFFSET ^ seed) >>> 0, s));
}

/**
 * FNV state after "<channel>:". FNV-1a is streamed, so hashing the feature from this state equals
 * hash32(`${channel}:${feature}`, 0) without building the concatenated string.
 */
const CHANNEL_PREFIX_STATE = Object.fromEntries(
  CHANNELS.map((channel) => [channel, fnv1a(FNV_OFFSET, `${channel}:`)]),
) as Record<Channel, number>;

/** Buffers an embedder reuses for every text, so that embedding allocates no dense arrays. */
interface Scratch {
  /** The weighted sum of the channels. */
  readonly acc: Float64Array;
  /** One channel's projection: all zeros between calls of project(). */
  readonly dense: Float64Array;
  /** The slots of `dense` one call of project() wrote to. */
  touched: Int32Array;
}

function project(bag: Bag, channel: Channel, out: Float64Array, scale: number, scratch: Scratch): void {
  const { dense } = scratch;
  if (scratch.touched.length < bag.size) scratch.touched = new Int32Array(bag.size * 2);
  const prefix = CHANNEL_PREFIX_STATE[channel];
  let n = 0;
  for (const [feature, tf] of bag) {
    if (tf <= 0) continue;
    const slot = fmix32(fnv1a(prefix, feature)) % out.length;
    const sign = hash32(feature, SIGN_SEED) & 1 ? 1 : -1;
    dense[slot] = (dense[slot] as number) + sign * (1 + Math.log(tf));
    scratch.touched[n++] = slot;
  }
  // Only touched slots can be non-zero. Visiting them in ascending order, each once, makes the same
  // floating-point additions in the same order as a scan of the whole array (which only adds zeros
  // elsewhere), so the vectors stay bit-for-bit identical while the cost follows the feature count.
  const slots = scratch.touched.subarray(0, n).sort();
  let norm = 0;
  for (let k = 0; k < n; k++) {
    if (k > 0 && slots[k] === slots[k - 1]) continue;
    const v = dense[slots[k] as number] as number;
    norm += v * v;
  }
  const f = scale / Math.sqrt(norm);
  for (let k = 0; k < n; k++) {
    const slot = slots[k] as number;
    if (k > 0 && slot === slots[k - 1]) continue;
    if (norm !== 0) out[slot] = (out[slot] as number) + (dense[slot] as number) * f;
    dense[slot] = 0; // leave the scratch all zeros for the next call
  }
}

function sumOfSquares(values: Float64Array): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += (values[i] as number) * (values[i] as number);
  return sum;
}

export class LocalEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  readonly #recent = new Map<string, Float32Array>();
  readonly #scratch: Scratch;

  constructor(options: LocalEmbedderOptions = {}) {
    const dimension = options.dimension ?? 512;
    if (!Number.isInteger(dimension) || dimension < 16 || dimension > 8192) {
      throw new ValidationError("LocalEmbedder dimension must be an integer from 16 to 8192", [
        `dimension: ${dimension}`,
      ]);
    }
    this.dimension = dimension;
    this.id = `local:${LOCAL_EMBEDDER_VERSION}@${dimension}`;
    this.#scratch = {
      acc: new Float64Array(dimension),
      dense: new Float64Array(dimension),
      touched: new Int32Array(256),
    };
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    texts.forEach((t, i) => {
      if (typeof t !== "string" || t.trim() === "") {
        throw new ValidationError("Cannot embed an empty text", [`texts[${i}] is empty or blank`]);
      }
    });
    return texts.map((t) => {
      // The same text comes back often (a task is embedded to elect its assistant, then again to
      // find its context): embedding is deterministic, so remember recent ones.
      let vector = this.#recent.get(t);
      if (!vector) {
        vector = this.embedOne(t);
        if (this.#recent.size >= 2_000) this.#recent.delete(this.#recent.keys().next().value as string);
        this.#recent.set(t, vector);
      }
      return vector.slice();
    });
  }

  private embedOne(text: string): Float32Array {
    const bags = textFeatures(text);
    const acc = this.#scratch.acc.fill(0);
    for (const channel of CHANNELS) {
      project(bags[channel], channel, acc, CHANNEL_WEIGHTS[channel], this.#scratch);
    }
    let norm = sumOfSquares(acc);
    if (norm === 0) {
      // Only stopwords, digits or symbols: fall back to the whole normalised text as one feature.
      project(new Map([[text.normalize("NFKC").trim().toLowerCase(), 1]]), "word", acc, 1, this.#scratch);
      norm = sumOfSquares(acc);
    }
    const out = new Float32Array(this.dimension);
    const f = 1 / Math.sqrt(norm);
    for (let i = 0; i < out.length; i++) out[i] = (acc[i] as number) * f;
    return out;
  }
}
