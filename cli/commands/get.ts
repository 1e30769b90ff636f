import { type Command, REMOTE_NOTE, UsageError } from "../command.ts";

export const get: Command = {
  name: "get",
  usage: ["get <urn>"],
  summary: "print one resource as JSON",
  examples: ["arbor get cld:common.Tenant.local/common.Conversation.01J0000000000000000000000"],
  notes: [REMOTE_NOTE],

  async local({ args, write }) {
    const urn = args[0];
    if (!urn) throw new UsageError();
    const { withRuntime } = await import("../lib/local.ts");
    const { ArborError } = await import("../../shared/kernel/errors.ts");
    const { parseUrn } = await import("../../shared/domain/urn.ts");
    parseUrn(urn); // a malformed or huge one is said so in a line, as ls says it
    return withRuntime(get, async (rt) => {
      const doc = await rt.resources.get(urn);
      if (!doc)
        throw new ArborError("NOT_FOUND", `No resource ${urn}. List what exists with: arbor ls --all`);
      write(JSON.stringify(doc, null, 2));
    });
  },

  async remote({ args, write }, remote) {
    if (!args[0]) throw new UsageError();
    const { remoteGet } = await import("../lib/remote-commands.ts");
    return remoteGet(remote, args[0], write);
  },
};
