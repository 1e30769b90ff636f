import { createHash } from "node:crypto";
import type { Actor } from "../../domain/events.ts";
import { checkRequestText } from "../../domain/input-limits.ts";
import { type Meta, withMeta } from "../../domain/resources.ts";
import { childUrn, lastElement, qualifiedType, tenantUrn, type Urn } from "../../domain/urn.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { type RequestEntry, requestIndexOps } from "../../store/request-index.ts";
import { principalOf, type ResourceAccess } from "../../store/resource-access.ts";
import { COMMANDS, type EngineDeps, type PlanCommand, planMarkerKey, send } from "../context.ts";
import type { Teams } from "../team.ts";
import { rootTaskUrn } from "./planner.ts";

/**
 * Engine.submit: a person's (or agent's) message, stored, then planned. Every step is idempotent,
 * so a submit repeated with the same `idempotencyKey` (a channel's retry: Slack's event id, an HTTP
 * client's Idempotency-Key) finds what the first one wrote and returns the same Submitted:
 *
 *   key     -> the message's name: a hash of tenant + key (a valid URN id), so the message URN is the
 *              same on every try; a new conversation's id is derived from the key as well;
 *   message -> written unless there (there with other text: ConflictError, the key was reused);
 *   marker  -> the plan marker, a conditional put: "already there" is the earlier try's;
 *   command -> sent when the marker was written now, or when the marker is still "requested" and
 *              older than PLAN_RESEND_AFTER_MS (the earlier try died before sending it: the plan
 *              step is idempotent, and the command's id is the same). A marker "requested" and
 *              younger is being planned (or the watchdog re-drives it): not sent again, so a quick
 *              retry does not plan twice.
 *
 * Without a key, a new conversation's id and the message's are the engine's new ids themselves
 * (ULIDs: time-ordered), not hashes of them: nothing asks for them to be derived again, and every
 * key a request writes (its resources, records and event streams, all under the conversation's
 * URN) then follows the one before it in the storage's key order, instead of landing on a page of
 * its own in every B-tree a history of requests has made large.
 *
 * `conversationName` makes the conversation URN `cld:common.Tenant.<t>/common.Conversation.<name>`:
 * continued when there (the same resource.write check as a conversationUrn), created when not, with
 * `startedBy` this actor. Creation is conditional: a claim record (`conversation#<urn>`, put with
 * expected version 0) decides who started it; the loser of a race completes the winner's conversation
 * (same content) and continues it, as a second message would.
 */
export interface SubmitRequest {
  /** The tenant the caller belongs to, as the channel authenticated it. */
  tenant: string;
  text: string;
  actor: Actor;
  /** The caller's roles, as the channel knows them (for the policy). */
  roles?: readonly string[];
  /** Continue a conversation; omit to start one. */
  conversationUrn?: string;
  mode?: "eager" | "lazy";
  title?: string;
  /**
   * 1-200 characters, unique per message within the tenant: a submit repeated with it writes
   * nothing new and returns the same Submitted (a retry after a crash completes the first).
   */
  idempotencyKey?: string;
  /**
   * Whose keys they are (the HTTP API: the caller's actor id): the same key string from two callers
   * is two messages, not a conflict naming the other's conversation. Absent: the tenant's (a chat
   * platform's event ids, unique within the workspace).
   */
  idempotencyScope?: string;
  /**
   * 1-100 of [A-Za-z0-9_-], used only without conversationUrn: the conversation
   * `cld:common.Tenant.<tenant>/common.Conversation.<name>`, created when absent, continued when there.
   */
  conversationName?: string;
}

export interface Submitted {
  conversationUrn: Urn;
  messageUrn: Urn;
  rootTaskId: Urn;
}

/** How long a plan marker may wait "requested" before a retried submit sends its command again. */
export const PLAN_RESEND_AFTER_MS = 30_000;

const CONVERSATION_NAME = /^[A-Za-z0-9_-]{1,100}$/;

/** The id a key gives a message (and a new conversation): 32 hex characters of sha256(tenant, [scope,] key). */
export function idempotencyId(tenant: string, key: string, scope?: string): string {
  const input = scope === undefined ? `${tenant}\u0000${key}` : `${tenant}\u0000${scope}\u0001${key}`;
  return createHash("sha256").update(input).digest("hex").slice(0, 32);
}

export const conversationClaimKey = (conversationUrn: string) => `conversation#${conversationUrn}`;

function checkOptions(req: SubmitRequest): void {
  const key = req.idempotencyKey;
  if (key !== undefined && (key.length < 1 || key.length > 200))
    throw new ValidationError("The idempotency key must be 1-200 characters", [`length ${key.length}`]);
  const name = req.conversationName;
  if (name !== undefined && !CONVERSATION_NAME.test(name))
    throw new ValidationError("The conversation name must be 1-100 of A-Z a-z 0-9 _ -", [name.slice(0, 120)]);
}

/** The conversation the message goes to, and whether it is to be created. */
function target(req: SubmitRequest): { urn?: Urn; named: boolean } {
  if (req.conversationUrn) return { urn: req.conversationUrn as Urn, named: false };
  const tenant = tenantUrn(req.tenant);
  const id =
    req.conversationName ??
    (req.idempotencyKey ? idempotencyId(req.tenant, req.idempotencyKey, req.idempotencyScope) : undefined);
  if (id === undefined) return { named: false };
  return { urn: childUrn(tenant, { pkg: "common", type: "Conversation", id }), named: true };
}

export async function submit(
  d: EngineDeps,
  access: ResourceAccess,
  teams: Teams,
  req: SubmitRequest,
): Promise<Submitted> {
  // The limits every channel keeps (domain/input-limits.ts), checked again before the first write.
  checkRequestText(req.text);
  checkOptions(req);
  const tenant = tenantUrn(req.tenant);
  const principal = principalOf(
    req.actor,
    { tenant: req.tenant, ...(req.roles ? { roles: req.roles } : {}) },
    req.tenant,
  );
  const to = target(req);
  let existing: unknown;
  // The message goes under the conversation (or a new one under the tenant): checked before any write.
  if (req.conversationUrn) {
    await access.authorize(principal, "resource.write", req.conversationUrn);
    if (qualifiedType(lastElement(req.conversationUrn)) !== "common.Conversation")
      throw new ValidationError(
        `${req.conversationUrn} is not a conversation: pass a common.Conversation URN`,
      );
    existing = await d.resources.get(req.conversationUrn);
    if (!existing) throw new NotFoundError("Conversation", req.conversationUrn);
  } else if (to.urn) {
    // A named one (its URN is ours, under the caller's tenant): continued if there, else created.
    existing = await d.resources.get(to.urn);
    await access.authorize(principal, "resource.write", existing ? to.urn : tenant);
  } else {
    await access.authorize(principal, "resource.write", tenant);
  }
  // Somebody is there to take the request's tasks (a tenant's first request: its default team).
  await teams.ensure(req.tenant);
  // The tenant's resource, written by its first request (a read per request until this process knows it).
  if (!teams.stored(req.tenant)) {
    if (!(await d.resources.get(tenant)))
      await d.resources.put({ meta: withMeta({ type: "common.Tenant", name: req.tenant, id: req.tenant }) });
    teams.storedNow(req.tenant);
  }
  let conversationUrn = to.urn;
  let messageUrn: Urn;
  if (!conversationUrn) {
    const id = d.newId();
    const meta = withMeta({ type: "common.Conversation", name: id, id, parent: tenant });
    conversationUrn = meta.id;
    // A new conversation and its first message are written at once (one object store round trip
    // on the request's way in, not two): both are new names, and nothing refers to either until the
    // plan marker below; a crash between leaves one unreferenced, never a request half recorded.
    // Whose it is comes from the authenticated caller, never from the request.
    [, messageUrn] = await Promise.all([
      d.resources.put({ meta, startedBy: req.actor.id, ...(req.title ? { title: req.title } : {}) }),
      putMessage(d, conversationUrn, req),
    ]);
  } else if (to.named && !existing) {
    const { won, conversation } = await claimNamed(d, conversationUrn, req);
    if (won) {
      // Ours: the conversation and the message at once, as above (a retry finds the claim ours again).
      [, messageUrn] = await Promise.all([
        d.resources.put(conversation),
        putMessage(d, conversationUrn, req),
      ]);
    } else {
      // Lost the race: the conversation is somebody's now; this message continues it, if it may.
      await d.resources.put(conversation);
      await access.authorize(principal, "resource.write", conversationUrn);
      messageUrn = await putMessage(d, conversationUrn, req);
    }
  } else {
    messageUrn = await putMessage(d, conversationUrn, req);
  }
  const command: PlanCommand = { messageUrn, mode: req.mode ?? "eager" };
  const listed: RequestEntry = {
    tenant: req.tenant,
    rootTaskId: rootTaskUrn(messageUrn),
    actor: req.actor.id,
    ...(req.actor.name ? { actorName: req.actor.name } : {}),
    ...(req.actor.capabilities?.length ? { actorCapabilities: req.actor.capabilities } : {}),
    at: d.clock().toISOString(),
    text: req.text,
    mode: command.mode,
  };
  if (await markForPlanning(d, command, listed)) await send(d, COMMANDS.plan, command, messageUrn);
  // The caller's answer (a 202, an A2A ACK) says the request is kept: on disk before it leaves.
  await d.untilDurable();
  return { conversationUrn, messageUrn, rootTaskId: rootTaskUrn(messageUrn) };
}

/**
 * Claims a named conversation for `req.actor`, unless somebody else's claim on it came first
 * (`won` false). Either way answers the conversation to write: the claimant's (what they would
 * have written: they may have died before).
 */
async function claimNamed(
  d: EngineDeps,
  urn: Urn,
  req: SubmitRequest,
): Promise<{ won: boolean; conversation: { meta: Meta; startedBy: string; title?: string } }> {
  const claim = { startedBy: req.actor.id, ...(req.title ? { title: req.title } : {}) };
  let won = true;
  let data = claim;
  try {
    await d.state.transact([
      {
        op: "put",
        record: {
          key: conversationClaimKey(urn),
          kind: "conversation",
          updatedAt: d.clock().toISOString(),
          data,
        },
        expectedVersion: 0,
      },
    ]);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    const held = await d.state.get<typeof claim>(conversationClaimKey(urn));
    if (!held) throw e;
    data = held.data;
    won = data.startedBy === req.actor.id;
  }
  const element = lastElement(urn);
  const meta = withMeta({
    type: "common.Conversation",
    name: element.id,
    id: element.id,
    parent: tenantUrn(req.tenant),
  });
  return { won, conversation: { meta, ...data } };
}

/** Writes the message (named after the key, when there is one) unless it is there; returns its URN. */
async function putMessage(d: EngineDeps, conversationUrn: Urn, req: SubmitRequest): Promise<Urn> {
  const keyed = req.idempotencyKey
    ? idempotencyId(req.tenant, req.idempotencyKey, req.idempotencyScope)
    : undefined;
  const id = keyed ?? d.newId();
  const meta = withMeta({ type: "common.Message", name: id, id, parent: conversationUrn });
  if (keyed) {
    const there = await d.resources.getAs("common.Message", meta.id);
    if (there) {
      if (there.role !== "user" || there.content !== req.text)
        throw new ConflictError(
          "This idempotency key was used for another message: send a new key for a new message",
          { messageUrn: meta.id },
        );
      return meta.id;
    }
  }
  await d.resources.put({ meta, role: "user", content: req.text });
  d.faults?.hit("after-write", "submit");
  return meta.id;
}

/**
 * The plan marker (durable before the command is sent: if the command is lost, the watchdog sends
 * it again), and the request's lines in the request index, together. True when the command is to
 * be sent now (see the file's header).
 */
async function markForPlanning(d: EngineDeps, command: PlanCommand, listed: RequestEntry): Promise<boolean> {
  const key = planMarkerKey(command.messageUrn);
  try {
    await d.state.transact([
      {
        op: "put",
        record: { key, kind: "plan", status: "requested", updatedAt: listed.at, data: command },
        expectedVersion: 0,
      },
      ...requestIndexOps(listed),
    ]);
    return true;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    const marker = await d.state.get<PlanCommand>(key);
    return (
      marker?.status === "requested" &&
      d.clock().getTime() - Date.parse(marker.updatedAt) >= PLAN_RESEND_AFTER_MS
    );
  }
}
