import { Duration, type RemovalPolicy, Stack } from "aws-cdk-lib";
import { type IManagedPolicy, ManagedPolicy, PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { TOOL_FUNCTION_TIMEOUT_MS } from "../../shared/ports/tool-function.ts";
import { EngineFunction } from "./engine-function.ts";
import {
  BUNDLED_TOOLS_FILE,
  DEPLOYED_TOOLS_FILE,
  lambdaToolArns,
  stageToolRegistry,
  type ToolRegistry,
} from "./tool-registry.ts";

export interface ToolFunctionProps {
  /** The settings every engine function gets (storage, policy, outbound); the model's are left out. */
  readonly environment: Readonly<Record<string, string>>;
  /** Resources (large results), the state table (the audit log), the embeddings (the search built-ins). */
  readonly dataPolicy: IManagedPolicy;
  /** The tool registry (`-c tools`); none: the built-in tools. */
  readonly registry?: ToolRegistry;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The tool function (functions/tool.ts): the policy-checked proxy for every tool call of the engine,
 * and the only function holding what the tools need: the registry (bundled as tools.json), the
 * invoke grants of its `lambda` tools (ToolFunctionAccess), their settings, the MCP and A2A
 * connections, the outbound guard. The steps that run a leaf's inner loop (ready, turn) invoke it
 * synchronously with `invokePolicy`; nothing else may.
 *
 * Only ever invoked with RequestResponse: a failure goes back to the caller, which records it as a
 * failed call; so no retries by Lambda (they apply to asynchronous invocations only, and one would
 * run a call with effects again) and no dead-letter queue.
 */
export class ToolFunction extends Construct {
  readonly handler: EngineFunction;
  /** lambda:InvokeFunction on exactly the registry's lambda tools; none without such tools. */
  readonly toolPolicy: ManagedPolicy | undefined;
  /** lambda:InvokeFunction on this function, for the steps that run tools. */
  readonly invokePolicy: ManagedPolicy;

  constructor(scope: Construct, id: string, props: ToolFunctionProps) {
    super(scope, id);
    const { registry } = props;
    this.toolPolicy = registry ? toolPolicy(this, registry) : undefined;
    this.handler = new EngineFunction(this, "Handler", {
      entry: "functions/tool.ts",
      description: "Arbor tool function: runs every tool call of the engine (ListTools, ExecuteTool)",
      timeout: Duration.millis(TOOL_FUNCTION_TIMEOUT_MS),
      memorySize: 1024,
      environment: {
        ...props.environment,
        ...(registry ? { ARBOR_TOOLS_FILE: DEPLOYED_TOOLS_FILE } : {}),
      },
      policies: [props.dataPolicy, ...(this.toolPolicy ? [this.toolPolicy] : [])],
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      retryAttempts: 0,
      maxEventAge: Duration.minutes(1),
      ...(registry
        ? { bundledFiles: { [BUNDLED_TOOLS_FILE]: stageToolRegistry(this, registry.config) } }
        : {}),
    });
    this.invokePolicy = new ManagedPolicy(this, "Invoke", {
      description: "Arbor engine steps that run a leaf's inner loop (ready, turn): call the tool function",
      statements: [
        new PolicyStatement({
          sid: "ToolService",
          actions: ["lambda:InvokeFunction"],
          // Unqualified: the port invokes $LATEST, and a grant on the bare ARN covers only that.
          resources: [this.handler.function.functionArn],
        }),
      ],
    });
  }
}

/**
 * InvokeFunction on exactly the functions the registry's `lambda` tools invoke: the unqualified
 * ARN, or the version's or alias's ARN when the entry names one (Lambda authorizes a qualified
 * Invoke on that ARN only, as CDK's own Alias/Version grantInvoke does). No wildcard. None
 * without `lambda` tools.
 */
function toolPolicy(scope: Construct, registry: ToolRegistry): ManagedPolicy | undefined {
  const functions = lambdaToolArns(Stack.of(scope), registry.config);
  if (functions.length === 0) return undefined;
  return new ManagedPolicy(scope, "ToolFunctionAccess", {
    // Fixed: a new description would replace the policy.
    description: "Arbor tool function: invoke the Lambda functions of the registry's lambda tools",
    statements: [
      new PolicyStatement({
        sid: "ToolFunctions",
        actions: ["lambda:InvokeFunction"],
        resources: functions,
      }),
    ],
  });
}
