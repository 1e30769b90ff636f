import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../shared/kernel/errors.ts";
import { loadConfig, parsePublicUrl } from "../../../shared/runtime/config.ts";

describe("config", () => {
  it("defaults to local mode with a data folder and durable writes", () => {
    expect(loadConfig({})).toMatchObject({ mode: "local", tenant: "local", durable: true });
    expect(loadConfig({ ARBOR_DURABLE: "false" })).toMatchObject({ durable: false });
  });

  it("gives local mode the watchdog's stale time too (arbor serve's watchdog uses it)", () => {
    expect(loadConfig({})).toMatchObject({ mode: "local", watchdogStaleMs: 600_000 });
    expect(loadConfig({ ARBOR_WATCHDOG_STALE_MS: "120000" })).toMatchObject({
      mode: "local",
      watchdogStaleMs: 120_000,
    });
    expect(() => loadConfig({ ARBOR_WATCHDOG_STALE_MS: "5000" })).toThrow(/ARBOR_WATCHDOG_STALE_MS/);
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

  it("lets webhooks reach loopback receivers only when ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP says so", () => {
    expect(loadConfig({})).toMatchObject({ notify: { allowLoopbackHttp: false } });
    expect(loadConfig({ ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true" })).toMatchObject({
      notify: { allowLoopbackHttp: true },
    });
    expect(() => loadConfig({ ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "maybe" })).toThrow(
      /ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP/,
    );
  });

  it("gives the AWS functions the notify queue, and refuses the loopback switch on Lambda", () => {
    const aws = {
      ARBOR_MODE: "aws",
      AWS_REGION: "eu-west-1",
      ARBOR_RESOURCES_BUCKET: "b",
      ARBOR_TABLE_NAME: "t",
      ARBOR_EVENT_BUS_NAME: "arbor-dev",
      ARBOR_POLICY_ENGINE: "cedar",
    };
    const url = "https://sqs.eu-west-1.amazonaws.com/123456789012/arbor-dev-deliveries";
    expect(loadConfig({ ...aws, ARBOR_NOTIFY_QUEUE_URL: url })).toMatchObject({
      notify: { allowLoopbackHttp: false, queueUrl: url },
    });
    expect(() => loadConfig({ ...aws, ARBOR_NOTIFY_QUEUE_URL: "a queue" })).toThrow(/ARBOR_NOTIFY_QUEUE_URL/);
    // A developer's shell in aws mode may reach a receiver on its machine; a deployed function may not.
    expect(loadConfig({ ...aws, ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true" })).toMatchObject({
      notify: { allowLoopbackHttp: true },
    });
    expect(() =>
      loadConfig({ ...aws, ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true", AWS_LAMBDA_FUNCTION_NAME: "notify" }),
    ).toThrow(/refused on Lambda/);
  });

  it("rejects malformed values with the variable named", () => {
    expect(() => loadConfig({ ARBOR_MODE: "cloud" })).toThrow(/ARBOR_MODE/);
    expect(() => loadConfig({ ARBOR_TENANT: "a/b" })).toThrow(/ARBOR_TENANT/);
    expect(() => loadConfig({ ARBOR_MODE: "aws", ARBOR_S3_ENDPOINT: "not a url" })).toThrow(
      /ARBOR_S3_ENDPOINT/,
    );
  });

  const aws = {
    ARBOR_MODE: "aws",
    AWS_REGION: "eu-west-1",
    ARBOR_RESOURCES_BUCKET: "b",
    ARBOR_TABLE_NAME: "t",
    ARBOR_EVENT_BUS_NAME: "arbor-prod",
    ARBOR_POLICIES_BUCKET: "p",
  };

  it("reads a complete AWS configuration", () => {
    expect(loadConfig(aws)).toEqual({
      mode: "aws",
      tenant: "local",
      region: "eu-west-1",
      resourcesBucket: "b",
      resourcesPrefix: "",
      tableName: "t",
      eventBusName: "arbor-prod",
      watchdogStaleMs: 600_000,
      resourceEvents: "default",
      endpoints: {},
      policy: { engine: "opa", bucket: "p", prefix: "", recheckMs: 300_000 },
      outbound: { allow: [], ports: [], httpsOnly: false, maxResponseBytes: 10 * 1024 * 1024 },
      notify: { allowLoopbackHttp: false },
      // The API function counts requests per key and per tenant too (per instance).
      rateLimits: { perKey: { perSecond: 20, burst: 200 }, perTenant: { perSecond: 50, burst: 500 } },
    });
  });

  it("reads which resource writes are announced (ARBOR_RESOURCE_EVENTS), refusing anything else", () => {
    expect(loadConfig({ ...aws, ARBOR_RESOURCE_EVENTS: "all" })).toMatchObject({ resourceEvents: "all" });
    expect(loadConfig({ ARBOR_RESOURCE_EVENTS: "all" })).toMatchObject({
      mode: "local",
      resourceEvents: "all",
    });
    expect(loadConfig({})).toMatchObject({ resourceEvents: "default" });
    expect(loadConfig({ ARBOR_RESOURCE_EVENTS: "off" })).toMatchObject({ resourceEvents: "off" });
    expect(() => loadConfig({ ARBOR_RESOURCE_EVENTS: "everything" })).toThrow(/ARBOR_RESOURCE_EVENTS/);
  });

  it("reads the engine's vector index, watchdog and endpoint settings in AWS mode", () => {
    expect(
      loadConfig({
        ...aws,
        ARBOR_VECTOR_BUCKET: "arbor-prod-vectors-123456789012",
        ARBOR_VECTOR_INDEX: "resources-titan-v2-1024",
        ARBOR_WATCHDOG_STALE_MS: "900000",
        ARBOR_S3VECTORS_ENDPOINT: "http://127.0.0.1:9001",
        ARBOR_BEDROCK_ENDPOINT: "http://127.0.0.1:9002",
      }),
    ).toMatchObject({
      vectors: { bucket: "arbor-prod-vectors-123456789012", index: "resources-titan-v2-1024" },
      watchdogStaleMs: 900_000,
      endpoints: { s3vectors: "http://127.0.0.1:9001", bedrock: "http://127.0.0.1:9002" },
    });
  });

  it("reads the tool function by name or ARN (unset: tools run in process), and refuses anything else", () => {
    expect(loadConfig(aws)).not.toHaveProperty("toolFunction");
    for (const fn of [
      "arbor-prod-engine-ToolsHandlerFunction1A2B3C",
      "arbor-tools:live",
      "arn:aws:lambda:eu-west-1:123456789012:function:arbor-tools",
    ])
      expect(loadConfig({ ...aws, ARBOR_TOOL_FUNCTION: fn })).toMatchObject({ toolFunction: fn });
    for (const bad of ["arn:aws:s3:::a-bucket", "two words", "x".repeat(65)])
      expect(() => loadConfig({ ...aws, ARBOR_TOOL_FUNCTION: bad })).toThrow(
        /ARBOR_TOOL_FUNCTION: a Lambda function name .*ToolFunctionName/,
      );
  });

  it("reads the command queues by step (unset: commands go on the bus), and refuses what it cannot use", () => {
    expect(loadConfig(aws)).not.toHaveProperty("commandQueues");
    const queues = { plan: "https://sqs.eu-west-1.amazonaws.com/123456789012/plan" };
    expect(loadConfig({ ...aws, ARBOR_COMMAND_QUEUES: JSON.stringify(queues) })).toMatchObject({
      commandQueues: queues,
    });
    expect(() => loadConfig({ ...aws, ARBOR_COMMAND_QUEUES: "plan=x" })).toThrow(
      /ARBOR_COMMAND_QUEUES: not JSON; e\.g\. \{"plan"/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_COMMAND_QUEUES: '{"supervise": "https://sqs.x/1/q"}' })).toThrow(
      /ARBOR_COMMAND_QUEUES: supervise/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_COMMAND_QUEUES: '{"plan": "not a url"}' })).toThrow(
      /ARBOR_COMMAND_QUEUES: plan/,
    );
  });

  it("wants the vector bucket and index together, and says which one is missing", () => {
    expect(() => loadConfig({ ...aws, ARBOR_VECTOR_BUCKET: "arbor-prod-vectors" })).toThrow(ConfigError);
    expect(() => loadConfig({ ...aws, ARBOR_VECTOR_BUCKET: "arbor-prod-vectors" })).toThrow(
      /set both .*VectorBucketName and VectorIndexName.*only ARBOR_VECTOR_BUCKET is set/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_VECTOR_INDEX: "resources" })).toThrow(
      /only ARBOR_VECTOR_INDEX is set/,
    );
  });

  it("rejects malformed vector and watchdog settings with the variable named", () => {
    expect(() => loadConfig({ ...aws, ARBOR_VECTOR_BUCKET: "Vectors_1", ARBOR_VECTOR_INDEX: "i-1" })).toThrow(
      /ARBOR_VECTOR_BUCKET: 3-63 lower-case letters/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_VECTOR_BUCKET: "v-1", ARBOR_VECTOR_INDEX: "x" })).toThrow(
      /ARBOR_VECTOR_INDEX/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_WATCHDOG_STALE_MS: "5000" })).toThrow(
      /ARBOR_WATCHDOG_STALE_MS: at least 60000/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_WATCHDOG_STALE_MS: "ten minutes" })).toThrow(
      /ARBOR_WATCHDOG_STALE_MS/,
    );
    expect(() => loadConfig({ ...aws, ARBOR_S3VECTORS_ENDPOINT: "nowhere" })).toThrow(
      /ARBOR_S3VECTORS_ENDPOINT/,
    );
  });
});

describe("the policy engine", () => {
  it("is the built-in Cedar policy unless OPA is chosen, and OPA needs its bundle's folder", () => {
    expect(loadConfig({})).toMatchObject({ policy: { engine: "cedar" } });
    expect(() => loadConfig({ ARBOR_POLICY_ENGINE: "opa" })).toThrow(
      /ARBOR_POLICY_ENGINE=opa needs ARBOR_POLICIES_DIR/,
    );
    expect(loadConfig({ ARBOR_POLICY_ENGINE: "opa", ARBOR_POLICIES_DIR: "/srv/policies" })).toMatchObject({
      policy: { engine: "opa", dir: "/srv/policies" },
    });
    expect(() => loadConfig({ ARBOR_POLICY_ENGINE: "rego" })).toThrow(/ARBOR_POLICY_ENGINE/);
  });
});

describe("the policy engine in AWS mode", () => {
  const base = {
    ARBOR_MODE: "aws",
    AWS_REGION: "eu-west-1",
    ARBOR_RESOURCES_BUCKET: "b",
    ARBOR_TABLE_NAME: "t",
    ARBOR_EVENT_BUS_NAME: "e",
  };
  it("is OPA from the policies bucket unless Cedar is chosen, and says what to set", () => {
    expect(() => loadConfig(base)).toThrow(
      /ARBOR_POLICIES_BUCKET: the policies bucket with the OPA bundle .*or ARBOR_POLICY_ENGINE=cedar/,
    );
    expect(loadConfig({ ...base, ARBOR_POLICIES_BUCKET: "p", ARBOR_POLICIES_PREFIX: "v2/" })).toMatchObject({
      policy: { engine: "opa", bucket: "p", prefix: "v2/" },
    });
    expect(
      loadConfig({ ...base, ARBOR_POLICIES_BUCKET: "p", ARBOR_POLICY_RECHECK_MS: "60000" }),
    ).toMatchObject({ policy: { engine: "opa", recheckMs: 60_000 } });
    expect(() => loadConfig({ ...base, ARBOR_POLICIES_BUCKET: "p", ARBOR_POLICY_RECHECK_MS: "5" })).toThrow(
      /ARBOR_POLICY_RECHECK_MS: at least 10000/,
    );
    expect(loadConfig({ ...base, ARBOR_POLICY_ENGINE: "cedar" })).toMatchObject({
      policy: { engine: "cedar" },
    });
  });

  it("takes the public URL as an absolute http(s) URL with at most a plain path prefix", () => {
    expect(loadConfig({ ARBOR_PUBLIC_URL: "https://arbor.example.com/" })).toMatchObject({
      publicUrl: "https://arbor.example.com",
    });
    expect(loadConfig({})).not.toHaveProperty("publicUrl");
    expect(parsePublicUrl("http://127.0.0.1:8787")).toBe("http://127.0.0.1:8787");
    expect(parsePublicUrl("https://example.com/arbor/")).toBe("https://example.com/arbor");
    for (const bad of [
      "arbor.example.com",
      "/a2a",
      "ftp://example.com",
      "https://user:pw@example.com",
      "https://example.com/?x=1",
      "https://example.com/#top",
      "https://example.com/a/../b",
      "https://example.com/a b",
      "https://example.com\\evil",
      "javascript:alert(1)",
    ])
      expect(() => loadConfig({ ARBOR_PUBLIC_URL: bad }), bad).toThrow(/ARBOR_PUBLIC_URL: The public URL/);
    // Refused, and its password not printed: the message goes to terminals, CI logs, bug reports.
    expect(() => parsePublicUrl("https://ada:hunter2@example.com")).toThrow(/has credentials in it/);
    expect(() => parsePublicUrl("https://ada:hunter2@example.com")).not.toThrow(/hunter2/);
  });
});
