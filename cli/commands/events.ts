import { type Command, REMOTE_NOTE, UsageError } from "../command.ts";

export const events: Command = {
  name: "events",
  usage: ["events <task-urn>", "events --prefix <urn>"],
  summary: "print the event log of one stream (a task URN), or follow resource writes below a URN",
  description:
    "Prints the event log of one stream (a task URN). With --prefix, follows a running Arbor's resource writes at and below a URN (needs ARBOR_URL and ARBOR_KEY).",
  options: [["--prefix <urn>", "follow the resource writes at and below this URN"]],
  examples: [
    "arbor events cld:common.Tenant.local/common.Conversation.c1/common.Message.m1/plan.Task.t1",
    "ARBOR_URL=http://127.0.0.1:8787 ARBOR_KEY=arbor_... arbor events --prefix cld:common.Tenant.acme",
  ],
  notes: [REMOTE_NOTE],

  async local({ args, options, write }) {
    if (options.prefix)
      throw new UsageError(
        "arbor events --prefix <urn> follows a running Arbor: set ARBOR_URL (arbor serve's address) and ARBOR_KEY",
      );
    const stream = args[0];
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
    if (options.prefix) {
      const { followResourceEvents } = await import("../lib/resource-events.ts");
      return followResourceEvents(remote.config, options.prefix, write);
    }
    if (!args[0]) throw new UsageError();
    const { remoteEvents } = await import("../lib/remote-commands.ts");
    return remoteEvents(remote, args[0], write);
  },
};
