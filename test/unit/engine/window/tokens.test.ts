import { describe, expect, it } from "vitest";
import {
  CLAUDE_MARGIN,
  estimateCounter,
  familyOf,
  tokenCounter,
} from "../../../../shared/engine/window/tokens.ts";

describe("token counting per model family", () => {
  it("picks the family from the model id, through provider and cross-region prefixes", () => {
    expect(familyOf("gpt-4o")).toBe("o200k");
    expect(familyOf("openai:gpt-4o-mini")).toBe("o200k");
    expect(familyOf("gpt-5")).toBe("o200k");
    expect(familyOf("o3-mini")).toBe("o200k");
    expect(familyOf("openai.gpt-oss-120b-1:0")).toBe("o200k");
    expect(familyOf("gpt-4-turbo")).toBe("cl100k");
    expect(familyOf("gpt-3.5-turbo")).toBe("cl100k");
    expect(familyOf("anthropic.claude-3-5-haiku-20241022-v1:0")).toBe("claude");
    expect(familyOf("us.anthropic.claude-sonnet-4-20250514-v1:0")).toBe("claude");
    expect(familyOf("bedrock:eu.anthropic.claude-3-7-sonnet-20250219-v1:0")).toBe("claude");
    expect(familyOf("claude-3-opus")).toBe("claude");
    for (const other of [
      "amazon.titan-text-express-v1",
      "meta.llama3-1-70b-instruct-v1:0",
      "mistral.mistral-large-2407-v1:0",
      "us.amazon.nova-pro-v1:0",
      "scripted",
      "llama3.1",
      "o1x", // not o1
      undefined,
    ])
      expect(familyOf(other)).toBe("estimate");
  });

  it("counts known strings exactly for OpenAI encodings", async () => {
    const o200k = await tokenCounter("gpt-4o");
    const cl100k = await tokenCounter("gpt-4");
    expect(o200k.family).toBe("o200k");
    expect(o200k.count("Hello, world!")).toBe(4);
    expect(o200k.count("hello world")).toBe(2);
    expect(cl100k.count("Hello, world!")).toBe(4);
    expect(cl100k.count("")).toBe(0);
  });

  it("counts Claude with the published tokenizer and the stated margin", async () => {
    const claude = await tokenCounter("anthropic.claude-3-5-haiku-20241022-v1:0");
    expect(claude.family).toBe("claude");
    // The published tokenizer gives 4 tokens for "Hello, world!" and 2 for "hello world".
    expect(claude.count("Hello, world!")).toBe(Math.ceil(4 * CLAUDE_MARGIN));
    expect(claude.count("hello world")).toBe(Math.ceil(2 * CLAUDE_MARGIN));
    // One tokenizer per process: the second counter is the same object.
    expect(await tokenCounter("us.anthropic.claude-3-haiku-20240307-v1:0")).toBe(claude);
  });

  it("estimates other families at one token per 3 characters", async () => {
    expect(estimateCounter.count("")).toBe(0);
    expect(estimateCounter.count("abc")).toBe(1);
    expect(estimateCounter.count("abcd")).toBe(2);
    expect((await tokenCounter("amazon.titan-text-express-v1")).count("x".repeat(300))).toBe(100);
  });

  it("counts special tokens in text as plain text, and hostile long runs quickly and the same each time", async () => {
    for (const model of ["gpt-4o", "gpt-4", "anthropic.claude-3-haiku"]) {
      const counter = await tokenCounter(model);
      expect(counter.count("a <|endoftext|> b <|im_start|>")).toBeGreaterThan(5);
      const run = "x".repeat(300_000); // one unsplittable piece: quadratic without chunking
      const first = counter.count(run);
      expect(first).toBeGreaterThan(0);
      expect(counter.count(run)).toBe(first);
      expect(counter.count(`${run}y`)).toBeGreaterThanOrEqual(first);
    }
  });

  it("never counts a long text below its tokens when its start reads unlike its rest", async () => {
    // Plain English first, then 100,000 distinct CJK characters (about two tokens each): a count
    // scaled from the start said 30,691 tokens for 193,968, and a window built on it overflowed.
    const text =
      "The quick brown fox. ".repeat(800) +
      Array.from({ length: 100_000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20_000))).join("");
    for (const model of ["gpt-4o", "gpt-4", "anthropic.claude-3-haiku"]) {
      const counter = await tokenCounter(model);
      let real = 0;
      for (let i = 0; i < text.length; i += 1000) real += counter.count(text.slice(i, i + 1000));
      expect(counter.count(text), model).toBeGreaterThanOrEqual(real);
    }
  });
});
