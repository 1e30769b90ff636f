import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { a2aScript, serveA2a, TEAM } from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";

export { until } from "../support/until.ts";

/**
 * What the notify tests share: a webhook receiver (a real node:http server on 127.0.0.1) that
 * records every request and answers as the test says, and the receiver's side of a signed
 * callback written from the README's recipe ("HTTP callbacks: verifying a delivery").
 */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What the receiver answered: a status, or "reset" (the connection cut, no answer). */
  answered: number | "reset";
}

export type Answer = number | "reset" | { redirect: string };

export interface Receiver {
  url: string;
  port: number;
  got: Received[];
  /** How the next request is answered (default 200); `plan` answers the first ones in order. */
  answer: (r: Omit<Received, "answered">) => Answer;
  plan: Answer[];
  /** 2xx answers, by Arbor-Delivery-Id. */
  deliveredIds(): Map<string, number>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const server: Server = createServer();
  const receiver: Receiver = {
    url: "",
    port: 0,
    got: [],
    plan: [],
    answer: () => 200,
    deliveredIds() {
      const out = new Map<string, number>();
      for (const r of this.got) {
        const id = String(r.headers["arbor-delivery-id"]);
        if (typeof r.answered === "number" && r.answered < 300) out.set(id, (out.get(id) ?? 0) + 1);
      }
      return out;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  server.on("request", (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const seen = {
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      const answer = receiver.plan.shift() ?? receiver.answer(seen);
      if (answer === "reset") {
        receiver.got.push({ ...seen, answered: "reset" });
        req.socket.destroy();
        return;
      }
      if (typeof answer === "object") {
        receiver.got.push({ ...seen, answered: 302 });
        res.writeHead(302, { location: answer.redirect, connection: "close" });
        res.end();
        return;
      }
      receiver.got.push({ ...seen, answered: answer });
      res.writeHead(answer, { "content-type": "text/plain", connection: "close" });
      res.end(answer < 300 ? "ok" : "not now");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `http://127.0.0.1:${receiver.port}`;
  return receiver;
}

/**
 * The README's recipe for a receiver of Arbor's signed callbacks, as a receiver would write it:
 * the timestamp within 300 s of its own clock, an HMAC-SHA256 of "<t>.<raw body>" with the secret
 * compared in constant time to each v1 of the header, and the event id remembered: a repeat is
 * acknowledged and not acted on twice.
 */
export function verifyCallback(
  secret: string,
  header: string | undefined,
  rawBody: string,
  nowSeconds: number,
  seen: Set<string>,
): { ok: true; id: string; duplicate: boolean } | { ok: false; why: string } {
  if (!header) return { ok: false, why: "no signature" };
  const fields = header.split(",").map((kv) => kv.split("=", 2) as [string, string]);
  const t = Number(fields.find(([k]) => k === "t")?.[1]);
  const signatures = fields.filter(([k]) => k === "v1").map(([, v]) => v);
  if (!Number.isInteger(t) || signatures.length === 0) return { ok: false, why: "malformed signature" };
  if (Math.abs(nowSeconds - t) > 300) return { ok: false, why: "too old (or from the future)" };
  const expected = createHmac("sha256", secret).update(`${t}.${rawBody}`).digest();
  const match = signatures.some((hex) => {
    const given = Buffer.from(hex, "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!match) return { ok: false, why: "signature mismatch" };
  // A repeat is answered 2xx (so Arbor stops sending it) and not acted on again.
  const id = (JSON.parse(rawBody) as { id: string }).id;
  const duplicate = seen.has(id);
  seen.add(id);
  return { ok: true, id, duplicate };
}

/**
 * What the A2A push tests share: a harness answering with `a2aScript`, the local notify path
 * (loopback receivers allowed, the worker kicked on each recording rather than ticking), Arbor's
 * A2A app on a real port, and a webhook receiver.
 */
export interface PushWorld {
  h: Harness;
  notify: LocalNotify;
  served: Awaited<ReturnType<typeof serveA2a>>;
  receiver: Receiver;
}

export async function startPushWorld(): Promise<PushWorld> {
  const h = await Harness.create({
    script: a2aScript(200),
    assistants: TEAM,
    settings: { electionThreshold: -1 },
  });
  const notify = startLocalNotify(h.engine, {
    notify: { allowLoopbackHttp: true },
    worker: { tickMs: 60_000 },
  });
  const served = await serveA2a(h.engine, { notify: notify.service });
  return { h, notify, served, receiver: await startReceiver() };
}

export async function stopPushWorld(world: Partial<PushWorld> | undefined): Promise<void> {
  await world?.served?.close();
  await world?.notify?.stop();
  await world?.receiver?.close();
  await world?.h?.close();
}
