import { createHash } from "node:crypto";
import { AgentCard, type AgentSkill } from "@a2a-js/sdk";
import pkg from "../../../package.json" with { type: "json" };
import type { Assistant } from "../../domain/resources.ts";
import { ArborError } from "../../kernel/errors.ts";
import type { Authenticated } from "../../ports/key-store.ts";

/**
 * Arbor's agent card, in the form each protocol version reads (one JSON per version, never a
 * mix: A2A 1.0's card is strict, a field it does not define makes it invalid).
 *
 *   1.0   the SDK's JSON form of the card (AgentCard.toJSON): `supportedInterfaces` names the
 *         JSON-RPC endpoint twice, once per protocol version ("1.0" and "0.3"; the same URL, the
 *         `A2A-Version` header picks, see a2a-transport.ts).
 *   0.3   0.3's card: `url`, `protocolVersion`, `preferredTransport`, `additionalInterfaces`,
 *         `supportsAuthenticatedExtendedCard`, `security`, each security scheme as `type`/`scheme`,
 *         skills without 1.0's fields; and 1.0's `supportedInterfaces`, which a 0.3 reader ignores,
 *         so that a 1.0 client that asks without the header still finds its interface.
 *
 * Which one a GET gets is the request's `A2A-Version` (header, else query parameter), as for
 * every A2A request (A2A 1.0 §3.6.2): none is 0.3 (a 0.3 client sends none), 1.0 is 1.0; a version
 * Arbor does not speak gets the newest card it has. Each body has its strong ETag (a hash of the
 * bytes): the cards are cached publicly (`Vary: A2A-Version`) and a conditional GET gets 304.
 */
export const A2A_PATH = "/a2a";

/** What the card offers beyond the request/response methods; both false until their helpers land. */
export interface CardCapabilities {
  /** SendStreamingMessage / SubscribeToTask (message/stream, tasks/resubscribe). */
  streaming: boolean;
  /** Push notification configs (in the send and through the config methods). */
  pushNotifications: boolean;
}

export const NO_CAPABILITIES: CardCapabilities = { streaming: false, pushNotifications: false };

const SCHEME = "arborApiKey";
const SCHEME_DESCRIPTION =
  "An Arbor API key (`arbor keys add --kind agent`), sent as Authorization: Bearer <key>";

/** What Arbor reads in a message, and what it answers with (see a2a-mapping.ts, artifactParts). */
export const INPUT_MODES = ["text/plain", "application/json"] as const;
export const OUTPUT_MODES = ["text/plain", "application/json"] as const;

const RUN_REQUEST: AgentSkill = {
  id: "run_request",
  name: "Run a request with a team of agents",
  description:
    "Takes a request in plain language and carries it out: planning, delegation to specialised " +
    "assistants and their tools, and a checked answer. When an action needs a person's approval " +
    "the task becomes input-required; answer it with a message on the same task.",
  tags: ["planning", "delegation", "multi-agent"],
  examples: [
    "Plan a two-day team offsite in Lisbon for 12 people in June, with a budget per person",
    "Compute the cost per person of a 1,200 EUR budget shared by 12 people",
  ],
  inputModes: [],
  outputModes: [],
  securityRequirements: [],
};

/** The agent card (the SDK's type): what Arbor does, where to call it, and that it wants a bearer key. */
export function arborAgentCard(baseUrl: string, capabilities: CardCapabilities = NO_CAPABILITIES): AgentCard {
  const url = `${baseUrl.replace(/\/+$/, "")}${A2A_PATH}`;
  return {
    name: "Arbor",
    description:
      "Runs a request with a team of LLM agents: plans it as a tree of tasks, gives every task to the " +
      "assistant that fits it best, checks each result against the task's definition of done, and asks " +
      "a person before a risky action.",
    supportedInterfaces: [
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
      { url, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "0.3" },
    ],
    provider: undefined,
    version: pkg.version,
    capabilities: { ...capabilities, extensions: [], extendedAgentCard: true },
    securitySchemes: {
      [SCHEME]: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: { description: SCHEME_DESCRIPTION, scheme: "Bearer", bearerFormat: "" },
        },
      },
    },
    securityRequirements: [{ schemes: { [SCHEME]: { list: [] } } }],
    defaultInputModes: [...INPUT_MODES],
    defaultOutputModes: [...OUTPUT_MODES],
    skills: [RUN_REQUEST],
    signatures: [],
  };
}

/** The versions the card is served in (a2a-transport.ts's A2aVersion). */
export type CardVersion = "1.0" | "0.3";

/** The card as A2A 1.0 has it: the SDK's JSON form, nothing else. */
export function cardJson10(card: AgentCard): Record<string, unknown> {
  return AgentCard.toJSON(card) as Record<string, unknown>;
}

/** The card as A2A 0.3 has it (see above), with 1.0's interfaces for a reader that sent no version. */
export function cardJson03(card: AgentCard): Record<string, unknown> {
  const [primary, ...others] = card.supportedInterfaces.filter((i) => i.protocolVersion === "0.3");
  // Cannot happen: arborAgentCard (above) always lists a 0.3 interface.
  if (!primary) throw new ArborError("INTERNAL", "The agent card has no A2A 0.3 interface");
  const v10 = cardJson10(card);
  const schemes = Object.fromEntries(
    Object.entries(card.securitySchemes).flatMap(([name, s]) =>
      s.scheme?.$case === "httpAuthSecurityScheme"
        ? [
            [
              name,
              {
                type: "http",
                scheme: (s.scheme.value.scheme || "bearer").toLowerCase(),
                ...(s.scheme.value.description ? { description: s.scheme.value.description } : {}),
              },
            ],
          ]
        : [],
    ),
  );
  return {
    protocolVersion: "0.3.0",
    name: card.name,
    description: card.description,
    url: primary.url,
    preferredTransport: primary.protocolBinding,
    additionalInterfaces: [primary, ...others].map((i) => ({ url: i.url, transport: i.protocolBinding })),
    version: card.version,
    capabilities: {
      streaming: card.capabilities?.streaming === true,
      pushNotifications: card.capabilities?.pushNotifications === true,
      ...(card.capabilities?.extensions.length
        ? {
            extensions: card.capabilities.extensions.map((e) => ({
              uri: e.uri,
              ...(e.description ? { description: e.description } : {}),
              required: e.required,
              ...(e.params ? { params: e.params } : {}),
            })),
          }
        : {}),
    },
    securitySchemes: schemes,
    security: card.securityRequirements.map((r) =>
      Object.fromEntries(Object.entries(r.schemes).map(([name, scopes]) => [name, scopes.list])),
    ),
    defaultInputModes: [...card.defaultInputModes],
    defaultOutputModes: [...card.defaultOutputModes],
    skills: card.skills.map((k) => ({
      id: k.id,
      name: k.name,
      description: k.description,
      tags: [...k.tags],
      ...(k.examples.length ? { examples: [...k.examples] } : {}),
      ...(k.inputModes.length ? { inputModes: [...k.inputModes] } : {}),
      ...(k.outputModes.length ? { outputModes: [...k.outputModes] } : {}),
    })),
    supportsAuthenticatedExtendedCard: card.capabilities?.extendedAgentCard === true,
    // 1.0's, for a 1.0 reader that asked without A2A-Version (0.3 readers ignore it).
    supportedInterfaces: v10.supportedInterfaces,
  };
}

export interface CardBody {
  body: string;
  etag: string;
}

/** The card's bytes in `version`'s form, and their strong ETag. */
export function cardBody(card: AgentCard, version: CardVersion = "1.0"): CardBody {
  const body = JSON.stringify(version === "1.0" ? cardJson10(card) : cardJson03(card));
  return { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 32)}"` };
}

/** Whether an If-None-Match header names `etag` (or is `*`): the caller's copy is current. */
export function matchesEtag(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch
    .split(",")
    .map((t) => t.trim().replace(/^W\//, ""))
    .some((t) => t === "*" || t === etag);
}

/** The URI of the extension that says, in the extended card, who the caller is to Arbor. */
export const CALLER_EXTENSION = "urn:arbor:a2a:extension:caller:v1";

/**
 * The extended card for an authenticated caller: the public card, plus what the caller's key is
 * (its tenant, actor and roles, as an extension's params) and, when the key may read its team
 * (`assistants` defined), one skill per active assistant of the team.
 */
export function extendedCard(
  card: AgentCard,
  who: Authenticated,
  assistants: readonly Assistant[] | undefined,
): AgentCard {
  const team: AgentSkill[] = (assistants ?? []).map((a) => ({
    id: `assistant:${a.meta.name}`,
    name: a.meta.name,
    description: a.meta.purpose ?? `The assistant ${a.meta.name} of the team`,
    tags: ["assistant", ...a.tools],
    examples: [],
    inputModes: [],
    outputModes: [],
    securityRequirements: [],
  }));
  return {
    ...card,
    capabilities: {
      ...(card.capabilities ?? { streaming: false, pushNotifications: false, extendedAgentCard: true }),
      extensions: [
        ...(card.capabilities?.extensions ?? []),
        {
          uri: CALLER_EXTENSION,
          description:
            "Who this key is to Arbor: its tenant, actor and roles (informational; nothing to activate)",
          required: false,
          params: {
            tenant: who.caller.tenant,
            actor: who.actor.id,
            kind: who.actor.kind,
            roles: [...who.caller.roles],
            team:
              assistants === undefined
                ? "not readable with this key (the tenant's admins read the team)"
                : assistants.map((a) => a.meta.name),
          },
        },
      ],
    },
    skills: [...card.skills, ...team],
  };
}
