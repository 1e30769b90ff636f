import { type Command, REMOTE_NOTE, TENANT_LOCAL_OR_REMOTE, UsageError } from "../command.ts";

export const team: Command = {
  name: "team",
  usage: ["team apply <file> [--yes] [--dry-run] [--tenant <tenant>]", "team show [--tenant <tenant>]"],
  summary: "make a tenant's team what a team file says (the change shown, then applied), or print it",
  description:
    "apply makes a tenant's team what a team file says: the change is shown, then applied once you say yes; show prints the tenant's team as a team file.",
  options: [
    ["--yes, -y", "apply without asking (needed when no terminal can be asked)"],
    ["--dry-run", "show the change only"],
    TENANT_LOCAL_OR_REMOTE,
  ],
  examples: ["arbor team apply team.json --dry-run", "arbor team show > team.json"],
  notes: [`${REMOTE_NOTE} It needs an admin's key there.`],

  async local({ args, options, write }) {
    const { localConfig } = await import("../lib/local.ts");
    const config = await localConfig(team);
    const tenant = options.tenant ?? config.tenant;
    const { teamApplyLocal, teamShowLocal } = await import("../lib/team.ts");
    if (args[0] === "show") return teamShowLocal(config, tenant, write);
    if (args[0] !== "apply") throw new UsageError();
    return teamApplyLocal(
      config,
      tenant,
      { file: args[1], yes: options.yes, dryRun: options["dry-run"] },
      write,
    );
  },

  async remote({ args, options, write }, remote) {
    const { teamApplyRemote, teamShowRemote } = await import("../lib/team.ts");
    if (args[0] === "show") return teamShowRemote(remote, write);
    if (args[0] !== "apply") throw new UsageError();
    return teamApplyRemote(remote, { file: args[1], yes: options.yes, dryRun: options["dry-run"] }, write);
  },
};
