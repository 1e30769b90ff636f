import { type Command, REMOTE_NOTE, UsageError } from "../command.ts";

export const graph: Command = {
  name: "graph",
  usage: ["graph query [subject] [predicate] [object] [--max <n>] [--tenant <tenant>]"],
  summary: "the triples of a tenant's graph (linked data) matching a pattern",
  description:
    'Prints the triples of a tenant\'s graph matching one pattern, one line each. ?x or - (or nothing) matches anything; a literal object as JSON, \'{"value":"Ada","language":"en"}\'.',
  options: [
    ["--max <n>", "at most n triples (1-100, default 100)"],
    [
      "--tenant <tenant>",
      "the tenant (local data folder; default ARBOR_TENANT; remote: the key's, no other)",
    ],
  ],
  examples: ["arbor graph query - schema:name"],
  notes: [REMOTE_NOTE],

  async local({ args, options, write }) {
    if (args[0] !== "query") throw new UsageError();
    const { withRuntime } = await import("../lib/local.ts");
    const { graphQueryLocal } = await import("../lib/graph.ts");
    return withRuntime(graph, (rt) =>
      graphQueryLocal(rt.state, options.tenant ?? rt.tenant, args.slice(1), options.max, write),
    );
  },

  async remote({ args, options, write }, remote) {
    if (args[0] !== "query") throw new UsageError();
    const { graphQueryRemote } = await import("../lib/graph.ts");
    return graphQueryRemote(remote, args.slice(1), options.max, write);
  },
};
