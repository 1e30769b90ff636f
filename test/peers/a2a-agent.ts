import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import {
  A2A_VERSION_HEADER,
  AGENT_CARD_PATH,
  type AgentCard,
  Extensions,
  HTTP_EXTENSION_HEADER,
  type Message,
  type Part,
  Role,
  roleToJSON,
  StreamResponse,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  defaultServerCallContextBuilder,
  type ExecutionEventBus,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  type RequestContext,
  UnauthenticatedUser,
  validateVersion,
} from "@a2a-js/sdk/server";

/**
 * A remote A2A 1.0 agent for the tests, written with the SDK's server side (AgentExecutor,
 * DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler) and served on node:http, as
 * the SDK's own Express adapter would: the agent card at the well-known path, JSON-RPC at /a2a/jsonrpc.
 * A "venue desk": the test picks how it answers (`behaviour`), and reads back every message it got
 * and every HTTP request with its headers.
 */
export type AgentBehaviour =
  /** Answers at once with a Message. */
  | "message"
  /** A task: submitted -> working -> an artifact -> completed, with a status message. */
  | "task"
  /** A task that fails (the booking system is down). */
  | "failed"
  /** A task the agent refuses (rejected). */
  | "rejected"
  /** A task that stops to ask for a date (input-required). */
  | "input-required"
  /** A task that stops for sign-in (auth-required). */
  | "auth-required"
  /** A task that works for `slowMs` before it completes (for timeouts). */
  | "slow"
  /** A task handed to a background job: the send returns it working; it completes `backgroundMs` later. */
  | "background"
  /**
   * With push: the agent is done before it answers the send. It pushes the completed task first
   * (awaiting Arbor's answer), then answers the send with the task working (and keeps it so).
   */
  | "early"
  /** As `early`, but the completed task comes after 25 pushes that say it is working. */
  | "early-chatty";

/** A message as the agent's executor got it (the server has given it its task and context ids). */
export interface ReceivedMessage {
  messageId: string;
  role: string;
  contextId: string;
  taskId: string;
  /** Each part: its text, or `[kind]` for any other content. */
  parts: string[];
  /** The sender asked to wait for the result (returnImmediately false). */
  blocking: boolean;
}

export interface ReceivedRequest {
  method: string;
  path: string;
  /** The JSON-RPC method (SendMessage, GetTask...) and its params as they came over the wire. */
  rpcMethod?: string;
  params?: unknown;
  headers: IncomingHttpHeaders;
}

export interface A2aAgentPeer {
  /** The agent's base URL (its card is at `${url}/.well-known/agent-card.json`). */
  url: string;
  cardUrl: string;
  card: AgentCard;
  behaviour: AgentBehaviour;
  messages: ReceivedMessage[];
  requests: ReceivedRequest[];
  /**
   * With `push`: the push configuration each task was sent with (by task id). A "background" task
   * pushes its final Task there when it completes, unless `dropPushes` (a push lost on the way).
   */
  pushConfigs: Map<string, { url: string; token: string }>;
  dropPushes: boolean;
  /** Completes a "background" task now (its timer would later), and pushes it as above. */
  finish(taskId: string): Promise<void>;
  /** Every push the agent sent, with Arbor's answer. */
  pushes: { taskId: string; state: string; status: number; answer: unknown }[];
  /**
   * POSTs the task as it stands now to its push URL, as the SDK's 1.0 sender does (a
   * StreamResponse `{ "task": ... }`), with `Authorization: Bearer <token>`: the configured token,
   * or `token` (null: none), or `body` instead of the task.
   */
  push(
    taskId: string,
    options?: { token?: string | null; body?: unknown },
  ): Promise<{ status: number; answer: unknown }>;
  close(): Promise<void>;
}

const RPC_PATH = "/a2a/jsonrpc";

export async function startA2aAgent(
  options: { token?: string; slowMs?: number; backgroundMs?: number; push?: boolean } = {},
): Promise<A2aAgentPeer> {
  const slowMs = options.slowMs ?? 10_000;
  const backgroundMs = options.backgroundMs ?? 300;
  const pending = new Set<{ timer: NodeJS.Timeout; done: () => void }>();
  /** Waits `ms`, or less when the peer closes (so no executor outlives it). */
  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          pending.delete(entry);
          resolve();
        }, ms),
        done: resolve,
      };
      pending.add(entry);
    });

  const http = createServer();
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const card: AgentCard = {
    name: "Venue desk",
    description: "Books venues for team events in Lisbon and Porto.",
    supportedInterfaces: [
      { url: `${url}${RPC_PATH}`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    ],
    provider: { organization: "Example Venues", url: "https://venues.example.com" },
    version: "1.0.0",
    capabilities: {
      streaming: false,
      pushNotifications: options.push === true,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: "find_venue",
        name: "Find venues",
        description: "Finds venues with free seats for a team and a date.",
        tags: ["venues"],
        examples: ["Find a venue for 12 people in Lisbon on 12 June"],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };

  const store = new InMemoryTaskStore();
  /** The server call context of each task (the store is read with it). */
  const contexts = new Map<string, RequestContext["context"]>();
  const finishers = new Map<string, () => Promise<void>>();
  let closed = false;
  const peer: A2aAgentPeer = {
    url,
    cardUrl: `${url}/${AGENT_CARD_PATH}`,
    card,
    behaviour: "message",
    messages: [],
    requests: [],
    pushConfigs: new Map(),
    dropPushes: false,
    pushes: [],
    finish: async (taskId) => {
      const finish = finishers.get(taskId);
      if (!finish) throw new Error(`no background task ${taskId}`);
      await finish();
    },
    push: async (taskId, o = {}) => {
      const config = peer.pushConfigs.get(taskId);
      const context = contexts.get(taskId);
      if (!config || !context) throw new Error(`no push configuration for task ${taskId}`);
      const task = await store.load(taskId, context);
      const token = o.token === undefined ? config.token : o.token;
      const response = await fetch(config.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(
          o.body ?? (task ? StreamResponse.toJSON({ payload: { $case: "task", value: task } }) : {}),
        ),
      });
      const text = await response.text();
      const answer = text ? JSON.parse(text) : undefined;
      const state = task?.status ? TaskState[task.status.state] : "";
      peer.pushes.push({ taskId, state, status: response.status, answer });
      return { status: response.status, answer };
    },
    close: async () => {
      closed = true;
      for (const p of pending) {
        clearTimeout(p.timer);
        p.done();
      }
      pending.clear();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    },
  };

  const executor: AgentExecutor = {
    execute: async (rc: RequestContext, bus: ExecutionEventBus) => {
      const m = rc.userMessage;
      peer.messages.push({
        messageId: m.messageId,
        role: roleToJSON(m.role),
        contextId: m.contextId,
        taskId: m.taskId,
        parts: m.parts.map((p) => (p.content?.$case === "text" ? p.content.value : `[${p.content?.$case}]`)),
        blocking: rc.request.configuration?.returnImmediately !== true,
      });
      const pushConfig = rc.request.configuration?.taskPushNotificationConfig;
      if (pushConfig) peer.pushConfigs.set(rc.taskId, { url: pushConfig.url, token: pushConfig.token });
      contexts.set(rc.taskId, rc.context);
      const asked = m.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join(" ");
      const ids = { taskId: rc.taskId, contextId: rc.contextId };
      const say = (text: string) => agentMessage(text, ids);
      const status = (state: TaskState, text?: string) =>
        bus.publish(
          AgentEvent.statusUpdate({
            ...ids,
            status: { state, message: text ? say(text) : undefined, timestamp: new Date().toISOString() },
            metadata: undefined,
          }),
        );
      const behaviour = peer.behaviour;
      if (behaviour === "message") {
        bus.publish(
          AgentEvent.message({ ...say(`Answer to "${asked}": Casa do Rio, seats 40.`), taskId: "" }),
        );
        return;
      }
      if (behaviour === "early-chatty")
        for (let i = 0; i < 25; i++)
          await peer.push(rc.taskId, {
            body: StreamResponse.toJSON({
              payload: { $case: "task", value: newTask(rc, TaskState.TASK_STATE_WORKING) },
            }),
          });
      if (behaviour === "early" || behaviour === "early-chatty") {
        const done: Task = {
          ...newTask(rc, TaskState.TASK_STATE_COMPLETED),
          status: {
            state: TaskState.TASK_STATE_COMPLETED,
            message: say("Found 2 venues (before answering)."),
            timestamp: new Date().toISOString(),
          },
          artifacts: [venuesArtifact(asked)],
        };
        await peer.push(rc.taskId, {
          body: StreamResponse.toJSON({ payload: { $case: "task", value: done } }),
        });
      }
      bus.publish(AgentEvent.task(newTask(rc, TaskState.TASK_STATE_SUBMITTED)));
      switch (behaviour) {
        case "task":
          status(TaskState.TASK_STATE_WORKING, "Looking for venues");
          bus.publish(
            AgentEvent.artifactUpdate({
              ...ids,
              artifact: venuesArtifact(asked),
              append: false,
              lastChunk: true,
              metadata: undefined,
            }),
          );
          status(TaskState.TASK_STATE_COMPLETED, "Found 2 venues.");
          return;
        case "failed":
          status(TaskState.TASK_STATE_WORKING);
          status(TaskState.TASK_STATE_FAILED, "The booking system is down.");
          return;
        case "rejected":
          status(TaskState.TASK_STATE_REJECTED, "I only book venues in Lisbon and Porto.");
          return;
        case "input-required":
          status(TaskState.TASK_STATE_INPUT_REQUIRED, "For which date?");
          return;
        case "auth-required":
          status(TaskState.TASK_STATE_AUTH_REQUIRED, "Sign in to the booking system first.");
          return;
        case "slow":
          status(TaskState.TASK_STATE_WORKING, "Calling every venue in town");
          await wait(slowMs);
          status(TaskState.TASK_STATE_COMPLETED, "Called them all.");
          return;
        case "early":
        case "early-chatty":
          status(TaskState.TASK_STATE_WORKING, "Queued");
          return;
        case "background": {
          status(TaskState.TASK_STATE_WORKING, "Queued");
          const context = rc.context;
          let done = false;
          const finish = async () => {
            if (done) return;
            done = true;
            const task = await store.load(rc.taskId, context);
            if (!task) return;
            task.artifacts = [venuesArtifact(asked)];
            task.status = {
              state: TaskState.TASK_STATE_COMPLETED,
              message: say("Found 2 venues (in the background)."),
              timestamp: new Date().toISOString(),
            };
            await store.save(task, context);
            if (peer.pushConfigs.has(rc.taskId) && !peer.dropPushes) await peer.push(rc.taskId);
          };
          finishers.set(rc.taskId, finish);
          // Not when the wait ended because the peer closes: nothing is pushed from a closed agent.
          void wait(backgroundMs).then(() => (closed ? undefined : finish()));
          return;
        }
      }
    },
    cancelTask: async (taskId: string, bus: ExecutionEventBus) => {
      bus.publish(
        AgentEvent.statusUpdate({
          taskId,
          contextId: "",
          status: {
            state: TaskState.TASK_STATE_CANCELED,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          metadata: undefined,
        }),
      );
    },
  };

  // The agent's pushes are its own (peer.push), sent when the test says: the SDK's sender is off.
  const handler = new DefaultRequestHandler(card, store, executor, undefined, undefined, {
    send: async () => {},
  });
  const jsonRpc = new JsonRpcTransportHandler(handler);

  http.on("request", async (req, res) => {
    const path = new URL(req.url ?? "/", url).pathname;
    let body = "";
    for await (const chunk of req) body += chunk;
    const record: ReceivedRequest = { method: req.method ?? "", path, headers: { ...req.headers } };
    const rpc = parseJson(body);
    if (typeof rpc?.method === "string") {
      record.rpcMethod = rpc.method;
      record.params = rpc.params;
    }
    peer.requests.push(record);

    if (options.token && req.headers.authorization !== `Bearer ${options.token}`) {
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": "Bearer" });
      res.end(JSON.stringify({ error: "a bearer token is required" }));
      return;
    }
    if (req.method === "GET" && path === `/${AGENT_CARD_PATH}`) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(await handler.getAgentCard()));
      return;
    }
    if (req.method !== "POST" || path !== RPC_PATH) {
      res.writeHead(404).end();
      return;
    }
    const version = header(req, A2A_VERSION_HEADER);
    const context = defaultServerCallContextBuilder({
      extensions: Extensions.parseServiceParameter(header(req, HTTP_EXTENSION_HEADER)),
      user: new UnauthenticatedUser(),
      headers: req.headers,
      ...(version ? { requestedVersion: version } : {}),
    });
    let response: unknown;
    try {
      validateVersion(context.requestedVersion, card, "JSONRPC");
      const out = await jsonRpc.handle(body, context);
      if (Symbol.asyncIterator in out) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        for await (const event of out) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.end();
        return;
      }
      response = out;
    } catch (error) {
      response = {
        jsonrpc: "2.0",
        id: typeof rpc?.id === "string" || typeof rpc?.id === "number" ? rpc.id : null,
        error: JsonRpcTransportHandler.mapToJSONRPCError(error),
      };
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(response));
  });

  return peer;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

function parseJson(body: string): { method?: unknown; id?: unknown; params?: unknown } | undefined {
  try {
    const v: unknown = JSON.parse(body);
    return typeof v === "object" && v !== null ? v : undefined;
  } catch {
    return undefined;
  }
}

const textPart = (value: string): Part => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

function agentMessage(text: string, ids: { taskId: string; contextId: string }): Message {
  return {
    messageId: randomUUID(),
    ...ids,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function newTask(rc: RequestContext, state: TaskState): Task {
  return {
    id: rc.taskId,
    contextId: rc.contextId,
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [rc.userMessage],
    metadata: undefined,
  };
}

const venuesArtifact = (asked: string) => ({
  artifactId: randomUUID(),
  name: "venues",
  description: "Venues with free seats",
  parts: [textPart(`Venues for "${asked}": Casa do Rio (40 seats), Sala Norte (16 seats).`)],
  metadata: undefined,
  extensions: [],
});
