import { randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Message, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import { type Client, ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { serve } from "@hono/node-server";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createA2aApp } from "../../shared/channels/a2a/a2a-server.ts";
import type { AssistantDefinition, Engine } from "../../shared/engine/engine.ts";
import { textPart } from "../../shared/protocols/a2a/a2a-mapping.ts";
import { firstUser, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * What the A2A endpoint's tests share: the team and the scripted model, the keys of two tenants
 * (acme: two people, ada and root, an admin, and a remote agent, partner; beta: a remote agent,
 * intruder), the endpoint
 * on an ephemeral port, and the client side as any A2A caller has it (the SDK's client).
 */
export const ANSWER = "The cost per person is 100 EUR.";
export const TEAM: AssistantDefinition[] = [
  {
    name: "Generalist",
    id: "generalist",
    purpose: "Do any part of any task and report the result",
    tools: ["calculator", "send_email"],
  },
];
export const EMAIL = { to: "team@example.com", subject: "Offsite", body: "See you in Lisbon" };

/**
 * Emails (a risky call, decided after a moment: a stream opened with the request sees it asked,
 * as with any real model) when asked to, answers "slowly" after `slowMs`, else answers at once.
 */
export const a2aScript =
  (slowMs: number): ScriptFunction =>
  (r) => {
    if (isPlan(r))
      return /email/i.test(firstUser(r))
        ? planOf({ name: "Email the team", purpose: "Send the team an email about the offsite" })
        : planOf({ name: "Cost per person", purpose: "Compute the cost per person of the offsite" });
    if (isEvaluation(r)) return pass();
    const told = [...r.messages].reverse().find((m) => m.role === "tool");
    if (/slowly/i.test(firstUser(r))) return { content: ANSWER, delayMs: slowMs };
    if (taskName(r) === "Email the team")
      return told
        ? { content: `Emailed the team: ${told.content}` }
        : { toolCalls: [{ name: "send_email", arguments: EMAIL }], delayMs: 100 };
    return { content: ANSWER };
  };

export const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
/** A person of acme who may act on anything of the tenant (the admin role). */
export const root = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
export const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: [] });
export const intruder = newApiKey({ id: "agent_intruder", kind: "agent", tenant: "beta", roles: [] });
export const keys = new ApiKeys({ keys: [ada.entry, root.entry, partner.entry, intruder.entry] });

/** The A2A sub-app for `engine` on @hono/node-server on an ephemeral port (its card names that URL). */
export async function serveA2a(
  engine: Engine,
  options: Omit<Parameters<typeof createA2aApp>[0], "baseUrl" | "engine" | "keys"> = {},
): Promise<{ url: string; close: () => Promise<void> }> {
  let app: ReturnType<typeof createA2aApp> | undefined;
  const server = await new Promise<Server>((resolve) => {
    const s = serve(
      { fetch: (request) => (app as NonNullable<typeof app>).fetch(request), port: 0, hostname: "127.0.0.1" },
      () => resolve(s as Server),
    );
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  app = createA2aApp({ engine, keys, baseUrl: url, ...options });
  return {
    url,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

// ---- the client side, as any A2A caller has it ----------------------------------------------------

export const withKey =
  (key: string | undefined): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    if (key) headers.set("authorization", `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };

export const a2aClient = (key: string | undefined, url: string): Promise<Client> =>
  new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: withKey(key) })],
    clientConfig: { polling: false },
  }).createFromUrl(url);

export const userMessage = (value: string, ids: { taskId?: string; contextId?: string } = {}): Message => ({
  messageId: randomUUID(),
  contextId: ids.contextId ?? "",
  taskId: ids.taskId ?? "",
  role: Role.ROLE_USER,
  parts: [textPart(value)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

/** A message sent; the answer must be a task. */
export async function send(c: Client, message: Message, returnImmediately = false): Promise<Task> {
  const result = await c.sendMessage({
    tenant: "",
    message,
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
    metadata: undefined,
  });
  if (!("status" in result)) throw new Error(`expected a task, got a message: ${JSON.stringify(result)}`);
  return result;
}

export const list = (
  c: Client,
  filters: Partial<{
    contextId: string;
    status: TaskState;
    pageSize: number;
    pageToken: string;
    historyLength: number;
    includeArtifacts: boolean;
  }> = {},
) =>
  c.listTasks({
    tenant: "",
    contextId: "",
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageSize: 100,
    pageToken: "",
    statusTimestampAfter: undefined,
    ...filters,
  });

export const partsText = (parts: readonly Part[] | undefined) =>
  (parts ?? []).flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : [])).join("\n");
export const rootOf = (task: Task): string => task.metadata?.arbor?.rootTaskId;
export const conversationOf = (task: Task): string => task.metadata?.arbor?.conversationUrn;
