import { readFileSync, realpathSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { App, type AppProps, type Environment, RemovalPolicy, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import type { Construct } from "constructs";
import * as z from "zod";
import { DEFAULT_BEDROCK_MODEL, endOfLife } from "../shared/domain/model-catalogue.ts";
import { ConfigError, ValidationError } from "../shared/kernel/errors.ts";
import { readTeamFile } from "../shared/store/team-file.ts";
import { DEFAULT_TOOLS, parseToolsConfig } from "../shared/tools/service/config.ts";
import { type ApiThrottle, DEFAULT_API_THROTTLE } from "./constructs/api-gateway.ts";
import { type ChatSecretRef, KMS_KEY_ARN, SECRET_ARN, SECRET_NAME } from "./constructs/chat-secret.ts";
import { PROJECT_ROOT } from "./constructs/function-bundle.ts";
import type { DeployedTeam } from "./constructs/team-file.ts";
import { type ToolRegistry, undeployableEntries } from "./constructs/tool-registry.ts";
import { type EngineModel, EngineStack, type Traces } from "./stacks/engine-stack.ts";
import { StorageStack } from "./stacks/storage-stack.ts";

/** The CDK context keys the app reads (`npx cdk deploy -c stage=prod`). */
export const CONTEXT_KEYS = {
  stage: "stage",
  removalPolicy: "removalPolicy",
  modelProvider: "modelProvider",
  model: "model",
  tools: "tools",
  apiRateLimit: "apiRateLimit",
  apiBurstLimit: "apiBurstLimit",
  team: "team",
  chatSecret: "chatSecret",
  chatSecretKey: "chatSecretKey",
  contextTokens: "contextTokens",
  traces: "traces",
} as const;

/** The model the engine steps call unless `-c model=<id>` says otherwise. */
/** The model the engine steps call when `-c model` names none (shared/domain/model-catalogue.ts). */
export const DEFAULT_MODEL = DEFAULT_BEDROCK_MODEL;

/** Dev stages: `dev` and personal ones such as `dev-alice`. Only they may be destroyed. */
const isDevStage = (stage: string): boolean => stage === "dev" || stage.startsWith("dev-");

const ContextSchema = z
  .object({
    stage: z
      .string()
      .regex(
        /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/,
        "use lower-case letters, digits and single hyphens, e.g. dev, prod, dev-alice",
      )
      .max(32)
      .default("dev"),
    removalPolicy: z.enum(["retain", "destroy"]).optional(),
  })
  .transform((c) => {
    const dev = isDevStage(c.stage);
    return {
      stage: c.stage,
      dev,
      removalPolicy: c.removalPolicy ?? (dev ? "destroy" : "retain"),
    };
  })
  .refine((s) => s.dev || s.removalPolicy === "retain", {
    path: ["removalPolicy"],
    message: "destroy is only allowed for dev stages (dev, dev-<name>); other stages keep their data",
  });

export type ArborSettings = z.output<typeof ContextSchema>;

/** The model the engine steps call; a separate schema, as only the engine stack reads it. */
const ModelContextSchema = z
  .object({
    modelProvider: z
      .enum(["bedrock"], {
        error: "the engine stack deploys Bedrock models only (an OpenAI-compatible endpoint runs locally)",
      })
      .default("bedrock"),
    model: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/,
        `a Bedrock model id or inference profile id, e.g. ${DEFAULT_MODEL}`,
      )
      .superRefine((model, ctx) => {
        const retired = endOfLife(model);
        if (retired) ctx.addIssue({ code: "custom", message: retired });
      })
      .default(DEFAULT_MODEL),
    /** A leaf's context window in tokens (ARBOR_CONTEXT_TOKENS); absent: the engine's default. */
    contextTokens: z.coerce
      .number()
      .int("whole tokens")
      .min(2_000, "at least 2000 tokens, e.g. 32000")
      .max(10_000_000, "at most 10000000 tokens, e.g. 200000 for Claude")
      .optional(),
  })
  .transform(
    (c): EngineModel => ({
      provider: c.modelProvider,
      id: c.model,
      ...(c.contextTokens === undefined ? {} : { contextTokens: c.contextTokens }),
    }),
  );

/**
 * Where the functions send their spans (`-c traces=xray`, `-c traces=https://collector.example:4318`):
 * X-Ray's OTLP endpoint, or an OTLP/HTTP endpoint (https; http only to a collector on the
 * function's own host, as an ADOT or OpenTelemetry collector extension listens). Default off.
 */
const TracesContextSchema = z
  .object({
    traces: z
      .string()
      .trim()
      .refine(
        (v) =>
          v === "off" ||
          v === "xray" ||
          /^https:\/\/[^\s]+$/.test(v) ||
          /^http:\/\/(localhost|127\.0\.0\.1)(:\d+)?(\/[^\s]*)?$/.test(v),
        "off, xray (X-Ray's OTLP endpoint, CloudWatch Transaction Search on), or an OTLP/HTTP endpoint: https://..., or http://localhost:4318 for a collector extension",
      )
      .default("off"),
  })
  .transform(({ traces }): Traces | undefined =>
    traces === "off" ? undefined : traces === "xray" ? { to: "xray" } : { to: "otlp", endpoint: traces },
  );

/** Reads `-c traces`; undefined: off. */
export function readTraces(scope: Construct): Traces | undefined {
  return parseContext(scope, TracesContextSchema);
}

/** The HTTP API's stage throttling: requests per second (steady) and at once (burst), all routes together. */
const ApiContextSchema = z
  .object({
    apiRateLimit: z.coerce
      .number()
      .positive("requests per second, more than 0, e.g. 50")
      .max(10_000, "at most 10000 (the account's own API Gateway quota is the real bound)")
      .default(DEFAULT_API_THROTTLE.rateLimit),
    apiBurstLimit: z.coerce
      .number()
      .int("a whole number of requests, e.g. 100")
      .min(1)
      .max(5_000)
      .default(DEFAULT_API_THROTTLE.burstLimit),
  })
  .transform((c): ApiThrottle => ({ rateLimit: c.apiRateLimit, burstLimit: c.apiBurstLimit }));

/**
 * The chat channels' secret (`-c chatSecret=<complete ARN or name>`, `-c chatSecretKey=<KMS key
 * ARN>`): only where it is, never its value (shared/channels/chat/CHAT-DEPLOY.md).
 */
const ChatContextSchema = z
  .object({
    chatSecret: z
      .string()
      .refine((v) => (v.startsWith("arn:") ? SECRET_ARN.test(v) : SECRET_NAME.test(v)), {
        message:
          "the chat settings secret's complete ARN (as create-secret prints it, ending in -<6 characters>) or " +
          "its name (letters, digits and /_+=.@-), e.g. arbor/prod/chat",
      })
      .optional(),
    chatSecretKey: z
      .string()
      .regex(
        KMS_KEY_ARN,
        "the ARN of the KMS key that encrypts the chat secret (arn:aws:kms:<region>:<account>:key/<id>)",
      )
      .optional(),
  })
  .refine((c) => c.chatSecretKey === undefined || c.chatSecret !== undefined, {
    path: ["chatSecretKey"],
    message: "chatSecretKey goes with chatSecret: give -c chatSecret=<the secret's ARN or name> too",
  })
  .transform((c): ChatSecretRef | undefined =>
    c.chatSecret ? { secret: c.chatSecret, ...(c.chatSecretKey ? { key: c.chatSecretKey } : {}) } : undefined,
  );

/** Bad CDK context: the message says which key to fix. */
export class SettingsError extends ConfigError {}

/** Reads and validates the app's settings from CDK context, with defaults. */
export function readSettings(scope: Construct): ArborSettings {
  return parseContext(scope, ContextSchema);
}

/** Reads and validates the HTTP API's throttling (`-c apiRateLimit=50 -c apiBurstLimit=100`), with defaults. */
export function readApiThrottle(scope: Construct): ApiThrottle {
  return parseContext(scope, ApiContextSchema);
}

/** Reads and validates the chat secret (`-c chatSecret`, `-c chatSecretKey`); undefined: no chat channels. */
export function readChatSecret(scope: Construct): ChatSecretRef | undefined {
  return parseContext(scope, ChatContextSchema);
}

/** Reads and validates the engine's model from CDK context (`-c model=<id>`), with defaults. */
export function readModel(scope: Construct): EngineModel {
  return parseContext(scope, ModelContextSchema);
}

function parseContext<S extends z.ZodType>(scope: Construct, schema: S): z.output<S> {
  const raw = Object.fromEntries(
    Object.values(CONTEXT_KEYS).map((key) => [key, scope.node.tryGetContext(key) as unknown]),
  );
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new SettingsError(
      `Invalid CDK context for the Arbor app (set it with -c <key>=<value>):\n${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}

/**
 * The tool registry of `-c tools=<file>` (relative to the project root, or absolute), read and
 * validated as the functions will read it (parseToolsConfig), with the entries Lambda cannot run
 * refused; undefined without the key (the functions then have the built-in tools only).
 */
export function readToolRegistry(scope: Construct, root: string = PROJECT_ROOT): ToolRegistry | undefined {
  const value: unknown = scope.node.tryGetContext(CONTEXT_KEYS.tools);
  if (value === undefined) return undefined;
  const fix = `Give -c ${CONTEXT_KEYS.tools}=<file>, the path of a JSON tool registry relative to ${root} or absolute (see README.md, Tools), or leave the key out for the built-in tools only.`;
  if (typeof value !== "string" || value.trim() === "")
    throw new SettingsError(`Invalid CDK context ${CONTEXT_KEYS.tools}=${JSON.stringify(value)}. ${fix}`);
  const file = resolve(root, value);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (cause) {
    const why = cause instanceof SyntaxError ? `it is not JSON (${cause.message})` : (cause as Error).message;
    const message = `Cannot read the tool registry ${file} (-c ${CONTEXT_KEYS.tools}=${value}): ${why}. ${fix}`;
    throw new SettingsError(message, { cause });
  }
  let config: ToolRegistry["config"];
  try {
    config = parseToolsConfig(raw, `The tool registry ${file}`);
  } catch (cause) {
    if (!(cause instanceof ValidationError)) throw cause;
    throw new SettingsError(
      `The tool registry ${file} (-c ${CONTEXT_KEYS.tools}=${value}) is not valid; fix these fields ` +
        `(shared/tools/service/config.ts and README.md, Tools, describe each kind):\n  ${cause.issues.join("\n  ")}`,
      { cause },
    );
  }
  const refused = undeployableEntries(config);
  if (refused.length > 0)
    throw new SettingsError(
      `The tool registry ${file} (-c ${CONTEXT_KEYS.tools}=${value}) has tools the engine functions cannot run:\n  ${refused.join("\n  ")}`,
    );
  return { config, source: file };
}

/**
 * The default team of `-c team=<file>` (relative to the project root, or absolute), read and
 * validated exactly as the functions read ARBOR_TEAM_FILE (readTeamFile), against the tools they
 * will have (`tools`, the registry of `-c tools`, else the built-in tools); undefined without the
 * key (a tenant's first request then gets the built-in default team).
 */
export function readTeam(
  scope: Construct,
  tools: ToolRegistry | undefined,
  root: string = PROJECT_ROOT,
): DeployedTeam | undefined {
  const value: unknown = scope.node.tryGetContext(CONTEXT_KEYS.team);
  if (value === undefined) return undefined;
  const fix = `Give -c ${CONTEXT_KEYS.team}=<file>, the path of a team file relative to ${root} or absolute (see README.md, Teams), or leave the key out for the built-in default team.`;
  if (typeof value !== "string" || value.trim() === "")
    throw new SettingsError(`Invalid CDK context ${CONTEXT_KEYS.team}=${JSON.stringify(value)}. ${fix}`);
  const file = resolve(root, value);
  const toolNames = Object.keys((tools?.config ?? DEFAULT_TOOLS).tools);
  try {
    return {
      team: readTeamFile(file, toolNames, `The team file ${file} (-c ${CONTEXT_KEYS.team}=${value})`),
      source: file,
    };
  } catch (cause) {
    if (cause instanceof ValidationError)
      throw new SettingsError(
        `The team file ${file} (-c ${CONTEXT_KEYS.team}=${value}) is not valid; fix these fields ` +
          `(README.md, Teams, describes the file):\n  ${cause.issues.length ? cause.issues.join("\n  ") : cause.message}`,
        { cause },
      );
    if (cause instanceof ConfigError) throw new SettingsError(`${cause.message}. ${fix}`, { cause });
    throw cause;
  }
}

/**
 * Account and region from the CLI (`CDK_DEFAULT_ACCOUNT` / `CDK_DEFAULT_REGION`) when it knows
 * them; without credentials the stack is environment-agnostic, which is all `cdk synth` needs.
 */
function environmentFrom(env: NodeJS.ProcessEnv): Environment {
  const account = env.CDK_DEFAULT_ACCOUNT;
  const region = env.CDK_DEFAULT_REGION;
  return { ...(account ? { account } : {}), ...(region ? { region } : {}) };
}

export interface CreateAppOptions extends AppProps {
  /** Where account and region come from (default `process.env`). */
  readonly processEnv?: NodeJS.ProcessEnv;
}

export function createApp(options: CreateAppOptions = {}) {
  const { processEnv = process.env, ...appProps } = options;
  const app = new App(appProps);
  const settings = readSettings(app);
  const model = readModel(app);
  const tools = readToolRegistry(app);
  const apiThrottle = readApiThrottle(app);
  const team = readTeam(app, tools);
  const chat = readChatSecret(app);
  const traces = readTraces(app);
  const env = environmentFrom(processEnv);
  const removalPolicy = settings.removalPolicy === "destroy" ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN;
  const storage = new StorageStack(app, `arbor-${settings.stage}-storage`, {
    env,
    description: `Arbor storage layer (${settings.stage}): resources and policies buckets, state table, event bus`,
    tags: { project: "arbor", stage: settings.stage },
    terminationProtection: !settings.dev,
    stage: settings.stage,
    removalPolicy,
    deletionProtection: !settings.dev,
  });
  const engine = new EngineStack(app, `arbor-${settings.stage}-engine`, {
    env,
    description: `Arbor engine (${settings.stage}): one Lambda function and EventBridge rule per engine step, the watchdog, the tool function, the vector index`,
    tags: { project: "arbor", stage: settings.stage },
    terminationProtection: !settings.dev,
    stage: settings.stage,
    removalPolicy,
    storage,
    model,
    ...(tools ? { tools } : {}),
    apiThrottle,
    ...(team ? { team } : {}),
    ...(chat ? { chat } : {}),
    ...(traces ? { traces } : {}),
  });
  // cdk-nag 3 is a CDK policy-validation plugin (it was an Aspect up to v2): its findings are
  // reported, and fail synthesis, after the templates are written. Acknowledgements sit next to
  // the constructs they concern, each with its reason.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { app, settings, storage, engine };
}

const entry = process.argv[1];
if (entry !== undefined && realpathSync(entry) === fileURLToPath(import.meta.url)) {
  try {
    createApp().app.synth();
  } catch (e) {
    if (!(e instanceof SettingsError)) throw e;
    console.error(e.message);
    process.exitCode = 1;
  }
}
