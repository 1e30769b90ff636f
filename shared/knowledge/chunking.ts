/**
 * A document's text cut into chunks for search: by its structure first (a chunk never spans two
 * sections or two pages), then by sentences within a section, each chunk at most `maxTokens`, and
 * each beginning with the last sentences of the one before it in the same section (up to
 * `overlapTokens`), so a fact that straddles a cut is whole in one of them. Pure: the text, its
 * blocks and a token counter in, the chunks with their offsets out.
 */

/** A run of the extracted text that belongs together (a paragraph, a list, a table, a page). */
export interface TextBlock {
  /** Offsets into the extracted text: `text.slice(start, end)` is the block. */
  start: number;
  end: number;
  /** The headings it lies under, outermost first. */
  headings: readonly string[];
  /** The page (PDF), from 1. */
  page?: number;
}

export interface ChunkDraft {
  content: string;
  start: number;
  end: number;
  headings: readonly string[];
  page?: number;
  tokens: number;
}

export interface ChunkOptions {
  maxTokens: number;
  overlapTokens: number;
  count: (text: string) => number;
}

/** Defaults: small enough to be specific, large enough to hold a paragraph and its point. */
export const CHUNK_TOKENS = 350;
export const CHUNK_OVERLAP_TOKENS = 50;

interface Piece {
  start: number;
  end: number;
  tokens: number;
  section: string;
  block: TextBlock;
}

// Made at the first document read, not when the engine's modules load (every function's cold start).
let segmenters: { sentences: Intl.Segmenter; words: Intl.Segmenter } | undefined;
const segmenter = () =>
  (segmenters ??= {
    sentences: new Intl.Segmenter("en", { granularity: "sentence" }),
    words: new Intl.Segmenter("en", { granularity: "word" }),
  });

/** The chunks of `text` made from its `blocks`, in order. */
export function chunkText(text: string, blocks: readonly TextBlock[], options: ChunkOptions): ChunkDraft[] {
  const chunks: ChunkDraft[] = [];
  let current: Piece[] = [];
  let tokens = 0;
  const emit = () => {
    const first = current[0];
    const last = current.at(-1);
    if (!first || !last) return;
    chunks.push({
      content: text.slice(first.start, last.end),
      start: first.start,
      end: last.end,
      headings: first.block.headings,
      ...(first.block.page !== undefined ? { page: first.block.page } : {}),
      tokens,
    });
  };
  for (const piece of piecesOf(text, blocks, options)) {
    if (
      current.length &&
      (current[0]?.section !== piece.section || tokens + piece.tokens > options.maxTokens)
    ) {
      const sameSection = current[0]?.section === piece.section;
      emit();
      // The tail of the chunk just made opens the next, within the overlap and the bound.
      const carried: Piece[] = [];
      let carriedTokens = 0;
      for (let i = current.length - 1; sameSection && i > 0; i--) {
        const p = current[i] as Piece;
        if (carriedTokens + p.tokens > options.overlapTokens) break;
        if (carriedTokens + p.tokens + piece.tokens > options.maxTokens) break;
        carried.unshift(p);
        carriedTokens += p.tokens;
      }
      current = carried;
      tokens = carriedTokens;
    }
    current.push(piece);
    tokens += piece.tokens;
  }
  emit();
  return chunks;
}

/** Every block as pieces within the bound: whole when it fits, else its sentences, else runs of words. */
function* piecesOf(text: string, blocks: readonly TextBlock[], options: ChunkOptions): Generator<Piece> {
  for (const block of blocks) {
    const section = `${block.page ?? ""}\u0000${block.headings.join("\u0000")}`;
    const whole = text.slice(block.start, block.end);
    if (!whole.trim()) continue;
    const tokens = options.count(whole);
    if (tokens <= options.maxTokens) {
      yield { start: block.start, end: block.end, tokens, section, block };
      continue;
    }
    for (const s of segmenter().sentences.segment(whole)) {
      const sentence = s.segment.trimEnd();
      if (!sentence.trim()) continue;
      const start = block.start + s.index;
      const count = options.count(sentence);
      if (count <= options.maxTokens) {
        yield { start, end: start + sentence.length, tokens: count, section, block };
        continue;
      }
      yield* wordRuns(sentence, start, section, block, options);
    }
  }
}

/** A sentence longer than the bound, as runs of whole words each within it. */
function* wordRuns(
  sentence: string,
  offset: number,
  section: string,
  block: TextBlock,
  options: ChunkOptions,
): Generator<Piece> {
  let from = 0;
  let to = 0;
  let tokens = 0;
  for (const w of segmenter().words.segment(sentence)) {
    const end = w.index + w.segment.length;
    const added = options.count(w.segment);
    if (to > from && tokens + added > options.maxTokens) {
      yield { start: offset + from, end: offset + to, tokens, section, block };
      from = w.index;
      tokens = 0;
    }
    // One "word" over the bound on its own (a long run without spaces) is cut by characters.
    if (added > options.maxTokens) {
      const step = Math.max(1, Math.floor((w.segment.length * options.maxTokens) / added));
      for (let at = w.index; at < end; at += step) {
        const piece = sentence.slice(at, Math.min(end, at + step));
        yield {
          start: offset + at,
          end: offset + at + piece.length,
          tokens: options.count(piece),
          section,
          block,
        };
      }
      from = end;
      to = end;
      tokens = 0;
      continue;
    }
    to = end;
    tokens += added;
  }
  if (to > from) yield { start: offset + from, end: offset + to, tokens, section, block };
}
