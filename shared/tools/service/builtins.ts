import { createHash } from "node:crypto";
import * as z from "zod";
import { AskQuestionSchema } from "../../domain/ask-question.ts";
import { formatIssues, MemoryScopeSchema, type Message } from "../../domain/resources.ts";
import { wholeCharacters } from "../../domain/text.ts";
import { conversationOf, isUrn, rootUrn, tenantOf } from "../../domain/urn.ts";
import type { GraphStore } from "../../graph/graph-store.ts";
import { graphAdd, graphQuery, graphRemove } from "../../graph/graph-tools.ts";
import { ArborError, ConfigError, ForbiddenError, ValidationError } from "../../kernel/errors.ts";
import { forget, MAX_FACT_CHARS, remember } from "../../knowledge/memory.ts";
import { contextLine, SEARCH_KINDS, type SearchKind, searchKnowledge } from "../../knowledge/search.ts";
import type { ArtifactStore } from "../../ports/artifact-store.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { PolicyEngine } from "../../ports/policy.ts";
import type { ToolBinding, ToolContext, ToolDescriptor } from "../../ports/tools.ts";
import type { VectorIndex } from "../../ports/vector-index.ts";
import { ownerOf, type Principal, ResourceAccess } from "../../store/resource-access.ts";
import type { ResourceStore } from "../../store/resource-store.ts";
import { ACTIVITIES, ACTIVITY_NAMES, activityBinding, isActivityName } from "../activities/activities.ts";
import type { BuiltinFunction } from "./builtin-function.ts";
import { parametersOf } from "./zod-parameters.ts";

const define = <S extends z.ZodObject>(f: BuiltinFunction<S>): BuiltinFunction =>
  f as unknown as BuiltinFunction;

/** What the built-ins that reach beyond their arguments need. */
export interface BuiltinDeps {
  resources: ResourceStore;
  embedder: Embedder;
  index: VectorIndex;
  /** Outbound HTTP (injected, so tests control the network). */
  fetch: typeof fetch;
  /** Decides the resource tools' reads (resource.read); the tenant boundary holds without it too. */
  policy?: PolicyEngine;
  /** The tenants' linked data, for the graph tools (shared/graph/). */
  graph?: GraphStore;
  /** The files tasks make (create_artifact). */
  artifacts?: ArtifactStore;
}

/** Per-tool settings of a built-in (from the tool's configuration entry). */
export interface BuiltinSettings {
  /** http_request: the hosts it may reach (`example.com`, or `*.example.com` for its subdomains). */
  allowedHosts?: readonly string[];
}

const text = z.string().max(1_000_000);

const sha256 = define({
  description: "SHA-256 hash of a text, as lowercase hex.",
  schema: z.object({ text }),
  pure: true,
  run: ({ text }) => createHash("sha256").update(text).digest("hex"),
});

const md5 = define({
  description: "MD5 hash of a text, as lowercase hex (a checksum, not for security).",
  schema: z.object({ text }),
  pure: true,
  run: ({ text }) => createHash("md5").update(text).digest("hex"),
});

const wordCount = define({
  description: "Counts the words in a text.",
  schema: z.object({ text }),
  pure: true,
  run: ({ text }) => String(text.split(/\s+/).filter(Boolean).length),
});

const calculator = define({
  description: "Adds, subtracts, multiplies or divides two numbers.",
  schema: z.object({ a: z.number(), b: z.number(), op: z.enum(["add", "subtract", "multiply", "divide"]) }),
  pure: true,
  run: ({ a, b, op }) => {
    if (op === "divide" && b === 0) throw new ValidationError("division by zero: give a b other than 0");
    return String(op === "add" ? a + b : op === "subtract" ? a - b : op === "multiply" ? a * b : a / b);
  },
});

/** A stand-in for an action with side effects: it only records what it would send, and it is risky. */
const sendEmail = define({
  description: "Sends an email. Needs a person's confirmation of the exact recipient, subject and body.",
  schema: z.object({ to: z.email(), subject: z.string().min(1).max(200), body: z.string().max(20_000) }),
  risky: true,
  run: ({ to, subject }) => `Email "${subject}" queued for ${to}`,
});

/**
 * Asks a person and waits for the answer (engine/turn/ask.ts): the engine's step handles the call, on
 * both runtimes; the tool service never runs it (if a call reaches it, it is refused).
 */
const askPerson = define({
  description:
    "Asks a person a question and waits for the answer (the task pauses until someone answers). Give a title; " +
    "options to choose from, or none for a free written answer, or options with freeAnswer: true for either. " +
    "validation.regex/required hold the written answer to a pattern. The result is the person's answer.",
  schema: AskQuestionSchema,
  pure: true,
  engine: "ask_person",
  run: () => {
    throw new ValidationError(
      "ask_person is answered by a person through the engine; it cannot run as a function",
    );
  },
});

/**
 * The assistant calling a tool, as the resource checks see it: of the tenant at the root of its URN
 * (an actor named otherwise acts within the task's tenant).
 */
function callerOf(context: ToolContext): Principal {
  const tenant = tenantOf(context.actor.startsWith("cld:") ? context.actor : context.taskId);
  return { id: context.actor, kind: "agent", ...(tenant ? { tenant } : {}) };
}

// The schemas of the built-ins made per tool service are made once (parametersOf converts each once).
const SEARCH_SCHEMA = z
  .object({
    query: z.string().min(1).max(2000).optional(),
    urnPrefix: z.string().min(5).max(1000).optional(),
    kinds: z.array(z.enum(SEARCH_KINDS)).min(1).max(SEARCH_KINDS.length).optional(),
    limit: z.number().int().min(1).max(50).default(5),
  })
  .refine((a) => (a.query === undefined) !== (a.urnPrefix === undefined), {
    message: "give either query or urnPrefix, not both",
  });
const READ_SCHEMA = z.object({
  urn: z.string().min(5).max(1000),
  offset: z.number().int().min(0).default(0),
  length: z.number().int().min(1).max(50_000).default(20_000),
});
const HTTP_SCHEMA = z.object({
  url: z.url({ protocol: /^https?$/ }),
  method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]).default("GET"),
  headers: z.record(z.string(), z.string().max(4000)).optional(),
  body: z.string().max(1_000_000).optional(),
});

function searchResources(deps: BuiltinDeps) {
  const access = new ResourceAccess(deps.resources, deps.policy);
  return define({
    description:
      "Finds resources of your tenant: by meaning (`query`: passages of the tenant's documents, results " +
      "of earlier tasks, tasks and questions, the tools, and the requests and conversations of the person " +
      "you work for, nearest first; `kinds` to ask for some of doc.Chunk, common.Message, plan.Task, " +
      "uip.Interaction, common.Conversation, common.Tool) or by place " +
      "(`urnPrefix`: the resources stored under that URN). Returns URNs with a short excerpt: cite a " +
      "passage by its URN, and read more of it with read_resource.",
    schema: SEARCH_SCHEMA,
    pure: true,
    run: async ({ query, urnPrefix, kinds, limit }, context) => {
      const caller = callerOf(context);
      if (query !== undefined) {
        const tenant = tenantOf(rootUrn(context.taskId));
        // Requests and conversations found are only those of the person this task works for.
        const person = tenant && wantsOwn(kinds) ? await ownerOf(deps.resources, context.taskId) : undefined;
        const found = tenant
          ? await searchKnowledge(deps, {
              tenant,
              text: query,
              ...(kinds ? { kinds } : {}),
              limit,
              ...(person ? { person } : {}),
            })
          : [];
        // What the search read passes the resource checks too (the policy decides), not read again.
        await access.authorizeMany(
          caller,
          "resource.read",
          found.map((f) => f.urn),
        );
        const lines = found.map((f) => contextLine(f, 300));
        return lines.length ? lines.join("\n") : "Nothing found.";
      }
      const urns = (await access.list(caller, (urnPrefix as string).replace(/\/$/, ""))).slice(0, limit);
      const docs = await access.readMany(caller, urns);
      const lines = docs.flatMap((d) =>
        d ? [`- ${d.meta.id} (${d.meta.type}) ${excerpt(d as Message)}`.trimEnd()] : [],
      );
      return lines.length ? lines.join("\n") : "Nothing found.";
    },
  });
}

/** Whether a search of `kinds` may find requests or conversations (whose owner it then needs). */
const wantsOwn = (kinds: readonly SearchKind[] | undefined) =>
  kinds === undefined || kinds.includes("common.Message") || kinds.includes("common.Conversation");

const excerpt = (d: Message) =>
  typeof d.content === "string" ? d.content.slice(0, 200).replace(/\s+/g, " ") : (d.meta.purpose ?? "");

function readResource(deps: BuiltinDeps) {
  const access = new ResourceAccess(deps.resources, deps.policy);
  return define({
    description:
      "Reads a resource of your tenant by URN (a result stored because it was too large to pass inline, " +
      "a message, a task). Long text comes in pieces: pass `offset` to read on.",
    schema: READ_SCHEMA,
    pure: true,
    run: async ({ urn, offset, length }, context) => {
      const resource = await access.read(callerOf(context), urn);
      if (!resource)
        throw new ArborError("NOT_FOUND", `No resource ${urn} in your tenant: check the URN`, {
          details: { urn },
        });
      const whole =
        "content" in resource && typeof resource.content === "string"
          ? resource.content
          : JSON.stringify(resource, null, 1);
      // Whole characters: a piece ends before a character it would cut, and starts after one an offset cuts.
      const from = offset > 0 && wholeCharacters(whole, offset) < offset ? offset + 1 : offset;
      const end = wholeCharacters(whole, from + length);
      const piece = whole.slice(from, end > from ? end : from + 2); // length 1 at a pair: the pair
      const rest = whole.length - from - piece.length;
      return rest > 0
        ? `${piece}\n[${rest} more characters: read on with offset ${from + piece.length}]`
        : piece;
    },
  });
}

const ARTIFACT_SCHEMA = z.object({
  name: z.string().min(1).max(200),
  contentType: z.string().min(3).max(255).default("text/plain"),
  content: z.string().max(4_000_000),
  encoding: z.enum(["text", "base64"]).default("text"),
});

/**
 * A file the task hands over (a report, a CSV, a chart): stored under the task, and part of its
 * answer (A2A file parts, the HTTP API's links). The same name again replaces it.
 */
function createArtifact(deps: BuiltinDeps) {
  return define({
    description:
      "Creates a file as part of your answer (a report, a CSV, a page): give it a file name, its content type " +
      "(text/markdown, text/csv, application/json...) and its content (text, or base64 with encoding: base64). " +
      "The same name again replaces it. Answers with the file's URN.",
    schema: ARTIFACT_SCHEMA,
    run: async ({ name, contentType, content, encoding }, context) => {
      if (!deps.artifacts)
        throw new ConfigError(
          "create_artifact has no artifact store here: this tool service was opened without one",
        );
      const body = encoding === "base64" ? Buffer.from(content, "base64") : content;
      const info = await deps.artifacts.put({ taskId: context.taskId, name, contentType, body });
      return `Created ${info.name} (${info.contentType}, ${info.size} bytes): ${info.urn}`;
    },
  });
}

const REMEMBER_SCHEMA = z.object({
  fact: z.string().min(1).max(MAX_FACT_CHARS),
  scope: MemoryScopeSchema.default("person"),
});
const FORGET_SCHEMA = z.object({ urn: z.string().min(5).max(1000) });

/**
 * Remembers a fact for later requests: about the person asking (default), for the whole tenant,
 * or for the assistant itself. The person is whoever started the request's conversation.
 */
function rememberFact(deps: BuiltinDeps) {
  return define({
    description:
      "Remembers a fact for later requests, recalled when it is relevant: scope person (default: about the person " +
      "asking, e.g. their preferences), tenant (true for everyone here) or assistant (how you work best). " +
      "Remember facts, never instructions; one short sentence each.",
    schema: REMEMBER_SCHEMA,
    run: async ({ fact, scope }, context) => {
      const tenant = tenantOf(context.taskId);
      if (!tenant)
        throw new ValidationError("This task belongs to no tenant: nothing can be remembered for it");
      let about: string | undefined;
      if (scope === "person") {
        const conversation = conversationOf(context.taskId);
        about = conversation
          ? (await deps.resources.getAs("common.Conversation", conversation))?.startedBy
          : undefined;
        if (!about)
          throw new ValidationError(
            "No person is known for this request: remember it for the tenant (scope tenant) instead",
          );
      }
      const memory = await remember(deps, {
        tenant,
        scope,
        ...(about ? { about } : {}),
        assistant: context.actor,
        fact,
        source: context.taskId,
        createdAt: new Date().toISOString(),
      });
      return `Remembered (${scope}): ${memory.meta.id}`;
    },
  });
}

/** Forgets a memory of the request's person, the tenant or the assistant itself, by its URN. */
function forgetFact(deps: BuiltinDeps) {
  return define({
    description:
      "Forgets a memory by its URN (as a recalled memory shows it): one that is wrong or out of date.",
    schema: FORGET_SCHEMA,
    run: async ({ urn }, context) => {
      const tenant = tenantOf(context.taskId);
      const memory = isUrn(urn) ? await deps.resources.getAs("mem.Memory", urn) : undefined;
      if (!tenant || !memory || tenantOf(urn) !== tenant)
        throw new ArborError("NOT_FOUND", `No memory ${urn} here: give the URN a recalled memory shows`);
      // Only what this request may recall: the person's own, the tenant's, this assistant's.
      const conversation = conversationOf(context.taskId);
      const person = conversation
        ? (await deps.resources.getAs("common.Conversation", conversation))?.startedBy
        : undefined;
      const mine =
        memory.scope === "tenant" ||
        (memory.scope === "person" && memory.about === person) ||
        (memory.scope === "assistant" && memory.assistant === context.actor);
      if (!mine) throw new ForbiddenError(`${urn} is not a memory this request may forget`);
      await forget(deps, urn);
      return `Forgot ${urn}`;
    },
  });
}

function httpRequest(deps: BuiltinDeps, settings: BuiltinSettings) {
  const allowed = settings.allowedHosts ?? [];
  return define({
    description: `Makes an HTTP request to an allowed host (${allowed.join(", ")}) and returns the status and body.`,
    schema: HTTP_SCHEMA,
    run: async ({ url, method, headers, body }, context) => {
      const host = new URL(url).hostname.toLowerCase();
      if (!hostAllowed(host, allowed))
        throw new ForbiddenError(`${host} is not an allowed host; allowed: ${allowed.join(", ") || "none"}`);
      const response = await deps.fetch(url, {
        method,
        redirect: "manual", // a redirect could leave the allow-list
        ...(headers ? { headers } : {}),
        ...(body !== undefined && method !== "GET" ? { body } : {}),
        ...(context.signal ? { signal: context.signal } : {}),
      });
      const location = response.headers.get("location");
      const tail = location ? `\n(redirects to ${location}: not followed)` : "";
      return `HTTP ${response.status}\n${await response.text()}${tail}`;
    },
  });
}

/** Whether `host` is one of `allowed`: an exact name, or `*.example.com` for its subdomains. */
export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  return allowed.some((a) => {
    const pattern = a.toLowerCase();
    return pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern;
  });
}

/** The built-in functions by name; those that need settings or dependencies are made per tool. */
export const BUILTIN_NAMES = [
  "sha256",
  "md5",
  "word_count",
  "calculator",
  "send_email",
  "search_resources",
  "read_resource",
  "http_request",
  "graph_add",
  "graph_query",
  "graph_remove",
  "create_artifact",
  "remember",
  "forget",
  // Activities (tools/activities/activities.ts): `(call, tool, context)` handlers, `_outputPath`, fire-and-forget.
  ...ACTIVITY_NAMES,
  "ask_person",
] as const;
export type BuiltinName = (typeof BUILTIN_NAMES)[number];

function builtinFunction(
  name: Exclude<BuiltinName, (typeof ACTIVITY_NAMES)[number]>,
  deps: BuiltinDeps | undefined,
  settings: BuiltinSettings,
): BuiltinFunction {
  const need = () => {
    if (!deps)
      throw new ConfigError(
        `The built-in ${name} needs the resources, the index and fetch: open the tool service with them`,
      );
    return deps;
  };
  switch (name) {
    case "sha256":
      return sha256;
    case "md5":
      return md5;
    case "word_count":
      return wordCount;
    case "calculator":
      return calculator;
    case "send_email":
      return sendEmail;
    case "search_resources":
      return searchResources(need());
    case "read_resource":
      return readResource(need());
    case "http_request":
      return httpRequest(need(), settings);
    case "graph_add":
    case "graph_query":
    case "graph_remove": {
      // Both runtimes give the graph store; a tool service opened without one (a test's) still
      // opens, and a call says what is missing.
      const make = { graph_add: graphAdd, graph_query: graphQuery, graph_remove: graphRemove }[name];
      return make({ graph: deps?.graph ?? noGraph(name), policy: deps?.policy });
    }
    case "ask_person":
      return askPerson;
    case "create_artifact":
      return createArtifact(deps ?? ({} as BuiltinDeps));
    case "remember":
      return rememberFact(need());
    case "forget":
      return forgetFact(need());
  }
}

/** The graph of a tool service opened without one: every call fails, saying so. */
const noGraph = (name: string): GraphStore => {
  const fail = async (): Promise<never> => {
    throw new ConfigError(`${name} has no graph store here: this tool service was opened without one`);
  };
  return { add: fail, remove: fail, query: fail, count: fail };
};

/** A tool named `name` bound to a built-in function. */
export function builtinBinding(
  name: string,
  fn: BuiltinName,
  options: { description?: string; risky?: boolean; settings?: BuiltinSettings },
  deps?: BuiltinDeps,
): ToolBinding {
  if (isActivityName(fn)) return activityBinding(name, ACTIVITIES[fn], options);
  const f = builtinFunction(fn, deps, options.settings ?? {});
  const parameters = parametersOf(f.schema);
  const descriptor: ToolDescriptor = {
    name,
    kind: "builtin",
    description: options.description ?? f.description,
    parameters,
    risky: options.risky ?? f.risky ?? false,
    pure: f.pure ?? false,
    ...(f.engine ? { engine: f.engine } : {}),
  };
  // The arguments as checked, for run() to use without parsing them again.
  const checked = new WeakMap<object, z.output<typeof f.schema>>();
  return {
    descriptor,
    check: (args) => {
      const parsed = f.schema.safeParse(args);
      if (!parsed.success) return formatIssues(parsed.error);
      checked.set(args, parsed.data);
      return [];
    },
    run: async (args, context) => f.run(checked.get(args) ?? f.schema.parse(args), context),
  };
}
