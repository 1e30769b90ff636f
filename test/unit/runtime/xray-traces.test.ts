import { createHash, createHmac } from "node:crypto";
import { trace } from "@opentelemetry/api";
import { SignatureV4 } from "@smithy/signature-v4";
import { afterEach, describe, expect, it, vi } from "vitest";
import { inSpan } from "../../../shared/kernel/tracing.ts";
import { XRayTracesExporter } from "../../../shared/runtime/aws/xray-traces.ts";
import { startTelemetry, type Telemetry, tracingConfigured } from "../../../shared/runtime/telemetry.ts";
import { startOtlpReceiver } from "../../support/otlp-receiver.ts";

/**
 * `-c traces=xray`: spans as OTLP protobuf to X-Ray's endpoint, SigV4-signed for the `xray` service
 * in the function's region. A peer stands for the endpoint and checks the signature with AWS's own
 * signer (the one the SDK clients use), from the request it received.
 */
const CREDENTIALS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};

class Sha256 {
  #h: ReturnType<typeof createHash>;
  constructor(secret?: string | Uint8Array) {
    this.#h =
      secret === undefined ? createHash("sha256") : (createHmac("sha256", Buffer.from(secret)) as never);
  }
  update(d: Uint8Array) {
    this.#h.update(d);
  }
  async digest() {
    return new Uint8Array(this.#h.digest());
  }
  reset() {}
}

describe("traces to X-Ray's OTLP endpoint", () => {
  let running: Telemetry | undefined;
  afterEach(async () => {
    await running?.shutdown();
    running = undefined;
  });

  it("is what ARBOR_TRACES=xray turns on, with no endpoint to configure", () => {
    expect(tracingConfigured({ ARBOR_TRACES: "xray" })).toBe(true);
    expect(new XRayTracesExporter({ region: "eu-west-1", credentials: async () => CREDENTIALS }).url).toBe(
      "https://xray.eu-west-1.amazonaws.com/v1/traces",
    );
  });

  it("refuses to start without a region", async () => {
    await expect(startTelemetry("arbor", { ARBOR_TRACES: "xray" })).rejects.toThrow(/AWS_REGION must be set/);
  });

  it("sends the spans as OTLP protobuf, signed with SigV4 for xray in the region", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const exporter = new XRayTracesExporter({
        region: "eu-west-1",
        url: `${receiver.url}/v1/traces`,
        credentials: async () => CREDENTIALS,
      });
      // A span made by the SDK as Arbor makes them, exported by this exporter.
      const { TracerProvider, SimpleSpanProcessor } = await import("@opentelemetry/sdk-trace");
      const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
      const span = provider.getTracer("t").startSpan("invoke_agent planner");
      const traceId = span.spanContext().traceId;
      span.end();
      await provider.forceFlush();
      await exporter.forceFlush();
      const [sent] = receiver.requests;
      expect(sent).toMatchObject({ path: "/v1/traces", contentType: "application/x-protobuf" });
      const body = receiver.protobuf[0]?.body as Buffer;
      expect(body.includes(Buffer.from(traceId, "hex"))).toBe(true);
      const auth = String(sent?.headers.authorization);
      expect(auth).toMatch(
        /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/xray\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
      );
      // The signature is the one AWS's signer computes for what arrived.
      const date = String(sent?.headers["x-amz-date"]);
      const url = new URL(`${receiver.url}/v1/traces`);
      const again = await new SignatureV4({
        service: "xray",
        region: "eu-west-1",
        credentials: CREDENTIALS,
        sha256: Sha256 as never,
      }).sign(
        {
          method: "POST",
          protocol: url.protocol,
          hostname: url.hostname,
          port: Number(url.port),
          path: url.pathname,
          query: {},
          headers: { host: url.host, "content-type": "application/x-protobuf" },
          body: new Uint8Array(body),
        },
        {
          signingDate: new Date(
            `${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`,
          ),
        },
      );
      expect(auth).toBe(again.headers.authorization);
      await provider.shutdown();
    } finally {
      await receiver.close();
    }
  });

  it("says what to check when the endpoint refuses", async () => {
    const exporter = new XRayTracesExporter({
      region: "us-east-1",
      credentials: async () => CREDENTIALS,
      fetch: async () => new Response("AccessDeniedException", { status: 403 }),
    });
    const result = await new Promise<{ code: number; error?: Error }>((done) => exporter.export([], done));
    expect(result.code).toBe(1);
    expect(result.error?.message).toMatch(/403: AccessDeniedException.*Transaction Search.*xray:PutSpans/);
  });

  it("starts tracing in a function's process from ARBOR_TRACES and AWS_REGION, signing with the role's credentials", async () => {
    // A function's role reaches it as these variables; the endpoint is the peer's here.
    vi.stubEnv("AWS_ACCESS_KEY_ID", CREDENTIALS.accessKeyId);
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", CREDENTIALS.secretAccessKey);
    const receiver = await startOtlpReceiver();
    try {
      running = await startTelemetry("arbor", {
        ARBOR_TRACES: "xray",
        AWS_REGION: "eu-west-1",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      });
      expect(running).toBeDefined();
      expect(await inSpan("x", {}, async () => trace.getActiveSpan()?.isRecording())).toBe(true);
      await running?.flush();
      expect(String(receiver.requests[0]?.headers.authorization)).toContain("Credential=AKIDEXAMPLE/");
      // Spans only: on AWS the metrics are CloudWatch's own.
      expect(receiver.requests.map((r) => r.path)).not.toContain("/v1/metrics");
    } finally {
      await running?.shutdown();
      running = undefined;
      await receiver.close();
      vi.unstubAllEnvs();
    }
  });
});
