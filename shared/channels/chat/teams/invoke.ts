import { type Actor, withCapabilities } from "../../../domain/events.ts";
import { DisplayNameSchema } from "../../../domain/resources.ts";
import { lastElement, qualifiedType } from "../../../domain/urn.ts";
import type { Engine } from "../../../engine/engine.ts";
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from "../../../kernel/errors.ts";
import type { TeamsTenant } from "../../../notify/chat/types.ts";
import { chatReply } from "../chat-parts.ts";
import { ANSWER_VERB, CARD_CONTENT_TYPE, questionCard, REFRESH_VERB, threadQuestion } from "./cards.ts";

/**
 * Who a Teams person is in Arbor, and the answer to an Adaptive Card's Action.Execute (the
 * `adaptiveCard/action` invoke). How to drive it:
 *
 *   const who = personOf(tenantSettings, activity.from.aadObjectId);   // undefined: not a person
 *   const body = await cardAction(engine, who, activity.value);        // the invoke's response body
 *   return c.json(body, 200);
 *
 * A person is `settings.users[aadObjectId]` (the Arbor actor their API key has) or
 * `user_teams.<aadObjectId>`; `admins` (actor ids or aad object ids) get the `admin` role, everyone
 * `defaultRoles`. `arbor.answer` calls engine.respond as that person (the policy decides) and
 * answers with the refreshed question card (who answered what); `arbor.refresh` (the card's
 * refresh block) answers with the card as the question stands, for whoever may read it. A
 * refusal or an answer that does not fit is an error response (`application/vnd.microsoft.error`)
 * and nothing is answered; a question already answered shows who answered it.
 */
export interface Person {
  actor: Actor;
  tenant: string;
  roles: string[];
}

const AAD_ID = /^[A-Za-z0-9-]{1,64}$/;

export function personOf(
  tenant: TeamsTenant,
  aadObjectId: string | undefined,
  /** Teams's name for them (the activity's `from.name`), unless the settings name them. */
  platformName?: string,
): Person | undefined {
  if (!aadObjectId || !AAD_ID.test(aadObjectId)) return undefined;
  const id = tenant.users[aadObjectId] ?? `user_teams.${aadObjectId}`;
  const admin = tenant.admins.includes(aadObjectId) || tenant.admins.includes(id);
  const roles = [...new Set([...tenant.defaultRoles, ...(admin ? ["admin"] : [])])];
  const names = (key: string) =>
    tenant.names && Object.hasOwn(tenant.names, key) ? tenant.names[key] : undefined;
  const given = DisplayNameSchema.safeParse(platformName);
  const name = names(aadObjectId) ?? names(id) ?? (given.success ? given.data : undefined);
  const actor = withCapabilities({ id, kind: "human", ...(name ? { name } : {}) }, roles);
  return { actor, tenant: tenant.tenant, roles };
}

export type InvokeBody =
  | { statusCode: 200; type: typeof CARD_CONTENT_TYPE; value: Record<string, unknown> }
  | {
      statusCode: 400 | 403 | 404 | 409 | 500 | 503;
      type: "application/vnd.microsoft.error";
      value: { code: string; message: string };
    };

const error = (statusCode: 400 | 403 | 404 | 409 | 500 | 503, code: string, message: string): InvokeBody => ({
  statusCode,
  type: "application/vnd.microsoft.error",
  value: { code, message: message.slice(0, 500) },
});

interface ActionData {
  interaction?: unknown;
  option?: unknown;
  choice?: unknown;
  value?: unknown;
}

const isInteraction = (urn: string) => {
  try {
    return qualifiedType(lastElement(urn)) === "uip.Interaction";
  } catch {
    return false; // not a URN
  }
};

const str = (v: unknown, max: number) => (typeof v === "string" && v.length <= max ? v : undefined);

/** The invoke's answer for an Action.Execute (see the header). */
export async function cardAction(engine: Engine, who: Person, value: unknown): Promise<InvokeBody> {
  const action = (value as { action?: { verb?: unknown; data?: unknown } } | undefined)?.action;
  const verb = action?.verb;
  const data = (action?.data ?? {}) as ActionData;
  const urn = str(data.interaction, 1000);
  if ((verb !== ANSWER_VERB && verb !== REFRESH_VERB) || !urn)
    return error(400, "BadRequest", "This card action is not one Arbor knows.");
  if (!isInteraction(urn)) return error(400, "BadRequest", "This card does not name a question.");
  const asker = { actor: who.actor, caller: { tenant: who.tenant, roles: who.roles } };
  try {
    if (verb === ANSWER_VERB) {
      const option = str(data.option, 100) ?? str(data.choice, 100);
      // An empty text field is no answer (a composite card sends it along with the choice).
      const input = option && data.value === "" ? undefined : str(data.value, 100_000);
      await engine.respond(
        urn,
        {
          ...(option ? { selectedOptionId: option } : {}),
          ...(input !== undefined ? { inputValue: input } : {}),
        },
        who.actor,
        asker.caller,
      );
    } else if (!(await engine.mayRead(urn, asker))) {
      return error(403, "Forbidden", "You may not see this question.");
    }
  } catch (e) {
    if (e instanceof ConflictError) {
      // Answered already (or no longer waiting): the card as it stands says by whom.
      return (await currentCard(engine, urn)) ?? error(409, "Conflict", e.message);
    }
    if (e instanceof ForbiddenError) return error(403, "Forbidden", "You may not answer this question.");
    if (e instanceof ValidationError) return error(400, "BadRequest", e.message);
    if (e instanceof NotFoundError) return error(404, "NotFound", "This question is no longer there.");
    // Anything else the person may read (chat-parts.ts): its text; the rest is thrown (logged, a 500).
    const told = chatReply(e, false);
    if (told)
      return told.retryable
        ? error(503, "ServiceUnavailable", told.text)
        : error(400, "BadRequest", told.text);
    throw e;
  }
  return (await currentCard(engine, urn)) ?? error(404, "NotFound", "This question is no longer there.");
}

async function currentCard(engine: Engine, urn: string): Promise<InvokeBody | undefined> {
  const interaction = await engine.deps.resources.getAs("uip.Interaction", urn);
  if (!interaction) return undefined;
  return { statusCode: 200, type: CARD_CONTENT_TYPE, value: questionCard(threadQuestion(interaction)) };
}
