/**
 * A local Amazon EventBridge peer for tests: an HTTP server that speaks the part of EventBridge's
 * JSON 1.1 protocol that the AWS SDK v3 client (`@aws-sdk/client-eventbridge`) uses for
 * PutEvents, PutRule, PutTargets, RemoveTargets, DeleteRule, ListRules and ListTargetsByRule, so the real client can
 * be pointed at it (`endpoint` = the peer, any region, dummy credentials).
 *
 * Protocol: `POST /` with `X-Amz-Target: AWSEvents.<Operation>` and
 * `Content-Type: application/x-amz-json-1.1`; errors are JSON bodies with `__type` and `message`
 * (plus the `x-amzn-ErrorType` header), as EventBridge sends them. SigV4 signatures are not
 * verified, but an `Authorization` header must be present (the region of its credential scope
 * becomes the `region` of the envelopes).
 *
 * What it does like EventBridge:
 * - PutEvents: at most 10 entries and 256 KiB per request (else ValidationException for the whole
 *   request); per entry, a missing Source / DetailType / Detail is `InvalidArgument` and a Detail that
 *   is not a JSON object is `MalformedDetail` (the other entries are still accepted). Accepted events
 *   are stored as EventBridge envelopes (version, id, detail-type, source, account, time, region,
 *   resources, detail) and delivered to the targets of every enabled rule on that bus whose
 *   EventPattern matches (matched with `compilePattern` from shared/kernel/event-pattern).
 * - Rules: PutRule (creates or updates; an invalid pattern is InvalidEventPatternException),
 *   PutTargets, RemoveTargets, DeleteRule (refused while the rule has targets), ListRules (paginated),
 *   ListTargetsByRule (one page).
 * - Buses need not be created: any EventBusName (or bus ARN) names a bus.
 *
 * Peer-only convention: a target whose `Arn` is an `http://127.0.0.1:<port>/...` (or
 * `http://localhost:<port>/...`) URL receives each matching envelope as a JSON `POST`, asynchronously
 * after PutEvents answered, retried on non-2xx or connection errors (like EventBridge's retry policy,
 * only faster) and dead-lettered after the last attempt. Targets with any other ARN are stored but
 * nothing is delivered to them. `Input`, `InputPath` and `InputTransformer` are not supported.
 *
 * Test hooks: `start()`, `stop()`, `events` (accepted envelopes), `idle()` (all deliveries done),
 * `throttleNextEntries(n)` (the next n valid entries fail with ThrottlingException),
 * `failNextRequests(n)` (the next n requests get HTTP 500), `calls` (every request, with its outcome).
 */
import { randomUUID } from "node:crypto";
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { compilePattern } from "../../shared/kernel/event-pattern/index.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";

/** What EventBridge delivers to a target: the port's envelope type. */
export type EventBridgeEnvelope = BusEnvelope;

export interface EventBridgePeerOptions {
  /** Account of the envelopes and ARNs (default 123456789012). */
  account?: string;
  /** Region when the Authorization header names none (default us-east-1). */
  region?: string;
  /** Attempts per target delivery (default 4). */
  deliveryAttempts?: number;
  /** Delay before delivery attempt n+1 (default 10 ms * 2^(n-1)). */
  deliveryRetryDelayMs?: (attempt: number) => number;
  /** Require an Authorization header (default true). */
  requireAuthorization?: boolean;
}

export interface PeerCall {
  operation: string;
  status: number;
  /** PutEvents: entries in the request. */
  entries?: number;
  /** PutEvents: entries that failed. */
  failed?: number;
  errorType?: string;
}

export interface PeerDelivery {
  bus: string;
  rule: string;
  targetId: string;
  url: string;
  eventId: string;
  attempts: number;
  ok: boolean;
  lastStatus?: number;
  lastError?: string;
}

interface Target {
  Id: string;
  Arn: string;
}

interface Rule {
  name: string;
  bus: string;
  arn: string;
  eventPattern: string | undefined;
  scheduleExpression: string | undefined;
  description: string | undefined;
  state: "ENABLED" | "DISABLED";
  match: (event: unknown) => boolean;
  targets: Map<string, Target>;
}

type Json = Record<string, unknown>;

class AwsError extends Error {
  readonly type: string;
  readonly status: number;

  constructor(type: string, message: string, status = 400) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

const MAX_ENTRIES = 10;
const MAX_REQUEST_BYTES = 256 * 1024;
const MAX_BODY_BYTES = 8 * 1024 * 1024;
const RULE_NAME = /^[.\-_A-Za-z0-9]{1,64}$/;

export class EventBridgePeer {
  readonly #opts: Required<EventBridgePeerOptions>;
  readonly #accepted: { bus: string; envelope: EventBridgeEnvelope }[] = [];
  /** rules by `${bus}\u0000${name}` */
  readonly #rules = new Map<string, Rule>();
  readonly #inflight = new Set<Promise<void>>();
  readonly calls: PeerCall[] = [];
  readonly deliveries: PeerDelivery[] = [];
  readonly deadLetters: PeerDelivery[] = [];
  #server: Server | undefined;
  #endpoint: string | undefined;
  #throttle = { count: 0, code: "ThrottlingException" };
  #failRequests = { count: 0, status: 500 };

  constructor(options: EventBridgePeerOptions = {}) {
    this.#opts = {
      account: options.account ?? "123456789012",
      region: options.region ?? "us-east-1",
      deliveryAttempts: options.deliveryAttempts ?? 4,
      deliveryRetryDelayMs: options.deliveryRetryDelayMs ?? ((n) => 10 * 2 ** (n - 1)),
      requireAuthorization: options.requireAuthorization ?? true,
    };
  }

  /** Listens on 127.0.0.1, on a free port. */
  async start(): Promise<{ endpoint: string }> {
    if (this.#endpoint) return { endpoint: this.#endpoint };
    const server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        if (!res.headersSent)
          send(res, 500, { __type: "InternalException", message: String(error) }, "InternalException");
        else res.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    this.#server = server;
    this.#endpoint = `http://127.0.0.1:${port}`;
    return { endpoint: this.#endpoint };
  }

  /** Waits for deliveries in flight, then closes the server and its connections. */
  async stop(): Promise<void> {
    await this.idle();
    const server = this.#server;
    this.#server = undefined;
    this.#endpoint = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  get endpoint(): string {
    if (!this.#endpoint) throw new Error("The EventBridge peer is not started");
    return this.#endpoint;
  }

  /** Every accepted event, as the envelope EventBridge would deliver. */
  get events(): readonly EventBridgeEnvelope[] {
    return this.#accepted.map((a) => a.envelope);
  }

  /** Accepted events of one bus. */
  eventsOn(bus: string): EventBridgeEnvelope[] {
    const name = busName(bus);
    return this.#accepted.filter((a) => a.bus === name).map((a) => a.envelope);
  }

  /** The rules of one bus (names). */
  ruleNames(bus = "default"): string[] {
    const name = busName(bus);
    return [...this.#rules.values()].filter((r) => r.bus === name).map((r) => r.name);
  }

  /** The next `count` otherwise valid PutEvents entries fail with this error code. */
  throttleNextEntries(count: number, errorCode = "ThrottlingException"): void {
    this.#throttle = { count, code: errorCode };
  }

  /** The next `count` requests (any operation) get this HTTP status (default 500). */
  failNextRequests(count: number, status = 500): void {
    this.#failRequests = { count, status };
  }

  /** Resolves when no delivery is in flight (including retries). */
  async idle(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
  }

  /** Forgets events, rules, calls, deliveries and injected failures. */
  reset(): void {
    this.#accepted.length = 0;
    this.#rules.clear();
    this.calls.length = 0;
    this.deliveries.length = 0;
    this.deadLetters.length = 0;
    this.#throttle = { count: 0, code: "ThrottlingException" };
    this.#failRequests = { count: 0, status: 500 };
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = header(req, "x-amz-target") ?? "";
    const operation = target.startsWith("AWSEvents.") ? target.slice("AWSEvents.".length) : target;
    const call: PeerCall = { operation, status: 200 };
    this.calls.push(call);
    const fail = (error: AwsError) => {
      call.status = error.status;
      call.errorType = error.type;
      send(res, error.status, { __type: error.type, message: error.message }, error.type);
    };

    let body: Buffer;
    try {
      body = await readBody(req);
    } catch (error) {
      return fail(error instanceof AwsError ? error : new AwsError("SerializationException", String(error)));
    }
    if (this.#failRequests.count > 0) {
      this.#failRequests.count--;
      return fail(
        new AwsError(
          "InternalException",
          "Injected failure by the EventBridge peer",
          this.#failRequests.status,
        ),
      );
    }
    if (req.method !== "POST" || (req.url ?? "/").split("?")[0] !== "/") {
      return fail(
        new AwsError("UnknownOperationException", `${req.method} ${req.url} is not supported`, 404),
      );
    }
    if (this.#opts.requireAuthorization && !header(req, "authorization")) {
      return fail(new AwsError("MissingAuthenticationTokenException", "Missing Authentication Token", 403));
    }
    const contentType = header(req, "content-type") ?? "";
    if (!contentType.startsWith("application/x-amz-json-1.1")) {
      return fail(
        new AwsError(
          "SerializationException",
          `Content-Type must be application/x-amz-json-1.1, got ${contentType}`,
        ),
      );
    }
    let input: unknown;
    try {
      input = body.length === 0 ? {} : JSON.parse(body.toString("utf8"));
    } catch {
      return fail(new AwsError("SerializationException", "The request body is not valid JSON"));
    }
    if (!isObject(input))
      return fail(new AwsError("SerializationException", "The request body must be a JSON object"));
    const region = regionOf(header(req, "authorization")) ?? this.#opts.region;

    try {
      let output: Json;
      switch (target) {
        case "AWSEvents.PutEvents":
          output = this.#putEvents(input, region, call);
          break;
        case "AWSEvents.PutRule":
          output = this.#putRule(input, region);
          break;
        case "AWSEvents.PutTargets":
          output = this.#putTargets(input);
          break;
        case "AWSEvents.RemoveTargets":
          output = this.#removeTargets(input);
          break;
        case "AWSEvents.DeleteRule":
          output = this.#deleteRule(input);
          break;
        case "AWSEvents.ListRules":
          output = this.#listRules(input);
          break;
        case "AWSEvents.ListTargetsByRule":
          output = this.#listTargetsByRule(input);
          break;
        default:
          throw new AwsError("UnknownOperationException", `Unknown operation ${JSON.stringify(target)}`);
      }
      send(res, 200, output);
    } catch (error) {
      if (error instanceof AwsError) return fail(error);
      throw error;
    }
  }

  #putEvents(input: Json, region: string, call: PeerCall): Json {
    const entries = input.Entries;
    if (!Array.isArray(entries) || entries.length === 0 || entries.length > MAX_ENTRIES) {
      throw new AwsError(
        "ValidationException",
        `1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to ${MAX_ENTRIES} and greater than or equal to 1`,
      );
    }
    call.entries = entries.length;
    let total = 0;
    for (const entry of entries) {
      if (!isObject(entry)) throw new AwsError("SerializationException", "Each entry must be a JSON object");
      total += sizeOf(entry);
    }
    if (total > MAX_REQUEST_BYTES) {
      throw new AwsError(
        "ValidationException",
        "Total size of the entries in the request is over the limit.",
      );
    }

    const now = new Date();
    const results: Json[] = [];
    const accepted: { bus: string; envelope: EventBridgeEnvelope }[] = [];
    for (const entry of entries as Json[]) {
      const problem = entryProblem(entry);
      if (problem) {
        results.push({ ErrorCode: problem.code, ErrorMessage: problem.message });
        continue;
      }
      if (this.#throttle.count > 0) {
        this.#throttle.count--;
        results.push({ ErrorCode: this.#throttle.code, ErrorMessage: "Rate exceeded." });
        continue;
      }
      const id = randomUUID();
      const bus = busName(
        typeof entry.EventBusName === "string" && entry.EventBusName ? entry.EventBusName : "default",
      );
      const envelope: EventBridgeEnvelope = {
        version: "0",
        id,
        "detail-type": entry.DetailType as string,
        source: entry.Source as string,
        account: this.#opts.account,
        time: isoSeconds(timeOf(entry.Time) ?? now),
        region,
        resources: Array.isArray(entry.Resources) ? entry.Resources.filter((r) => typeof r === "string") : [],
        detail: JSON.parse(entry.Detail as string) as Record<string, unknown>,
      };
      accepted.push({ bus, envelope });
      results.push({ EventId: id });
    }
    const failed = results.filter((r) => r.ErrorCode !== undefined).length;
    call.failed = failed;
    for (const a of accepted) {
      this.#accepted.push(a);
      this.#route(a.bus, a.envelope);
    }
    return { FailedEntryCount: failed, Entries: results };
  }

  #putRule(input: Json, region: string): Json {
    const name = requireString(input, "Name");
    if (!RULE_NAME.test(name)) {
      throw new AwsError(
        "ValidationException",
        `Rule name ${JSON.stringify(name)} must match [\\.\\-_A-Za-z0-9]+ (1-64)`,
      );
    }
    const bus = busName(optionalString(input, "EventBusName") ?? "default");
    const eventPattern = optionalString(input, "EventPattern");
    const scheduleExpression = optionalString(input, "ScheduleExpression");
    if (eventPattern === undefined && scheduleExpression === undefined) {
      throw new AwsError(
        "ValidationException",
        "Parameter(s) EventPattern or ScheduleExpression must be specified.",
      );
    }
    let match: (event: unknown) => boolean = () => false;
    if (eventPattern !== undefined) {
      try {
        match = compilePattern(JSON.parse(eventPattern));
      } catch (error) {
        throw new AwsError(
          "InvalidEventPatternException",
          `Event pattern is not valid. Reason: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
    const state = optionalString(input, "State") ?? "ENABLED";
    if (state !== "ENABLED" && state !== "DISABLED") {
      throw new AwsError("ValidationException", `State must be ENABLED or DISABLED, got ${state}`);
    }
    const key = ruleKey(bus, name);
    const arn = `arn:aws:events:${region}:${this.#opts.account}:rule/${bus === "default" ? "" : `${bus}/`}${name}`;
    const existing = this.#rules.get(key);
    this.#rules.set(key, {
      name,
      bus,
      arn,
      eventPattern,
      scheduleExpression,
      description: optionalString(input, "Description"),
      state,
      match,
      targets: existing?.targets ?? new Map(),
    });
    return { RuleArn: arn };
  }

  #putTargets(input: Json): Json {
    const rule = this.#rule(requireString(input, "Rule"), optionalString(input, "EventBusName"));
    const targets = input.Targets;
    if (!Array.isArray(targets) || targets.length === 0 || targets.length > 10) {
      throw new AwsError("ValidationException", "Targets must hold between 1 and 10 targets");
    }
    const failed: Json[] = [];
    for (const t of targets) {
      const id = isObject(t) && typeof t.Id === "string" ? t.Id : undefined;
      const arn = isObject(t) && typeof t.Arn === "string" ? t.Arn : undefined;
      if (!isObject(t) || !id || !arn) {
        failed.push({
          TargetId: id ?? "",
          ErrorCode: "ValidationException",
          ErrorMessage: "Id and Arn are required",
        });
        continue;
      }
      if (t.Input !== undefined || t.InputPath !== undefined || t.InputTransformer !== undefined) {
        failed.push({
          TargetId: id,
          ErrorCode: "ValidationException",
          ErrorMessage: "The EventBridge peer does not support Input, InputPath or InputTransformer",
        });
        continue;
      }
      if (!rule.targets.has(id) && rule.targets.size >= 5) {
        failed.push({
          TargetId: id,
          ErrorCode: "LimitExceededException",
          ErrorMessage: "A rule has at most 5 targets",
        });
        continue;
      }
      rule.targets.set(id, { Id: id, Arn: arn });
    }
    return { FailedEntryCount: failed.length, FailedEntries: failed };
  }

  #removeTargets(input: Json): Json {
    const rule = this.#rule(requireString(input, "Rule"), optionalString(input, "EventBusName"));
    const ids = input.Ids;
    if (!Array.isArray(ids) || ids.length === 0)
      throw new AwsError("ValidationException", "Ids must not be empty");
    for (const id of ids) if (typeof id === "string") rule.targets.delete(id);
    return { FailedEntryCount: 0, FailedEntries: [] };
  }

  /** One page holds them all: a rule has at most 5 targets on EventBridge (10 here). */
  #listTargetsByRule(input: Json): Json {
    const rule = this.#rule(requireString(input, "Rule"), optionalString(input, "EventBusName"));
    return { Targets: [...rule.targets.values()].map((t) => ({ Id: t.Id, Arn: t.Arn })) };
  }

  #deleteRule(input: Json): Json {
    const name = requireString(input, "Name");
    const key = ruleKey(busName(optionalString(input, "EventBusName") ?? "default"), name);
    const rule = this.#rules.get(key);
    if (!rule) return {};
    if (rule.targets.size > 0 && input.Force !== true) {
      throw new AwsError("ValidationException", "Rule can't be deleted since it has targets.");
    }
    this.#rules.delete(key);
    return {};
  }

  #listRules(input: Json): Json {
    const bus = busName(optionalString(input, "EventBusName") ?? "default");
    const prefix = optionalString(input, "NamePrefix") ?? "";
    const limit = typeof input.Limit === "number" ? input.Limit : 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new AwsError("ValidationException", "Limit must be between 1 and 100");
    }
    const token = optionalString(input, "NextToken");
    const start =
      token === undefined ? 0 : Number.parseInt(Buffer.from(token, "base64url").toString("utf8"), 10);
    if (!Number.isInteger(start) || start < 0) throw new AwsError("ValidationException", "Invalid NextToken");
    const all = [...this.#rules.values()]
      .filter((r) => r.bus === bus && r.name.startsWith(prefix))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const page = all.slice(start, start + limit);
    const output: Json = {
      Rules: page.map((r) => ({
        Name: r.name,
        Arn: r.arn,
        EventBusName: r.bus,
        State: r.state,
        ...(r.eventPattern === undefined ? {} : { EventPattern: r.eventPattern }),
        ...(r.scheduleExpression === undefined ? {} : { ScheduleExpression: r.scheduleExpression }),
        ...(r.description === undefined ? {} : { Description: r.description }),
      })),
    };
    if (start + limit < all.length)
      output.NextToken = Buffer.from(String(start + limit)).toString("base64url");
    return output;
  }

  #rule(name: string, bus: string | undefined): Rule {
    const b = busName(bus ?? "default");
    const rule = this.#rules.get(ruleKey(b, name));
    if (!rule)
      throw new AwsError("ResourceNotFoundException", `Rule ${name} does not exist on EventBus ${b}.`);
    return rule;
  }

  /** Schedules the deliveries of one accepted event (before PutEvents answers, so idle() sees them). */
  #route(bus: string, envelope: EventBridgeEnvelope): void {
    for (const rule of this.#rules.values()) {
      if (rule.bus !== bus || rule.state !== "ENABLED" || !rule.match(envelope)) continue;
      for (const target of rule.targets.values()) {
        const url = targetUrl(target.Arn);
        if (!url) continue;
        const delivery: PeerDelivery = {
          bus,
          rule: rule.name,
          targetId: target.Id,
          url: url.href,
          eventId: envelope.id,
          attempts: 0,
          ok: false,
        };
        this.deliveries.push(delivery);
        const p = this.#deliver(url, envelope, delivery);
        this.#inflight.add(p);
        void p.finally(() => this.#inflight.delete(p));
      }
    }
  }

  async #deliver(url: URL, envelope: EventBridgeEnvelope, delivery: PeerDelivery): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    const body = JSON.stringify(envelope);
    for (let attempt = 1; attempt <= this.#opts.deliveryAttempts; attempt++) {
      delivery.attempts = attempt;
      try {
        const status = await post(url, body);
        delivery.lastStatus = status;
        if (status >= 200 && status < 300) {
          delivery.ok = true;
          return;
        }
      } catch (error) {
        delivery.lastError = error instanceof Error ? error.message : String(error);
      }
      if (attempt < this.#opts.deliveryAttempts) {
        await new Promise((resolve) => setTimeout(resolve, this.#opts.deliveryRetryDelayMs(attempt)));
      }
    }
    this.deadLetters.push(delivery);
  }
}

/** Starts a peer; convenient for global setups. */
export async function startEventBridgePeer(
  options: EventBridgePeerOptions = {},
): Promise<{ peer: EventBridgePeer; endpoint: string }> {
  const peer = new EventBridgePeer(options);
  const { endpoint } = await peer.start();
  return { peer, endpoint };
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function send(res: ServerResponse, status: number, body: Json, errorType?: string): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/x-amz-json-1.1",
    "content-length": Buffer.byteLength(text),
    "x-amzn-requestid": randomUUID(),
    ...(errorType === undefined ? {} : { "x-amzn-errortype": errorType }),
  });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES) throw new AwsError("ValidationException", "Request body too large", 413);
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

/** `AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/events/aws4_request, ...` -> us-east-1 */
function regionOf(authorization: string | undefined): string | undefined {
  const m = authorization?.match(/Credential=[^/]+\/\d{8}\/([^/]+)\//);
  return m?.[1];
}

/** A bus name from a name or an `arn:aws:events:...:event-bus/<name>` ARN. */
function busName(nameOrArn: string): string {
  const m = nameOrArn.match(/^arn:[^:]+:events:[^:]*:[^:]*:event-bus\/(.+)$/);
  return m?.[1] ?? nameOrArn;
}

function ruleKey(bus: string, name: string): string {
  return `${bus}\u0000${name}`;
}

function requireString(input: Json, key: string): string {
  const value = input[key];
  if (typeof value !== "string" || value.length === 0) {
    throw new AwsError(
      "ValidationException",
      `1 validation error detected: Value null at '${key}' failed to satisfy constraint: Member must not be null`,
    );
  }
  return value;
}

function optionalString(input: Json, key: string): string | undefined {
  const value = input[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new AwsError("SerializationException", `${key} must be a string`);
  return value;
}

/** The size EventBridge charges an entry (Time, Source, DetailType, Detail, Resources). */
function sizeOf(entry: Json): number {
  let size = 14;
  for (const key of ["Source", "DetailType", "Detail"] as const) {
    const v = entry[key];
    if (typeof v === "string") size += Buffer.byteLength(v);
  }
  if (Array.isArray(entry.Resources)) {
    for (const r of entry.Resources) if (typeof r === "string") size += Buffer.byteLength(r);
  }
  return size;
}

function entryProblem(entry: Json): { code: string; message: string } | undefined {
  for (const key of ["Source", "DetailType", "Detail"] as const) {
    const v = entry[key];
    if (typeof v !== "string" || v.length === 0) {
      return {
        code: "InvalidArgument",
        message: `Parameter ${key} is not valid. Reason: ${key} is a required argument.`,
      };
    }
  }
  try {
    if (!isObject(JSON.parse(entry.Detail as string)))
      return { code: "MalformedDetail", message: "Detail is malformed." };
  } catch {
    return { code: "MalformedDetail", message: "Detail is malformed." };
  }
  if (
    entry.Resources !== undefined &&
    (!Array.isArray(entry.Resources) || entry.Resources.some((r) => typeof r !== "string"))
  ) {
    return { code: "InvalidArgument", message: "Parameter Resources is not valid." };
  }
  return undefined;
}

/** The SDK sends Time as epoch seconds (a number); accept an ISO string too. */
function timeOf(value: unknown): Date | undefined {
  if (typeof value === "number") return new Date(value * 1000);
  if (typeof value === "string") {
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? undefined : d;
  }
  return undefined;
}

function isoSeconds(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

function targetUrl(arn: string): URL | undefined {
  if (!/^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?\//.test(arn)) return undefined;
  return new URL(arn);
}

function post(url: URL, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: "POST",
        agent: false,
        timeout: 30_000,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("delivery timed out")));
    req.on("error", reject);
    req.end(body);
  });
}
