import { AsyncLocalStorage } from "node:async_hooks";
import { appendFileSync } from "node:fs";
import { allows, type Grant, type GrantArns } from "../../infra/constructs/grants.ts";

/**
 * A function's grants (infra/constructs/grants.ts) enforced offline: a middleware on the SDK
 * clients refuses, as AWS would (AccessDeniedException), any call made inside `within` that the
 * grants do not allow, and remembers it. So a test that runs the tool function through its real
 * paths fails when the function needs a right the stack does not give it; and `used` tells which
 * grants the tested paths needed.
 *
 *   const guard = new IamGuard(TOOL_FUNCTION_GRANTS, worldArns(world));
 *   guard.instrument(client);                 // every client the function gets (shared ones too)
 *   await guard.within(() => toolHandler(event));
 *   expect(guard.denied).toEqual([]);
 */
interface Client {
  middlewareStack: { add(middleware: unknown, options: { step: "initialize"; name: string }): void };
}

/** The IAM action and resource (and item key) of one SDK call, as IAM authorizes it. */
export function authorizationsOf(
  service: string,
  command: string,
  input: Record<string, unknown>,
  arns: GrantArns,
): { action: string; resource: string; leadingKey?: string }[] {
  const op = command.replace(/Command$/, "");
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  const bucketArn = (name: string) => `arn:aws:s3:::${name}`;
  const pk = (key: unknown) => (key as { pk?: { S?: string } } | undefined)?.pk?.S;
  switch (service) {
    case "S3":
      if (op === "ListObjectsV2")
        return [{ action: "s3:ListBucket", resource: bucketArn(str(input.Bucket)) }];
      if (op === "HeadObject")
        return [{ action: "s3:GetObject", resource: `${bucketArn(str(input.Bucket))}/${str(input.Key)}` }];
      if (op === "DeleteObjects")
        return ((input.Delete as { Objects?: { Key?: string }[] })?.Objects ?? []).map((o) => ({
          action: "s3:DeleteObject",
          resource: `${bucketArn(str(input.Bucket))}/${o.Key ?? ""}`,
        }));
      return [{ action: `s3:${op}`, resource: `${bucketArn(str(input.Bucket))}/${str(input.Key)}` }];
    case "DynamoDB": {
      const table = arns.table;
      if (op === "TransactWriteItems")
        return ((input.TransactItems as Record<string, { Key?: unknown; Item?: unknown }>[]) ?? []).flatMap(
          (t) =>
            Object.entries(t).map(([kind, item]) => ({
              action: `dynamodb:${kind === "ConditionCheck" ? "ConditionCheckItem" : `${kind}Item`}`,
              resource: table,
              leadingKey: pk(item.Key ?? item.Item) ?? "",
            })),
        );
      if (["PutItem", "UpdateItem", "DeleteItem"].includes(op))
        return [{ action: `dynamodb:${op}`, resource: table, leadingKey: pk(input.Key ?? input.Item) ?? "" }];
      if (op === "Query" && str(input.IndexName))
        return [{ action: "dynamodb:Query", resource: `${table}/index/${str(input.IndexName)}` }];
      return [{ action: `dynamodb:${op}`, resource: table }];
    }
    case "EventBridge":
      return [{ action: `events:${op}`, resource: arns.bus }];
    case "SQS":
      return [
        {
          action: op.startsWith("SendMessage") ? "sqs:SendMessage" : `sqs:${op}`,
          resource: str(input.QueueUrl),
        },
      ];
    case "BedrockRuntime":
      return [{ action: "bedrock:InvokeModel", resource: arns.embeddingModel }];
    case "S3Vectors":
      return [{ action: `s3vectors:${op}`, resource: arns.vectorIndex }];
    case "SecretsManager":
      return [{ action: `secretsmanager:${op}`, resource: str(input.SecretId) }];
    case "Lambda":
      return [{ action: "lambda:InvokeFunction", resource: str(input.FunctionName) }];
    default:
      return [{ action: `${service.toLowerCase()}:${op}`, resource: "*" }];
  }
}

export class IamGuard {
  /** Calls refused: `<action> on <resource> [key]`. */
  readonly denied: string[] = [];
  /** The sids of the grants the calls needed. */
  readonly used = new Set<string>();
  readonly #context = new AsyncLocalStorage<boolean>();
  readonly #instrumented = new WeakSet<object>();
  readonly #grants: readonly Grant[];
  readonly #arns: GrantArns;
  /** Resources outside the grants' reach the function is given on its own (its queues, its tools' functions). */
  readonly #also: readonly string[];

  static #count = 0;
  readonly #id = ++IamGuard.#count;
  /** Discovery (ARBOR_IAM_RECORD=<file>): every call is allowed and appended to the file as JSON, labelled. */
  readonly #record: { file: string; label: string } | undefined;

  constructor(grants: readonly Grant[], arns: GrantArns, also: readonly string[] = [], label = "function") {
    this.#grants = grants;
    this.#arns = arns;
    this.#also = also;
    const file = process.env.ARBOR_IAM_RECORD;
    this.#record = file ? { file, label } : undefined;
  }

  instrument(client: Client): void {
    if (this.#instrumented.has(client)) return;
    this.#instrumented.add(client);
    client.middlewareStack.add(
      (
        next: (args: { input: Record<string, unknown> }) => Promise<unknown>,
        context: Record<string, unknown>,
      ) =>
        async (args: { input: Record<string, unknown> }) => {
          if (this.#context.getStore()) {
            const service = String(context.clientName ?? "?").replace(/Client$/, "");
            for (const need of authorizationsOf(
              service,
              String(context.commandName),
              args.input,
              this.#arns,
            )) {
              if (this.#record) {
                appendFileSync(this.#record.file, `${JSON.stringify({ fn: this.#record.label, ...need })}\n`);
                continue;
              }
              if (this.#also.includes(need.resource)) continue;
              const grant = allows(this.#grants, this.#arns, need.action, need.resource, need.leadingKey);
              if (grant) {
                this.used.add(grant.sid);
                continue;
              }
              const what = `${need.action} on ${need.resource}${need.leadingKey ? ` [${need.leadingKey}]` : ""}`;
              this.denied.push(what);
              throw Object.assign(new Error(`User is not authorized to perform: ${what}`), {
                name: "AccessDeniedException",
                $metadata: { httpStatusCode: 403 },
              });
            }
          }
          return next(args);
        },
      // One per guard: a client may carry several functions' guards (the harness shares clients).
      { step: "initialize", name: `arborIamGuard-${this.#id}` },
    );
  }

  /** Runs `fn` as the guarded function: its calls are checked. */
  within<T>(fn: () => Promise<T>): Promise<T> {
    return this.#context.run(true, fn);
  }
}

/** The ARNs of an offline world's resources, named as the guard names what the clients call. */
export function worldArns(names: {
  resourcesBucket: string;
  policiesBucket?: string;
  table: string;
  bus: string;
}): GrantArns {
  const table = `arn:aws:dynamodb:us-east-1:000000000000:table/${names.table}`;
  return {
    resourcesBucket: `arn:aws:s3:::${names.resourcesBucket}`,
    policiesBucket: `arn:aws:s3:::${names.policiesBucket ?? "no-policies-bucket"}`,
    table,
    indexes: [`${table}/index/*`],
    bus: `arn:aws:events:us-east-1:000000000000:event-bus/${names.bus}`,
    embeddingModel: "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0",
    vectorIndex: "arn:aws:s3vectors:us-east-1:000000000000:bucket/vectors/index/resources",
  };
}
