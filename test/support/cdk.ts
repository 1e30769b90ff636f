import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type CfnResource, Stack } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import { QUEUED_STEPS } from "../../shared/engine/routes.ts";

/** The logical id a construct (or its default child, the resource it wraps) has in its stack's template. */
export const logicalId = (c: IConstruct): string =>
  Stack.of(c).getLogicalId((c.node.defaultChild ?? c) as CfnResource);

/** A value or a list of them as a list (IAM's Action and Resource take either). */
export const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

/**
 * A function's environment as CloudFormation fills it in: plain strings as they are, a reference
 * as `values` gives it (default `fallback`), and the command queues' JSON (a join of the queues'
 * URLs) as their URLs would be.
 */
export function deployedEnvironment(
  vars: Record<string, unknown>,
  values: Readonly<Record<string, string>> = {},
  fallback = "value-from-cloudformation",
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(vars).map(([k, v]) => [
      k,
      typeof v === "string"
        ? v
        : (values[k] ??
          (k === "ARBOR_COMMAND_QUEUES"
            ? JSON.stringify(
                Object.fromEntries(
                  QUEUED_STEPS.map((s) => [s, `https://sqs.eu-west-1.amazonaws.com/123456789012/arbor-${s}`]),
                ),
              )
            : fallback)),
    ]),
  );
}

/**
 * The chunks of a function's bundle (infra/constructs/function-bundle.ts) that `import()` loads and
 * that export a default only: a CommonJS package imported lazily by name, whose functions would be
 * undefined at the first call. None should be.
 */
export function lazyChunksWithoutNames(bundle: string): string[] {
  const sources = readdirSync(bundle)
    .filter((f) => f.endsWith(".mjs"))
    .map((f) => [f, readFileSync(join(bundle, f), "utf8")] as const);
  const lazy = new Set(
    sources.flatMap(([, text]) =>
      [...text.matchAll(/import\("\.\/(chunk-[A-Z0-9]+\.mjs)"\)/g)].map((m) => m[1]),
    ),
  );
  return sources
    .filter(([f, text]) => lazy.has(f) && /export default [^;]*;/.test(text) && !/export\s*\{/.test(text))
    .map(([f]) => f);
}
