import { ArborError } from "../../shared/kernel/errors.ts";
import type { ToolDescriptor } from "../../shared/ports/tools.ts";
import type { LocalConfig } from "../../shared/runtime/config.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { scriptedModel } from "../../shared/runtime/local/local-parts.ts";
import { loadToolsConfig } from "../../shared/tools/service/config.ts";
import { checkNamespace } from "../../shared/tools/service/tool-registry.ts";
import { UsageError } from "../command.ts";
import { enc, type Remote } from "./remote.ts";
import { note, printable } from "./render.ts";

/**
 * `arbor tools ls [--namespace <ns>]`: ListTools, the tenant's stored Tool resources, of one
 * namespace or all. On the local data folder (ARBOR_TENANT, or --tenant; the tools of
 * ARBOR_TOOLS_FILE, registered first when the stored ones are not theirs: idempotent writes that
 * are safe beside a running `arbor serve`, so no lock is taken), or, with ARBOR_URL and ARBOR_KEY,
 * on a remote Arbor through `GET /v1/tools?namespace=` (the key's tenant).
 */

type Write = (line: string) => void;

interface Listed {
  name: string;
  namespace: string;
  kind: string;
  risky: boolean;
  description: string;
}

function print(tools: readonly Listed[], where: string, namespace: string | undefined, write: Write): void {
  for (const t of tools)
    write(
      // A description may come from elsewhere (an MCP server's, a remote Arbor's answer): printable.
      `${printable(t.namespace).padEnd(16)} ${printable(t.name).padEnd(28)} ${printable(t.kind).padEnd(8)}${t.risky ? " risky" : "      "} ${note(
        oneLine(printable(t.description, true)),
      )}`,
    );
  const which = namespace === undefined ? "" : ` in namespace ${namespace}`;
  write(note(`${tools.length} tool${tools.length === 1 ? "" : "s"}${which}, ${where}`));
}

const oneLine = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
};

const listed = (d: ToolDescriptor): Listed => ({
  name: d.name,
  namespace: d.namespace ?? d.kind,
  kind: d.kind,
  risky: d.risky,
  description: d.description,
});

export async function toolsLocal(
  config: LocalConfig,
  tenant: string,
  sub: string | undefined,
  namespace: string | undefined,
  write: Write,
): Promise<void> {
  if (sub !== "ls") throw new UsageError();
  const ns = checkNamespace(namespace); // said before the data folder is opened
  const rt = createLocalRuntime(config);
  try {
    const engine = await createLocalEngine(rt, {
      llm: scriptedModel(),
      toolsConfig: loadToolsConfig(config.toolsFile),
    });
    try {
      const tools = engine.deps.tools;
      if (!tools.listTools)
        throw new ArborError(
          "INTERNAL",
          "These tools keep no Tool resources: the local runtime always should; report it",
        );
      const found = await tools.listTools(tenant, ns === undefined ? {} : { namespace: ns });
      print(found.map(listed), `tenant ${tenant} in ${config.dataDir}`, ns, write);
    } finally {
      await engine.close();
    }
  } finally {
    await rt.close();
  }
}

export async function toolsRemote(
  remote: Remote,
  sub: string | undefined,
  namespace: string | undefined,
  write: Write,
): Promise<void> {
  if (sub !== "ls") throw new UsageError();
  const ns = checkNamespace(namespace);
  const answer = await remote.get<{ tenant: string; tools: Listed[] }>(
    `/v1/tools${ns === undefined ? "" : `?namespace=${enc(ns)}`}`,
    { tools: "array" },
  );
  print(answer.tools, `tenant ${answer.tenant} at ${remote.url}`, ns, write);
}
