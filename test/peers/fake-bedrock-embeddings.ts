/**
 * A fake Amazon Bedrock runtime endpoint for Titan Text Embeddings v2, driven by the real
 * `@aws-sdk/client-bedrock-runtime` client (InvokeModel: `POST /model/{modelId}/invoke`, REST-JSON).
 * The client speaks HTTP/2 by default, so one port serves HTTP/2 cleartext (prior knowledge) and
 * HTTP/1.1: the first bytes of each connection decide. (The Converse/ConverseStream fake lives in
 * test/peers/fake-bedrock.ts.)
 *
 * Like Bedrock for `amazon.titan-embed-text-v2:0`: the body is `{inputText, dimensions?, normalize?,
 * embeddingTypes?}`; `inputText` must be 1..50,000 characters; `dimensions` is 256, 512 or 1024
 * (default 1024); `normalize` defaults to true; unknown fields and other model ids are a
 * ValidationException. The answer is `{embedding, inputTextTokenCount, embeddingsByType: {float}}`.
 * Embeddings are deterministic pseudo-random vectors seeded by the text (same text, same vector).
 * Errors carry `x-amzn-errortype` and a JSON `message`, with Bedrock's status codes.
 *
 * Test hooks: `requests` (parsed bodies), `failNext(n, error)` (default: ThrottlingException),
 * `delayMs` (hold every answer, to observe concurrency), `maxInFlight`.
 */
import { createHash } from "node:crypto";
import { createServer as createHttp1Server, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttp2Server, type Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { Duplex } from "node:stream";

export const TITAN_V2 = "amazon.titan-embed-text-v2:0";

interface ErrorSpec {
  status: number;
  type: string;
}
export interface TitanRequest {
  modelId: string;
  inputText: string;
  dimensions: number;
  normalize: boolean;
}

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

/** A deterministic vector for `text`: xorshift32 seeded by SHA-256 of the text, centred values. */
export function fakeTitanVector(text: string, dimensions: number, normalize: boolean): number[] {
  let state = createHash("sha256").update(text).digest().readUInt32LE(0) || 1;
  const out: number[] = [];
  for (let i = 0; i < dimensions; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    out.push(state / 0xffffffff - 0.5);
  }
  if (!normalize) return out.map((x) => x * 3);
  const norm = Math.hypot(...out);
  return out.map((x) => x / norm);
}

/** A Duplex over `socket` that first yields `first` (bytes already read from the socket). */
function replaying(socket: Socket, first: Buffer): Duplex {
  const stream = new Duplex({
    read: () => {
      socket.resume();
    },
    write: (chunk: Buffer, _encoding, done) => {
      socket.write(chunk, done);
    },
    final: (done) => {
      socket.end(done);
    },
    destroy: (error, done) => {
      socket.destroy(error ?? undefined);
      done(error);
    },
  });
  stream.push(first);
  socket.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.once("end", () => stream.push(null));
  socket.once("close", () => stream.destroy());
  socket.once("error", (e) => stream.destroy(e));
  return stream;
}

export class FakeBedrockEmbeddings {
  readonly requests: TitanRequest[] = [];
  delayMs = 0;
  maxInFlight = 0;
  private inFlight = 0;
  private failures: { remaining: number; error: ErrorSpec }[] = [];
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly h1 = createHttp1Server((req, res) => void this.handle(req, res));
  private readonly h2 = createHttp2Server((req, res) => void this.handle(req, res));

  async start(): Promise<string> {
    this.server = createNetServer((socket) => {
      this.sockets.add(socket);
      socket.once("close", () => this.sockets.delete(socket));
      socket.once("data", (first: Buffer) => {
        socket.pause();
        if (first.subarray(0, 3).toString("latin1") === "PRI") {
          // http2 reads the native handle, which no longer holds `first`: give it a replaying stream.
          this.h2.emit("connection", replaying(socket, first));
        } else {
          socket.unshift(first);
          this.h1.emit("connection", socket);
          socket.resume();
        }
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    const address = this.server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    return `http://127.0.0.1:${address.port}`;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** The next `n` requests fail with `error` (default: 429 ThrottlingException). */
  failNext(n: number, error: ErrorSpec = { status: 429, type: "ThrottlingException" }): void {
    this.failures.push({ remaining: n, error });
  }

  private async handle(req: Req, res: Res): Promise<void> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
      const { status, body, errorType } = this.answer(req.method ?? "", req.url ?? "", Buffer.concat(chunks));
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (errorType) headers["x-amzn-errortype"] = errorType;
      // Narrowed first: the two protocols' writeHead overloads differ.
      if (res instanceof Http2ServerResponse) res.writeHead(status, headers);
      else res.writeHead(status, headers);
      res.end(JSON.stringify(body));
    } finally {
      this.inFlight--;
    }
  }

  private answer(
    method: string,
    url: string,
    raw: Buffer,
  ): { status: number; body: unknown; errorType?: string } {
    const fail = (status: number, type: string, message: string) => ({
      status,
      body: { message },
      errorType: type,
    });
    const m = /^\/model\/([^/]+)\/invoke$/.exec(url.split("?")[0] ?? "");
    if (method !== "POST" || !m) return fail(404, "UnknownOperationException", `No route ${method} ${url}`);
    const failure = this.failures.find((f) => f.remaining > 0);
    if (failure) {
      failure.remaining--;
      return fail(
        failure.error.status,
        failure.error.type,
        "Too many requests, please wait before trying again.",
      );
    }
    const modelId = decodeURIComponent(m[1] as string);
    if (modelId !== TITAN_V2)
      return fail(400, "ValidationException", "The provided model identifier is invalid.");
    let body: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(raw.toString("utf8"));
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        throw new Error("not an object");
      body = parsed as Record<string, unknown>;
    } catch {
      return fail(
        400,
        "ValidationException",
        "Malformed input request, please reformat your input and try again.",
      );
    }
    const extra = Object.keys(body).filter(
      (k) => !["inputText", "dimensions", "normalize", "embeddingTypes"].includes(k),
    );
    if (extra.length) {
      return fail(
        400,
        "ValidationException",
        `Malformed input request: extraneous key [${extra[0]}] is not permitted`,
      );
    }
    const { inputText, dimensions = 1024, normalize = true } = body;
    if (typeof inputText !== "string" || inputText.length < 1 || inputText.length > 50_000) {
      return fail(
        400,
        "ValidationException",
        "Malformed input request: inputText must be 1 to 50000 characters",
      );
    }
    if (dimensions !== 256 && dimensions !== 512 && dimensions !== 1024) {
      return fail(
        400,
        "ValidationException",
        "Malformed input request: dimensions must be one of 256, 512, 1024",
      );
    }
    if (typeof normalize !== "boolean")
      return fail(400, "ValidationException", "normalize must be a boolean");
    this.requests.push({ modelId, inputText, dimensions, normalize });
    const embedding = fakeTitanVector(inputText, dimensions, normalize);
    return {
      status: 200,
      body: {
        embedding,
        inputTextTokenCount: inputText.split(/\s+/).filter(Boolean).length,
        embeddingsByType: { float: embedding },
      },
    };
  }
}
