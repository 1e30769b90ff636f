import { join } from "node:path";
import { AssetHashType, DockerImage, type Duration, type RemovalPolicy } from "aws-cdk-lib";
import { type IManagedPolicy, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, Code, Function as LambdaFunction, Runtime } from "aws-cdk-lib/aws-lambda";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { buildFunctionBundle, checkBundledFiles, PROJECT_ROOT } from "./function-bundle.ts";

/**
 * Node.js 24 (LTS), the Node the code is developed and tested on (package.json: engines >=24;
 * .ci/run brings it), and Lambda's latest Node.js runtime (cdk-nag's AwsSolutions-L1 passes).
 * Move it together with `engines`, .ci/run and the bundles' esbuild target (function-bundle.ts).
 */
export const FUNCTION_RUNTIME = Runtime.NODEJS_24_X;

/**
 * Every function's code: its own bundle, built locally by the installed esbuild (never in Docker) with
 * code splitting (function-bundle.ts). The asset is hashed by its output, so functions built from one
 * entry with the same files share one asset, and a bundled file's content is part of the function's
 * code: another content, another deployment.
 */
function functionCode(entry: string, files: Readonly<Record<string, string>>): Code {
  checkBundledFiles(files);
  return Code.fromAsset(PROJECT_ROOT, {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Required by the type, never pulled: the local build below always answers.
      image: DockerImage.fromRegistry("public.ecr.aws/docker/library/node:24-slim"),
      // Part of the staging's cache key (the build itself is a function, which the key does not see):
      // without it two entries would share the first one's bundle.
      command: ["arbor-function-bundle", entry, ...Object.entries(files).flat()],
      local: {
        tryBundle(outputDir: string) {
          buildFunctionBundle(join(PROJECT_ROOT, entry), outputDir, files);
          return true;
        },
      },
    },
  });
}

export interface EngineFunctionProps {
  /** Entry file, relative to the repository root, e.g. `functions/engine-step.ts`. */
  readonly entry: string;
  readonly description: string;
  readonly timeout: Duration;
  readonly memorySize: number;
  readonly environment: Record<string, string>;
  /** Customer-managed policies with the data and model access this function needs. */
  readonly policies: readonly IManagedPolicy[];
  readonly logRetention: RetentionDays;
  /** For the log group. */
  readonly removalPolicy: RemovalPolicy;
  /** Lambda's own retries of a failed asynchronous invocation (0-2). */
  readonly retryAttempts: number;
  readonly maxEventAge: Duration;
  /** Where Lambda sends an invocation that failed every attempt; none: it is dropped. */
  readonly deadLetterQueue?: IQueue;
  /** Files to ship in the bundle's root (`/var/task/<name>`): name -> absolute path at synth. */
  readonly bundledFiles?: Readonly<Record<string, string>>;
}

/**
 * A Node.js function on ARM64 with its own role (no AWS managed policy: it may write only to
 * its own log group) and its own log group with a retention.
 */
export class EngineFunction extends Construct {
  readonly function: LambdaFunction;
  readonly role: Role;
  readonly logGroup: LogGroup;

  constructor(scope: Construct, id: string, props: EngineFunctionProps) {
    super(scope, id);
    this.logGroup = new LogGroup(this, "Logs", {
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    this.role = new Role(this, "Role", {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
      description: props.description,
      managedPolicies: [...props.policies],
    });
    this.logGroup.grantWrite(this.role);
    this.function = new LambdaFunction(this, "Function", {
      code: functionCode(props.entry, props.bundledFiles ?? {}),
      handler: "index.handler",
      runtime: FUNCTION_RUNTIME,
      architecture: Architecture.ARM_64,
      description: props.description,
      timeout: props.timeout,
      memorySize: props.memorySize,
      environment: { NODE_OPTIONS: "--enable-source-maps", ...props.environment },
      role: this.role,
      logGroup: this.logGroup,
      retryAttempts: props.retryAttempts,
      maxEventAge: props.maxEventAge,
      ...(props.deadLetterQueue ? { deadLetterQueue: props.deadLetterQueue } : {}),
    });
  }
}
