import { describe, expect, it } from "vitest";
import { LocalEmbedder } from "../../shared/adapters/embeddings/local-embedder.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { embedderContract } from "./embedder.contract.ts";

embedderContract("local concept embedder", async () => ({
  embedder: new LocalEmbedder(),
  deterministic: true,
  batchSize: 64,
  cleanup: async () => undefined,
}));

embedderContract("local concept embedder, 128 dimensions", async () => ({
  embedder: new LocalEmbedder({ dimension: 128 }),
  deterministic: true,
  batchSize: 8,
  cleanup: async () => undefined,
}));

describe("LocalEmbedder specifics", () => {
  const embedder = new LocalEmbedder();
  const cos = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);

  it("encodes version and dimension in its id", () => {
    expect(embedder.id).toBe("local:concepts-v1@512");
    expect(new LocalEmbedder({ dimension: 1024 }).id).toBe("local:concepts-v1@1024");
    expect(() => new LocalEmbedder({ dimension: 3 })).toThrow(ValidationError);
  });

  it("gives the same vector whatever else is in the batch", async () => {
    const [alone] = await embedder.embed(["Reconcile the ledger"]);
    const [, inBatch] = await embedder.embed(["Plan a trip to Rome", "Reconcile the ledger"]);
    expect(Array.from(inBatch as Float32Array)).toEqual(Array.from(alone as Float32Array));
  });

  it("meets a paraphrase through shared concepts rather than shared words", async () => {
    const [task, analyst, travel] = await embedder.embed([
      "Work out why revenue dipped last quarter",
      "Data analyst: statistics, spreadsheets, charts",
      "Travel planner: itineraries, flights, hotels",
    ]);
    expect(cos(task as Float32Array, analyst as Float32Array)).toBeGreaterThan(
      cos(task as Float32Array, travel as Float32Array) + 0.1,
    );
  });

  it("does not let 'Not for ...' attract what it excludes", async () => {
    const [task, excluding, plain] = await embedder.embed([
      "File the VAT return and the tax filing",
      "Answer questions with statistics and charts. Not for tax filings or VAT returns.",
      "Answer questions with statistics and charts.",
    ]);
    expect(cos(task as Float32Array, excluding as Float32Array)).toBeCloseTo(
      cos(task as Float32Array, plain as Float32Array),
      6,
    );
  });

  it("embeds texts with no content words (stopwords, digits, symbols)", async () => {
    const vectors = await embedder.embed(["the", "42", "!!!", "of and the"]);
    for (const v of vectors) expect(Math.hypot(...v)).toBeCloseTo(1, 5);
  });
});
