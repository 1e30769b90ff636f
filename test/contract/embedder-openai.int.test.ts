import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { OpenAIEmbedder } from "../../shared/adapters/embeddings/openai-embedder.ts";
import { ConfigError, ThrottledError, ValidationError } from "../../shared/kernel/errors.ts";
import { embedderContract } from "./embedder.contract.ts";

/**
 * A tiny OpenAI-compatible embeddings server: `POST /v1/embeddings` with `{model, input: string[]}`.
 * It answers deterministic, NOT normalised vectors, in reverse order (clients must sort by `index`),
 * refuses more than MAX_INPUTS inputs per request, and can be told to fail or to change dimension.
 */
const MAX_INPUTS = 16;
const fakeState = {
  dimension: 48,
  failures: [] as { status: number; retryAfter?: string }[],
  requests: [] as {
    model: string;
    inputs: number;
    authorization: string | undefined;
    dimensions?: unknown;
  }[],
};

function vectorFor(text: string, dimension: number): number[] {
  const digest = createHash("sha512").update(text).digest();
  return Array.from(
    { length: dimension },
    (_, i) => ((digest[i % digest.length] as number) - 127.5) * (1 + (i % 3)),
  );
}

let server: Server;
let baseUrl: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => {
      raw += String(c);
    });
    req.on("end", () => {
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "content-type": "application/json", ...headers });
        res.end(JSON.stringify(body));
      };
      if (req.method !== "POST" || req.url !== "/v1/embeddings")
        return send(404, { error: { message: "no route" } });
      const failure = fakeState.failures.shift();
      if (failure) {
        return send(
          failure.status,
          { error: { message: `injected ${failure.status}` } },
          failure.retryAfter ? { "retry-after": failure.retryAfter } : {},
        );
      }
      const body = JSON.parse(raw) as { model: string; input: string[]; dimensions?: unknown };
      fakeState.requests.push({
        model: body.model,
        inputs: body.input.length,
        authorization: req.headers.authorization,
        ...(body.dimensions === undefined ? {} : { dimensions: body.dimensions }),
      });
      if (!Array.isArray(body.input) || body.input.length === 0 || body.input.length > MAX_INPUTS) {
        return send(400, { error: { message: `input must hold 1 to ${MAX_INPUTS} strings` } });
      }
      const data = body.input.map((text, index) => ({
        object: "embedding",
        index,
        embedding: vectorFor(text, fakeState.dimension),
      }));
      send(200, {
        object: "list",
        model: body.model,
        data: data.reverse(),
        usage: { prompt_tokens: 1, total_tokens: 1 },
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/`;
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
});
beforeEach(() => {
  fakeState.dimension = 48;
  fakeState.failures = [];
});

const noSleep = async () => undefined;
const make = (extra: Partial<ConstructorParameters<typeof OpenAIEmbedder>[0]> = {}) =>
  new OpenAIEmbedder({
    baseUrl,
    model: "nomic-embed-text",
    dimension: 48,
    batchSize: MAX_INPUTS,
    sleep: noSleep,
    ...extra,
  });

embedderContract("OpenAI-compatible /embeddings (fake server)", async () => ({
  embedder: make(),
  deterministic: true,
  batchSize: MAX_INPUTS,
  cleanup: async () => undefined,
}));

describe("OpenAIEmbedder specifics", () => {
  it("posts {model, input} with the API key, in batches, and names model and dimension in its id", async () => {
    const embedder = make({ apiKey: "sk-test", batchSize: 5 });
    expect(embedder.id).toBe("openai:nomic-embed-text@48");
    const from = fakeState.requests.length;
    await embedder.embed(Array.from({ length: 12 }, (_, i) => `t${i}`));
    expect(fakeState.requests.slice(from)).toEqual(
      [5, 5, 2].map((inputs) => ({
        model: "nomic-embed-text",
        inputs,
        authorization: "Bearer sk-test",
      })),
    );
  });

  it("sends `dimensions` only when asked to", async () => {
    const from = fakeState.requests.length;
    await make({ sendDimensions: true }).embed(["x"]);
    expect(fakeState.requests[from]?.dimensions).toBe(48);
  });

  it("uses the injected fetch", async () => {
    const urls: string[] = [];
    const embedder = make({
      fetch: (input, init) => {
        urls.push(String(input));
        return fetch(input, init);
      },
    });
    await embedder.embed(["a", "b"]);
    expect(urls).toEqual([`${baseUrl}embeddings`]);
  });

  it("refuses an answer of another dimension with a ConfigError that says what to set", async () => {
    fakeState.dimension = 64;
    await expect(make().embed(["a"])).rejects.toThrow(ConfigError);
    await expect(make().embed(["a"])).rejects.toThrow(
      /64-dimensional.*configured for 48: set dimension to 64/,
    );
  });

  it("retries 429 and 5xx (honouring Retry-After) and then succeeds", async () => {
    const waits: number[] = [];
    fakeState.failures.push({ status: 429, retryAfter: "2" }, { status: 503 });
    const [v] = await make({ sleep: async (ms) => void waits.push(ms), baseDelayMs: 10 }).embed(["a"]);
    expect(v?.length).toBe(48);
    expect(waits[0]).toBe(2000);
    expect(waits).toHaveLength(2);
  });

  it("gives up with ThrottledError after maxAttempts of 429", async () => {
    fakeState.failures.push({ status: 429 }, { status: 429 }, { status: 429 });
    await expect(make({ maxAttempts: 3 }).embed(["a"])).rejects.toBeInstanceOf(ThrottledError);
  });

  it("maps 401 to ConfigError and 400 to ValidationError, without retrying", async () => {
    fakeState.failures.push({ status: 401 });
    await expect(make().embed(["a"])).rejects.toBeInstanceOf(ConfigError);
    fakeState.failures.push({ status: 400 });
    await expect(make().embed(["a"])).rejects.toBeInstanceOf(ValidationError);
    expect(fakeState.failures).toEqual([]);
  });

  it("refuses a configuration without a dimension", () => {
    expect(() => new OpenAIEmbedder({ baseUrl, model: "m", dimension: 0 })).toThrow(ConfigError);
    expect(() => new OpenAIEmbedder({ baseUrl: "not a url", model: "m", dimension: 8 })).toThrow(ConfigError);
  });
});
