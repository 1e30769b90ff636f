import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../shared/runtime/config.ts";
import { AWS_ENV } from "../../support/config.ts";

describe("ARBOR_CONTEXT_TOKENS", () => {
  it("sets a leaf's context window, locally and on AWS", () => {
    expect(loadConfig({ ARBOR_CONTEXT_TOKENS: "64000" })).toMatchObject({
      mode: "local",
      contextTokens: 64_000,
    });
    expect(loadConfig({}).contextTokens).toBeUndefined();
    const aws = loadConfig({ ...AWS_ENV, ARBOR_CONTEXT_TOKENS: "200000" });
    expect(aws).toMatchObject({ mode: "aws", contextTokens: 200_000 });
  });

  it("refuses a window too small, too large or not whole, saying what to set", () => {
    expect(() => loadConfig({ ARBOR_CONTEXT_TOKENS: "100" })).toThrow(
      /ARBOR_CONTEXT_TOKENS: at least 2000 tokens/,
    );
    expect(() => loadConfig({ ARBOR_CONTEXT_TOKENS: "99999999999" })).toThrow(/at most 10000000 tokens/);
    expect(() => loadConfig({ ARBOR_CONTEXT_TOKENS: "3200.5" })).toThrow(/whole tokens/);
    expect(() => loadConfig({ ARBOR_CONTEXT_TOKENS: "lots" })).toThrow(/ARBOR_CONTEXT_TOKENS/);
  });
});
