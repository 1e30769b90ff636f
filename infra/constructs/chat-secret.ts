import { ArnFormat, Aws, Stack, Validations } from "aws-cdk-lib";
import { type IRole, ManagedPolicy, PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import { Construct } from "constructs";

/**
 * The chat channels' settings on AWS (Slack's signing secret and bot tokens, the Teams app's
 * password: shared/notify/chat/types.ts, ChatSettingsSchema): an existing Secrets Manager secret, made
 * and rotated by the operator (shared/channels/chat/CHAT-DEPLOY.md), named to the stack with
 * `-c chatSecret=<its complete ARN or its name>` and, when a customer managed KMS key encrypts it,
 * `-c chatSecretKey=<the key's ARN>`. Never a value: the template and the bundles hold its name only.
 *
 * The functions that read it (the API function: the Slack and Teams routes; the notify function:
 * the messages it posts) get ARBOR_CHAT_SECRET_ARN and one managed policy: GetSecretValue on this
 * secret only (by name, Secrets Manager's ARN ends in six random characters, so the grant is
 * `<name>-??????`), and kms:Decrypt on the key only through Secrets Manager.
 */
export interface ChatSecretRef {
  /** The secret's complete ARN (`...:secret:<name>-AbCdEf`) or its name. */
  readonly secret: string;
  /** The customer managed KMS key that encrypts it (its ARN); absent: the AWS managed key. */
  readonly key?: string;
}

/** A complete secret ARN: the name, a hyphen and six characters. */
export const SECRET_ARN =
  /^arn:aws[a-z-]*:secretsmanager:[a-z]{2,}(-[a-z]+)+-\d{1,2}:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}-[A-Za-z0-9]{6}$/;
export const SECRET_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;
export const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z]{2,}(-[a-z]+)+-\d{1,2}:\d{12}:key\/[A-Za-z0-9-]{1,128}$/;

export class ChatSecret extends Construct {
  readonly policy: ManagedPolicy;
  /** What ARBOR_CHAT_SECRET_ARN holds: the complete ARN, or the name. */
  readonly secretId: string;
  /** What the grant names (the complete ARN, or `<name>-??????` in this account and region). */
  readonly resource: string;

  constructor(scope: Construct, id: string, props: ChatSecretRef) {
    super(scope, id);
    const stack = Stack.of(this);
    const byArn = props.secret.startsWith("arn:");
    this.secretId = props.secret;
    this.resource = byArn
      ? props.secret
      : stack.formatArn({
          service: "secretsmanager",
          resource: "secret",
          resourceName: `${props.secret}-??????`,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        });
    const statements = [
      new PolicyStatement({
        sid: "ChatSettings",
        actions: ["secretsmanager:GetSecretValue"],
        resources: [this.resource],
      }),
    ];
    if (props.key)
      statements.push(
        new PolicyStatement({
          sid: "ChatSettingsKey",
          actions: ["kms:Decrypt"],
          resources: [props.key],
          conditions: { StringEquals: { "kms:ViaService": `secretsmanager.${Aws.REGION}.amazonaws.com` } },
        }),
      );
    this.policy = new ManagedPolicy(this, "Access", {
      description: "Arbor chat channels (Slack, Teams): read their settings' secret",
      statements,
    });
    if (!byArn)
      Validations.of(this.policy).acknowledge({
        id: `AwsSolutions-IAM5[Resource::${flattenCfnReference(stack.resolve(this.resource))}]`,
        reason:
          "One secret, named by -c chatSecret: Secrets Manager ends a secret's ARN with six random characters, " +
          "so a secret given by name is granted as <name>-?????? (exactly six characters, nothing else).",
      });
  }

  /** The function reads the secret: its ARN in the environment, the policy on its role. */
  grantRead(fn: LambdaFunction, role: IRole): void {
    fn.addEnvironment("ARBOR_CHAT_SECRET_ARN", this.secretId);
    role.addManagedPolicy(this.policy);
  }
}
