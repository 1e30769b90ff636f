import { isWithin, lastElement, qualifiedType, tenantUrn } from "../../../domain/urn.ts";
import type { InteractionResponse } from "../../../engine/interactions.ts";
import { ACTION_OPEN, ACTION_OPTION, parseOpenValue, parseOptionValue } from "./blocks.ts";
import { slackClient } from "./client.ts";
import { personOf, type SlackPerson } from "./identity.ts";
import { EPHEMERAL_TIMEOUT_MS, FOREIGN_TEXT, type Inbound, refusalText, tell, throttled } from "./inbound.ts";
import {
  answerModal,
  CHOICE_BLOCK,
  MODAL_CALLBACK,
  parseModalMeta,
  readSubmission,
  VALUE_BLOCK,
} from "./modals.ts";

/**
 * Interactivity payloads, once verified and their workspace known. How to drive it (routes.ts does):
 *
 *   await onBlockActions(x, payload);            // a button: answer, or open the modal (views.open)
 *   const body = await onViewSubmission(x, payload);   // {} closes the modal; {response_action:"errors"}
 *
 * Who clicked is the actor (personOf), and engine.respond's policy decides whether they may
 * answer: a refusal writes nothing and is told to them ephemerally (a button) or on the modal's
 * field (a submission). The question's message is updated by the thread sync once the answer is
 * recorded (who answered what), not here.
 */
interface ActionPayload {
  type: "block_actions";
  user: { id: string; team_id?: string };
  trigger_id?: string;
  channel?: { id?: string };
  container?: { channel_id?: string; thread_ts?: string; message_ts?: string };
  message?: { ts?: string; thread_ts?: string };
  actions: { action_id?: string; value?: string }[];
}

interface SubmissionPayload {
  type: "view_submission";
  user: { id: string; team_id?: string };
  view: { callback_id?: string; private_metadata?: string; state?: { values?: unknown } };
}

function interactionUrn(x: Inbound, urn: string): string | undefined {
  try {
    if (qualifiedType(lastElement(urn)) !== "uip.Interaction") return undefined;
  } catch {
    return undefined;
  }
  return isWithin(urn, tenantUrn(x.ws.tenant)) ? urn : undefined;
}

async function answer(x: Inbound, person: SlackPerson, urn: string, response: InteractionResponse) {
  await x.parts.engine.respond(urn, response, person.actor, person.caller);
}

export async function onBlockActions(x: Inbound, p: ActionPayload): Promise<void> {
  const action = p.actions[0];
  if (!action?.action_id) return;
  const person = personOf(x.team, p.user.id, x.ws);
  const channel = p.channel?.id ?? p.container?.channel_id;
  const threadTs = p.message?.thread_ts ?? p.container?.thread_ts ?? p.message?.ts ?? p.container?.message_ts;
  const where = { channel: channel ?? "", user: p.user.id, threadTs };
  const say = (text: string) => (channel ? tell(x, where, text) : Promise.resolve());
  if (p.user.team_id !== undefined && p.user.team_id !== x.team) return say(FOREIGN_TEXT);
  const limited = throttled(x, person);
  if (limited) return say(limited);
  try {
    if (action.action_id.startsWith(`${ACTION_OPTION}.`)) {
      const v = parseOptionValue(action.value);
      const urn = v && interactionUrn(x, v.urn);
      if (!v || !urn) return say("That button does not name a question of this workspace's requests.");
      await answer(x, person, urn, { selectedOptionId: v.optionId });
      return;
    }
    if (action.action_id.startsWith(`${ACTION_OPEN}.`)) {
      const v = parseOpenValue(action.value);
      const urn = v && interactionUrn(x, v.urn);
      if (!v || !urn || !p.trigger_id)
        return say("That button does not name a question of this workspace's requests.");
      // Only whoever may answer sees the form (the same people the policy lets read it).
      if (!(await x.parts.engine.mayRead(urn, { actor: person.actor, caller: person.caller })))
        return say(
          `Refused: ${person.actor.id} may not answer this question. Only the person who started the conversation, or an admin, may.`,
        );
      const interaction = await x.parts.engine.deps.resources.getAs("uip.Interaction", urn);
      if (!interaction) return say("That question is not there any more.");
      if (interaction.status !== "pending") return say("That question was already answered.");
      // views.open must use the trigger within 3 s of the click: made here, bounded.
      const client = slackClient(x.ws.botToken, x.slack.apiUrl, { timeoutMs: EPHEMERAL_TIMEOUT_MS });
      try {
        await client.views.open({
          trigger_id: p.trigger_id,
          view: answerModal(interaction, { urn, mode: v.mode, channel, threadTs }),
        });
      } catch (error) {
        // An expired trigger, Slack slow: the person clicks again.
        x.log.warn("slack: views.open failed", { team: x.team, error: (error as Error).message });
        return say("The form could not be opened: click the button again.");
      }
    }
  } catch (error) {
    const message = refusalText(error);
    if (message) return say(message);
    throw error;
  }
}

export type SubmissionReply =
  | Record<string, never>
  | { response_action: "errors"; errors: Record<string, string> };

export async function onViewSubmission(x: Inbound, p: SubmissionPayload): Promise<SubmissionReply> {
  if (p.view.callback_id !== MODAL_CALLBACK) return {};
  const meta = parseModalMeta(p.view.private_metadata);
  const urn = meta && interactionUrn(x, meta.urn);
  // An error is shown on a field of the form: the choice in a choosing form, else the value.
  const field = meta?.mode === "select" ? CHOICE_BLOCK : VALUE_BLOCK;
  const refuse = (text: string): SubmissionReply => ({
    response_action: "errors",
    errors: { [field]: text },
  });
  if (!meta || !urn) return refuse("This form does not name a question of this workspace's requests.");
  if (p.user.team_id !== undefined && p.user.team_id !== x.team) return refuse(FOREIGN_TEXT);
  const person = personOf(x.team, p.user.id, x.ws);
  const limited = throttled(x, person);
  if (limited) return refuse(limited);
  const interaction = await x.parts.engine.deps.resources.getAs("uip.Interaction", urn);
  if (!interaction) return refuse("That question is not there any more.");
  const read = readSubmission(interaction, meta, p.view.state?.values);
  if ("errors" in read) return { response_action: "errors", errors: read.errors };
  try {
    await answer(x, person, urn, read.response);
    return {};
  } catch (error) {
    const message = refusalText(error);
    if (message) return refuse(message.slice(0, 2000));
    throw error;
  }
}

export type { ActionPayload, SubmissionPayload };
