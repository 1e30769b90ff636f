import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../shared/runtime/config.ts";
import { AWS_ENV } from "../../support/config.ts";

describe("ARBOR_MODEL_RETRY_MS", () => {
  it("sets how long a failing model is tried before its task fails, locally and on AWS", () => {
    expect(loadConfig({ ARBOR_MODEL_RETRY_MS: "5000" })).toMatchObject({
      mode: "local",
      modelRetryMs: 5_000,
    });
    expect(loadConfig({ ARBOR_MODEL_RETRY_MS: "0" })).toMatchObject({ modelRetryMs: 0 });
    expect(loadConfig({}).modelRetryMs).toBeUndefined();
    const aws = loadConfig({ ...AWS_ENV, ARBOR_MODEL_RETRY_MS: "60000" });
    expect(aws).toMatchObject({ mode: "aws", modelRetryMs: 60_000 });
  });

  it("refuses a value past a model step's time on AWS, or not whole, saying what to set", () => {
    expect(() => loadConfig({ ARBOR_MODEL_RETRY_MS: "600000" })).toThrow(
      /ARBOR_MODEL_RETRY_MS: at most 240000 \(4 minutes: a model step on AWS ends at 5\)/,
    );
    expect(() => loadConfig({ ARBOR_MODEL_RETRY_MS: "1.5" })).toThrow(/whole milliseconds/);
    expect(() => loadConfig({ ARBOR_MODEL_RETRY_MS: "-1" })).toThrow(/ARBOR_MODEL_RETRY_MS/);
  });
});
