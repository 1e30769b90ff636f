import { describe, expect, it } from "vitest";
import { OpenAIEmbedder } from "../../../../shared/adapters/embeddings/openai-embedder.ts";
import { ThrottledError, UnavailableError } from "../../../../shared/kernel/errors.ts";

/** How the embedder's failed attempts end: retried, then the error of the one taxonomy. */
function embedder(answer: () => Promise<Response>, waits: number[] = []) {
  return new OpenAIEmbedder({
    baseUrl: "http://embeddings.test/v1",
    model: "m",
    dimension: 2,
    maxAttempts: 3,
    fetch: answer as typeof fetch,
    sleep: async (ms) => void waits.push(ms),
  });
}

describe("OpenAIEmbedder's failures", () => {
  it("retries a 429, waiting as Retry-After says, then fails with a ThrottledError", async () => {
    const waits: number[] = [];
    const e = embedder(
      async () => new Response("slow down", { status: 429, headers: { "retry-after": "2" } }),
      waits,
    );
    const error = await e.embed(["a"]).catch((x: unknown) => x);
    expect(error).toBeInstanceOf(ThrottledError);
    expect((error as Error).message).toMatch(/failed after 3 attempts: HTTP 429 .*slow down/);
    expect(((error as Error).cause as ThrottledError).details).toEqual({ status: 429 });
    expect(waits).toEqual([2000, 2000]);
  });

  it("retries a 5xx and an endpoint it cannot reach, then fails with an UnavailableError", async () => {
    const down = await embedder(async () => new Response("oops", { status: 503 }))
      .embed(["a"])
      .catch((x: unknown) => x);
    expect(down).toBeInstanceOf(UnavailableError);
    expect((down as Error).message).toMatch(/HTTP 503/);
    const unreachable = await embedder(async () => {
      throw new TypeError("fetch failed");
    })
      .embed(["a"])
      .catch((x: unknown) => x);
    expect(unreachable).toBeInstanceOf(UnavailableError);
    expect((unreachable as Error).message).toMatch(
      /cannot reach http:\/\/embeddings\.test\/v1\/embeddings: fetch failed/,
    );
  });
});
