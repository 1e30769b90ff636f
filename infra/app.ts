import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { App, type AppProps, type Environment, RemovalPolicy, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import type { Construct } from "constructs";
import { z } from "zod";
import { StorageStack } from "./stacks/storage-stack.ts";

/** The CDK context keys the app reads (`npx cdk deploy -c stage=prod`). */
export const CONTEXT_KEYS = {
  stage: "stage",
  removalPolicy: "removalPolicy",
} as const;

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

/** Bad CDK context: the message says which key to fix. */
export class SettingsError extends Error {
  override readonly name = "SettingsError";
}

/** Reads and validates the app's settings from CDK context, with defaults. */
export function readSettings(scope: Construct): ArborSettings {
  const raw = Object.fromEntries(
    Object.values(CONTEXT_KEYS).map((key) => [key, scope.node.tryGetContext(key) as unknown]),
  );
  const parsed = ContextSchema.safeParse(raw);
  if (!parsed.success) {
    throw new SettingsError(
      `Invalid CDK context for the Arbor app (set it with -c <key>=<value>):\n${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
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
  const storage = new StorageStack(app, `arbor-${settings.stage}-storage`, {
    env: environmentFrom(processEnv),
    description: `Arbor storage layer (${settings.stage}): resources and policies buckets, state table, event bus`,
    tags: { project: "arbor", stage: settings.stage },
    terminationProtection: !settings.dev,
    stage: settings.stage,
    removalPolicy: settings.removalPolicy === "destroy" ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    deletionProtection: !settings.dev,
  });
  // cdk-nag 3 is a CDK policy-validation plugin (it was an Aspect up to v2): its findings are
  // reported, and fail synthesis, after the templates are written. Acknowledgements sit next to
  // the constructs they concern, each with its reason.
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { app, settings, storage };
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
