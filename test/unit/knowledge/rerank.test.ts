import { describe, expect, it } from "vitest";
import type { Urn } from "../../../shared/domain/urn.ts";
import { type Found, rerankByWords } from "../../../shared/knowledge/search.ts";

const passage = (id: string, text: string): Found => ({
  urn: `cld:common.Tenant.acme/doc.Document.d/doc.Chunk.${id}` as Urn,
  kind: "doc.Chunk",
  score: 0.5,
  text,
});

describe("rerankByWords", () => {
  it("moves up a passage holding the question's rarer words; keeps the rest in the vector's order", () => {
    const found = [
      passage("a", "Shipping leaves the warehouse every weekday."),
      passage("b", "Returns are accepted within thirty days."),
      passage("c", "The mileage allowance is paid per kilometre driven."),
    ];
    const ranked = rerankByWords(found, "How much is paid per kilometre?");
    expect(ranked.map((f) => f.urn.slice(-1))).toEqual(["c", "a", "b"]);
  });

  it("leaves the order as it is when no passage shares a word, and earlier results where they were", () => {
    const result: Found = {
      urn: "cld:common.Tenant.acme/x" as Urn,
      kind: "common.Message",
      score: 0.9,
      text: "x",
    };
    const found = [result, passage("a", "alpha beta"), passage("b", "gamma delta")];
    expect(rerankByWords(found, "nothing shared here")).toEqual(found);
  });
});
