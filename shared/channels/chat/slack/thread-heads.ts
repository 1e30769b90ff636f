import { ConflictError } from "../../../kernel/errors.ts";
import type { StateStore } from "../../../ports/state-store.ts";

/**
 * Threads Arbor started itself (a slash command's request, a watched request): the first message
 * it posts in the channel heads the thread, and a follow-up in that thread must continue the
 * request's conversation, which no hash of the thread's ts can name. How to drive it:
 *
 *   await rememberThreadHead(state, clock, { team, channel, ts }, { tenant, conversationUrn, rootTaskUrn });
 *   const head = await threadHead(state, team, channel, threadTs);   // undefined: not one of ours
 *
 * One state record per head (kind `slack-head`, key `slack-head#<team>#<channel>#<ts>`), written
 * once by the surface right after it posted the head (a conditional create: writing it again is a
 * no-op), read by the routes when a message arrives in a thread.
 */
export const HEAD_KIND = "slack-head";
const headKey = (team: string, channel: string, ts: string) => `slack-head#${team}#${channel}#${ts}`;

export interface ThreadHead {
  tenant: string;
  conversationUrn: string;
  rootTaskUrn: string;
}

export async function rememberThreadHead(
  state: StateStore,
  clock: () => Date,
  where: { team: string; channel: string; ts: string },
  head: ThreadHead,
): Promise<void> {
  try {
    await state.transact([
      {
        op: "put",
        record: {
          key: headKey(where.team, where.channel, where.ts),
          kind: HEAD_KIND,
          updatedAt: clock().toISOString(),
          data: head,
        },
        expectedVersion: 0,
      },
    ]);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e; // already remembered
  }
}

export async function threadHead(
  state: StateStore,
  team: string,
  channel: string,
  ts: string,
): Promise<ThreadHead | undefined> {
  return (await state.get<ThreadHead>(headKey(team, channel, ts)))?.data;
}
