import { describe, expect, it } from "vitest";
import { costText } from "../../../shared/domain/budgets.ts";
import {
  catalogued,
  costAt,
  DEFAULT_BEDROCK_MODEL,
  endOfLife,
  MODEL_CATALOGUE,
  modelRef,
  priceOf,
} from "../../../shared/domain/model-catalogue.ts";
import { TeamFileSchema } from "../../../shared/domain/team.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";

const MILLION = { inputTokens: 1_000_000, outputTokens: 1_000_000 };

describe("the model catalogue", () => {
  it("has one row per model, each with a price, a lifecycle and a dated source", () => {
    const ids = MODEL_CATALOGUE.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const m of MODEL_CATALOGUE) {
      expect(m.price.input, m.id).toBeGreaterThanOrEqual(0);
      expect(m.price.output, m.id).toBeGreaterThanOrEqual(0);
      expect(m.source.url, m.id).toMatch(/^(https:\/\/|shared\/)/);
      expect(m.source.checked, m.id).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      // An id is stored without a profile prefix: lookups strip it.
      expect(modelRef(m.id).profile, m.id).toBeUndefined();
      if (m.lifecycle.status !== "active")
        expect(catalogued(m.lifecycle.replacement)?.lifecycle.status).toBe("active");
    }
  });

  it("defaults to a model that is served", () => {
    expect(catalogued(DEFAULT_BEDROCK_MODEL)?.lifecycle.status).toBe("active");
  });

  // model as configured -> dollars for a million input and a million output tokens
  const cases: [string, number | undefined][] = [
    ["global.anthropic.claude-haiku-4-5-20251001-v1:0", 1 + 5],
    ["us.anthropic.claude-haiku-4-5-20251001-v1:0", 1.1 + 5.5], // a geographic profile: 10 % more
    ["anthropic.claude-haiku-4-5-20251001-v1:0", 1.1 + 5.5], // in one region: 10 % more
    ["eu.anthropic.claude-sonnet-4-5-20250929-v1:0", 3.3 + 16.5],
    ["bedrock:amazon.nova-micro-v1:0", 0.035 + 0.14],
    ["us.amazon.nova-pro-v1:0", 0.8 + 3.2], // no regional premium on Nova
    ["openai:gpt-4o-mini", 0.15 + 0.6],
    ["gpt-4.1", 2 + 8],
    ["scripted", 0],
    ["llama3.1", undefined], // self-hosted: the operator says what it costs
    ["anthropic.claude-v9", undefined],
    ["arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", undefined],
  ];
  it.each(cases)("prices %s at its own price, or not at all", (model, dollars) => {
    const price = priceOf(model);
    if (dollars === undefined) expect(price).toBeUndefined();
    else expect(costAt(price as NonNullable<typeof price>, MILLION)).toBeCloseTo(dollars, 9);
  });

  it("bills cached input at the cache prices, and at the input price where the model has none", () => {
    const haiku = priceOf("global.anthropic.claude-haiku-4-5-20251001-v1:0") ?? { input: NaN, output: NaN };
    expect(
      costAt(haiku, { inputTokens: 0, outputTokens: 0, cacheReadTokens: 1e6, cacheWriteTokens: 1e6 }),
    ).toBeCloseTo(0.1 + 1.25, 9);
    expect(costAt({ input: 2, output: 4 }, { inputTokens: 0, outputTokens: 0, cacheReadTokens: 1e6 })).toBe(
      2,
    );
  });

  it("takes the operator's price over the catalogue's, by the id as configured or as catalogued", () => {
    const overrides = {
      "llama3.1": { input: 0, output: 0 },
      "anthropic.claude-haiku-4-5-20251001-v1:0": { input: 0.5, output: 2.5 },
    };
    expect(priceOf("llama3.1", overrides)).toEqual({ input: 0, output: 0 });
    expect(priceOf("us.anthropic.claude-haiku-4-5-20251001-v1:0", overrides)).toEqual({
      input: 0.5,
      output: 2.5,
    });
    expect(priceOf("gpt-4o", overrides)).toEqual(priceOf("gpt-4o"));
  });

  it("refuses a model past its end of life wherever one is configured, saying which to use", () => {
    expect(endOfLife(DEFAULT_BEDROCK_MODEL)).toBeUndefined();
    expect(endOfLife("llama3.1")).toBeUndefined();
    const retired = "us.anthropic.claude-3-5-haiku-20241022-v1:0";
    expect(endOfLife(retired)).toMatch(
      /end of life.*Use us\.anthropic\.claude-haiku-4-5-20251001-v1:0 instead/,
    );
    expect(() =>
      loadConfig({ ARBOR_MODEL_PROVIDER: "bedrock", AWS_REGION: "us-east-1", ARBOR_MODEL: retired }),
    ).toThrow(/ARBOR_MODEL=.*end of life.*claude-haiku-4-5/);
    const team = TeamFileSchema.safeParse({
      assistants: [{ name: "old", purpose: "anything", model: "anthropic.claude-3-7-sonnet-20250219-v1:0" }],
    });
    expect(team.success).toBe(false);
    expect(JSON.stringify(team.error?.issues)).toMatch(/end of life.*claude-sonnet-4-5/);
  });

  it("reads the operator's prices from ARBOR_MODEL_PRICES and refuses a malformed one", () => {
    expect(
      loadConfig({ ARBOR_MODEL_PRICES: '{"llama3.1": {"input": 0, "output": 0.5}}' }).modelPrices,
    ).toEqual({
      "llama3.1": { input: 0, output: 0.5 },
    });
    expect(() => loadConfig({ ARBOR_MODEL_PRICES: "{oops" })).toThrow(/ARBOR_MODEL_PRICES.*not JSON/s);
    expect(() => loadConfig({ ARBOR_MODEL_PRICES: '{"m": {"input": -1, "output": 0}}' })).toThrow(
      /ARBOR_MODEL_PRICES.*m\.input/s,
    );
    expect(() => loadConfig({ ARBOR_MODEL_PRICES: '{"m": {"input": 1, "output": 1, "per": "k"}}' })).toThrow(
      /ARBOR_MODEL_PRICES/,
    );
  });

  it("shows a cost as a person reads it, and an unknown one as unknown", () => {
    expect(costText({ costUsd: 0, unpricedCalls: 0 })).toBe("$0");
    expect(costText({ costUsd: 0.004213, unpricedCalls: 0 })).toBe("$0.0042");
    expect(costText({ costUsd: 1.256, unpricedCalls: 0 })).toBe("$1.26");
    expect(costText({ costUsd: 0, unpricedCalls: 3 })).toBe("cost unknown");
    expect(costText({ costUsd: 0.5, unpricedCalls: 1 })).toBe("$0.50 + unknown");
  });
});
