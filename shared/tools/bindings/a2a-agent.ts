import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  AGENT_CARD_PATH,
  type AgentCard,
  type AgentInterface,
  type Message,
  type Part,
  Role,
  type Task,
  TaskState,
  taskStateToJSON,
} from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { ConfigError, ForbiddenError, ToolError, ValidationError } from "../../kernel/errors.ts";
import type { RemoteTaskHandedOff, ToolBinding, ToolContext } from "../../ports/tools.ts";
import { outsideTool } from "../service/json-schema.ts";
import { type Callback, callbackOf, newCallback, readPush, stillRunning } from "./a2a-push-client.ts";

/**
 * A tool bound to a remote agent over A2A 1.0 (`@a2a-js/sdk` client): the model's message goes to
 * the agent as a user message, and the agent's answer comes back as text. The agent card is
 * fetched once, when the tool service opens, so the tool's description can be the agent's own
 * (its name, description and skills) and a wrong URL stops Arbor at start, not at the first call.
 *
 * A call waits for the agent's final answer: the message is sent blocking, and a task that comes
 * back still submitted or working is polled until it settles or the call's signal fires (the tool
 * service's timeout). A task that ends failed, rejected or canceled, or that stops to ask for
 * input or authentication, is the tool failing: Arbor cannot answer for a person here.
 *
 * When the card offers push (`capabilities.pushNotifications`) and Arbor knows its own public URL
 * (`callbackBase`), and the caller can settle the call later (`context.handOff`, which records the
 * callback first; or `context.callback`, one the caller made and recorded: the tool function on
 * AWS, which has no public URL of its own), the call does not wait: it is sent with
 * `returnImmediately` and a push config for a callback of its own (a2a-push-client.ts), and a
 * task that comes back still working is handed off (RemoteTaskHandedOff): the engine ends the
 * turn, and the push, or at the deadline one GetTask, settles it (`settle`).
 *
 * The configured headers are credentials: they, and the model's messages, go only to the origin
 * of the configured URL. The card names where the agent's interfaces are; an interface on another
 * origin is never used, a card that offers Arbor's transports only elsewhere is refused at start
 * (a ConfigError naming the tool, the configured origin and the card's URLs), and every request
 * is checked against the origin once more before it leaves (onlyTo). All of it goes through the
 * fetch the tool service is given: in production, the outbound guard (shared/outbound/guard.ts).
 */
export interface A2aAgentSettings {
  /** The agent's base URL (its card is at `<url>/.well-known/agent-card.json`) or its card's URL. */
  url: string;
  /** Sent with every request, the card's included; never shown to the model. */
  headers: Record<string, string>;
}

/** The arguments the model gives: what to ask, and maybe the conversation to continue. */
export const A2A_PARAMETERS = {
  type: "object",
  properties: {
    message: { type: "string", description: "what to ask the agent" },
    contextId: {
      type: "string",
      minLength: 1,
      description: "the contextId of an earlier answer of this agent, to continue that conversation",
    },
  },
  required: ["message"],
  additionalProperties: false,
} as const;

/** Where the agent card of a configured URL is: the URL itself when it names a .json file. */
export function agentCardUrl(url: string): string {
  const u = new URL(url);
  if (u.pathname.endsWith(".json")) return u.href;
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  return new URL(AGENT_CARD_PATH, u).href;
}

/**
 * Resolves the agent card and returns the tool's binding; throws ConfigError naming the tool and
 * the URL when the card cannot be fetched or offers nothing Arbor can speak to.
 */
export async function a2aAgentBinding(
  name: string,
  options: {
    description?: string;
    risky: boolean;
    settings: A2aAgentSettings;
    openTimeoutMs: number;
    /** Arbor's public URL, when it has one: pushes come back under it. */
    callbackBase?: () => string | undefined;
  },
  fetchFn: typeof fetch,
): Promise<ToolBinding> {
  const cardUrl = agentCardUrl(options.settings.url);
  const origin = new URL(cardUrl).origin;
  const send = onlyTo(origin, name, withHeaders(fetchFn, options.settings.headers));
  const where = `tools.${name}: the A2A agent card at ${cardUrl}`;

  let card: AgentCard;
  try {
    const resolver = new DefaultAgentCardResolver({
      // Arbor starts only once every card is known: a card that never comes must not hold it up.
      fetchImpl: (input, init) =>
        send(input, { ...init, signal: AbortSignal.timeout(options.openTimeoutMs) }),
    });
    card = await resolver.resolve(cardUrl, "");
  } catch (cause) {
    throw new ConfigError(
      `${where} cannot be fetched (${reason(cause)}): check the url in the tool configuration ` +
        "(the agent's base URL, or its agent card's URL), that the agent is running, and the headers it needs",
      { cause },
    );
  }
  if (typeof card?.name !== "string" || !Array.isArray(card.supportedInterfaces)) {
    throw new ConfigError(
      `${where} is not an A2A 1.0 agent card (it needs a name and a supportedInterfaces list; an A2A ` +
        "0.3 card has a url and a preferredTransport instead): point the url at an agent that speaks A2A 1.0",
    );
  }

  // The credentials (and the model's messages) go only to the origin the operator configured: an
  // interface the card puts elsewhere is never used, and a card that offers Arbor's transports
  // only elsewhere is refused.
  const spoken = (i: AgentInterface) => SPOKEN.has(i.protocolBinding);
  const away = (i: AgentInterface) => spoken(i) && originOf(i.url) !== origin;
  const elsewhere = card.supportedInterfaces.filter(away);
  const home: AgentCard = { ...card, supportedInterfaces: card.supportedInterfaces.filter((i) => !away(i)) };
  if (elsewhere.length > 0 && !home.supportedInterfaces.some(spoken)) {
    throw new ConfigError(
      `${where} names ${elsewhere.map((i) => i.url).join(", ")} for its interface, not the configured origin ` +
        `${origin}: Arbor sends this tool's headers and messages only to ${origin}, so it does not call the agent. ` +
        "Configure the agent's own URL, or have its card name interfaces on that origin",
    );
  }

  let client: Client;
  try {
    client = await new ClientFactory({
      transports: [
        new JsonRpcTransportFactory({ fetchImpl: send }),
        new RestTransportFactory({ fetchImpl: send }),
      ],
      clientConfig: { polling: false },
    }).createFromAgentCard(home);
  } catch (cause) {
    const offered = card.supportedInterfaces.map((i) => `${i.protocolBinding} ${i.protocolVersion}`.trim());
    throw new ConfigError(
      `${where} offers no interface Arbor can use (it offers ${offered.join(", ") || "none"}; ` +
        "Arbor speaks JSONRPC and HTTP+JSON): give the agent one of them",
      { cause },
    );
  }

  const parameters: Record<string, unknown> = structuredClone(A2A_PARAMETERS);
  const pushable = card.capabilities?.pushNotifications === true;
  const binding = outsideTool(
    {
      name,
      kind: "a2a",
      description: options.description ?? describeAgent(card),
      parameters,
      risky: options.risky,
    },
    (args: Record<string, unknown>, context: ToolContext) =>
      ask(client, args as { message: string; contextId?: string }, context, () =>
        pushable ? callbackFor(context, options.callbackBase) : Promise.resolve(undefined),
      ),
  );
  return {
    ...binding,
    settle: (remoteTaskId, pushed, signal) => settle(client, remoteTaskId, pushed, signal),
  };
}

/**
 * The answer of a handed-off call: from the push (a whole Task in a final state; a bare status
 * update is read back with GetTask), or without one by asking once. Undefined while it runs;
 * throws as `ask` does for a task that did not complete, and ValidationError for a push that is
 * not about this task.
 */
async function settle(
  client: Client,
  remoteTaskId: string,
  pushed: unknown,
  signal: AbortSignal,
): Promise<string | undefined> {
  if (pushed !== undefined) {
    const push = readPush(pushed);
    if (push.taskId !== remoteTaskId)
      throw new ValidationError(
        `The push is about task ${push.taskId || "(none)"}, not ${remoteTaskId}, the task of this callback`,
      );
    if (stillRunning(push.state)) return undefined;
    if (push.task) return taskAnswer(push.task);
  }
  const task = await client.getTask({ tenant: "", id: remoteTaskId, historyLength: 0 }, { signal });
  return stillRunning(task.status?.state) ? undefined : taskAnswer(task);
}

/**
 * Sends the message and waits for the agent's answer; throws when the agent does not give one. The
 * message's metadata carries the call's idempotency key and attempt (`arbor.idempotencyKey`,
 * `arbor.attempt`): the same key on a repeat of the call, for an agent that deduplicates.
 */
async function ask(
  client: Client,
  args: { message: string; contextId?: string },
  context: ToolContext,
  pushTo: () => Promise<Callback | undefined>,
): Promise<string | RemoteTaskHandedOff> {
  // The tool service always gives a signal (its timeout); without one, stop at the longest timeoutMs.
  const signal = context.signal ?? AbortSignal.timeout(900_000);
  const { idempotencyKey, attempt } = context;
  const message: Message = {
    messageId: randomUUID(),
    contextId: args.contextId ?? "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      {
        content: { $case: "text", value: args.message },
        metadata: undefined,
        filename: "",
        mediaType: "text/plain",
      },
    ],
    metadata: idempotencyKey ? { arbor: { idempotencyKey, attempt: attempt ?? 1 } } : undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  const callback = await pushTo();
  const result = await client.sendMessage(
    {
      tenant: "",
      message,
      // Blocking: the agent answers when the task is done, failed or stopped for input. With a
      // callback: at once, and it pushes the task's changes there.
      configuration: {
        acceptedOutputModes: [],
        taskPushNotificationConfig: callback?.config,
        returnImmediately: callback !== undefined,
        historyLength: 0,
      },
      metadata: undefined,
    },
    { signal },
  );
  if ("messageId" in result) return messageAnswer(result);
  if (callback && isRunning(result))
    return {
      kind: "remote-task-handed-off",
      callbackId: callback.callbackId,
      tokenHash: callback.tokenHash,
      remoteTaskId: result.id,
    };

  // An agent may still answer with a task in progress (work handed to a background job): poll it.
  let task = result;
  let wait = 200;
  while (isRunning(task)) {
    await sleep(wait, undefined, { signal });
    wait = Math.min(wait * 1.5, 2_000);
    task = await client.getTask({ tenant: "", id: task.id, historyLength: 0 }, { signal });
  }
  return taskAnswer(task);
}

/**
 * The call's callback, when the caller can settle the call later: the one the caller made and
 * recorded already (ToolContext.callback: the turn step's, for the tool function on AWS), or a new
 * one under Arbor's public URL, recorded through handOff before the agent can use it.
 */
async function callbackFor(
  context: ToolContext,
  base: (() => string | undefined) | undefined,
): Promise<Callback | undefined> {
  if (context.callback) return callbackOf(context.callback);
  const publicUrl = context.handOff ? base?.() : undefined;
  if (!publicUrl) return undefined;
  const callback = newCallback(publicUrl);
  await context.handOff?.({ callbackId: callback.callbackId, tokenHash: callback.tokenHash });
  return callback;
}

const isRunning = (t: Task) =>
  t.status?.state === TaskState.TASK_STATE_SUBMITTED || t.status?.state === TaskState.TASK_STATE_WORKING;

/** `completed`, `input-required`...: the spec's names of the states. */
const stateName = (s: TaskState | undefined) =>
  taskStateToJSON(s ?? TaskState.TASK_STATE_UNSPECIFIED)
    .replace(/^TASK_STATE_/, "")
    .toLowerCase()
    .replaceAll("_", "-");

function messageAnswer(m: Message): string {
  const text = partsText(m.parts) || "(the agent answered with no text)";
  const refs = [m.taskId ? `task ${m.taskId}` : "", m.contextId ? `contextId ${m.contextId}` : ""];
  const trace = refs.filter(Boolean).join("; ");
  return trace ? `${text}\n\n[A2A message; ${trace}]` : text;
}

function taskAnswer(task: Task): string {
  const state = task.status?.state;
  const said = partsText(task.status?.message?.parts);
  const trace = `A2A task ${task.id}, ${stateName(state)}${task.contextId ? `; contextId ${task.contextId}` : ""}`;
  switch (state) {
    case TaskState.TASK_STATE_COMPLETED: {
      const artifacts = (task.artifacts ?? []).map((a) => partsText(a.parts)).filter(Boolean);
      const text =
        [said, ...artifacts].filter(Boolean).join("\n\n") || "(the agent completed the task with no text)";
      return `${text}\n\n[${trace}]`;
    }
    case TaskState.TASK_STATE_FAILED:
    case TaskState.TASK_STATE_REJECTED:
    case TaskState.TASK_STATE_CANCELED:
      throw new ToolError(
        `the agent's task ended ${stateName(state)}: ${said || "(it gave no reason)"} [${trace}]`,
      );
    case TaskState.TASK_STATE_INPUT_REQUIRED:
      throw new ToolError(
        `the agent needs more input: ${said || "(it did not say what)"} [${trace}]. ` +
          "Nobody can answer it from here: send a new message that already contains what it asks for",
      );
    case TaskState.TASK_STATE_AUTH_REQUIRED:
      throw new ConfigError(
        `the agent needs authentication: ${said || "(it did not say which)"} [${trace}]. ` +
          "The credentials (headers) in this tool's configuration are missing or not enough",
      );
    default:
      throw new ToolError(
        `the agent's task is in a state Arbor does not know (${stateName(state)}) [${trace}]`,
      );
  }
}

/** The text of message or artifact parts; files and other content are named, data is inlined as JSON. */
function partsText(parts: readonly Part[] | undefined): string {
  return (parts ?? [])
    .map((p) => {
      const c = p.content;
      switch (c?.$case) {
        case "text":
          return c.value;
        case "data":
          return JSON.stringify(c.value);
        case "url":
          return `[file ${p.filename ? `${p.filename} ` : ""}at ${c.value}]`;
        case "raw":
          return `[file ${p.filename || "(unnamed)"}, ${p.mediaType || "binary"}, ${c.value.length} bytes]`;
        default:
          return "";
      }
    })
    .filter(Boolean)
    .join("\n");
}

/** What the model reads about the agent: its card's name, description and skills. */
function describeAgent(card: AgentCard): string {
  const lines = [
    `Delegates a request to the remote agent "${card.name}"${card.description ? `: ${card.description}` : "."}`,
  ];
  const skills = card.skills ?? [];
  if (skills.length) {
    lines.push("Its skills:");
    for (const s of skills) lines.push(`- ${s.name}${s.description ? `: ${s.description}` : ""}`);
  }
  lines.push(
    "Send it one self-contained request as `message`. Its answer comes back as text with a contextId; " +
      "pass that as `contextId` to continue the same conversation.",
  );
  const text = lines.join("\n");
  return text.length <= 4000 ? text : `${text.slice(0, 3997)}...`;
}

/** An error's message, with its cause's when it has one (fetch says only "fetch failed"). */
function reason(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const cause = e instanceof Error ? e.cause : undefined;
  return cause instanceof Error ? `${message}: ${cause.message}` : message;
}

/** The protocol bindings Arbor's client speaks (its transports below). */
const SPOKEN = new Set(["JSONRPC", "HTTP+JSON"]);

/** A URL's origin, or undefined when it is not a URL. */
function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/**
 * Requests only to `origin` (what the operator configured): whatever the card or the SDK asks for,
 * the configured headers and the model's messages never leave for another origin.
 */
function onlyTo(origin: string, name: string, fetchFn: typeof fetch): typeof fetch {
  return (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (originOf(url) !== origin)
      return Promise.reject(
        new ForbiddenError(
          `tools.${name}: a request to ${url} refused: this A2A tool speaks only to its configured origin ${origin}`,
        ),
      );
    return fetchFn(input, init);
  };
}

/** The configured headers on every request; the SDK's own (content type, A2A-Version) win. */
function withHeaders(fetchFn: typeof fetch, headers: Record<string, string>): typeof fetch {
  if (Object.keys(headers).length === 0) return fetchFn;
  return (input, init) => {
    const merged = new Headers(headers);
    new Headers(init?.headers).forEach((value, key) => {
      merged.set(key, value);
    });
    return fetchFn(input, { ...init, headers: merged });
  };
}
