import { type Command, REMOTE_NOTE } from "../command.ts";

export const ls: Command = {
  name: "ls",
  usage: ["ls [urn] [--all]"],
  summary: "list the resources directly below a URN (default: your tenant)",
  options: [["--all", "every level below, not only the first"]],
  examples: ["arbor ls --all"],
  notes: [REMOTE_NOTE],

  async local({ args, options, write }) {
    const { withRuntime } = await import("../lib/local.ts");
    const { parseUrn, tenantUrn } = await import("../../shared/domain/urn.ts");
    const { note } = await import("../lib/render.ts");
    return withRuntime(ls, async (rt) => {
      const urn = args[0] ?? tenantUrn(rt.tenant);
      parseUrn(urn);
      const urns = options.all ? await rt.resources.descendantUrns(urn) : await rt.resources.childUrns(urn);
      const docs = await rt.resources.getMany(urns);
      for (const doc of docs)
        if (doc) write(`${doc.meta.type.padEnd(20)} ${doc.meta.name.padEnd(28)} ${note(doc.meta.id)}`);
      if (urns.length === 0) write(note(`Nothing below ${urn}. Try: arbor demo`));
    });
  },

  async remote({ args, options, write }, remote) {
    const { remoteLs } = await import("../lib/remote-commands.ts");
    return remoteLs(remote, args[0], options.all, write);
  },
};
