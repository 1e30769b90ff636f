import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ValidationError } from "../../shared/kernel/errors.ts";
import type { Embedder } from "../../shared/ports/embeddings.ts";

/**
 * The one contract every Embedder adapter passes. `setup` returns a ready embedder, whether its
 * backend is deterministic (same text, same vector), and its batch size (texts per backend call;
 * 1 for one request per text), so that the suite can send more than one batch.
 */
export interface EmbedderFixture {
  embedder: Embedder;
  deterministic: boolean;
  batchSize: number;
  cleanup(): Promise<void>;
}

const TEXTS = [
  "**Purpose:** Plan a three-day team offsite in Lisbon: flights, hotel and an itinerary.",
  "**Purpose:** Reconcile the May bank statements with the ledger.",
  "**Purpose:** Review pull request #12 for correctness and missing tests.",
  "Ünïcödé, emoji 🚀 and CJK 日本語 text are embedded too.",
];

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const cosine = (a: Float32Array, b: Float32Array) =>
  a.reduce((s, x, i) => s + x * (b[i] as number), 0) / (norm(a) * norm(b));

export function embedderContract(name: string, setup: () => Promise<EmbedderFixture>): void {
  describe(`Embedder contract: ${name}`, () => {
    let fx: EmbedderFixture;
    let embedder: Embedder;
    beforeEach(async () => {
      fx = await setup();
      embedder = fx.embedder;
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it("has a stable id that names its dimension, and a positive integer dimension", () => {
      expect(embedder.id).toMatch(/^[a-z][a-z0-9-]*:.+@\d+$/);
      expect(embedder.id.endsWith(`@${embedder.dimension}`)).toBe(true);
      expect(Number.isInteger(embedder.dimension) && embedder.dimension > 0).toBe(true);
    });

    it("returns one unit-length Float32Array of the declared dimension per text", async () => {
      const vectors = await embedder.embed(TEXTS);
      expect(vectors).toHaveLength(TEXTS.length);
      for (const v of vectors) {
        expect(v).toBeInstanceOf(Float32Array);
        expect(v.length).toBe(embedder.dimension);
        expect(v.every(Number.isFinite)).toBe(true);
        expect(norm(v)).toBeCloseTo(1, 5);
      }
    });

    it("preserves the order of the input", async () => {
      const forward = await embedder.embed(TEXTS);
      const backward = await embedder.embed([...TEXTS].reverse());
      const n = TEXTS.length;
      for (let i = 0; i < n; i++) {
        expect(cosine(forward[i] as Float32Array, backward[n - 1 - i] as Float32Array)).toBeGreaterThan(
          0.999,
        );
      }
      // Different texts are not all mapped to the same vector.
      expect(cosine(forward[0] as Float32Array, forward[1] as Float32Array)).toBeLessThan(0.999);
    });

    it("is deterministic for the same input (where the backend is)", async () => {
      if (!fx.deterministic) return;
      const [a] = await embedder.embed([TEXTS[0] as string]);
      const [b] = await embedder.embed([TEXTS[0] as string]);
      expect(Array.from(a as Float32Array)).toEqual(Array.from(b as Float32Array));
    });

    it("returns [] for no texts and refuses empty or blank texts with a ValidationError", async () => {
      expect(await embedder.embed([])).toEqual([]);
      await expect(embedder.embed(["fine", ""])).rejects.toBeInstanceOf(ValidationError);
      await expect(embedder.embed(["  \n\t "])).rejects.toBeInstanceOf(ValidationError);
    });

    it("embeds more texts than one backend batch, each as if embedded alone", async () => {
      const n = fx.batchSize * 2 + 3;
      const texts = Array.from(
        { length: n },
        (_, i) => `Task ${i}: ${TEXTS[i % TEXTS.length]} (variant ${i * 7})`,
      );
      const vectors = await embedder.embed(texts);
      expect(vectors).toHaveLength(n);
      for (const i of [0, fx.batchSize - 1, fx.batchSize, n - 1]) {
        const [alone] = await embedder.embed([texts[i] as string]);
        expect(cosine(vectors[i] as Float32Array, alone as Float32Array)).toBeGreaterThan(0.999);
      }
    });
  });
}
