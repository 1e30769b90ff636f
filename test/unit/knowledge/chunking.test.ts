import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { chunkText, type TextBlock } from "../../../shared/knowledge/chunking.ts";

/** One token a word, as the tests count. */
const count = (text: string) => text.split(/\s+/).filter(Boolean).length;
const options = { maxTokens: 20, overlapTokens: 6, count };

/** Paragraphs of `text` under one heading path, as blocks. */
function blocksOf(text: string, headings: string[] = [], page?: number): TextBlock[] {
  const blocks: TextBlock[] = [];
  let at = 0;
  for (const para of text.split("\n\n")) {
    const start = text.indexOf(para, at);
    blocks.push({ start, end: start + para.length, headings, ...(page ? { page } : {}) });
    at = start + para.length;
  }
  return blocks;
}

describe("chunkText", () => {
  it("keeps a chunk within the bound, its text the source's own slice", () => {
    const text = Array.from({ length: 12 }, (_, i) => `Sentence number ${i} says something short.`).join(" ");
    const chunks = chunkText(text, blocksOf(text), options);
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) {
      expect(c.tokens).toBeLessThanOrEqual(options.maxTokens);
      expect(text.slice(c.start, c.end)).toBe(c.content);
    }
  });

  it("opens each chunk of a section with the end of the one before it (the overlap)", () => {
    const text = Array.from({ length: 8 }, (_, i) => `Fact ${i} is here.`).join(" ");
    const [first, second] = chunkText(text, blocksOf(text), { ...options, maxTokens: 12, overlapTokens: 4 });
    expect(second?.start).toBeLessThan(first?.end as number);
  });

  it("never spans two sections or two pages", () => {
    const a = "Alpha one. Alpha two.";
    const b = "Beta one. Beta two.";
    const text = `${a}\n\n${b}`;
    const blocks = [
      { start: 0, end: a.length, headings: ["A"] },
      { start: a.length + 2, end: text.length, headings: ["B"] },
    ];
    expect(chunkText(text, blocks, options).map((c) => c.headings)).toEqual([["A"], ["B"]]);
    const paged = [
      { start: 0, end: a.length, headings: [], page: 1 },
      { start: a.length + 2, end: text.length, headings: [], page: 2 },
    ];
    expect(chunkText(text, paged, options).map((c) => c.page)).toEqual([1, 2]);
  });

  it("cuts a sentence longer than the bound by words, and a run without spaces by characters", () => {
    const long = Array.from({ length: 50 }, (_, i) => `w${i}`).join(" ");
    for (const c of chunkText(long, blocksOf(long), options)) expect(c.tokens).toBeLessThanOrEqual(20);
    const blob = "x".repeat(500);
    const chars = (t: string) => Math.ceil(t.length / 10);
    const cut = chunkText(blob, blocksOf(blob), { maxTokens: 20, overlapTokens: 0, count: chars });
    expect(cut.map((c) => c.content).join("")).toBe(blob);
    for (const c of cut) expect(chars(c.content)).toBeLessThanOrEqual(20);
  });

  it("covers every word of the text, in order, whatever the text (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^[a-z]{1,8}( [a-z]{1,8}){0,30}\.$/), { minLength: 1, maxLength: 6 }),
        (paras) => {
          const text = paras.join("\n\n");
          const chunks = chunkText(text, blocksOf(text), options);
          const covered = new Set<number>();
          for (const c of chunks) for (let i = c.start; i < c.end; i++) covered.add(i);
          for (let i = 0; i < text.length; i++)
            if (/[a-z]/.test(text[i] as string)) expect(covered.has(i)).toBe(true);
          for (const c of chunks) expect(c.tokens).toBeLessThanOrEqual(options.maxTokens);
        },
      ),
      { numRuns: 100 },
    );
  });
});
