import { hash } from "node:crypto";
import { InvalidUrnError } from "../kernel/errors.ts";
import { trimOldest } from "./bounded-map.ts";

/**
 * URNs name every resource: `cld:` + a path of elements joined by `/`, parent first.
 * Each element is `<package>.<Type>.<id>`, e.g.
 * `cld:common.Tenant.acme/common.Conversation.c1/common.Message.m2/plan.Task.t3`.
 * A resource is stored under `<urn>.json`, so children are one prefix listing away and every
 * ancestor can be read from the URN alone.
 */
export const URN_NAMESPACE = "cld";
const SCHEME = `${URN_NAMESPACE}:`;

const PACKAGE = /^[a-z][a-z0-9]*$/;
const TYPE = /^[A-Z][A-Za-z0-9]*$/;
const ID = /^[A-Za-z0-9_-]{1,128}$/;
/** Longest URN we accept; S3 keys top out at 1024 bytes and we add `.json`. */
export const MAX_URN_LENGTH = 1000;

export type Urn = string & { readonly __brand: "Urn" };

export interface UrnElement {
  /** e.g. `common` */
  readonly pkg: string;
  /** e.g. `Conversation` */
  readonly type: string;
  /** e.g. `c1` or a deterministic hash */
  readonly id: string;
}

/** `common.Conversation`: package and type, as stored in `meta.type`. */
export const qualifiedType = (e: Pick<UrnElement, "pkg" | "type">): string => `${e.pkg}.${e.type}`;

export function formatElement(e: UrnElement): string {
  return `${e.pkg}.${e.type}.${e.id}`;
}

function parseElement(urn: string, raw: string, index: number): UrnElement {
  const parts = raw.split(".");
  if (parts.length !== 3) {
    throw new InvalidUrnError(
      urn,
      `element ${index + 1} (${JSON.stringify(raw)}) must be <package>.<Type>.<id>`,
    );
  }
  const [pkg, type, id] = parts as [string, string, string];
  if (!PACKAGE.test(pkg))
    throw new InvalidUrnError(urn, `package ${JSON.stringify(pkg)} must match ${PACKAGE}`);
  if (!TYPE.test(type)) throw new InvalidUrnError(urn, `type ${JSON.stringify(type)} must match ${TYPE}`);
  if (!ID.test(id)) throw new InvalidUrnError(urn, `id ${JSON.stringify(id)} must match ${ID}`);
  return { pkg, type, id };
}

/** Splits and validates a URN. Throws InvalidUrnError saying which part is wrong. */
/**
 * URNs already parsed, by text: the engine parses the same few hundred URNs over and over. The
 * elements are frozen and shared; each caller gets its own array. Bounded: the oldest go first.
 */
const parsed = new Map<string, readonly UrnElement[]>();
/**
 * How many URNs (and derived ids) are remembered. An entry of each costs about 1 KB together, so
 * this is ~10 MB, and a server at 3 requests a second (about 40 new URNs each) reaches it in about
 * a minute and a half, then holds its size; at 50,000 the caches held ~50 MB, took 20 minutes to
 * fill and were then dropped whole (issue 22). Requests in flight use a few hundred each.
 */
export const MAX_REMEMBERED_URNS = 10_000;

export function parseUrn(urn: string): UrnElement[] {
  return [...elementsOf(urn)];
}

/** The shared, frozen elements of a valid URN (parsed once). */
function elementsOf(urn: string): readonly UrnElement[] {
  const known = parsed.get(urn);
  if (known) return known;
  return remember(urn, parseUncached(urn));
}

/** Keeps the elements of a URN just checked: fresh ones (parseElement's) are frozen where they are. */
function remember(urn: string, elements: UrnElement[]): readonly UrnElement[] {
  for (const e of elements) if (!Object.isFrozen(e)) Object.freeze(e);
  const frozen = Object.freeze(elements);
  parsed.set(urn, frozen);
  trimOldest(parsed, MAX_REMEMBERED_URNS);
  return frozen;
}

function parseUncached(urn: string): UrnElement[] {
  if (typeof urn !== "string" || urn.length === 0) throw new InvalidUrnError(String(urn), "empty");
  if (urn.length > MAX_URN_LENGTH)
    throw new InvalidUrnError(urn.slice(0, 80), `longer than ${MAX_URN_LENGTH} characters`);
  if (!urn.startsWith(SCHEME)) throw new InvalidUrnError(urn, `must start with "${SCHEME}"`);
  const path = urn.slice(SCHEME.length);
  if (path.length === 0) throw new InvalidUrnError(urn, "has no path");
  return path.split("/").map((raw, i) => parseElement(urn, raw, i));
}

export function isUrn(value: unknown): value is Urn {
  if (typeof value !== "string") return false;
  try {
    elementsOf(value);
    return true;
  } catch {
    return false;
  }
}

export function asUrn(value: string): Urn {
  elementsOf(value);
  return value as Urn;
}

export function formatUrn(elements: readonly UrnElement[]): Urn {
  if (elements.length === 0) throw new InvalidUrnError("", "needs at least one element");
  const urn = `${SCHEME}${elements.map(formatElement).join("/")}`;
  elementsOf(urn);
  return urn as Urn;
}

/** The URN of `element` under `parent` (or a root URN when parent is undefined). */
export function childUrn(parent: string | undefined, element: UrnElement): Urn {
  if (parent === undefined) return formatUrn([element]);
  const above = elementsOf(parent);
  const text = formatElement(element);
  const urn = `${parent}/${text}`;
  if (parsed.has(urn)) return urn as Urn;
  // The parent is valid already: only the new element and the length are left to check.
  if (urn.length > MAX_URN_LENGTH)
    throw new InvalidUrnError(urn.slice(0, 80), `longer than ${MAX_URN_LENGTH} characters`);
  remember(urn, [...above, parseElement(urn, text, above.length)]);
  return urn as Urn;
}

export function lastElement(urn: string): UrnElement {
  const elements = elementsOf(urn);
  return elements[elements.length - 1] as UrnElement;
}

/** The parent URN, or undefined for a root. */
export function parentUrn(urn: string): Urn | undefined {
  // A valid URN cut at an element boundary is a valid URN.
  return elementsOf(urn).length > 1 ? (urn.slice(0, urn.lastIndexOf("/")) as Urn) : undefined;
}

/** Every ancestor, root first, not including the URN itself. */
export function ancestors(urn: string): Urn[] {
  elementsOf(urn);
  const out: Urn[] = [];
  for (let i = urn.indexOf("/"); i !== -1; i = urn.indexOf("/", i + 1)) out.push(urn.slice(0, i) as Urn);
  return out;
}

/** How many task levels a URN has: a request's root task is 1, its subtasks 2, and so on. */
export const taskDepth = (urn: string): number =>
  elementsOf(urn).filter((e) => e.pkg === "plan" && e.type === "Task").length;

/** Depth: a root URN has depth 1. */
export const depth = (urn: string): number => elementsOf(urn).length;

/** The key prefix under which all descendants of `urn` are stored: `<urn>/`. */
export const descendantPrefix = (urn: string): string => {
  elementsOf(urn);
  return `${urn}/`;
};

/** True when `candidate` is `urn` or lies below it. Compares whole elements, never partial ids. */
export function isWithin(candidate: string, urn: string): boolean {
  return candidate === urn || candidate.startsWith(`${urn}/`);
}

/** The root element's URN: for tenant-rooted resources this is the tenant. */
export function rootUrn(urn: string): Urn {
  elementsOf(urn);
  const cut = urn.indexOf("/");
  return (cut === -1 ? urn : urn.slice(0, cut)) as Urn;
}

/** The storage key of a resource. */
export const objectKey = (urn: string): string => `${urn}.json`;

/** The request a task URN belongs to: the URN up to its first plan.Task element (the root task). */
export function rootTaskOf(taskUrn: string): Urn | undefined {
  const at = taskUrn.indexOf("/plan.Task.");
  if (at < 0) return undefined;
  const end = taskUrn.indexOf("/", at + 1);
  return (end < 0 ? taskUrn : taskUrn.slice(0, end)) as Urn;
}

/** The URN for an object key, or undefined when the key is not a resource document. */
export function urnFromKey(key: string): Urn | undefined {
  if (!key.endsWith(".json")) return undefined;
  const urn = key.slice(0, -".json".length);
  return isUrn(urn) ? (urn as Urn) : undefined;
}

/**
 * Deterministic id from parent + type + name (the `withMeta()` rule): repeating a step that
 * creates "the same" resource produces the same URN, so the write is idempotent.
 * 16 hex characters (64 bits) of SHA-256.
 */
export function deterministicId(parent: string | undefined, type: string, name: string): string {
  const input = `${parent ?? ""}\u0000${type}\u0000${name}`;
  let id = derived.get(input);
  if (id === undefined) {
    id = hash("sha256", input).slice(0, 16);
    derived.set(input, id);
    trimOldest(derived, MAX_REMEMBERED_URNS);
  }
  return id;
}
/** Ids already derived: a step derives the same few (a task's messages, its output) again and again. */
const derived = new Map<string, string>();

// ---- tenants ---------------------------------------------------------------------------------

export const TENANT_TYPE = { pkg: "common", type: "Tenant" } as const;

/**
 * `cld:common.Tenant.<id>`: the root under which everything a tenant owns is stored. The id must be
 * one id (InvalidUrnError otherwise): `acme/common.Conversation.c1` would make a valid URN of two
 * elements, below the tenant, and a caller that takes a tenant id from a request would then act on
 * whatever that names.
 */
export function tenantUrn(tenantId: string): Urn {
  if (typeof tenantId !== "string" || !ID.test(tenantId))
    throw new InvalidUrnError(
      `${SCHEME}common.Tenant.${String(tenantId).slice(0, 80)}`,
      `the tenant id must match ${ID} (one id, no "/" or ".")`,
    );
  return formatUrn([{ ...TENANT_TYPE, id: tenantId }]);
}

/** The tenant id a URN belongs to, or undefined when its root is not a tenant. */
export function tenantOf(urn: string): string | undefined {
  const [first] = elementsOf(urn);
  return first && first.pkg === TENANT_TYPE.pkg && first.type === TENANT_TYPE.type ? first.id : undefined;
}

/**
 * The conversation a tenant's URN lies in (the URN itself when it is one): its second element, as
 * every conversation is stored right under its tenant. Undefined for what lies in none (the tenant,
 * its assistants).
 */
export function conversationOf(urn: string): Urn | undefined {
  const elements = elementsOf(urn);
  const second = elements[1];
  if (second?.pkg !== "common" || second.type !== "Conversation" || tenantOf(urn) === undefined)
    return undefined;
  const cut = urn.indexOf("/", urn.indexOf("/") + 1);
  return (cut === -1 ? urn : urn.slice(0, cut)) as Urn;
}
