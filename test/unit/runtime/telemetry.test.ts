import { trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../../shared/kernel/errors.ts";
import { currentTraceparent, inSpan, tracingOn } from "../../../shared/kernel/tracing.ts";
import {
  startTelemetry,
  type Telemetry,
  tracesProtocol,
  tracingConfigured,
} from "../../../shared/runtime/telemetry.ts";
import { startOtlpReceiver } from "../../support/otlp-receiver.ts";

/** The SDK's own settings turn traces on and shape them; without an endpoint nothing is loaded. */
describe("telemetry settings", () => {
  let running: Telemetry | undefined;
  afterEach(async () => {
    await running?.shutdown();
    running = undefined;
  });

  it("is on only with an OTLP endpoint, and off when the SDK's settings say so", () => {
    expect(tracingConfigured({})).toBe(false);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toBe(
      true,
    );
    expect(
      tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }),
    ).toBe(false);
    expect(
      tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }),
    ).toBe(false);
  });

  it("exports OTLP over HTTP as protobuf by default or JSON, and says what to do about gRPC", () => {
    expect(tracesProtocol({})).toBe("http/protobuf");
    expect(tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })).toBe("http/json");
    expect(
      tracesProtocol({
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      }),
    ).toBe("http/json");
    expect(() => tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(ConfigError);
    expect(() => tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(/http\/protobuf.*4318/);
  });

  it("starts nothing without an endpoint: no provider, and spans' code paths run as plain calls", async () => {
    running = await startTelemetry("arbor", {});
    expect(running).toBeUndefined();
    expect(tracingOn()).toBe(false);
    expect(await inSpan("x", {}, async () => currentTraceparent())).toBeUndefined();
  });

  it("refuses a sampler it does not know, or a ratio that is not one", async () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" };
    await expect(startTelemetry("arbor", { ...base, OTEL_TRACES_SAMPLER: "sometimes" })).rejects.toThrow(
      /OTEL_TRACES_SAMPLER=sometimes is not supported/,
    );
    await expect(
      startTelemetry("arbor", { ...base, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "2" }),
    ).rejects.toThrow(/OTEL_TRACES_SAMPLER_ARG=2 is not a ratio/);
  });

  it("sends http/protobuf to the signal's path, with the span's trace id and name in it", async () => {
    const receiver = await startOtlpReceiver();
    try {
      running = await startTelemetry("arbor", {
        OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
        OTEL_METRICS_EXPORTER: "none",
        OTEL_SERVICE_NAME: "arbor-proto",
      });
      expect(tracingOn()).toBe(true);
      const traceId = await inSpan(
        "invoke_agent planner",
        {},
        async () => trace.getActiveSpan()?.spanContext().traceId,
      );
      await running?.flush();
      expect(receiver.requests).toContainEqual(
        expect.objectContaining({ path: "/v1/traces", contentType: "application/x-protobuf" }),
      );
      const body = Buffer.concat(receiver.protobuf.map((p) => p.body));
      expect(body.includes(Buffer.from(traceId as string, "hex"))).toBe(true);
      expect(body.includes(Buffer.from("invoke_agent planner"))).toBe(true);
      expect(body.includes(Buffer.from("arbor-proto"))).toBe(true);
    } finally {
      await running?.shutdown();
      running = undefined;
      await receiver.close();
    }
  });

  it("samples by ratio: none at 0, as the operator asked", async () => {
    const receiver = await startOtlpReceiver();
    try {
      running = await startTelemetry("arbor", {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_METRICS_EXPORTER: "none",
        OTEL_TRACES_SAMPLER: "traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0",
      });
      await inSpan("dropped", {}, async () => undefined);
      await running?.flush();
      expect(receiver.spans).toEqual([]);
    } finally {
      await running?.shutdown();
      running = undefined;
      await receiver.close();
    }
  });
});
