// The layering of ARCHITECTURE.md, checked on every import (type-only imports included):
//   kernel <- domain <- ports <- store <- engine, tools, graph, knowledge, notify, outbound, protocols, evals
//   <- channels <- runtime/{local,aws} (the only composition roots) <- entry points (functions/, cli/)
// and beside them adapters/, which implement ports and import only ports, domain, the kernel, each
// other and their SDKs. `npm run lint:layers` runs it; test/unit/house/layers.test.ts runs it in the suite.

/** A folder of shared/ as a path pattern. */
const dir = (...names) => `^shared/(${names.join("|")})/`;

/** Everything above the given layers: what they may not import. */
const CORE = ["engine", "tools", "graph", "knowledge", "notify", "outbound", "protocols", "evals"];

/** SDKs of clouds, databases and policy engines: adapters, composition roots and edges only. */
const CLOUD_SDKS =
  "(^|/)node_modules/(@aws-sdk|@smithy|libsql|@cedar-policy|@open-policy-agent|@slack/web-api|@aws-lambda-powertools/metrics)/";
/** Protocol libraries: the edges (channels, tool bindings, the A2A mapping) and the composition roots. */
const PROTOCOL_LIBS = "(^|/)node_modules/(hono|@hono|@a2a-js|@modelcontextprotocol|@slack)/";

const forbid = (name, comment, from, to) => ({ name, comment, severity: "error", from, to });

module.exports = {
  forbidden: [
    forbid(
      "no-circular",
      "An import circle: move what both sides need below them (a kit, a type in domain or ports).",
      {},
      { circular: true },
    ),
    forbid(
      "kernel-imports-kernel",
      "shared/kernel is the ground floor: errors, configuration, event patterns, the logger.",
      { path: dir("kernel") },
      { path: "^shared/", pathNot: dir("kernel") },
    ),
    forbid(
      "domain-is-pure",
      "shared/domain imports nothing of Arbor's but domain and the kernel.",
      { path: dir("domain") },
      { path: "^shared/", pathNot: dir("domain", "kernel") },
    ),
    forbid(
      "ports-import-domain",
      "shared/ports are interfaces over domain types: they import domain, the kernel and each other.",
      { path: dir("ports") },
      { path: "^shared/", pathNot: dir("ports", "domain", "kernel") },
    ),
    forbid(
      "store-over-ports",
      "shared/store (repositories over ports) imports ports, domain and the kernel.",
      { path: dir("store") },
      { path: "^shared/", pathNot: dir("store", "ports", "domain", "kernel") },
    ),
    forbid(
      "core-below-channels",
      "engine, tools, graph, notify, outbound and protocols never import channels, adapters or composition roots.",
      { path: dir(...CORE) },
      { path: [dir("channels", "adapters", "runtime"), "^(cli|functions|infra)/"] },
    ),
    forbid(
      "adapters-implement-ports",
      "shared/adapters import ports, domain, the kernel, each other and their SDKs: nothing of the engine's.",
      { path: dir("adapters") },
      { path: "^shared/", pathNot: dir("adapters", "ports", "domain", "kernel") },
    ),
    forbid(
      "channels-below-runtime",
      "channels never import a composition root or an entry point, nor choose adapters.",
      { path: dir("channels") },
      { path: [dir("runtime", "adapters"), "^(cli|functions|infra)/"] },
    ),
    forbid(
      "runtime-below-entry-points",
      "the composition roots never import an entry point.",
      { path: dir("runtime") },
      { path: "^(cli|functions)/" },
    ),
    forbid(
      "entry-points-through-runtime",
      "functions/ and cli/ reach adapters through a composition root (shared/runtime), never directly.",
      { path: "^(cli|functions)/" },
      { path: dir("adapters") },
    ),
    forbid(
      "cli-through-runtime",
      "The CLI builds no cloud client itself: the composition root (shared/runtime/aws) hands it what it needs.",
      { path: "^cli/" },
      { path: CLOUD_SDKS },
    ),
    forbid(
      "cloud-sdks-at-the-edges",
      "AWS, database and policy-engine SDKs belong in adapters, the composition roots and the edges.",
      { path: "^shared/", pathNot: [dir("adapters", "runtime", "channels")] },
      { path: CLOUD_SDKS },
    ),
    forbid(
      "protocol-libraries-at-the-edges",
      "HTTP-framework and protocol SDKs belong in channels, tool bindings, the A2A mapping and the roots.",
      {
        path: "^shared/",
        pathNot: [dir("adapters", "runtime", "channels", "protocols"), "^shared/tools/bindings/"],
      },
      { path: PROTOCOL_LIBS },
    ),
    {
      name: "functions-carry-no-libsql",
      comment:
        "A Lambda function's bundle must load on Lambda: libsql is a native module the functions have no build of (the local runtime's stores and the keys file's lock use it).",
      severity: "error",
      from: { path: "^functions/" },
      to: { path: "(^|/)node_modules/libsql/", reachable: true },
    },
    {
      name: "cli-commands-load-lazily",
      comment:
        "The command table is read by every start of the CLI (arbor help too): a command file imports its work with `await import` when it runs, and statically only the command kit, the kernel and types.",
      severity: "error",
      from: { path: "^cli/commands/" },
      to: {
        pathNot: ["^cli/commands/", "^cli/command\\.ts$", "^shared/kernel/"],
        dependencyTypesNot: ["dynamic-import", "type-only"],
      },
    },
    forbid(
      "product-never-imports-tests",
      "Product code never imports tests or benches; only the CLI, which runs the examples, imports examples.",
      { path: "^(shared|functions|cli|infra)/" },
      { path: "^(test|bench)/" },
    ),
    forbid(
      "examples-through-the-cli",
      "The examples are run by the CLI (arbor run --example): nothing else of Arbor's imports them.",
      { path: "^(shared|functions|infra)/" },
      { path: "^examples/" },
    ),
  ],
  options: {
    // TypeScript 7 has no compiler API for dependency-cruiser: swc parses the sources.
    parser: "swc",
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(cdk\\.out|\\.arbor)/" },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
