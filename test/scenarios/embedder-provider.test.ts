import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { scriptedModel } from "../../shared/runtime/local/local-parts.ts";
import { createEmbedder } from "../../shared/runtime/models.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Locally, election embeds with the model server's embedding model when one is configured
 * (ARBOR_EMBEDDING_MODEL with ARBOR_MODEL_PROVIDER=openai), and a data folder whose team was
 * indexed by another embedder gets it indexed again, into the new embedder's own index, at the
 * tenant's first request: election then still finds the assistant that fits.
 */
const DIMENSION = 64;
/** Words hashed into a bag of words: texts that share words are near (what an embedding model does, roughly). */
function vectorOf(text: string): number[] {
  const v = new Array<number>(DIMENSION).fill(0);
  for (const word of text.toLowerCase().match(/[a-z]{4,}/g) ?? []) {
    const at = (createHash("sha256").update(word).digest()[0] as number) % DIMENSION;
    v[at] = (v[at] as number) + 1;
  }
  return v;
}

const seen: { model: string; inputs: string[] }[] = [];
let server: Server;
let baseUrl: string;
let dir: string;

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    if (req.method !== "POST" || req.url !== "/v1/embeddings") return res.writeHead(404).end();
    const { model, input } = JSON.parse(raw) as { model: string; input: string[] };
    seen.push({ model, inputs: input });
    const data = input.map((text, index) => ({ index, embedding: vectorOf(text) }));
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  dir = await mkdtemp(join(tmpdir(), "arbor-embedder-provider-"));
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

const script: ScriptFunction = (r) => {
  if (isPlan(r))
    return planOf({ name: "Budget", purpose: "Calculate the total cost of the budget with arithmetic" });
  if (isEvaluation(r)) return pass("done");
  return { content: "240 EUR" };
};

async function requestOn(embedder: ReturnType<typeof createEmbedder>) {
  const rt = createLocalRuntime({ mode: "local", tenant: "acme", dataDir: dir, durable: false });
  const engine = await createLocalEngine(rt, {
    llm: scriptedModel(script),
    ...(embedder ? { embedder } : {}),
  });
  const stop = engine.start();
  try {
    const { rootTaskId } = await engine.submit({
      tenant: "acme",
      text: "What does the budget cost?",
      actor: { id: "user_ada", kind: "human" },
    });
    await rt.bus.idle();
    const task = await engine.deps.resources.getAs("plan.Task", rootTaskId);
    return { status: (await engine.result(rootTaskId)).view?.status, election: task?.election };
  } finally {
    stop();
    await engine.close();
    await rt.close();
  }
}

describe("the election's embedder follows the configured model server", () => {
  it("is the server's embedding model with ARBOR_EMBEDDING_MODEL, else the offline one", () => {
    const openai = (extra: Record<string, string>) =>
      loadConfig({
        ARBOR_MODEL_PROVIDER: "openai",
        ARBOR_OPENAI_BASE_URL: baseUrl,
        ARBOR_MODEL: "llama3.1",
        ...extra,
      });
    expect(createEmbedder(openai({}).model)).toBeUndefined();
    const embedder = createEmbedder(
      openai({ ARBOR_EMBEDDING_MODEL: "nomic-embed-text", ARBOR_EMBEDDING_DIMENSION: String(DIMENSION) })
        .model,
    );
    expect(embedder?.dimension).toBe(DIMENSION);
    expect(embedder?.id).toContain("nomic-embed-text");
    expect(() => openai({ ARBOR_EMBEDDING_MODEL: "nomic-embed-text" })).toThrow(/ARBOR_EMBEDDING_DIMENSION/);
    expect(() =>
      loadConfig({
        ARBOR_MODEL_PROVIDER: "bedrock",
        AWS_REGION: "us-east-1",
        ARBOR_MODEL: "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        ARBOR_EMBEDDING_MODEL: "x",
      }),
    ).toThrow(/ARBOR_EMBEDDING_MODEL is for an OpenAI-compatible model server/);
  });

  it("elects with the server's embeddings, the team indexed again into its index at the first request", async () => {
    // First the offline embedder: the default team is applied and indexed with it.
    const offline = await requestOn(undefined);
    expect(offline.status).toBe("done");
    expect(offline.election?.assistant).toMatch(/common\.Assistant\./);
    expect(seen).toEqual([]);

    // Then the model server's: the stored team goes into that embedder's own index, and election uses it.
    const config = loadConfig({
      ARBOR_MODEL_PROVIDER: "openai",
      ARBOR_OPENAI_BASE_URL: baseUrl,
      ARBOR_MODEL: "llama3.1",
      ARBOR_EMBEDDING_MODEL: "nomic-embed-text",
      ARBOR_EMBEDDING_DIMENSION: String(DIMENSION),
    });
    const served = await requestOn(createEmbedder(config.model));
    expect(served.status).toBe("done");
    expect(seen.every((s) => s.model === "nomic-embed-text")).toBe(true);
    const inputs = seen.flatMap((s) => s.inputs);
    expect(inputs.some((t) => /analyst|numbers|arithmetic|calculat/i.test(t))).toBe(true); // the team's descriptions
    expect(inputs.some((t) => t.includes("Calculate the total cost"))).toBe(true); // the task's
    expect(served.election?.assistant).toBe(offline.election?.assistant);
    expect(served.election?.score).toBeGreaterThan(0);
  });
});
