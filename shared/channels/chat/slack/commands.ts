import { isWithin, tenantUrn } from "../../../domain/urn.ts";
import { commandKey, personOf, rootTaskOf, slackConversationName, slackSubmitKey } from "./identity.ts";
import { HELP_TEXT, type Inbound, refusalText, startWork, subscribeThread, throttled } from "./inbound.ts";

/**
 * The slash command, once verified and its workspace known. How to drive it (routes.ts does):
 *
 *   const reply = await onCommand(x, form, rawBody);   // the ephemeral reply Slack shows the person
 *
 *   /arbor <request>          starts a request; its thread is started by Arbor's first message in
 *                             the channel (the progress message), whose ts the surface remembers
 *   /arbor help               the help
 *   /arbor watch <task URN>   follows a request started elsewhere (the HTTP API, the CLI) in this
 *                             channel, once the engine says this person may read it
 *
 * The idempotency key is the command's trigger id (or a hash of the body): a repeated delivery
 * starts nothing new. The reply is the HTTP response itself: no Slack call is made before the ack.
 */
export interface CommandForm {
  team_id: string;
  channel_id: string;
  user_id: string;
  text: string;
  trigger_id?: string | undefined;
}

export interface CommandReply {
  response_type: "ephemeral";
  text: string;
}

const reply = (text: string): CommandReply => ({ response_type: "ephemeral", text });

export async function onCommand(x: Inbound, form: CommandForm, rawBody: string): Promise<CommandReply> {
  const person = personOf(x.team, form.user_id, x.ws);
  const text = form.text.trim();
  if (text === "" || /^help$/i.test(text)) return reply(HELP_TEXT);
  const limited = throttled(x, person);
  if (limited) return reply(limited);
  try {
    const watch = /^watch\s+(\S+)\s*$/i.exec(text);
    if (watch) return await startWatching(x, form, watch[1] as string);
    const key = commandKey(form.trigger_id, rawBody);
    await startWork(x, person, {
      channel: form.channel_id,
      threadTs: undefined,
      text,
      key: slackSubmitKey(x.team, key),
      conversation: { name: slackConversationName(x.team, form.channel_id, key) },
    });
    return reply(
      `On it: “${text.length > 200 ? `${text.slice(0, 199)}…` : text}”. Its progress, questions and answer come in a thread in this channel (invite the app here if nothing shows).`,
    );
  } catch (error) {
    const message = refusalText(error);
    if (!message) throw error;
    return reply(message);
  }
}

async function startWatching(x: Inbound, form: CommandForm, urn: string): Promise<CommandReply> {
  const person = personOf(x.team, form.user_id, x.ws);
  const root = rootTaskOf(urn);
  const notFound = reply(
    `There is no request ${urn} that you can follow here: give the task URN the HTTP API returned (rootTaskId).`,
  );
  // Another tenant's request is answered as one that is not there.
  if (!root || !isWithin(root, tenantUrn(x.ws.tenant))) return notFound;
  const asker = { actor: person.actor, caller: person.caller };
  if (!(await x.parts.engine.mayRead(root, asker)))
    return reply(
      `Refused: ${person.actor.id} may not read ${root}. Only the person who started it, or an admin, may follow it; ask an admin to map your Slack user to your Arbor id (settings \`users\`).`,
    );
  const { view } = await x.parts.engine.result(root, asker);
  if (!view) return notFound;
  await subscribeThread(x, root, form.channel_id, undefined);
  return reply(
    `Following “${view.title}” (${view.status}) in this channel: its progress, questions and answer come in a thread.`,
  );
}
