import {
  Aws,
  CfnOutput,
  Duration,
  Fn,
  type RemovalPolicy,
  Stack,
  type StackProps,
  Validations,
} from "aws-cdk-lib";
import { type ITable, Table } from "aws-cdk-lib/aws-dynamodb";
import { EventBus, type IEventBus, Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import { ManagedPolicy, PolicyStatement } from "aws-cdk-lib/aws-iam";
import { type CfnFunction, Function as LambdaFn } from "aws-cdk-lib/aws-lambda";
import { RetentionDays } from "aws-cdk-lib/aws-logs";
import { Bucket, type IBucket } from "aws-cdk-lib/aws-s3";
import { type IQueue, Queue } from "aws-cdk-lib/aws-sqs";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import type { Construct } from "constructs";
import { ALL_GSIS } from "../../shared/adapters/aws/dynamo-schema.ts";
import { QUEUED_STEPS, type QueuedStep, ROUTES, type StepName } from "../../shared/engine/routes.ts";
import { EVAL_ROUTE } from "../../shared/evals/driver.ts";
import { type ApiThrottle, ArborApi, DEFAULT_API_THROTTLE } from "../constructs/api-gateway.ts";
import { ChatSecret, type ChatSecretRef } from "../constructs/chat-secret.ts";
import {
  CommandQueue,
  readLeavesAtOnce,
  readLeavesWhenIdle,
  readStepConcurrency,
} from "../constructs/command-queue.ts";
import { EngineFunction } from "../constructs/engine-function.ts";
import {
  API_GRANTS,
  EVAL_STEP_GRANTS,
  type Grant,
  type GrantArns,
  NOTIFY_GRANTS,
  SENDS_NO_COMMAND,
  STEP_GRANTS,
  statementOf,
  TOOL_FUNCTION_GRANTS,
} from "../constructs/grants.ts";
import { NotifyFunction } from "../constructs/notify-function.ts";
import {
  ALARMS,
  addOpsOutputs,
  OpsAlarms,
  readAlarmEmail,
  readReservedConcurrency,
} from "../constructs/ops-alarms.ts";
import { RouteRule } from "../constructs/route-rule.ts";
import {
  BUNDLED_TEAM_FILE,
  DEPLOYED_TEAM_FILE,
  type DeployedTeam,
  stageTeamFile,
} from "../constructs/team-file.ts";
import { ToolFunction } from "../constructs/tool-function.ts";
import { assertDeployable, type ToolRegistry } from "../constructs/tool-registry.ts";
import { EMBEDDING_MODEL_ID, VectorStore } from "../constructs/vector-store.ts";
import { STORAGE_OUTPUT_KEYS, type StorageOutputs, type StorageStack } from "./storage-stack.ts";

export interface EngineModel {
  readonly provider: "bedrock";
  /** A Bedrock model id or a cross-region inference profile id (`us.`, `eu.`, ... prefix). */
  readonly id: string;
  /** Its context window in tokens (`-c contextTokens`, ARBOR_CONTEXT_TOKENS); absent: the engine's default. */
  readonly contextTokens?: number;
}

export interface EngineStackProps extends StackProps {
  readonly stage: string;
  /** For the vector store and the log groups. */
  readonly removalPolicy: RemovalPolicy;
  /**
   * The storage layer: its resources bucket, state table, event bus and dead-letter queue are
   * read from the stack's published outputs (STORAGE_OUTPUT_KEYS) with Fn::GetStackOutput.
   * Referencing the constructs' own tokens instead would make CDK add an output to the storage
   * stack for every value used here.
   */
  readonly storage: StorageStack;
  readonly model: EngineModel;
  /**
   * The tool registry (`-c tools=<file>`), shipped in the tool function's bundle as `tools.json`
   * with ARBOR_TOOLS_FILE pointing at it; its `lambda` tools' functions are granted to the tool
   * function only (ToolFunctionAccess). None: the tool function has the built-in tools only.
   */
  readonly tools?: ToolRegistry;
  /**
   * The default team (`-c team=<file>`), shipped in the API function's bundle as `team.json` with
   * ARBOR_TEAM_FILE pointing at it: a tenant without assistants gets it at its first request,
   * which the API function takes. None: the built-in default team.
   */
  readonly team?: DeployedTeam;
  /**
   * Where every function sends its spans (`-c traces`): X-Ray's OTLP endpoint in the stack's
   * region (signed by each function's role, which is granted xray:PutSpans), or an OTLP/HTTP
   * endpoint the operator runs. None: no tracing, nothing loaded (shared/runtime/telemetry.ts).
   */
  readonly traces?: Traces;
  /** Default one month. */
  readonly logRetention?: RetentionDays;
  /** Default 10 minutes: twice the longest step timeout, so running work is never re-driven. */
  readonly watchdogStale?: Duration;
  /** The HTTP API's stage throttling (`-c apiRateLimit`, `-c apiBurstLimit`); default DEFAULT_API_THROTTLE. */
  readonly apiThrottle?: ApiThrottle;
  /**
   * The chat channels' settings secret (`-c chatSecret`, `-c chatSecretKey`): the API function
   * serves the Slack and Teams routes, the notify function posts to them; both read it. None: no
   * chat routes on the API, and neither function may read any secret.
   */
  readonly chat?: ChatSecretRef;
}

/** The CloudFormation output key of each function name and of the vector store names. */
export const ENGINE_OUTPUT_KEYS = {
  plan: "PlanFunctionName",
  ready: "ReadyFunctionName",
  turn: "TurnFunctionName",
  resume: "ResumeFunctionName",
  supervise: "SuperviseFunctionName",
  "index-output": "IndexOutputFunctionName",
  activity: "ActivityFunctionName",
  documents: "DocumentsFunctionName",
  eval: "EvalFunctionName",
  watchdog: "WatchdogFunctionName",
  notify: "NotifyFunctionName",
  notifyQueue: "NotifyDeliveryQueueUrl",
  toolFunction: "ToolFunctionName",
  vectorBucketName: "VectorBucketName",
  vectorIndexName: "VectorIndexName",
  apiUrl: "ApiUrl",
  agentCardUrl: "AgentCardUrl",
} as const satisfies Record<
  | StepName
  | "eval"
  | "watchdog"
  | "notify"
  | "notifyQueue"
  | "toolFunction"
  | "vectorBucketName"
  | "vectorIndexName"
  | "apiUrl"
  | "agentCardUrl",
  string
>;

/** A step that may call the model waits for it: long answers and Bedrock's retries take minutes. */
const MODEL_STEP = { timeout: Duration.minutes(5), memorySize: 1024 } as const;
const PLAIN_STEP = { timeout: Duration.minutes(1), memorySize: 512 } as const;
/** A step that runs tools and calls no model (activity): it waits on the tool function (4 minutes at most). */
const TOOL_STEP = { timeout: Duration.minutes(5), memorySize: 512 } as const;
/** A document's processing: a PDF read on a thread with its own heap, hundreds of chunks embedded. */
const DOCUMENT_STEP = { timeout: Duration.minutes(5), memorySize: 1024 } as const;

/** Inference profile ids start with their geography (`us.anthropic...`, `global.anthropic...`). */
const INFERENCE_PROFILE = /^(us|us-gov|eu|apac|jp|au|ca|global)\.(.+)$/;

/** The storage stack's resources, as this stack sees them. */
export interface StorageResources {
  readonly resourcesBucket: IBucket;
  /** OPA bundles: what decides who may do what (policies/README.md). */
  readonly policiesBucket: IBucket;
  readonly table: ITable;
  readonly eventBus: IEventBus;
  readonly deadLetterQueue: IQueue;
}

/**
 * The orchestration engine on Lambda: one function per route of shared/engine/routes.ts, each
 * invoked by a rule of the same name and pattern on the Arbor bus, plus the watchdog on a
 * schedule, the tool function the ready and turn steps call for every tool call, and the S3
 * Vectors store the engine embeds into.
 */
/** `-c traces`: X-Ray's OTLP endpoint, or an OTLP/HTTP endpoint of the operator's. */
export type Traces = { to: "xray" } | { to: "otlp"; endpoint: string };

/** What the functions read of `-c traces` (shared/runtime/telemetry.ts). */
export function tracesEnvironment(traces: Traces | undefined): Record<string, string> {
  if (!traces) return {};
  return traces.to === "xray"
    ? { ARBOR_TRACES: "xray" }
    : { OTEL_EXPORTER_OTLP_ENDPOINT: traces.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" };
}

export class EngineStack extends Stack {
  /** With `-c traces=xray`: every function's right to send its spans. */
  readonly tracesPolicy?: ManagedPolicy;
  readonly storage: StorageResources;
  readonly steps: Record<StepName, EngineFunction>;
  /** The rules of the steps that start on RESOURCE_PUT (supervise, index-output). */
  readonly rules: Partial<Record<StepName, RouteRule>>;
  /** The queues of the steps started by a command (QUEUED_STEPS): the command is sent there, not on the bus. */
  readonly commandQueues: Record<QueuedStep, CommandQueue>;
  /** Experiments started over the API (shared/evals/driver.ts): moved on by their requests' events. */
  readonly evalStep: EngineFunction;
  readonly evalRule: RouteRule;
  readonly watchdog: EngineFunction;
  readonly watchdogSchedule: Rule;
  readonly vectors: VectorStore;
  /** The API function's data rights (API_GRANTS). */
  readonly apiDataPolicy: ManagedPolicy;
  /** The watchdog's (WATCHDOG_GRANTS, the experiments' driver's: the same policy as evalDataPolicy). */
  readonly watchdogDataPolicy: ManagedPolicy;
  /** Each step function's own data rights (STEP_GRANTS). */
  readonly stepDataPolicies: Record<StepName, ManagedPolicy>;
  /** The experiments' driver's (EVAL_STEP_GRANTS). */
  readonly evalDataPolicy: ManagedPolicy;
  /** The tool function's own, narrower data policy (TOOL_FUNCTION_GRANTS): no delete but a retired tool's. */
  readonly toolDataPolicy: ManagedPolicy;
  /** Send any command to its step's queue: the steps, the experiments' step and the watchdog. */
  readonly commandsPolicy: ManagedPolicy;
  readonly modelPolicy: ManagedPolicy;
  /** Runs every tool call; the only function with the tools' grants, registry and connections. */
  readonly tools: ToolFunction;
  /** Invoke on the functions of the registry's `lambda` tools (the tool function's); none without such tools. */
  readonly toolPolicy: ManagedPolicy | undefined;
  /** Alarms and their topic (infra/constructs/ops-alarms.ts). */
  readonly ops: OpsAlarms;
  /** The front door: the API function behind API Gateway's HTTP API. */
  readonly api: ArborApi;
  /** Webhook deliveries: the notify function, its wake and delivery queues, rule and schedule. */
  readonly notify: NotifyFunction;
  /** The chat channels' secret and who reads it (the API and notify functions); none without -c chatSecret. */
  readonly chat: ChatSecret | undefined;

  constructor(scope: Construct, id: string, props: EngineStackProps) {
    super(scope, id, props);
    const logRetention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const watchdogStale = props.watchdogStale ?? Duration.minutes(10);
    const alarmEmail = readAlarmEmail(this);
    this.storage = this.#importStorage(props.storage);
    const { deadLetterQueue } = this.storage;

    this.vectors = new VectorStore(this, "Vectors", {
      stage: props.stage,
      removalPolicy: props.removalPolicy,
    });
    // The commands' queues first: every function that sends a command names them all.
    const sizeOf = (name: StepName) => {
      const route = ROUTES.find((r) => r.name === name);
      if (name === "documents") return DOCUMENT_STEP;
      return route?.callsModel ? MODEL_STEP : route?.runsTools ? TOOL_STEP : PLAIN_STEP;
    };
    this.commandQueues = Object.fromEntries(
      QUEUED_STEPS.map((step) => [
        step,
        new CommandQueue(this, `${pascal(step)}Commands`, {
          consumerTimeout: sizeOf(step).timeout,
          deadLetterQueue,
          removalPolicy: props.removalPolicy,
        }),
      ]),
    ) as Record<QueuedStep, CommandQueue>;
    const stepConcurrency = readStepConcurrency(this);
    const leavesAtOnce = readLeavesAtOnce(this, stepConcurrency);
    const leavesWhenIdle = readLeavesWhenIdle(this, stepConcurrency, leavesAtOnce);
    // The engine's functions may send any command (a step's work leads to any other step's); the
    // API function and the tool function get the ones they send (below).
    this.commandsPolicy = new ManagedPolicy(this, "EngineCommands", {
      description: "Arbor engine functions: send the steps' commands to their queues",
      statements: [
        new PolicyStatement({
          sid: "Commands",
          actions: ["sqs:SendMessage"],
          resources: QUEUED_STEPS.map((step) => this.commandQueues[step].queue.queueArn),
        }),
        // How many leaf steps wait or run (shared/engine/leaf-slots.ts): while others' are few,
        // a request's leaves may run up to ARBOR_LEAVES_WHEN_IDLE at once.
        ...(leavesWhenIdle
          ? [
              new PolicyStatement({
                sid: "LeafSteps",
                actions: ["sqs:GetQueueAttributes"],
                resources: [this.commandQueues.ready.queue.queueArn, this.commandQueues.turn.queue.queueArn],
              }),
            ]
          : []),
      ],
    });
    this.modelPolicy = this.#modelPolicy(props.model);
    if (props.tools) assertDeployable(props.tools);
    const environment = {
      ARBOR_MODE: "aws",
      ARBOR_RESOURCES_BUCKET: this.storage.resourcesBucket.bucketName,
      // OPA decides on AWS: the bundle built from policies/arbor.rego, uploaded with its sha256.
      ARBOR_POLICY_ENGINE: "opa",
      ARBOR_POLICIES_BUCKET: this.storage.policiesBucket.bucketName,
      ARBOR_TABLE_NAME: this.storage.table.tableName,
      ARBOR_EVENT_BUS_NAME: this.storage.eventBus.eventBusName,
      ARBOR_VECTOR_BUCKET: this.vectors.bucketName,
      ARBOR_VECTOR_INDEX: this.vectors.indexName,
      ARBOR_MODEL_PROVIDER: props.model.provider,
      ARBOR_MODEL: props.model.id,
      ...(props.model.contextTokens ? { ARBOR_CONTEXT_TOKENS: String(props.model.contextTokens) } : {}),
      ARBOR_LEAVES_AT_ONCE: String(leavesAtOnce),
      ARBOR_LEAVES_WHEN_IDLE: String(leavesWhenIdle),
      POWERTOOLS_LOG_LEVEL: "INFO",
      ARBOR_STAGE: props.stage,
      ARBOR_COMMAND_QUEUES: this.toJsonString(
        Object.fromEntries(QUEUED_STEPS.map((step) => [step, this.commandQueues[step].queue.queueUrl])),
      ),
      ...tracesEnvironment(props.traces),
    };
    const common = { logRetention, removalPolicy: props.removalPolicy };
    const { ARBOR_MODEL: _model, ARBOR_MODEL_PROVIDER: _provider, ...toolEnvironment } = environment;
    this.toolDataPolicy = this.#grantsPolicy(
      "ToolDataAccess",
      "Arbor tool function: reads, and the writes of its own records only (infra/constructs/grants.ts)",
      TOOL_FUNCTION_GRANTS,
    );
    this.tools = new ToolFunction(this, "Tools", {
      ...common,
      environment: toolEnvironment,
      dataPolicy: this.toolDataPolicy,
      ...(props.tools ? { registry: props.tools } : {}),
    });
    this.toolPolicy = this.tools.toolPolicy;

    const steps: Partial<Record<StepName, EngineFunction>> = {};
    const stepData: Partial<Record<StepName, ManagedPolicy>> = {};
    const rules: Partial<Record<StepName, RouteRule>> = {};
    for (const route of ROUTES) {
      const id = pascal(route.name);
      const data = this.#grantsPolicy(
        `${id}StepData`,
        `Arbor engine step "${route.name}": the reads and writes of its route (infra/constructs/grants.ts)`,
        STEP_GRANTS[route.name],
      );
      stepData[route.name] = data;
      const fn = new EngineFunction(this, `${id}Step`, {
        ...common,
        ...sizeOf(route.name),
        entry: "functions/engine-step.ts",
        description: `Arbor engine step "${route.name}": ${route.description}`,
        // A tool runs only on the model's tool call, in a leaf's inner loop (ready, turn): only
        // those steps call the tool function, and may.
        environment: route.runsTools
          ? { ...environment, ARBOR_TOOL_FUNCTION: this.tools.handler.function.functionName }
          : environment,
        policies: [
          // Its own data rights (infra/constructs/grants.ts: STEP_GRANTS), not the API's and watchdog's.
          data,
          // Indexing an output and running an activity start nothing.
          ...(SENDS_NO_COMMAND.has(route.name) ? [] : [this.commandsPolicy]),
          ...(route.callsModel ? [this.modelPolicy] : []),
          ...(route.runsTools ? [this.tools.invokePolicy] : []),
        ],
        // A failed step is retried twice by Lambda (after about 1 and 2 minutes), then its
        // invocation goes to the dead-letter queue, from where it can be sent again.
        retryAttempts: 2,
        maxEventAge: Duration.hours(6),
        deadLetterQueue,
      });
      steps[route.name] = fn;
      const queued = QUEUED_STEPS.find((q) => q === route.name);
      if (queued) {
        this.commandQueues[queued].consumeWith(fn.function, stepConcurrency);
        new CfnOutput(this, ENGINE_OUTPUT_KEYS[route.name], {
          value: fn.function.functionName,
          description: `Engine step function "${route.name}" (its commands' queue)`,
        });
        continue;
      }
      rules[route.name] = new RouteRule(this, `${id}Route`, {
        eventBus: this.storage.eventBus,
        name: route.name,
        description: route.description,
        pattern: route.pattern,
        target: fn.function,
        retryAttempts: 8,
        maxEventAge: Duration.hours(1),
        deadLetterQueue,
      });
      new CfnOutput(this, ENGINE_OUTPUT_KEYS[route.name], {
        value: fn.function.functionName,
        description: `Engine step function "${route.name}"`,
      });
    }
    this.steps = steps as Record<StepName, EngineFunction>;
    this.stepDataPolicies = stepData as Record<StepName, ManagedPolicy>;
    this.rules = rules;

    // The experiments' driver: the engine-step bundle on its own rule, whose pattern takes only the
    // events of experiments' requests (their conversations' URNs say so). It submits, answers and
    // scores, and a case's judge calls the model; it runs no tool.
    this.evalDataPolicy = this.#grantsPolicy(
      "EvalStepData",
      "Arbor experiments and the watchdog's sweep of them: a case's requests and the experiment's records (infra/constructs/grants.ts)",
      EVAL_STEP_GRANTS,
    );
    this.evalStep = new EngineFunction(this, "EvalStep", {
      ...common,
      ...MODEL_STEP,
      entry: "functions/engine-step.ts",
      description: `Arbor experiments: ${EVAL_ROUTE.description}`,
      environment,
      policies: [this.evalDataPolicy, this.commandsPolicy, this.modelPolicy],
      retryAttempts: 2,
      maxEventAge: Duration.hours(6),
      deadLetterQueue,
    });
    this.evalRule = new RouteRule(this, "EvalRoute", {
      eventBus: this.storage.eventBus,
      name: EVAL_ROUTE.name,
      description: EVAL_ROUTE.description,
      pattern: EVAL_ROUTE.pattern,
      target: this.evalStep.function,
      retryAttempts: 8,
      maxEventAge: Duration.hours(1),
      deadLetterQueue,
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.eval, {
      value: this.evalStep.function.functionName,
      description: "Experiments' step function (the runtime-driven experiments)",
    });

    // The watchdog may evaluate a stalled parent, i.e. call the model. It runs no tool: a leaf's
    // turns it only sends again (shared/engine/steps/lifecycle.ts `watchdog`), so no tool function.
    // Its grants are the experiments' driver's (WATCHDOG_GRANTS): one policy serves both.
    this.watchdogDataPolicy = this.evalDataPolicy;
    this.watchdog = new EngineFunction(this, "Watchdog", {
      ...common,
      ...MODEL_STEP,
      entry: "functions/watchdog.ts",
      description:
        "Arbor engine watchdog: sends again the commands of work that stopped moving, and sweeps running experiments",
      environment: { ...environment, ARBOR_WATCHDOG_STALE_MS: String(watchdogStale.toMilliseconds()) },
      policies: [this.watchdogDataPolicy, this.commandsPolicy, this.modelPolicy],
      // The next run, five minutes later, does the same work: no retries, nothing to dead-letter.
      retryAttempts: 0,
      maxEventAge: Duration.minutes(5),
    });
    this.watchdogSchedule = new Rule(this, "WatchdogSchedule", {
      description: "Runs the Arbor engine watchdog",
      schedule: Schedule.rate(Duration.minutes(5)),
      targets: [new LambdaFunction(this.watchdog.function, { retryAttempts: 0 })],
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.watchdog, {
      value: this.watchdog.function.functionName,
      description: "Engine watchdog function",
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.toolFunction, {
      value: this.tools.handler.function.functionName,
      description:
        "Tool function: every tool call of the engine (ARBOR_TOOL_FUNCTION of the ready and turn steps)",
    });
    this.ops = new OpsAlarms(this, "Ops", {
      stage: props.stage,
      deadLetterQueue,
      callees: [{ label: "ToolFunction", fn: this.tools.handler.function }],
      watchdog: this.watchdog.function,
      ...(alarmEmail ? { alarmEmail } : {}),
    });
    addOpsOutputs(this, { ops: this.ops, deadLetterQueue, policiesBucket: this.storage.policiesBucket });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.vectorBucketName, {
      value: this.vectors.bucketName,
      description: "S3 Vectors bucket of the engine's embeddings",
    });
    // The API function writes what the entry points write (API_GRANTS), and calls no model and no
    // tool. It lists the tools (from the tool function: it holds no registry and no secret), to
    // check team files against them, and gives a tenant's first request the default team.
    this.apiDataPolicy = this.#grantsPolicy(
      "ApiData",
      "Arbor API function: what the entry points read and write (infra/constructs/grants.ts)",
      API_GRANTS,
    );
    this.api = new ArborApi(this, "Api", {
      ...common,
      environment: {
        ...environment,
        ARBOR_TOOL_FUNCTION: this.tools.handler.function.functionName,
        ...(props.team ? { ARBOR_TEAM_FILE: DEPLOYED_TEAM_FILE } : {}),
      },
      ...(props.team ? { bundledFiles: { [BUNDLED_TEAM_FILE]: stageTeamFile(this, props.team.team) } } : {}),
      policies: [this.apiDataPolicy, this.tools.invokePolicy],
      throttle: props.apiThrottle ?? DEFAULT_API_THROTTLE,
      ...(props.chat ? { chat: true } : {}),
    });
    this.ops.addCallee({ label: "ApiFunction", fn: this.api.function.function });
    this.notify = new NotifyFunction(this, "Notify", {
      ...common,
      environment,
      eventBus: this.storage.eventBus,
      dataPolicy: this.#grantsPolicy(
        "NotifyData",
        "Arbor notify function: reads tasks and answers, records subscriptions and deliveries (infra/constructs/grants.ts)",
        NOTIFY_GRANTS,
      ),
      deadLetterQueue,
    });
    this.ops.addQueueAge(
      "NotifyDeliveries",
      this.notify.deliveries,
      "Webhook deliveries have waited over 20 minutes in the notify function's queue: its invocations " +
        "fail, are throttled, or are all held by receivers that do not answer. The NotifyFunction's log " +
        "and alarms say which; GET /v1/admin/deliveries shows each tenant's.",
    );
    this.ops.addQueueAge(
      "NotifyWakeups",
      this.notify.wakeQueue,
      "The engine's events have waited over 5 minutes in the notify wake queue: the notify function " +
        "fails or is throttled on them, so webhooks and chat threads fall behind. Its log and alarms say which.",
      ALARMS.oldestWakeup,
    );
    this.ops.addApi("Api", this.api.gateway.stage);
    this.ops.addTable("StateTable", this.storage.table);
    this.ops.addModel(props.model.id);
    for (const step of QUEUED_STEPS)
      this.ops.addQueueAge(
        `${pascal(step)}Commands`,
        this.commandQueues[step].queue,
        `Commands have waited over 5 minutes in the "${step}" step's queue: the ${pascal(step)}Step function ` +
          "fails on them, is throttled, or runs at its maximum concurrency (-c stepConcurrency) on a wide request. " +
          "Its log and alarms say which.",
        ALARMS.oldestCommand,
      );
    // Reserved concurrency (-c apiConcurrency, -c toolConcurrency): the front door and the tools keep
    // their share of the account whatever a wide request's steps take.
    const reserved = readReservedConcurrency(this);
    const reserve = (fn: { node: { defaultChild?: unknown } }, n: number | undefined) => {
      if (n !== undefined) (fn.node.defaultChild as CfnFunction).reservedConcurrentExecutions = n;
    };
    reserve(this.api.function.function, reserved.api);
    reserve(this.tools.handler.function, reserved.tools);
    // Slack and Teams: the API function takes their requests, the notify function posts the threads.
    this.chat = props.chat ? new ChatSecret(this, "ChatSecret", props.chat) : undefined;
    for (const fn of this.chat ? [this.api.function, this.notify.handler] : [])
      this.chat?.grantRead(fn.function, fn.role);
    // The API function queues what it records (a subscription's first notification, a redrive).
    this.notify.grantQueue(this.api.function.role);
    // It plans what it takes (a message, an A2A send), resumes what a person answered, and goes on
    // with a leaf's turn when a remote agent pushes its answer (POST /v1/a2a-callbacks/:id); the tool
    // function settles a remote call whose answer came with the call's own response the same way.
    for (const step of ["plan", "resume", "turn"] as const)
      this.commandQueues[step].queue.grantSendMessages(this.api.function.role);
    // A request canceled here frees its leaves' slots, counting the leaf steps as every step does
    // (the turn queue's count comes with sending to it, above).
    if (leavesWhenIdle)
      this.commandQueues.ready.queue.grant(this.api.function.role, "sqs:GetQueueAttributes");
    this.commandQueues.turn.queue.grantSendMessages(this.tools.handler.role);
    this.api.function.function.addEnvironment("ARBOR_NOTIFY_QUEUE_URL", this.notify.deliveries.queueUrl);
    // The steps that run tools make the callback an A2A agent that pushes is given (the tool
    // function has no public URL: the API's endpoint there would close a cycle, API -> API function
    // -> tool function -> API). The push comes to the API function, which settles the call
    // through the tool function (SettleTool).
    for (const route of ROUTES.filter((r) => r.runsTools))
      this.steps[route.name].function.addEnvironment("ARBOR_PUBLIC_URL", this.api.gateway.url);
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.notify, {
      value: this.notify.handler.function.functionName,
      description: "Notify function: webhook deliveries (A2A push, HTTP callbacks)",
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.notifyQueue, {
      value: this.notify.deliveries.queueUrl,
      description: "Notify delivery queue: one delivery id per message",
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.apiUrl, {
      value: this.api.gateway.url,
      description: "Arbor's API (ARBOR_URL)",
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.agentCardUrl, {
      value: `${this.api.gateway.url}/.well-known/agent-card.json`,
      description: "Arbor's A2A agent card",
    });
    new CfnOutput(this, ENGINE_OUTPUT_KEYS.vectorIndexName, {
      value: this.vectors.indexName,
      description: "S3 Vectors index (Titan Text Embeddings v2, 1024 dimensions, cosine)",
    });
    if (props.traces?.to === "xray") this.tracesPolicy = this.#tracesPolicy();
  }

  /** The right to send spans to X-Ray's OTLP endpoint, given to every function of the stack. */
  #tracesPolicy(): ManagedPolicy {
    const policy = new ManagedPolicy(this, "Traces", {
      description: "Arbor functions: send their spans to X-Ray's OTLP endpoint (-c traces=xray)",
      statements: [
        new PolicyStatement({
          sid: "Traces",
          actions: ["xray:PutSpans", "xray:PutSpansForIndexing"],
          resources: ["*"],
        }),
      ],
    });
    Validations.of(policy).acknowledge({
      id: nagFinding("AwsSolutions-IAM5", "Resource::*"),
      reason:
        "X-Ray's span ingestion has no resource to name: PutSpans and PutSpansForIndexing take only *. " +
        "The policy holds these two actions and nothing else.",
    });
    for (const fn of this.node.findAll())
      if (fn instanceof LambdaFn && fn.role) fn.role.addManagedPolicy(policy);
    return policy;
  }

  #importStorage(storage: StorageStack): StorageResources {
    this.addStackDependency(storage, "the engine reads the storage stack's outputs");
    const output = (key: keyof StorageOutputs) =>
      Fn.getStackOutput(storage.stackName, STORAGE_OUTPUT_KEYS[key]);
    return {
      resourcesBucket: Bucket.fromBucketName(this, "ResourcesBucket", output("resourcesBucketName")),
      policiesBucket: Bucket.fromBucketName(this, "PoliciesBucket", output("policiesBucketName")),
      table: Table.fromTableName(this, "StateTable", output("tableName")),
      eventBus: EventBus.fromEventBusAttributes(this, "EventBus", {
        eventBusName: output("eventBusName"),
        eventBusArn: output("eventBusArn"),
        eventBusPolicy: "",
      }),
      // Imported, so no rule adds a statement to its policy: the storage stack's policy already
      // admits every rule on the bus.
      deadLetterQueue: Queue.fromQueueAttributes(this, "DeadLetterQueue", {
        queueArn: output("deadLetterQueueArn"),
        queueUrl: output("deadLetterQueueUrl"),
      }),
    };
  }

  /** The stack's ARNs of what grants name (infra/constructs/grants.ts). */
  #grantArns(storage: StorageResources): GrantArns {
    const tableArn = storage.table.tableArn;
    return {
      resourcesBucket: storage.resourcesBucket.bucketArn,
      policiesBucket: storage.policiesBucket.bucketArn,
      table: tableArn,
      indexes: ALL_GSIS.map((g) => `${tableArn}/index/${g.name}`),
      bus: storage.eventBus.eventBusArn,
      embeddingModel: foundationModelArn(this, EMBEDDING_MODEL_ID),
      vectorIndex: this.vectors.indexArn,
    };
  }

  /** A managed policy of `grants`, with cdk-nag's object wildcards acknowledged, each with its reason. */
  #grantsPolicy(id: string, description: string, grants: readonly Grant[]): ManagedPolicy {
    const arns = this.#grantArns(this.storage);
    const policy = new ManagedPolicy(this, id, {
      description,
      statements: grants.map((g) => statement(g, arns)),
    });
    for (const g of grants)
      if ("objects" in g.on)
        for (const resource of statementOf(g, arns).resources)
          Validations.of(policy).acknowledge({
            id: nagFinding("AwsSolutions-IAM5", `Resource::${flattenCfnReference(this.resolve(resource))}`),
            reason:
              `Objects of the resources bucket whose keys match ${resource.split("/").slice(1).join("/")}: each ` +
              `resource is an object named by its URN, created at run time, so no fixed list of keys exists (${g.why}).`,
          });
    return policy;
  }

  #modelPolicy(model: EngineModel): ManagedPolicy {
    const profile = INFERENCE_PROFILE.exec(model.id);
    const policy = new ManagedPolicy(this, "ModelAccess", {
      description: `Arbor engine steps that call the model: ${model.id} on Bedrock`,
      statements: [
        new PolicyStatement({
          sid: "Model",
          // Converse is authorized as InvokeModel, ConverseStream as InvokeModelWithResponseStream.
          actions: ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
          resources: profile
            ? [
                this.formatArn({ service: "bedrock", resource: "inference-profile", resourceName: model.id }),
                // A profile routes each request to the model in one of its regions.
                `arn:${Aws.PARTITION}:bedrock:*::foundation-model/${profile[2]}`,
              ]
            : [foundationModelArn(this, model.id)],
        }),
      ],
    });
    if (profile) {
      const wildcard = flattenCfnReference(
        this.resolve(`arn:${Aws.PARTITION}:bedrock:*::foundation-model/${profile[2]}`),
      );
      Validations.of(policy).acknowledge({
        id: nagFinding("AwsSolutions-IAM5", `Resource::${wildcard}`),
        reason:
          `The inference profile ${model.id} sends each request to ${profile[2]} in any of the profile's ` +
          "regions, which Bedrock chooses per request; the grant is for this one model only.",
      });
    }
    return policy;
  }
}

/**
 * cdk-nag 3 acknowledges each finding of a granular rule by `<rule>[<finding>]`, where a resource
 * finding is the resource flattened by cdk-nag's own function; using it here keeps the ids exact
 * whatever the tokens (imported names, partition) resolve to.
 */
const nagFinding = (rule: string, finding: string) => `${rule}[${finding}]`;

function foundationModelArn(stack: Stack, modelId: string): string {
  return stack.formatArn({
    service: "bedrock",
    account: "",
    resource: "foundation-model",
    resourceName: modelId,
  });
}

/** A grant (infra/constructs/grants.ts) as the stack's IAM statement. */
function statement(grant: Grant, arns: GrantArns): PolicyStatement {
  const s = statementOf(grant, arns);
  return new PolicyStatement({
    sid: s.sid,
    actions: s.actions,
    resources: s.resources,
    ...(s.conditions ? { conditions: s.conditions } : {}),
  });
}

const pascal = (name: string) =>
  name
    .split("-")
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join("");
