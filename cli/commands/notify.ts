import { type Command, REMOTE_NOTE } from "../command.ts";

export const notify: Command = {
  name: "notify",
  usage: [
    "notify ls [--dead | --status pending|sending|delivered|dead]",
    "notify redrive <delivery-id>",
    "notify redrive --all",
  ],
  summary: "webhook deliveries (callbacks, A2A push): list them, send dead ones again",
  description:
    "ls lists the webhook deliveries (HTTP callbacks, A2A push) of the local data folder, dead ones by default; redrive sends a dead delivery again (a new hour of retries), --all every dead one.",
  options: [
    ["--dead", "dead deliveries only (the default)"],
    ["--status <s>", "pending, sending, delivered or dead"],
    ["--all", "redrive: every dead delivery"],
  ],
  examples: ["arbor notify ls --status pending", "arbor notify redrive --all"],
  notes: [`${REMOTE_NOTE} It needs an admin's key there.`],

  async local({ args, options, write }) {
    const { withRuntime } = await import("../lib/local.ts");
    const { notifyCommand } = await import("../lib/notify.ts");
    return withRuntime(notify, (rt) =>
      notifyCommand(
        args[0],
        args[1],
        { dead: options.dead, status: options.status, all: options.all },
        rt.state,
        () => new Date(),
        write,
      ),
    );
  },

  async remote({ args, options, write }, remote) {
    const { notifyRemote } = await import("../lib/notify.ts");
    return notifyRemote(
      args[0],
      args[1],
      { dead: options.dead, status: options.status, all: options.all },
      remote,
      write,
    );
  },
};
