import { describe, expect, it } from "vitest";
import { type APIGatewayProxyEventV2, withEncodedUrn } from "../../../functions/api.ts";
import { loadConfig, loadKeysTarget } from "../../../shared/runtime/config.ts";

const event = (rawPath: string) => ({ rawPath }) as unknown as APIGatewayProxyEventV2;
const URN = "cld:common.Tenant.acme/common.Conversation.c-1/plan.Task.t_2";

describe("the API function's paths (API Gateway hands them over decoded)", () => {
  it("encodes a URN spread over several segments into one again, keeping what follows it", () => {
    const encoded = encodeURIComponent(URN);
    expect(withEncodedUrn(event(`/v1/tasks/${URN}`)).rawPath).toBe(`/v1/tasks/${encoded}`);
    expect(withEncodedUrn(event(`/v1/tasks/${URN}/tree`)).rawPath).toBe(`/v1/tasks/${encoded}/tree`);
    expect(withEncodedUrn(event(`/v1/tasks/${URN}/interactions`)).rawPath).toBe(
      `/v1/tasks/${encoded}/interactions`,
    );
    const answer = `${URN}/uip.Interaction.i1`;
    expect(withEncodedUrn(event(`/v1/interactions/${answer}/answer`)).rawPath).toBe(
      `/v1/interactions/${encodeURIComponent(answer)}/answer`,
    );
  });

  it("leaves paths without a decoded URN as they are", () => {
    for (const path of [`/v1/tasks/${encodeURIComponent(URN)}/tree`, "/v1/messages", "/healthz", "/a2a"]) {
      const e = event(path);
      expect(withEncodedUrn(e)).toBe(e);
    }
  });
});

describe("settings of the API function and of arbor keys", () => {
  const aws = {
    ARBOR_MODE: "aws",
    AWS_REGION: "eu-west-1",
    ARBOR_RESOURCES_BUCKET: "res",
    ARBOR_TABLE_NAME: "table",
    ARBOR_EVENT_BUS_NAME: "bus",
    ARBOR_POLICY_ENGINE: "cedar",
  };

  it("reads the public URL and the blocking A2A wait in aws mode, and the wait locally", () => {
    expect(
      loadConfig({
        ...aws,
        ARBOR_PUBLIC_URL: "https://abc.execute-api.eu-west-1.amazonaws.com/",
        ARBOR_A2A_BLOCKING_WAIT_MS: "25000",
      }),
    ).toMatchObject({
      publicUrl: "https://abc.execute-api.eu-west-1.amazonaws.com",
      a2aBlockingWaitMs: 25_000,
    });
    expect(loadConfig({ ARBOR_A2A_BLOCKING_WAIT_MS: "1000" })).toMatchObject({ a2aBlockingWaitMs: 1000 });
    expect(loadConfig({})).not.toHaveProperty("a2aBlockingWaitMs");
    expect(() => loadConfig({ ARBOR_A2A_BLOCKING_WAIT_MS: "soon" })).toThrow(/ARBOR_A2A_BLOCKING_WAIT_MS/);
  });

  it("chooses where arbor keys keeps keys: remote, the state table, or the local file, and says what is missing", () => {
    expect(loadKeysTarget({})).toEqual({ kind: "file" });
    expect(
      loadKeysTarget({ ARBOR_URL: "https://api.example.com/", ARBOR_KEY: "arbor_0123456789abcdef" }),
    ).toEqual({
      kind: "remote",
      url: "https://api.example.com",
      key: "arbor_0123456789abcdef",
    });
    expect(() => loadKeysTarget({ ARBOR_URL: "https://api.example.com" })).toThrow(
      /ARBOR_URL needs ARBOR_KEY/,
    );
    expect(() => loadKeysTarget({ ARBOR_URL: "ftp://x", ARBOR_KEY: "arbor_0123456789abcdef" })).toThrow(
      /ARBOR_URL/,
    );
    // Only the table and the region: the rest of aws mode's settings are not needed to write keys.
    expect(loadKeysTarget({ ARBOR_MODE: "aws", ARBOR_TABLE_NAME: "t", AWS_REGION: "eu-west-1" })).toEqual({
      kind: "table",
      tableName: "t",
      region: "eu-west-1",
    });
    expect(() => loadKeysTarget({ ARBOR_MODE: "aws" })).toThrow(/ARBOR_TABLE_NAME.*\n.*AWS_REGION/s);
  });
});
