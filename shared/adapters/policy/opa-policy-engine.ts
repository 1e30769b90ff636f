import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import type { S3Client } from "@aws-sdk/client-s3";
import { ConfigError } from "../../kernel/errors.ts";
import type { PolicyDecision, PolicyEngine, PolicyInput } from "../../ports/policy.ts";
import { type Answer, Decisions, type ParsedPolicyInput } from "./decisions.ts";
import { publishCommand, readBundle } from "./policy-bundle-s3.ts";

/**
 * Policies compiled by OPA to wasm (`opa build -t wasm`), evaluated with
 * `@open-policy-agent/opa-wasm`: the AWS default. The bundle comes from the policies bucket or a
 * local folder with its sha256 beside it (`bundle.tar.gz`, `bundle.tar.gz.sha256`); a bundle whose
 * hash differs is refused. It is loaded once per process, and the named entrypoint decides: only
 * a result of exactly `true` allows; anything else, an evaluation error included, denies.
 */
export const DEFAULT_ENTRYPOINT = "arbor/authz/allow";
const BUNDLE = "bundle.tar.gz";

type LoadedPolicy = Awaited<ReturnType<typeof import("@open-policy-agent/opa-wasm").loadPolicy>>;

export class OpaPolicyEngine implements PolicyEngine {
  readonly engine = "opa" as const;
  readonly revision: string;
  readonly #policy: LoadedPolicy;
  readonly #entrypoint: string;
  readonly #decisions: Decisions;

  private constructor(policy: LoadedPolicy, revision: string, entrypoint: string) {
    this.#policy = policy;
    this.revision = revision;
    this.#entrypoint = entrypoint;
    // A Rego policy may call builtins that are not pure (time, HTTP): no answer is remembered.
    this.#decisions = new Decisions("opa", revision, (input) => this.#evaluate(input), { remember: false });
  }

  /**
   * A bundle (a `.tar.gz` holding `/policy.wasm`, or the wasm itself) whose sha256 must be
   * `sha256` (hex): the one the bundle was published with.
   */
  static async load(
    bundle: Uint8Array,
    sha256: string,
    options: { entrypoint?: string; source?: string } = {},
  ): Promise<OpaPolicyEngine> {
    const source = options.source ?? "the OPA bundle";
    const actual = createHash("sha256").update(bundle).digest("hex");
    if (actual !== sha256.trim().toLowerCase()) {
      throw new ConfigError(
        `${source} has sha256 ${actual}, not the ${sha256.trim()} it was published with: upload the bundle and its .sha256 together`,
      );
    }
    const wasm = isWasm(bundle) ? bundle : await policyWasmOf(bundle, source);
    let policy: LoadedPolicy;
    try {
      // Loaded with the first bundle: a function that decides nothing never loads them.
      const { loadPolicy } = await import("@open-policy-agent/opa-wasm");
      policy = await loadPolicy(
        wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength) as ArrayBuffer,
      );
    } catch (cause) {
      throw new ConfigError(`${source} does not load as an OPA wasm policy: ${String(cause)}`, { cause });
    }
    const entrypoint = options.entrypoint ?? DEFAULT_ENTRYPOINT;
    if (!Object.hasOwn(policy.entrypoints, entrypoint)) {
      throw new ConfigError(
        `${source} has no entrypoint ${entrypoint}; it has ${Object.keys(policy.entrypoints).join(", ") || "none"} (build it with -e ${entrypoint})`,
      );
    }
    return new OpaPolicyEngine(policy, actual.slice(0, 16), entrypoint);
  }

  /** `bundle.tar.gz` and `bundle.tar.gz.sha256` from a folder. */
  static async fromFolder(dir: string, options: { entrypoint?: string } = {}): Promise<OpaPolicyEngine> {
    const [bundle, sha] = await Promise.all([
      readFile(join(dir, BUNDLE)),
      readFile(join(dir, `${BUNDLE}.sha256`), "utf8"),
    ]).catch((cause: unknown) => {
      throw new ConfigError(`Cannot read the OPA bundle in ${dir}: ${(cause as Error).message}`, { cause });
    });
    return OpaPolicyEngine.load(bundle, sha.split(/\s/)[0] ?? "", { ...options, source: join(dir, BUNDLE) });
  }

  /**
   * `<prefix>bundle.tar.gz` from the policies bucket, checked against the sha256 it was published
   * with (policy-bundle-s3.ts). No bundle is an error here; `PublishedPolicy` is what decides then.
   */
  static async fromS3(
    client: S3Client,
    bucket: string,
    options: { prefix?: string; entrypoint?: string } = {},
  ): Promise<OpaPolicyEngine> {
    const found = await readBundle(client, bucket, options.prefix);
    const source = `s3://${bucket}/${found.key}`;
    if (found.kind === "none") {
      throw new ConfigError(
        `Cannot read ${source}: NoSuchKey. Build the bundle and upload it with its sha256 (policies/README.md: ${publishCommand(bucket, options.prefix)}), or set ARBOR_POLICY_ENGINE=cedar`,
      );
    }
    return OpaPolicyEngine.load(found.bytes, found.sha256, { ...options, source });
  }

  async decide(raw: PolicyInput): Promise<PolicyDecision> {
    return this.#decisions.decide(raw);
  }

  /** Only a result of exactly `true` allows; an evaluation error denies. */
  #evaluate(input: ParsedPolicyInput): Answer {
    try {
      const result = this.#policy.evaluate(input, this.#entrypoint) as { result?: unknown }[];
      const allow = result.length === 1 && result[0]?.result === true;
      return { allow, reasons: [allow ? `${this.#entrypoint} is true` : `${this.#entrypoint} is not true`] };
    } catch (e) {
      return { allow: false, reasons: [`evaluation failed: ${String(e)}`] };
    }
  }
}

const isWasm = (b: Uint8Array) => b[0] === 0x00 && b[1] === 0x61 && b[2] === 0x73 && b[3] === 0x6d;

/** The `/policy.wasm` of an OPA bundle (a gzipped tar). */
async function policyWasmOf(bundle: Uint8Array, source: string): Promise<Uint8Array> {
  let tarball: Buffer;
  try {
    tarball = gunzipSync(bundle);
  } catch (cause) {
    throw new ConfigError(`${source} is neither a gzipped bundle nor a wasm module`, { cause });
  }
  const { Parser } = await import("tar");
  const found = await new Promise<Uint8Array | undefined>((resolve, reject) => {
    let wasm: Uint8Array | undefined;
    const parser = new Parser({
      onReadEntry: (entry) => {
        if (entry.path.replace(/^\.?\//, "") !== "policy.wasm") return entry.resume();
        const chunks: Buffer[] = [];
        entry.on("data", (c: Buffer) => chunks.push(c));
        entry.on("end", () => {
          wasm = Buffer.concat(chunks);
        });
      },
    });
    parser.on("end", () => resolve(wasm));
    parser.on("error", reject);
    parser.end(tarball);
  });
  if (!found) throw new ConfigError(`${source} has no /policy.wasm: build it with opa build -t wasm`);
  return found;
}
