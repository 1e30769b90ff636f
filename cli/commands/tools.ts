import { type Command, REMOTE_NOTE, TENANT_LOCAL_OR_REMOTE } from "../command.ts";

export const tools: Command = {
  name: "tools",
  usage: ["tools ls [--namespace <ns>] [--tenant <tenant>]"],
  summary: "list a tenant's tools (its stored Tool resources), by namespace",
  options: [
    ["--namespace <ns>", 'only the tools of one namespace (a tool entry\'s "namespace", else its kind)'],
    TENANT_LOCAL_OR_REMOTE,
  ],
  examples: ["ARBOR_TOOLS_FILE=examples/mcp-venues/tools.json arbor tools ls --namespace venues"],
  notes: ["Locally the tools of ARBOR_TOOLS_FILE (else the built-ins) are registered first.", REMOTE_NOTE],

  async local({ args, options, write }) {
    const { localConfig } = await import("../lib/local.ts");
    const config = await localConfig(tools);
    const { toolsLocal } = await import("../lib/tools.ts");
    return toolsLocal(config, options.tenant ?? config.tenant, args[0], options.namespace, write);
  },

  async remote({ args, options, write }, remote) {
    const { toolsRemote } = await import("../lib/tools.ts");
    return toolsRemote(remote, args[0], options.namespace, write);
  },
};
