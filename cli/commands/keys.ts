import type { Command } from "../command.ts";

export const keys: Command = {
  name: "keys",
  usage: [
    "keys add --id user_<name>|agent_<name> [--name <display name>] [--kind human|agent] [--tenant <tenant>] [--role <role>]...",
    "keys list [--tenant <tenant>]",
    "keys revoke <id>|<fingerprint> [--tenant <tenant>]",
  ],
  summary: "API keys: add one (printed once), list them, revoke a principal's or one key",
  description:
    "add makes a new API key and prints it once (user_<name> for a person, agent_<name> for a remote agent); list shows fingerprint, id, kind, tenant and roles (never a key); revoke removes a principal's keys, or one key.",
  options: [
    ["--id <id>", "the principal: user_<name> or agent_<name>"],
    ["--name <display name>", "how they are named where people read it (approvals, threads, the console)"],
    ["--kind human|agent", "default: from the id"],
    ["--tenant <tenant>", "the tenant it acts for (default ARBOR_TENANT; remotely, your admin key's)"],
    ["--role <role>", "a role for the policy (admin: may manage keys and the team); repeat for more"],
  ],
  examples: ['arbor keys add --id user_ada --name "Ada Lovelace" --role admin', "arbor keys revoke user_ada"],
  notes: [
    "Where the keys are: by default the local keys file of serve (a running serve takes a change within a second); with ARBOR_URL + ARBOR_KEY, a remote Arbor, with an admin key of your tenant; with ARBOR_MODE=aws + ARBOR_TABLE_NAME + AWS_REGION, a deployed stack's state table, with your AWS credentials (how the first admin key of a fresh deploy is made).",
  ],

  // Where the keys are (the local file, a remote Arbor, a stack's table) is the keys' own choice.
  async local({ args, options, write }) {
    const { keysCommand } = await import("../lib/keys.ts");
    await keysCommand(
      args[0],
      args[1],
      {
        id: options.id,
        kind: options.kind,
        tenant: options.tenant,
        roles: options.role ?? [],
        name: options.name,
      },
      write,
    );
  },
};
