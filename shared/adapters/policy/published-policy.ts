import type { S3Client } from "@aws-sdk/client-s3";
import type { PolicyDecision, PolicyEngine, PolicyInput } from "../../ports/policy.ts";
import { OpaPolicyEngine } from "./opa-policy-engine.ts";
import { bundleKeys, bundleVersion, publishCommand, readBundle } from "./policy-bundle-s3.ts";

/**
 * The policy of the policies bucket, as a function on AWS decides with it:
 * - a bundle is there: the OPA bundle, checked against the sha256 it was published with; a
 *   bundle that fails the check or does not load is an error (the function fails: no decision
 *   at all), never a quiet fall back to anything else;
 * - no bundle (S3 answers NoSuchKey): the built-in default policy (`fallback`, the Cedar one of
 *   policies/arbor.cedar), with a WARN that names the bucket, the key and the command that
 *   publishes a bundle, once per cold start (and again only if a bundle disappears);
 * - anything else (access denied, network): an error, as for a bad bundle.
 *
 * Takeover: a function instance re-checks the bucket at most every `recheckMs` (default five
 * minutes) with one HeadObject, before a decision; another upload (a bundle published, replaced
 * or removed: its ETag, metadata hash or time differ) loads again. Warm Lambda instances live for hours, so "at the next cold start"
 * would leave a fleet deciding with old and new policies for an unbounded time; a HEAD per
 * instance every five minutes costs next to nothing and bounds the takeover.
 */
export interface PolicyLog {
  warn(message: string, details: Record<string, unknown>): void;
  info(message: string, details: Record<string, unknown>): void;
}

export interface PublishedPolicyOptions {
  client: S3Client;
  bucket: string;
  prefix?: string;
  /** What decides while the bucket has no bundle. */
  fallback: PolicyEngine;
  /** Default five minutes. */
  recheckMs?: number;
  /** Milliseconds now (tests move time). */
  now?: () => number;
  log: PolicyLog;
  entrypoint?: string;
}

export const DEFAULT_POLICY_RECHECK_MS = 5 * 60_000;

interface Current {
  policy: PolicyEngine;
  /** Which upload of the bundle decides (bundleVersion), or undefined for the fallback (no bundle). */
  version: string | undefined;
  bundled: boolean;
}

export class PublishedPolicy implements PolicyEngine {
  readonly #o: Required<Omit<PublishedPolicyOptions, "entrypoint" | "prefix">> & {
    prefix: string;
    entrypoint?: string;
  };
  #current: Current;
  #checkedAt: number;
  #checking: Promise<void> | undefined;

  private constructor(options: PublishedPolicyOptions, current: Current, checkedAt: number) {
    this.#o = {
      recheckMs: DEFAULT_POLICY_RECHECK_MS,
      now: Date.now,
      ...options,
      prefix: options.prefix ?? "",
    };
    this.#current = current;
    this.#checkedAt = checkedAt;
  }

  /** Reads the bucket once (the cold start); throws on anything but a good bundle or none. */
  static async open(options: PublishedPolicyOptions): Promise<PublishedPolicy> {
    const now = options.now ?? Date.now;
    const at = now();
    const current = await load(options, undefined);
    return new PublishedPolicy(options, current, at);
  }

  get engine(): "cedar" | "opa" {
    return this.#current.policy.engine;
  }

  get revision(): string {
    return this.#current.policy.revision;
  }

  /** Whether a published bundle decides (false: the built-in default, no bundle yet). */
  get bundled(): boolean {
    return this.#current.bundled;
  }

  async decide(input: PolicyInput): Promise<PolicyDecision> {
    if (this.#o.now() - this.#checkedAt >= this.#o.recheckMs) await this.recheck();
    return this.#current.policy.decide(input);
  }

  /** One HeadObject; loads the bundle again when another upload is there. Concurrent callers share it. */
  recheck(): Promise<void> {
    this.#checking ??= this.#recheck().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  async #recheck(): Promise<void> {
    const at = this.#o.now();
    const version = await bundleVersion(this.#o.client, this.#o.bucket, this.#o.prefix);
    const unchanged = version === this.#current.version;
    // A failure above or below leaves the clock where it was: the next decision tries again.
    if (!unchanged) this.#current = await load(this.#o, this.#current);
    this.#checkedAt = at;
  }
}

async function load(o: PublishedPolicyOptions, previous: Current | undefined): Promise<Current> {
  const prefix = o.prefix ?? "";
  const found = await readBundle(o.client, o.bucket, prefix);
  const where = `s3://${o.bucket}/${bundleKeys(prefix).bundle}`;
  if (found.kind === "none") {
    // Once per cold start, and again only when a bundle that decided is gone.
    if (!previous || previous.bundled) {
      o.log.warn(
        `No OPA bundle at ${where} (NoSuchKey): deciding with the built-in default policy ` +
          `(policies/arbor.cedar) until one is published with: ${publishCommand(o.bucket, prefix)}`,
        {
          bucket: o.bucket,
          key: found.key,
          policy: "default",
          engine: o.fallback.engine,
          revision: o.fallback.revision,
        },
      );
    }
    return { policy: o.fallback, version: undefined, bundled: false };
  }
  const policy = await OpaPolicyEngine.load(found.bytes, found.sha256, {
    source: where,
    ...(o.entrypoint ? { entrypoint: o.entrypoint } : {}),
  });
  o.log.info(
    previous ? `A new OPA bundle at ${where} takes over` : `Deciding with the OPA bundle at ${where}`,
    {
      bucket: o.bucket,
      key: found.key,
      policy: "bundle",
      revision: policy.revision,
      sha256From: found.shaFrom,
    },
  );
  return { policy, version: found.version, bundled: true };
}
