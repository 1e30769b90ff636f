import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ArnFormat, type Stack, Stage } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import { ConfigError } from "../../shared/kernel/errors.ts";
import { TOOL_CALL_MAX_MS, TOOL_FUNCTION_TIMEOUT_MS } from "../../shared/ports/tool-function.ts";
import { LAMBDA_FUNCTION, type ToolsConfig } from "../../shared/tools/service/config.ts";

/**
 * The tool registry deployed with the tool function (tool-function.ts): validated at synth, written
 * into its bundle as `tools.json` (ARBOR_TOOLS_FILE points at it), and the source of its grants on
 * the Lambda functions the registry's `lambda` tools invoke.
 */
export interface ToolRegistry {
  /** What parseToolsConfig returned for the file. */
  readonly config: ToolsConfig;
  /** Where it was read from, as given (`-c tools=<path>`): for messages only, never in a template. */
  readonly source: string;
}

/** The registry's name inside the tool function's bundle. */
export const BUNDLED_TOOLS_FILE = "tools.json";

/** Where Lambda unpacks a function's code (LAMBDA_TASK_ROOT): the bundle's root. */
export const LAMBDA_TASK_ROOT = "/var/task";

/** ARBOR_TOOLS_FILE of a function deployed with a registry. */
export const DEPLOYED_TOOLS_FILE = `${LAMBDA_TASK_ROOT}/${BUNDLED_TOOLS_FILE}`;

/**
 * Entries that cannot work inside a Lambda function, each as `tools.<name>: <why and what to do>`.
 * A stdio MCP server is a command Arbor starts next to itself: that command is not in the bundle.
 * A call longer than TOOL_CALL_MAX_MS cannot be waited for: the steps call the tool function
 * synchronously, and it answers within its timeout.
 */
export function undeployableEntries(config: ToolsConfig): string[] {
  return Object.entries(config.tools).flatMap(([name, entry]) => [
    ...(entry.kind === "mcp" && entry.transport === "stdio"
      ? [
          `tools.${name}: a stdio MCP server cannot run on Lambda (its command ${JSON.stringify(entry.command)} ` +
            'is not in the function bundle); run the server where it can listen and give it as "transport": ' +
            '"http" with the "url" of its streamable HTTP endpoint',
        ]
      : []),
    ...(entry.timeoutMs !== undefined && entry.timeoutMs > TOOL_CALL_MAX_MS
      ? [
          `tools.${name}.timeoutMs: ${entry.timeoutMs} is longer than a tool call may take on Lambda ` +
            `(${TOOL_CALL_MAX_MS} ms: the engine's steps wait for the tool function, which answers within ` +
            `${TOOL_FUNCTION_TIMEOUT_MS / 1000} s); give at most ${TOOL_CALL_MAX_MS}, or have the tool start ` +
            "the work and return at once, and a second tool read how it went",
        ]
      : []),
  ]);
}

/** Throws when the registry has entries that cannot work inside Lambda, naming each and the fix. */
export function assertDeployable(registry: ToolRegistry): void {
  const refused = undeployableEntries(registry.config);
  if (refused.length > 0)
    throw new ConfigError(
      `The tool registry ${registry.source} cannot be deployed:\n  ${refused.join("\n  ")}`,
    );
}

/**
 * The ARNs the registry's `lambda` tools invoke, as Lambda authorizes an Invoke: the function's
 * unqualified ARN, or, when the entry names a version or alias, that version's or alias's ARN
 * (`<function ARN>:<qualifier>`), the one the tool always invokes (shared/tools/bindings/lambda-function.ts
 * sends the entry's qualifier with every call). A function given by name is in the entry's
 * `region`, else the stack's, and in the stack's account and partition (tokens in an
 * environment-agnostic stack); an ARN is taken as it is. Each ARN once.
 */
export function lambdaToolArns(stack: Stack, config: ToolsConfig): string[] {
  const arns = new Map<string, string>(); // resolved -> as given to the policy
  for (const [name, entry] of Object.entries(config.tools)) {
    if (entry.kind !== "lambda") continue;
    const match = LAMBDA_FUNCTION.exec(entry.function)?.groups;
    // The schema already refused anything else; this keeps a hand-made prop from becoming a wrong grant.
    if (!match?.name)
      throw new ConfigError(
        `tools.${name}.function: ${entry.function} is not a Lambda function: give its name or ARN`,
      );
    const qualifier = entry.qualifier ?? match.qualifier;
    const unqualified = match.region
      ? `${entry.function.slice(0, entry.function.indexOf(":function:"))}:function:${match.name}`
      : stack.formatArn({
          service: "lambda",
          resource: "function",
          resourceName: match.name,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          ...(entry.region ? { region: entry.region } : {}),
        });
    const arn = qualifier ? `${unqualified}:${qualifier}` : unqualified;
    arns.set(JSON.stringify(stack.resolve(arn)), arn);
  }
  return [...arns.values()];
}

/**
 * Writes the registry, as validated, where the functions' bundling copies it from: next to the
 * assets in the cloud assembly (`cdk.out/tools.<sha256>.json`), so the same registry gives the same
 * file and bundle, and another registry another one. Returns that path.
 */
export function stageToolRegistry(scope: IConstruct, config: ToolsConfig): string {
  const json = `${JSON.stringify(config, null, 2)}\n`;
  const sha256 = createHash("sha256").update(json).digest("hex");
  const stage = Stage.of(scope);
  if (!stage)
    throw new ConfigError(
      `${scope.node.path} is not in a CDK app: the tool registry has nowhere to go; add the stack to an App`,
    );
  mkdirSync(stage.assetOutdir, { recursive: true });
  const path = join(stage.assetOutdir, `tools.${sha256}.json`);
  writeFileSync(path, json);
  return path;
}
