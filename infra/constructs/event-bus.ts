import { Duration, type RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import { Archive, EventBus } from "aws-cdk-lib/aws-events";
import { PolicyStatement, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";

export interface ArborEventBusProps {
  /** The bus is named `arbor-<stage>`. */
  readonly stage: string;
  /** How long the archive keeps events for replay. */
  readonly archiveRetention: Duration;
  /** For the dead-letter queue (it may hold undelivered events). */
  readonly removalPolicy: RemovalPolicy;
}

/**
 * The custom event bus, an archive of every event it receives (so a run can be replayed), and
 * the dead-letter queue that the rules added later (routing, supervisors, notify) give their
 * targets.
 */
export class ArborEventBus extends Construct {
  readonly bus: EventBus;
  readonly archive: Archive;
  readonly deadLetterQueue: Queue;

  constructor(scope: Construct, id: string, props: ArborEventBusProps) {
    super(scope, id);
    const stack = Stack.of(this);
    this.bus = new EventBus(this, "Bus", {
      eventBusName: `arbor-${props.stage}`,
      description: `Arbor domain events (${props.stage})`,
    });
    this.archive = new Archive(this, "Archive", {
      sourceEventBus: this.bus,
      description: `Every event on arbor-${props.stage}, for replay`,
      // Every event carries the account it was put in: this pattern matches all of them.
      eventPattern: { account: [stack.account] },
      retention: props.archiveRetention,
    });

    // SSE-SQS (SQS-owned keys): EventBridge can deliver to it without a KMS key policy, which the
    // AWS-managed key `alias/aws/sqs` would not allow.
    this.deadLetterQueue = new Queue(this, "DeadLetterQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      // The longest SQS allows: time to notice, fix the target and redrive.
      retentionPeriod: Duration.days(14),
      removalPolicy: props.removalPolicy,
    });
    // Any rule on this bus may dead-letter here, so rules defined in other stacks need no
    // change to this queue's policy (which would make this stack depend on theirs).
    this.deadLetterQueue.addToResourcePolicy(
      new PolicyStatement({
        sid: "EventBridgeRulesOnArborBus",
        principals: [new ServicePrincipal("events.amazonaws.com")],
        actions: ["sqs:SendMessage"],
        resources: [this.deadLetterQueue.queueArn],
        conditions: {
          ArnLike: {
            "aws:SourceArn": stack.formatArn({
              service: "events",
              resource: "rule",
              resourceName: `${this.bus.eventBusName}/*`,
            }),
          },
          StringEquals: { "aws:SourceAccount": stack.account },
        },
      }),
    );
    Validations.of(this.deadLetterQueue).acknowledge({
      id: "AwsSolutions-SQS3",
      reason:
        "This queue is itself the dead-letter queue of the EventBridge rule targets; a dead-letter " +
        "queue for a dead-letter queue would only move the same messages once more.",
    });
  }
}
