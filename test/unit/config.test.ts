import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config.ts";
import { ConfigError } from "../../shared/errors.ts";

describe("config", () => {
  it("defaults to local mode with a data folder and durable writes", () => {
    expect(loadConfig({})).toMatchObject({ mode: "local", tenant: "local", durable: true });
    expect(loadConfig({ ARBOR_DURABLE: "false" })).toMatchObject({ durable: false });
  });

  it("names every missing AWS setting and where to find it", () => {
    const err = (() => {
      try {
        loadConfig({ ARBOR_MODE: "aws", AWS_REGION: "eu-west-1" });
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err?.message).toMatch(/ARBOR_RESOURCES_BUCKET: .*ResourcesBucketName/);
    expect(err?.message).toMatch(/ARBOR_TABLE_NAME/);
    expect(err?.message).toMatch(/ARBOR_EVENT_BUS_NAME/);
    expect(err?.message).not.toMatch(/AWS_REGION/);
  });

  it("rejects malformed values with the variable named", () => {
    expect(() => loadConfig({ ARBOR_MODE: "cloud" })).toThrow(/ARBOR_MODE/);
    expect(() => loadConfig({ ARBOR_TENANT: "a/b" })).toThrow(/ARBOR_TENANT/);
    expect(() => loadConfig({ ARBOR_MODE: "aws", ARBOR_S3_ENDPOINT: "not a url" })).toThrow(
      /ARBOR_S3_ENDPOINT/,
    );
  });

  it("reads a complete AWS configuration", () => {
    expect(
      loadConfig({
        ARBOR_MODE: "aws",
        AWS_REGION: "eu-west-1",
        ARBOR_RESOURCES_BUCKET: "b",
        ARBOR_TABLE_NAME: "t",
        ARBOR_EVENT_BUS_NAME: "arbor-prod",
      }),
    ).toEqual({
      mode: "aws",
      tenant: "local",
      region: "eu-west-1",
      resourcesBucket: "b",
      resourcesPrefix: "",
      tableName: "t",
      eventBusName: "arbor-prod",
      endpoints: {},
    });
  });
});
