import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { signSlackBody } from "../../shared/channels/chat/slack/verify.ts";

/**
 * A fake Slack for tests: the Web API methods Arbor calls, on a real node:http server that the
 * REAL `@slack/web-api` WebClient talks to (point the settings' `apiUrl` at `fake.apiUrl`), and
 * Slack's side of the inbound requests (signed as Slack signs them). How to drive it:
 *
 *   const fake = await startFakeSlack({ tokens: { "xoxb-test-token-1": "T1" } });
 *   settings.slack.apiUrl = fake.apiUrl;
 *   fake.fail("chat.postMessage", { error: "ratelimited", retryAfter: 7 });   // the next call only
 *   fake.calls("chat.postMessage"); fake.thread("C1", ts); fake.message("C1", ts)
 *   const res = await slackPost(url + "/slack/events", secret, eventCallback({ ... }), nowSeconds);
 *
 * Methods: chat.postMessage, chat.update, chat.postEphemeral, views.open, auth.test. Every call's
 * bearer token is checked (an unknown one gets `invalid_auth`); JSON fields (blocks, view) are
 * decoded as Slack does. Messages are kept per channel with their ts, thread and every update.
 */
export interface FakeCall {
  method: string;
  token: string | undefined;
  args: Record<string, unknown>;
}

export interface FakeMessage {
  channel: string;
  ts: string;
  threadTs?: string;
  text: string;
  blocks: unknown[];
  /** How it read before each chat.update, oldest first. */
  history: { text: string; blocks: unknown[] }[];
}

export type FakeFailure =
  | { error: "ratelimited"; retryAfter: number }
  | { error: string }
  | { status: number }
  | { reset: true };

export interface FakeSlack {
  apiUrl: string;
  calls(method?: string): FakeCall[];
  /** The next call of `method` fails so (each call takes one). */
  fail(method: string, failure: FakeFailure): void;
  messages(channel?: string): FakeMessage[];
  message(channel: string, ts: string): FakeMessage | undefined;
  /** The messages of a thread (its head first), in order posted. */
  thread(channel: string, threadTs: string): FakeMessage[];
  /**
   * A file as Slack holds one a person shared: served at its `url_private_download` to the
   * workspace's bot token only (another token, or none, gets 403). Returns the event's file object.
   */
  addFile(name: string, body: Uint8Array | string, mimetype: string): Record<string, unknown>;
  /** How many times a file was downloaded, with which token. */
  downloads(): { id: string; token: string | undefined }[];
  close(): Promise<void>;
}

const JSON_FIELDS = new Set(["blocks", "view", "attachments", "metadata"]);

export async function startFakeSlack(options: {
  tokens: Record<string, string>;
  botUser?: string;
}): Promise<FakeSlack> {
  const calls: FakeCall[] = [];
  const failures = new Map<string, FakeFailure[]>();
  const messages: FakeMessage[] = [];
  let clock = 1_780_000_000;
  let seq = 0;
  const nextTs = () => `${clock}.${String(++seq).padStart(6, "0")}`;

  const answer = (method: string, token: string | undefined, args: Record<string, unknown>) => {
    const team = token ? options.tokens[token] : undefined;
    if (!team) return { ok: false, error: token ? "invalid_auth" : "not_authed" };
    const channel = String(args.channel ?? "");
    switch (method) {
      case "auth.test":
        return { ok: true, team_id: team, user_id: options.botUser ?? "UBOT", bot_id: "BBOT" };
      case "chat.postMessage": {
        if (!channel) return { ok: false, error: "channel_not_found" };
        const m: FakeMessage = {
          channel,
          ts: nextTs(),
          text: String(args.text ?? ""),
          blocks: (args.blocks as unknown[]) ?? [],
          history: [],
          ...(args.thread_ts ? { threadTs: String(args.thread_ts) } : {}),
        };
        messages.push(m);
        return { ok: true, channel, ts: m.ts, message: { text: m.text } };
      }
      case "chat.update": {
        const m = messages.find((x) => x.channel === channel && x.ts === String(args.ts));
        if (!m) return { ok: false, error: "message_not_found" };
        m.history.push({ text: m.text, blocks: m.blocks });
        m.text = String(args.text ?? "");
        m.blocks = (args.blocks as unknown[]) ?? [];
        return { ok: true, channel, ts: m.ts };
      }
      case "chat.postEphemeral":
        if (!channel || !args.user) return { ok: false, error: "invalid_arguments" };
        return { ok: true, message_ts: nextTs() };
      case "views.open":
        if (!args.trigger_id || !args.view) return { ok: false, error: "invalid_arguments" };
        return { ok: true, view: { id: `V${++seq}`, ...(args.view as object) } };
      default:
        return { ok: false, error: "unknown_method" };
    }
  };

  const files = new Map<string, { body: Buffer; mimetype: string }>();
  const downloads: { id: string; token: string | undefined }[] = [];
  const server: Server = createServer((req, res) => {
    const file = /^\/files-pri\/([A-Z0-9-]+)\/download\//.exec(req.url ?? "")?.[1];
    if (file !== undefined) {
      const auth = req.headers.authorization;
      const token = auth?.startsWith("Bearer ") ? auth.slice(7) : undefined;
      downloads.push({ id: file, token });
      const held = files.get(file);
      if (!held) return void res.writeHead(404).end("no such file");
      if (!token || !(token in options.tokens)) return void res.writeHead(403).end("not allowed");
      res
        .writeHead(200, { "content-type": held.mimetype, "content-length": String(held.body.length) })
        .end(held.body);
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const method =
        (req.url ?? "")
          .replace(/^\/api\//, "")
          .replace(/^\//, "")
          .split("?")[0] ?? "";
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const args: Record<string, unknown> = {};
      for (const [k, v] of form) args[k] = JSON_FIELDS.has(k) ? JSON.parse(v) : v;
      const auth = req.headers.authorization;
      const token = auth?.startsWith("Bearer ") ? auth.slice(7) : (args.token as string | undefined);
      delete args.token;
      calls.push({ method, token, args });
      clock++;
      const failure = failures.get(method)?.shift();
      if (failure && "reset" in failure) {
        req.socket.destroy();
        return;
      }
      if (failure && "status" in failure) {
        res.writeHead(failure.status, { "content-type": "text/plain" }).end("upstream trouble");
        return;
      }
      if (failure && failure.error === "ratelimited" && "retryAfter" in failure) {
        res
          .writeHead(429, { "content-type": "application/json", "retry-after": String(failure.retryAfter) })
          .end(JSON.stringify({ ok: false, error: "ratelimited" }));
        return;
      }
      const body = failure ? { ok: false, error: failure.error } : answer(method, token, args);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    apiUrl: `http://127.0.0.1:${port}/api/`,
    calls: (method) => calls.filter((c) => method === undefined || c.method === method),
    fail(method, failure) {
      failures.set(method, [...(failures.get(method) ?? []), failure]);
    },
    messages: (channel) => messages.filter((m) => channel === undefined || m.channel === channel),
    message: (channel, ts) => messages.find((m) => m.channel === channel && m.ts === ts),
    thread: (channel, threadTs) =>
      messages.filter((m) => m.channel === channel && (m.ts === threadTs || m.threadTs === threadTs)),
    addFile(name, body, mimetype) {
      const id = `T1-F${files.size + 1}`;
      const bytes = Buffer.from(body);
      files.set(id, { body: bytes, mimetype });
      return {
        id,
        name,
        mimetype,
        size: bytes.length,
        url_private_download: `http://127.0.0.1:${port}/files-pri/${id}/download/${encodeURIComponent(name)}`,
      };
    },
    downloads: () => [...downloads],
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

// ---- Slack's side of the inbound requests ---------------------------------------------------------

/** POSTs `body` to one of Arbor's Slack routes, signed as Slack signs it at `nowSeconds`. */
export function slackPost(
  url: string,
  secret: string,
  body: string,
  nowSeconds: number,
  headers: Record<string, string> = {},
): Promise<Response> {
  const json = body.startsWith("{");
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": json ? "application/json" : "application/x-www-form-urlencoded",
      ...signSlackBody(secret, body, nowSeconds),
      ...headers,
    },
    body,
  });
}

/** An Events API callback as Slack sends it (JSON). */
export function eventCallback(p: {
  team: string;
  eventId: string;
  event: Record<string, unknown>;
  botUser?: string;
}): string {
  return JSON.stringify({
    token: "deprecated-verification-token",
    team_id: p.team,
    api_app_id: "A1",
    type: "event_callback",
    event_id: p.eventId,
    event_time: 1_780_000_000,
    event: { event_ts: p.event.ts, ...p.event },
    authorizations: [{ team_id: p.team, user_id: p.botUser ?? "UBOT", is_bot: true }],
  });
}

/** A slash command's form as Slack sends it. */
export function commandForm(p: {
  team: string;
  channel: string;
  user: string;
  text: string;
  triggerId?: string;
}): string {
  return new URLSearchParams({
    token: "deprecated-verification-token",
    team_id: p.team,
    team_domain: "acme",
    channel_id: p.channel,
    channel_name: "general",
    user_id: p.user,
    user_name: "someone",
    command: "/arbor",
    text: p.text,
    api_app_id: "A1",
    response_url: "https://hooks.slack.com/commands/T1/1/x",
    trigger_id: p.triggerId ?? `trig.${Math.random().toString(36).slice(2)}`,
  }).toString();
}

/** An interactivity request (block_actions, view_submission) as Slack sends it: a `payload` form field. */
export function interactivityForm(payload: Record<string, unknown>): string {
  return new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
}

/** A click on a button of a message Arbor posted (the button as the message's blocks have it). */
export function buttonClick(p: {
  team: string;
  user: string;
  channel: string;
  message: FakeMessage;
  button: { action_id: string; value: string };
  triggerId?: string;
}): Record<string, unknown> {
  return {
    type: "block_actions",
    team: { id: p.team, domain: "acme" },
    user: { id: p.user, team_id: p.team },
    api_app_id: "A1",
    trigger_id: p.triggerId ?? `trig.${Math.random().toString(36).slice(2)}`,
    container: {
      type: "message",
      channel_id: p.channel,
      message_ts: p.message.ts,
      ...(p.message.threadTs ? { thread_ts: p.message.threadTs } : {}),
    },
    channel: { id: p.channel },
    message: {
      ts: p.message.ts,
      ...(p.message.threadTs ? { thread_ts: p.message.threadTs } : {}),
      text: p.message.text,
    },
    actions: [
      {
        type: "button",
        action_id: p.button.action_id,
        value: p.button.value,
        block_id: "arbor.answer",
        action_ts: "1",
      },
    ],
  };
}

/** The buttons of a message (every actions block's), by their text. */
export function buttonsOf(m: FakeMessage): { text: string; action_id: string; value: string }[] {
  const out: { text: string; action_id: string; value: string }[] = [];
  for (const b of m.blocks as {
    type: string;
    elements?: { type: string; action_id: string; value: string; text: { text: string } }[];
  }[])
    if (b.type === "actions")
      for (const e of b.elements ?? [])
        if (e.type === "button") out.push({ text: e.text.text, action_id: e.action_id, value: e.value });
  return out;
}

/** Every text of a message's blocks, joined (what a person reads). */
export function textOf(m: FakeMessage): string {
  return (
    JSON.stringify(m.blocks)
      .match(/"text":"((?:[^"\\]|\\.)*)"/g)
      ?.map((t) => JSON.parse(t.slice(7)) as string)
      .join("\n") ?? ""
  );
}
