import { type Command, REMOTE_NOTE, UsageError } from "../command.ts";

export const events: Command = {
  name: "events",
  usage: ["events <task-urn>", "events --all [--from <position>] [--max <n>]", "events --prefix <urn>"],
  summary:
    "print the event log of one stream (a task URN), or of every stream, or follow resource writes below a URN",
  description:
    "Prints the event log of one stream (a task URN). With --all, the global log of the data folder: every stream's events in the order they were committed, each with its position, a page at a time (--from goes on after a position). With --prefix, follows a running Arbor's resource writes at and below a URN (needs ARBOR_URL and ARBOR_KEY).",
  options: [
    ["--all", "every stream's events, in the global log's order"],
    ["--from <position>", "with --all: go on after this position (a line's first column)"],
    ["--max <n>", "with --all: at most this many events (1 to 1000, default 100)"],
    ["--prefix <urn>", "follow the resource writes at and below this URN"],
  ],
  examples: [
    "arbor events cld:common.Tenant.local/common.Conversation.c1/common.Message.m1/plan.Task.t1",
    "arbor events --all --max 20",
    "ARBOR_URL=http://127.0.0.1:8787 ARBOR_KEY=arbor_... arbor events --prefix cld:common.Tenant.acme",
  ],
  notes: [REMOTE_NOTE],

  async local({ args, options, write }) {
    if (options.prefix)
      throw new UsageError(
        "arbor events --prefix <urn> follows a running Arbor: set ARBOR_URL (arbor serve's address) and ARBOR_KEY",
      );
    const stream = args[0];
    if (options.all) {
      if (stream) throw new UsageError("arbor events --all reads every stream: give it no URN");
      return globalLog(options.from, options.max, write);
    }
    if (options.from !== undefined || options.max !== undefined)
      throw new UsageError("--from and --max go with --all");
    if (!stream) throw new UsageError();
    const { withRuntime } = await import("../lib/local.ts");
    const { note, printable } = await import("../lib/render.ts");
    const { parseUrn } = await import("../../shared/domain/urn.ts");
    const { ArborError } = await import("../../shared/kernel/errors.ts");
    parseUrn(stream); // a stream is a task's URN: anything else is said so, as ls and a remote Arbor say it
    return withRuntime(events, async (rt) => {
      const events = await rt.state.readStream(stream);
      // No event: no such task (a task's stream starts with TaskCreated), as a remote Arbor's 404 says.
      if (events.length === 0)
        throw new ArborError(
          "NOT_FOUND",
          `No events in stream ${printable(stream)}: there is no such task here. List what exists with: arbor ls --all`,
        );
      for (const e of events)
        write(`${String(e.seq).padStart(4)} ${e.at} ${e.type.padEnd(26)} ${e.actor.id} ${note(e.id)}`);
    });
  },

  async remote({ args, options, write }, remote) {
    if (options.all)
      throw new UsageError(
        "arbor events --all reads the data folder's global log, not a remote Arbor's: unset ARBOR_URL",
      );
    if (options.prefix) {
      const { followResourceEvents } = await import("../lib/resource-events.ts");
      return followResourceEvents(remote.config, options.prefix, write);
    }
    if (!args[0]) throw new UsageError();
    const { remoteEvents } = await import("../lib/remote-commands.ts");
    return remoteEvents(remote, args[0], write);
  },
};

/** A page of the global log, a line per event; the command that reads on when there may be more. */
async function globalLog(from: string | undefined, max: string | undefined, write: (line: string) => void) {
  const limit = max === undefined ? 100 : Number(max);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new UsageError(`--max takes a whole number from 1 to 1000, not ${JSON.stringify(max)}`);
  const { withRuntime } = await import("../lib/local.ts");
  const { note, printable } = await import("../lib/render.ts");
  return withRuntime(events, async (rt) => {
    const page = await rt.state.readAll({ ...(from === undefined ? {} : { from }), limit });
    for (const e of page.events)
      write(
        `${e.position} ${e.recordedAt} ${e.type.padEnd(26)} ${e.actor.id} ${printable(e.streamId)}#${e.seq} ${note(e.id)}`,
      );
    if (page.events.length === limit && page.next) write(`# more: arbor events --all --from ${page.next}`);
  });
}
