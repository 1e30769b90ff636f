import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { chooseModel } from "../../cli/lib/serve.ts";
import { ScriptedLlm } from "../../shared/adapters/llm/scripted-llm.ts";
import type { LocalConfig } from "../../shared/runtime/config.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";

/**
 * What a long-running `arbor serve` keeps per request must not grow without bound (issue 11 item
 * 19: 953 MB after ~3,400 requests, not given back when idle).
 */
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const heapAfterGc = () => {
  for (let i = 0; i < 3; i++) gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers; // typed arrays' values are outside the V8 heap
};

describe("memory a long-running server holds", () => {
  it("the offline example model of arbor serve keeps no prompts", async () => {
    const setup = chooseModel({} as LocalConfig, "offsite");
    const llm = setup?.llm as ScriptedLlm;
    expect(llm).toBeInstanceOf(ScriptedLlm);
    for (let i = 0; i < 20; i++)
      await llm.complete({
        system: "You plan.",
        messages: [{ role: "user", content: `Plan the offsite ${i}` }],
      });
    expect(llm.calls).toHaveLength(0);
  });

  it("the local engine's vector index keeps the vectors on disk, not in the heap", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "arbor-memory-"));
    const rt = createLocalRuntime({
      mode: "local",
      tenant: "t",
      dataDir,
      durable: false,
      syncEachWrite: false,
    });
    const engine = await createLocalEngine(rt, { llm: new ScriptedLlm([]) });
    try {
      const { index } = engine.deps;
      const dense = (seed: number) =>
        Float32Array.from({ length: index.space.dimension }, (_, d) => Math.sin(seed * 31 + d));
      const before = heapAfterGc();
      const n = 6000; // 512 float32 each: 12 MB of values alone when held in memory
      for (let i = 0; i < n; i += 500)
        await index.upsert(
          Array.from({ length: 500 }, (_, j) => ({
            key: `cld:common.Tenant.t/common.Conversation.c${i + j}/common.Message.m`,
            vector: dense(i + j),
            type: "common.Message",
          })),
        );
      const grown = heapAfterGc() - before;
      const [best] = await index.query({ vector: dense(7), topK: 1 });
      expect(best?.score).toBeGreaterThan(0.99);
      expect(grown).toBeLessThan(4e6);
    } finally {
      await engine.close();
      await rt.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
