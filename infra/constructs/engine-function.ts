import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Duration, RemovalPolicy } from "aws-cdk-lib";
import { type IManagedPolicy, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, Runtime } from "aws-cdk-lib/aws-lambda";
import { type BundlingOptions, NodejsFunction, OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { ConfigError } from "../../shared/kernel/errors.ts";

/**
 * Node.js 24 (LTS), the Node the code is developed and tested on (package.json: engines >=24;
 * .ci/run brings it), and Lambda's latest Node.js runtime (cdk-nag's AwsSolutions-L1 passes).
 * Move it together with `engines`, .ci/run and BUNDLING's esbuild target.
 */
export const FUNCTION_RUNTIME = Runtime.NODEJS_24_X;

/** The repository root: entries, package-lock.json and tsconfig.json are found from here. */
export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Packages kept out of the bundle and shipped as files (the context window's tokenizers). */
export const TOKENIZER_PACKAGES = ["gpt-tokenizer", "@anthropic-ai/tokenizer"] as const;

/**
 * One shell command copying what the tokenizers load into `<outputDir>/node_modules`: gpt-tokenizer's
 * ESM build, @anthropic-ai/tokenizer's CommonJS build and the tiktoken (lite, with its wasm) it
 * requires; without source maps and type declarations (7.5 MB).
 */
export function tokenizerCopy(inputDir: string, outputDir: string): string {
  const from = `${inputDir}/node_modules`;
  const to = `${outputDir}/node_modules`;
  return [
    `mkdir -p "${to}/gpt-tokenizer" "${to}/@anthropic-ai/tokenizer/dist" "${to}/tiktoken"`,
    `cp "${from}/gpt-tokenizer/package.json" "${to}/gpt-tokenizer/"`,
    `cp -r "${from}/gpt-tokenizer/esm" "${to}/gpt-tokenizer/"`,
    `cp "${from}/@anthropic-ai/tokenizer/package.json" "${to}/@anthropic-ai/tokenizer/"`,
    `cp -r "${from}/@anthropic-ai/tokenizer/dist/cjs" "${to}/@anthropic-ai/tokenizer/dist/"`,
    `cp "${from}/tiktoken/package.json" "${to}/tiktoken/"`,
    `cp -r "${from}/tiktoken/lite" "${to}/tiktoken/"`,
    `find "${to}" \\( -name '*.map' -o -name '*.d.ts' \\) -delete`,
  ].join(" && ");
}

/**
 * One bundle per entry file, built locally by the installed esbuild (never in Docker). Every
 * function using an entry gets the same bundling options, so CDK bundles that entry once per
 * synthesis and the functions share the asset.
 *
 * The AWS SDK is bundled: the engine needs clients (S3 Vectors among them) at the versions it was
 * tested with, not whatever the Lambda runtime happens to ship. ESM output; the banner gives the
 * CommonJS modules inside the bundle the `require`, `__filename` and `__dirname` that ESM lacks.
 */
export const BUNDLING: BundlingOptions = {
  forceDockerBundling: false,
  format: OutputFormat.ESM,
  target: "node24",
  mainFields: ["module", "main"],
  bundleAwsSDK: true,
  // The tokenizers of the context window (shared/engine/window/tokens.ts) stay out of the bundle, as files
  // beside it (below): inlined, their tables (4 MB) cost every cold start seconds of parsing, even
  // in a function that never counts a token; apart, only a turn that counts loads them.
  externalModules: [...TOKENIZER_PACKAGES],
  minify: true,
  // Error classes name themselves after their constructor: keep the names readable in logs.
  keepNames: true,
  sourceMap: true,
  sourcesContent: false,
  banner:
    "import { createRequire as __arborRequire } from 'node:module'; const require = __arborRequire(import.meta.url);" +
    " import { fileURLToPath as __arborPath } from 'node:url'; const __filename = __arborPath(import.meta.url);" +
    " const __dirname = __arborPath(new URL('.', import.meta.url));",
  // The Cedar policy engine reads its wasm next to the module that loads it (`__dirname`). The
  // tokenizers go to node_modules beside the bundle: the files their dynamic imports reach.
  commandHooks: {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (inputDir: string, outputDir: string) => [
      `cp "${inputDir}/node_modules/@cedar-policy/cedar-wasm/nodejs/cedar_wasm_bg.wasm" "${outputDir}/"`,
      tokenizerCopy(inputDir, outputDir),
    ],
  },
};

/**
 * BUNDLING plus files copied into the bundle's root (name in the bundle -> absolute path at synth),
 * after the Cedar wasm. NodejsFunction hashes the bundle's output (AssetHashType.OUTPUT), so a
 * file's content is part of the function's asset: another content, another code deployment.
 */
export function bundlingWith(files: Readonly<Record<string, string>>): BundlingOptions {
  const entries = Object.entries(files);
  for (const [name, source] of entries) {
    if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith("."))
      throw new ConfigError(
        `Bundled file name ${JSON.stringify(name)}: give a plain file name, e.g. tools.json`,
      );
    // The copy is a shell command: keep the path out of the shell's reach.
    if (/["$`\\]/.test(source) || !isAbsolute(source))
      throw new ConfigError(
        `Bundled file ${name}: ${source} must be an absolute path without " $ \` or \\ (move the file or the CDK output directory)`,
      );
  }
  const hooks = BUNDLING.commandHooks;
  return {
    ...BUNDLING,
    commandHooks: {
      beforeBundling: (inputDir, outputDir) => hooks?.beforeBundling(inputDir, outputDir) ?? [],
      beforeInstall: (inputDir, outputDir) => hooks?.beforeInstall(inputDir, outputDir) ?? [],
      afterBundling: (inputDir, outputDir) => [
        ...(hooks?.afterBundling(inputDir, outputDir) ?? []),
        ...entries.map(([name, source]) => `cp "${source}" "${outputDir}/${name}"`),
      ],
    },
  };
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
  readonly function: NodejsFunction;
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
    this.function = new NodejsFunction(this, "Function", {
      entry: join(PROJECT_ROOT, props.entry),
      handler: "handler",
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: join(PROJECT_ROOT, "package-lock.json"),
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
      bundling: props.bundledFiles ? bundlingWith(props.bundledFiles) : BUNDLING,
    });
  }
}
