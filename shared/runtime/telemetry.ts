import { context, metrics, propagation, trace } from "@opentelemetry/api";
import type { Resource } from "@opentelemetry/resources";
import { ConfigError } from "../kernel/errors.ts";
import { closeMeters, openMeters, setTracing, takePinnedSpanId } from "../kernel/tracing.ts";

/**
 * OpenTelemetry for both runtimes, configured by the SDK's own environment variables, so Jaeger,
 * Grafana Tempo, Langfuse, Honeycomb or Datadog take it unchanged:
 *
 *   OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)  where to send; none: nothing is exported
 *   OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL)  http/protobuf (default) or http/json
 *   OTEL_EXPORTER_OTLP_HEADERS, ..._TIMEOUT, ..._COMPRESSION  read by the exporter itself
 *   OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES              the resource
 *   OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG             parentbased_always_on (default), traceidratio, ...
 *   OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none         off
 *   ARBOR_TRACES=xray                                        to X-Ray's OTLP endpoint, SigV4-signed (AWS)
 *   OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true  prompts and completions in spans (off by default)
 *   OTEL_METRICS_EXPORTER=none, OTEL_METRIC_EXPORT_INTERVAL   metrics (to the same endpoint) off, or how often
 *   OTEL_BSP_SCHEDULE_DELAY and the other OTEL_BSP_*          the span batches
 *
 * With no endpoint nothing of the SDK is even loaded: the spans' code paths test one boolean.
 */

export interface Telemetry {
  /** Sends what is buffered (a Lambda invocation ends with it: a frozen function sends nothing). */
  flush(): Promise<void>;
  /** Flushes and stops; idempotent. */
  shutdown(): Promise<void>;
}

type Env = Readonly<Record<string, string | undefined>>;

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== "";

/** Whether these settings turn tracing on: an OTLP endpoint, and nothing that turns it off. */
export function tracingConfigured(env: Env = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === "none") return false;
  return toXRay(env) || set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_ENDPOINT);
}

/**
 * ARBOR_TRACES=xray (the engine stack's `-c traces=xray`): spans go to X-Ray's OTLP endpoint in the
 * function's region, signed by its role (aws/xray-traces.ts), with no endpoint to configure.
 */
const toXRay = (env: Env): boolean => env.ARBOR_TRACES?.trim().toLowerCase() === "xray";

/** The OTLP protocol of the traces: http/protobuf (the specification's default) or http/json. */
export function tracesProtocol(env: Env = process.env): "http/protobuf" | "http/json" {
  const value = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? "").trim();
  if (value === "" || value === "http/protobuf") return "http/protobuf";
  if (value === "http/json") return "http/json";
  throw new ConfigError(
    `OTEL_EXPORTER_OTLP_PROTOCOL=${value} is not supported: Arbor exports OTLP over HTTP, as http/protobuf (the default) or http/json; a collector that takes only gRPC takes these on port 4318`,
  );
}

let running: Promise<Telemetry | undefined> | undefined;

/**
 * Starts tracing for this process when the environment configures it (once: later calls get the
 * same). `serviceName` names the process where OTEL_SERVICE_NAME does not (arbor, arbor-api, ...).
 */
export function startTelemetry(serviceName: string, env: Env = process.env): Promise<Telemetry | undefined> {
  // Kept once started; not kept when off or refused (a later call looks again, cheaply).
  running ??= open(serviceName, env).then(
    (telemetry) => {
      if (!telemetry) running = undefined;
      return telemetry;
    },
    (error: unknown) => {
      running = undefined;
      throw error;
    },
  );
  return running;
}

async function open(serviceName: string, env: Env): Promise<Telemetry | undefined> {
  if (!tracingConfigured(env)) return undefined;
  const xray = toXRay(env);
  if (xray && !set(env.AWS_REGION))
    throw new ConfigError(
      "ARBOR_TRACES=xray sends spans to X-Ray in the function's region: AWS_REGION must be set",
    );
  const protocol = tracesProtocol(env);
  const [sdk, core, resources, hooks] = await Promise.all([
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/core"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/context-async-hooks"),
  ]);
  const exporter = xray
    ? new (await import("./aws/xray-traces.ts")).XRayTracesExporter({
        region: env.AWS_REGION as string,
        ...(set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
          ? { url: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.trim() }
          : {}),
      })
    : new (protocol === "http/json"
        ? await import("@opentelemetry/exporter-trace-otlp-http")
        : await import("@opentelemetry/exporter-trace-otlp-proto")
      ).OTLPTraceExporter({ url: signalUrl(env, "TRACES", "v1/traces") });
  const random = new sdk.RandomIdGenerator();
  const resource = resources
    .resourceFromAttributes({
      "service.name": env.OTEL_SERVICE_NAME?.trim() || serviceName,
      // On Lambda: which function, so one service's spans still say where each ran.
      ...(env.AWS_LAMBDA_FUNCTION_NAME
        ? {
            "faas.name": env.AWS_LAMBDA_FUNCTION_NAME,
            "cloud.provider": "aws",
            "cloud.platform": "aws_lambda",
            ...(env.AWS_REGION ? { "cloud.region": env.AWS_REGION } : {}),
          }
        : {}),
    })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.TracerProvider({
    resource,
    sampler: samplerOf(sdk, env),
    // A task's span takes the id derived from its URN (kernel/tracing.ts); every other span a random one.
    idGenerator: {
      generateTraceId: () => random.generateTraceId(),
      generateSpanId: () => takePinnedSpanId() ?? random.generateSpanId(),
    },
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter,
        // The specification's settings of the batch processor (the SDK leaves reading them to us).
        ...positive(env.OTEL_BSP_SCHEDULE_DELAY, "scheduledDelayMillis"),
        ...positive(env.OTEL_BSP_MAX_QUEUE_SIZE, "maxQueueSize"),
        ...positive(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "maxExportBatchSize"),
        ...positive(env.OTEL_BSP_EXPORT_TIMEOUT, "exportTimeoutMillis"),
      }),
    ],
  });
  const contextManager = new hooks.AsyncLocalStorageContextManager();
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(
    new core.CompositePropagator({
      propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
    }),
  );
  trace.setGlobalTracerProvider(provider);
  const meterProvider = metricsConfigured(env) ? await openMetrics(env, protocol, resource) : undefined;
  setTracing(true, {
    captureContent: env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === "true",
  });
  let stopped: Promise<void> | undefined;
  return {
    flush: async () => {
      await Promise.all([provider.forceFlush(), meterProvider?.forceFlush()]);
    },
    shutdown: () => {
      stopped ??= (async () => {
        setTracing(false);
        closeMeters();
        await Promise.all([provider.shutdown(), meterProvider?.shutdown()]);
        metrics.disable();
        trace.disable();
        context.disable();
        propagation.disable();
        running = undefined;
      })();
      return stopped;
    },
  };
}

/**
 * Where a signal goes, as the specification says: OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT as it is,
 * else OTEL_EXPORTER_OTLP_ENDPOINT with the signal's path added.
 */
function signalUrl(env: Env, signal: "TRACES" | "METRICS", path: string): string {
  const own = env[`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`];
  if (set(own)) return own.trim();
  const base = (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "").trim();
  return `${base.endsWith("/") ? base : `${base}/`}${path}`;
}

/** `{ [key]: n }` for a whole number above 0, else nothing (the SDK's default stands). */
function positive<K extends string>(value: string | undefined, key: K): Partial<Record<K, number>> {
  const n = Number(value);
  return value !== undefined && Number.isInteger(n) && n > 0 ? ({ [key]: n } as Record<K, number>) : {};
}

/** Metrics go where traces go unless OTEL_METRICS_EXPORTER=none. */
const metricsConfigured = (env: Env): boolean =>
  env.OTEL_METRICS_EXPORTER?.trim().toLowerCase() !== "none" &&
  // To X-Ray go spans only: on AWS the metrics are CloudWatch's (EMF), unless an OTLP endpoint is set.
  (!toXRay(env) || set(env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_ENDPOINT));

/**
 * The meter provider beside the tracer provider: the GenAI client metrics and Arbor's counts
 * (kernel/tracing.ts openMeters), exported every OTEL_METRIC_EXPORT_INTERVAL ms (default 60 s), and
 * at each Lambda invocation's end (flush).
 */
async function openMetrics(env: Env, protocol: "http/protobuf" | "http/json", resource: Resource) {
  const [sdk, exporterModule] = await Promise.all([
    import("@opentelemetry/sdk-metrics"),
    protocol === "http/json"
      ? import("@opentelemetry/exporter-metrics-otlp-http")
      : import("@opentelemetry/exporter-metrics-otlp-proto"),
  ]);
  const provider = new sdk.MeterProvider({
    resource,
    readers: [
      new sdk.PeriodicExportingMetricReader({
        exporter: new exporterModule.OTLPMetricExporter({ url: signalUrl(env, "METRICS", "v1/metrics") }),
        ...positive(env.OTEL_METRIC_EXPORT_INTERVAL, "exportIntervalMillis"),
      }),
    ],
  });
  metrics.setGlobalMeterProvider(provider);
  openMeters();
  return provider;
}

type Sdk = typeof import("@opentelemetry/sdk-trace");

/** OTEL_TRACES_SAMPLER (and its _ARG), as the specification names them. */
function samplerOf(sdk: Sdk, env: Env) {
  const name = (env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on").trim().toLowerCase();
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const ratio = arg === undefined || arg === "" ? 1 : Number(arg);
  if (Number.isNaN(ratio) || ratio < 0 || ratio > 1)
    throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio: a number from 0 to 1, e.g. 0.25`);
  const parentBased = (
    root: InstanceType<Sdk["AlwaysOnSampler"]> | InstanceType<Sdk["TraceIdRatioBasedSampler"]>,
  ) => new sdk.ParentBasedSampler({ root });
  switch (name) {
    case "always_on":
      return new sdk.AlwaysOnSampler();
    case "always_off":
      return new sdk.AlwaysOffSampler();
    case "traceidratio":
      return new sdk.TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return parentBased(new sdk.AlwaysOnSampler());
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return parentBased(new sdk.TraceIdRatioBasedSampler(ratio));
    default:
      throw new ConfigError(
        `OTEL_TRACES_SAMPLER=${name} is not supported: always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio`,
      );
  }
}
