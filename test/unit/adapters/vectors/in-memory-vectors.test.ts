import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InMemoryVectors } from "../../../../shared/adapters/vectors/in-memory-vectors.ts";

const D = 32;
const cosine = (a: Float32Array, b: Float32Array) => {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < D; i++) {
    dot += (a[i] as number) * (b[i] as number);
    na += (a[i] as number) ** 2;
    nb += (b[i] as number) ** 2;
  }
  return dot / Math.sqrt(na * nb);
};

// Vectors with 1-4 non-zero components (scored over those) or all 32 (scored whole).
const vector = fc.oneof(
  fc.uniqueArray(fc.integer({ min: 0, max: D - 1 }), { minLength: 1, maxLength: 4 }).chain((at) =>
    fc
      .array(fc.float({ min: 1, max: 10, noNaN: true }), { minLength: at.length, maxLength: at.length })
      .map((vs) => {
        const v = new Float32Array(D);
        at.forEach((i, k) => {
          v[i] = vs[k] as number;
        });
        return v;
      }),
  ),
  fc
    .array(fc.float({ min: 1, max: 10, noNaN: true }), { minLength: D, maxLength: D })
    .map((a) => Float32Array.from(a)),
);

describe("InMemoryVectors", () => {
  it("ranks like a brute-force cosine over the records that pass the filters, sparse or dense, after deletions", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.constantFrom("a", "b"), vector), {
          maxLength: 60,
        }),
        fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 10 }),
        vector,
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom(undefined, "a", "b"),
        fc.constantFrom(undefined, "k1", "k2"),
        (puts, deletes, q, topK, type, keyPrefix) => {
          const index = new InMemoryVectors(D);
          const truth = new Map<string, { type: string; v: Float32Array }>();
          for (const [k, t, v] of puts) {
            index.put(`k${k}`, t, JSON.stringify({ k }), v);
            truth.set(`k${k}`, { type: t, v });
          }
          for (const k of deletes) {
            index.delete(`k${k}`);
            truth.delete(`k${k}`);
          }
          const expected = [...truth]
            .filter(
              ([k, r]) => (type === undefined || r.type === type) && (!keyPrefix || k.startsWith(keyPrefix)),
            )
            .map(([k, r]) => ({ key: k, score: cosine(q, r.v) }))
            .sort((x, y) => y.score - x.score || (x.key < y.key ? -1 : 1))
            .slice(0, topK);
          const got = index.query({
            vector: q,
            topK,
            ...(type ? { type } : {}),
            ...(keyPrefix ? { keyPrefix } : {}),
          });
          expect(index.size).toBe(truth.size);
          expect(got.matches).toHaveLength(expected.length);
          got.matches.forEach((m, i) => {
            expect(m.score).toBeCloseTo((expected[i] as { score: number }).score, 4);
            expect(m.metadata).toEqual({ k: Number(m.key.slice(1)) });
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("ranks as before after thousands of replacements and deletions renumber its rows", () => {
    let seed = 3;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const sparseVector = () => {
      const v = new Float32Array(D);
      for (let k = 0; k < 4; k++) v[Math.floor(random() * D)] = 1 + random() * 9;
      return v;
    };
    const index = new InMemoryVectors(D);
    const truth = new Map<string, Float32Array>();
    for (let i = 0; i < 6000; i++) {
      const key = `k${Math.floor(random() * 300)}`;
      if (random() < 0.2) {
        index.delete(key);
        truth.delete(key);
      } else {
        const v = random() < 0.1 ? Float32Array.from({ length: D }, () => 1 + random()) : sparseVector();
        index.put(key, "a", JSON.stringify({ key }), v);
        truth.set(key, v);
      }
    }
    expect(index.size).toBe(truth.size);
    for (let n = 0; n < 20; n++) {
      const q = sparseVector();
      const expected = [...truth]
        .map(([key, v]) => ({ key, score: cosine(q, v) }))
        .sort((x, y) => y.score - x.score || (x.key < y.key ? -1 : 1))
        .slice(0, 5);
      const got = index.query({ vector: q, topK: 5, type: "a" });
      expect(got.scored).toBe(truth.size);
      got.matches.forEach((m, i) => {
        expect(m.score).toBeCloseTo((expected[i] as { score: number }).score, 4);
        expect(m.metadata).toEqual({ key: m.key });
      });
    }
  });

  it("ranks records that share a vector (a repeated output) as brute force does: equal scores by key, under a prefix", () => {
    fc.assert(
      fc.property(
        fc.array(vector, { minLength: 1, maxLength: 4 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.nat(), fc.boolean()), { maxLength: 300 }),
        vector,
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom(undefined, "t1/", "t2/", "t1/c1"),
        (pool, writes, q, topK, keyPrefix) => {
          const index = new InMemoryVectors(D);
          const truth = new Map<string, Float32Array>();
          for (const [k, pick, remove] of writes) {
            const key = `t${k % 3}/c${k % 7}/m${k}`;
            if (remove) {
              index.delete(key);
              truth.delete(key);
            } else {
              const v = pool[pick % pool.length] as Float32Array;
              index.put(key, "a", JSON.stringify({ k }), v);
              truth.set(key, v);
            }
          }
          const got = index.query({ vector: q, topK, type: "a", ...(keyPrefix ? { keyPrefix } : {}) });
          // The same vector gives the same score: those rank by key (scores rounded, so that two
          // vectors of one direction tie here as they do in the index).
          const expected = [...truth]
            .filter(([key]) => !keyPrefix || key.startsWith(keyPrefix))
            .map(([key, v]) => ({ key, score: Math.round(cosine(q, v) * 1e9) / 1e9 }))
            .sort((x, y) => y.score - x.score || (x.key < y.key ? -1 : 1))
            .slice(0, topK);
          expect(index.size).toBe(truth.size);
          expect(got.matches.map((m) => m.key)).toEqual(expected.map((e) => e.key));
          got.matches.forEach((m, i) => {
            expect(m.score).toBeCloseTo(cosine(q, truth.get(m.key) as Float32Array), 4);
            expect(m.score).toBeCloseTo((expected[i] as { score: number }).score, 4);
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
