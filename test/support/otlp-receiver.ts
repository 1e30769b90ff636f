import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An OTLP/HTTP receiver for the tests: what a collector (Jaeger, Tempo, Langfuse...) is to a real
 * deployment. It takes POST /v1/traces in both encodings the SDK's exporters send: http/json, which
 * it parses into spans, and http/protobuf, which it keeps as bytes (the tests look for ids and
 * names in them; decoding protobuf here would be a second implementation of the exporter).
 */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  status: { code?: number; message?: string };
  links: { traceId: string; spanId: string }[];
  service: string;
}

/** One data point of a metric: its attributes, and its value (a sum's or gauge's) or a histogram's count and sum. */
export interface ReceivedPoint {
  metric: string;
  attributes: Record<string, unknown>;
  value?: number;
  count?: number;
  sum?: number;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Every data point of every metrics export (http/json), in arrival order. */
  points: ReceivedPoint[];
  /** Raw bodies of http/protobuf exports, with their content type. */
  protobuf: { contentType: string; body: Buffer }[];
  /** Every request's path and content type, in order, and its headers. */
  requests: { path: string; contentType: string; headers: Record<string, string | string[] | undefined> }[];
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
};

const anyValue = (v: AnyValue): unknown => {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(anyValue);
  return undefined;
};

const attrs = (list: { key: string; value: AnyValue }[] | undefined) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));

async function body(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of req) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const points: ReceivedPoint[] = [];
  const protobuf: OtlpReceiver["protobuf"] = [];
  const requests: OtlpReceiver["requests"] = [];
  const server: Server = createServer(async (req, res) => {
    const contentType = String(req.headers["content-type"] ?? "");
    const path = new URL(req.url ?? "/", "http://x").pathname;
    requests.push({ path, contentType, headers: { ...req.headers } });
    const raw = await body(req);
    if (req.method === "POST" && path === "/v1/metrics" && contentType.startsWith("application/json")) {
      points.push(...metricPoints(JSON.parse(raw.toString("utf8"))));
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      return;
    }
    if (req.method !== "POST" || path !== "/v1/traces") {
      res.writeHead(404).end();
      return;
    }
    if (contentType.startsWith("application/x-protobuf")) {
      protobuf.push({ contentType, body: raw });
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      return;
    }
    const json = JSON.parse(raw.toString("utf8")) as {
      resourceSpans?: {
        resource?: { attributes?: { key: string; value: AnyValue }[] };
        scopeSpans?: { spans?: Record<string, unknown>[] }[];
      }[];
    };
    for (const rs of json.resourceSpans ?? []) {
      const service = String(attrs(rs.resource?.attributes)["service.name"] ?? "");
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          spans.push({
            traceId: String(s.traceId),
            spanId: String(s.spanId),
            parentSpanId: String(s.parentSpanId ?? ""),
            name: String(s.name),
            kind: Number(s.kind),
            startNs: BigInt(String(s.startTimeUnixNano)),
            endNs: BigInt(String(s.endTimeUnixNano)),
            attributes: attrs(s.attributes as never),
            status: (s.status ?? {}) as ReceivedSpan["status"],
            links: ((s.links ?? []) as { traceId: string; spanId: string }[]).map((l) => ({
              traceId: l.traceId,
              spanId: l.spanId,
            })),
            service,
          });
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    points,
    protobuf,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

type DataPoint = {
  attributes?: { key: string; value: AnyValue }[];
  asInt?: string | number;
  asDouble?: number;
  count?: string | number;
  sum?: number;
};
type Metric = {
  name: string;
  sum?: { dataPoints?: DataPoint[] };
  gauge?: { dataPoints?: DataPoint[] };
  histogram?: { dataPoints?: DataPoint[] };
};

function metricPoints(json: {
  resourceMetrics?: { scopeMetrics?: { metrics?: Metric[] }[] }[];
}): ReceivedPoint[] {
  const out: ReceivedPoint[] = [];
  for (const rm of json.resourceMetrics ?? [])
    for (const sm of rm.scopeMetrics ?? [])
      for (const m of sm.metrics ?? []) {
        for (const p of [...(m.sum?.dataPoints ?? []), ...(m.gauge?.dataPoints ?? [])])
          out.push({
            metric: m.name,
            attributes: attrs(p.attributes),
            value: Number(p.asInt ?? p.asDouble ?? 0),
          });
        for (const p of m.histogram?.dataPoints ?? [])
          out.push({
            metric: m.name,
            attributes: attrs(p.attributes),
            count: Number(p.count ?? 0),
            sum: Number(p.sum ?? 0),
          });
      }
  return out;
}

/** A task's span id, as Arbor derives it from the task's URN. */
export const taskSpanIdOf = (urn: string): string =>
  createHash("sha256").update(urn).digest("hex").slice(0, 16);
