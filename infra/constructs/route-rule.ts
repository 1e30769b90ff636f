import type { Duration } from "aws-cdk-lib";
import {
  type EventPattern as CdkEventPattern,
  type CfnRule,
  type IEventBus,
  type IRule,
  Rule,
  RuleTargetInput,
  type RuleTargetInputProperties,
} from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { InvalidPatternError } from "../../shared/kernel/errors.ts";
import type { EventPattern } from "../../shared/kernel/event-pattern/index.ts";

/** Our pattern's top-level keys (the envelope's field names) as CDK's EventPattern spells them. */
const CDK_FIELDS: Readonly<Record<string, keyof CdkEventPattern>> = {
  version: "version",
  id: "id",
  "detail-type": "detailType",
  source: "source",
  account: "account",
  time: "time",
  region: "region",
  resources: "resources",
  detail: "detail",
};

/**
 * The same pattern in CDK's shape. CDK renames `detailType` back to `detail-type` and passes
 * every value through untouched, so the rule's EventPattern is the route's pattern, byte for
 * byte (content filters such as `prefix` or `anything-but` included). Top-level keys EventBridge
 * does not know (a top-level `$or`) are refused rather than silently dropped.
 */
export function toCdkEventPattern(pattern: EventPattern): CdkEventPattern {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(pattern)) {
    const field = CDK_FIELDS[key];
    if (!field)
      throw new InvalidPatternError(`the key "${key}" has no CDK EventPattern field; use a CfnRule`, [key]);
    out[field] = value;
  }
  return out as CdkEventPattern;
}

/**
 * What the step function receives: `{"subscription": "<route>", "event": <the whole event>}`.
 * `<aws.events.event.json>` is EventBridge's predefined variable for the original event with its
 * detail (`<aws.events.event>` would drop the detail), usable only as a JSON value, as here.
 */
export class StepTargetInput extends RuleTargetInput {
  readonly subscription: string;

  constructor(subscription: string) {
    super();
    this.subscription = subscription;
  }

  override bind(_rule: IRule): RuleTargetInputProperties {
    return {
      inputTemplate: `{"subscription":${JSON.stringify(this.subscription)},"event":<aws.events.event.json>}`,
    };
  }
}

export interface RouteRuleProps {
  readonly eventBus: IEventBus;
  /** The route's name: the rule's name on the bus and the `subscription` the target receives. */
  readonly name: string;
  readonly description: string;
  readonly pattern: EventPattern;
  readonly target: IFunction;
  /** EventBridge's delivery retries (it retries only failures to invoke the function). */
  readonly retryAttempts: number;
  readonly maxEventAge: Duration;
  readonly deadLetterQueue: IQueue;
}

/** One engine route: a rule on the Arbor bus that invokes the route's function. */
export class RouteRule extends Construct {
  readonly rule: Rule;

  constructor(scope: Construct, id: string, props: RouteRuleProps) {
    super(scope, id);
    // A top-level `$or` (EventBridge takes it; CDK's EventPattern type has no field for it): the
    // rule gets a placeholder, replaced below by the whole pattern as it is.
    const alternatives = "$or" in props.pattern;
    this.rule = new Rule(this, "Rule", {
      eventBus: props.eventBus,
      ruleName: props.name,
      description: props.description,
      eventPattern: alternatives ? { source: ["arbor"] } : toCdkEventPattern(props.pattern),
      targets: [
        new LambdaFunction(props.target, {
          event: new StepTargetInput(props.name),
          retryAttempts: props.retryAttempts,
          maxEventAge: props.maxEventAge,
          deadLetterQueue: props.deadLetterQueue,
        }),
      ],
    });
    if (alternatives) (this.rule.node.defaultChild as CfnRule).eventPattern = props.pattern;
  }
}
