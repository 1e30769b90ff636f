import { describe, expect, it } from "vitest";
import { RememberingEmbedder } from "../../../../shared/adapters/embeddings/remembering-embedder.ts";
import type { Embedder } from "../../../../shared/ports/embeddings.ts";

/** A counting embedder: each text's vector is its length and first code, so answers can be checked. */
function counting(): Embedder & { asked: string[] } {
  const asked: string[] = [];
  return {
    id: "counting@2",
    dimension: 2,
    asked,
    embed: async (texts) => {
      asked.push(...texts);
      return texts.map((t) => new Float32Array([t.length, t.charCodeAt(0) || 1]));
    },
  };
}

describe("RememberingEmbedder", () => {
  it("answers a text it embedded before without asking again, in the order asked", async () => {
    const inner = counting();
    const e = new RememberingEmbedder(inner);
    expect(e.id).toBe("counting@2");
    expect(e.dimension).toBe(2);
    await e.embed(["alpha", "be"]);
    const again = await e.embed(["be", "gamma", "alpha"]);
    expect(inner.asked).toEqual(["alpha", "be", "gamma"]);
    expect(again.map((v) => [...v])).toEqual([
      [2, 98],
      [5, 103],
      [5, 97],
    ]);
  });

  it("keeps at most `max` texts, the least recently asked for going first", async () => {
    const inner = counting();
    const e = new RememberingEmbedder(inner, { max: 2 });
    await e.embed(["a", "b"]);
    await e.embed(["a"]); // "a" is now the most recent
    await e.embed(["c"]); // "b" goes
    expect(e.size).toBe(2);
    await e.embed(["a", "b"]);
    expect(inner.asked).toEqual(["a", "b", "c", "b"]);
  });

  it("does not keep texts longer than maxChars", async () => {
    const inner = counting();
    const e = new RememberingEmbedder(inner, { maxChars: 3 });
    await e.embed(["long text"]);
    await e.embed(["long text"]);
    expect(inner.asked).toEqual(["long text", "long text"]);
  });
});
