import { type CfnResource, Stack } from "aws-cdk-lib";
import type { IConstruct } from "constructs";

/** The logical id a construct (or its default child, the resource it wraps) has in its stack's template. */
export const logicalId = (c: IConstruct): string =>
  Stack.of(c).getLogicalId((c.node.defaultChild ?? c) as CfnResource);

/** A value or a list of them as a list (IAM's Action and Resource take either). */
export const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);
