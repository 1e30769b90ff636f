import { createHash } from "node:crypto";
import { type Actor, withCapabilities } from "../../../domain/events.ts";
import type { SlackSettings, SlackThread, SlackWorkspace } from "../../../notify/chat/types.ts";
import type { Caller } from "../../../store/resource-access.ts";

/**
 * Who a Slack request is in Arbor, and the names derived from where it was said. How to drive it:
 *
 *   const ws = workspaceOf(settings, teamId);          // undefined: a workspace we do not serve
 *   const who = personOf(teamId, userId, ws);          // { actor, caller: { tenant, roles } }
 *   slackThreadId(team, channel, threadTs ?? rootTaskUrn);    // the notify subscription's id
 *   slackConversationName(team, channel, threadTs);   // one conversation per thread
 *
 * A person is `users[<user id>]` (or `users["<team>.<user>"]`) when the settings map them to the
 * Arbor actor their API key has, else `user_slack.<team>.<user>`; `admins` (Slack user ids or
 * Arbor actor ids) get the `admin` role on top of `defaultRoles`.
 */
export interface SlackPerson {
  actor: Actor;
  caller: Required<Caller>;
}

export function workspaceOf(settings: SlackSettings | undefined, team: unknown): SlackWorkspace | undefined {
  if (!settings || typeof team !== "string") return undefined;
  return Object.hasOwn(settings.workspaces, team) ? settings.workspaces[team] : undefined;
}

export function personOf(team: string, user: string, ws: SlackWorkspace): SlackPerson {
  const own = (key: string) => (Object.hasOwn(ws.users, key) ? ws.users[key] : undefined);
  const mapped = own(`${team}.${user}`) ?? own(user);
  const id = mapped ?? `user_slack.${team}.${user}`;
  const admin = ws.admins.includes(user) || ws.admins.includes(id) || ws.admins.includes(`${team}.${user}`);
  const roles = [...new Set([...ws.defaultRoles, ...(admin ? ["admin"] : [])])];
  const names = (key: string) => (ws.names && Object.hasOwn(ws.names, key) ? ws.names[key] : undefined);
  const name = names(`${team}.${user}`) ?? names(user) ?? names(id);
  const actor = withCapabilities({ id, kind: "human", ...(name ? { name } : {}) }, roles);
  return { actor, caller: { tenant: ws.tenant, roles } };
}

const digest = (...parts: string[]) =>
  createHash("sha256").update(parts.join("\u0000")).digest("base64url").slice(0, 32);

/** The notify subscription's id: one per request and thread (or channel, before its head is posted). */
export const slackThreadId = (team: string, channel: string, threadTsOrRoot: string) =>
  `slack_${digest(team, channel, threadTsOrRoot)}`;

/** The conversation a thread is: the same for every message in it (a URN id: [A-Za-z0-9_-]). */
export const slackConversationName = (team: string, channel: string, threadTs: string) =>
  `slack_${digest(team, channel, threadTs)}`;

/** The idempotency key of a submit made for a Slack request (an event, or a command's trigger). */
export const slackSubmitKey = (team: string, id: string) => `slack:${team}:${id}`;

export const commandKey = (triggerId: string | undefined, rawBody: string) =>
  triggerId ? `cmd:${triggerId}` : `cmd:${digest(rawBody)}`;

export function slackThread(
  tenant: string,
  team: string,
  channel: string,
  threadTs: string | undefined,
  rootTaskUrn: string,
): SlackThread {
  return {
    kind: "slack",
    id: slackThreadId(team, channel, threadTs ?? rootTaskUrn),
    tenant,
    team,
    channel,
    ...(threadTs ? { threadTs } : {}),
  };
}

/** The request a task URN belongs to (its root task). */
export { rootTaskOf } from "../../../domain/urn.ts";
