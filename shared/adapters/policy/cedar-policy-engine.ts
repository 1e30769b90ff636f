import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import * as cedar from "@cedar-policy/cedar-wasm/nodejs";
import { ulid } from "ulid";
import { ConfigError } from "../../errors.ts";
import { componentLogger } from "../../observability/logger.ts";
import {
  type PolicyDecision,
  type PolicyEngine,
  type PolicyInput,
  PolicyInputSchema,
} from "../../ports/policy.ts";

/**
 * Policies in Cedar (`@cedar-policy/cedar-wasm`): the local default, as it needs no compiler. The
 * policy text is parsed once (a bad one fails at start-up, saying where); each decision maps the
 * input to Cedar entities:
 *   principal  Arbor::Human | Arbor::Agent | Arbor::System, with `tenant` and `roles`
 *   action     Arbor::Action::"tool.call" (and the other POLICY_ACTIONS)
 *   resource   Arbor::Resource, with `tenant`, `type` and, when known, `tool`, `risky`, `purpose`
 *   context    `allowedTools`
 * The same input always gets the same answer from the same policies, so answers are remembered
 * (a model's tool calls repeat the same few questions); each decision still gets its own id.
 */
const PRINCIPAL_TYPES = { human: "Arbor::Human", agent: "Arbor::Agent", system: "Arbor::System" } as const;
const MAX_REMEMBERED = 10_000;

interface LogLine {
  action: string;
  principal: string;
  resource: string;
  inputHash: string;
  revision: string;
}

export class CedarPolicyEngine implements PolicyEngine {
  readonly engine = "cedar" as const;
  readonly revision: string;
  readonly #setId: string;
  /** Answers by the input as given (its JSON): a repeated question costs a lookup. */
  readonly #answers = new Map<
    string,
    { allow: boolean; reasons: string[]; inputHash: string; line: LogLine }
  >();
  /** Decision ids: unique to this engine instance (a ULID), then a counter. */
  readonly #idPrefix = `dec_${ulid()}_`;
  #decisions = 0;
  readonly #log = componentLogger("policy");
  /** Allowed decisions are logged at debug level: only worked out when that level is on. */
  readonly #debug = ["DEBUG", "TRACE"].includes(this.#log.getLevelName());

  constructor(policyText: string, source = "the Cedar policies") {
    this.revision = createHash("sha256").update(policyText).digest("hex").slice(0, 16);
    this.#setId = `arbor-${this.revision}`;
    const parsed = cedar.preparsePolicySet(this.#setId, { staticPolicies: policyText });
    if (parsed.type === "failure") {
      throw new ConfigError(`${source} do not parse: ${parsed.errors.map((e) => e.message).join("; ")}`);
    }
  }

  /** The policies of a `.cedar` file. */
  static fromFile(path: string): CedarPolicyEngine {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (cause) {
      throw new ConfigError(`Cannot read the Cedar policies at ${path}: ${(cause as Error).message}`, {
        cause,
      });
    }
    return new CedarPolicyEngine(text, path);
  }

  async decide(raw: PolicyInput): Promise<PolicyDecision> {
    const key = JSON.stringify(raw);
    let answer = this.#answers.get(key);
    if (!answer) {
      const input = PolicyInputSchema.parse(raw);
      const inputHash = createHash("sha256").update(JSON.stringify(input)).digest("hex");
      const line = {
        action: input.action,
        principal: input.principal.id,
        resource: input.resource.id,
        inputHash,
        revision: this.revision,
      };
      answer = { ...this.#evaluate(input), inputHash, line };
      if (this.#answers.size >= MAX_REMEMBERED) this.#answers.clear();
      this.#answers.set(key, answer);
    }
    const decision: PolicyDecision = {
      allow: answer.allow,
      id: `${this.#idPrefix}${(++this.#decisions).toString(36)}`,
      inputHash: answer.inputHash,
      revision: this.revision,
      engine: "cedar",
      reasons: answer.reasons,
    };
    // Every decision is logged; denials where they are seen by default.
    if (!decision.allow)
      this.#log.info("policy decision", {
        decisionId: decision.id,
        allow: false,
        ...answer.line,
        reasons: decision.reasons,
      });
    else if (this.#debug)
      this.#log.debug("policy decision", { decisionId: decision.id, allow: true, ...answer.line });
    return decision;
  }

  #evaluate(input: ReturnType<typeof PolicyInputSchema.parse>): { allow: boolean; reasons: string[] } {
    const principal = { type: PRINCIPAL_TYPES[input.principal.kind], id: input.principal.id };
    const resource = { type: "Arbor::Resource", id: input.resource.id };
    const { id: _r, ...given } = input.resource;
    const resourceAttrs = Object.fromEntries(
      Object.entries(given).filter(([, v]) => v !== undefined),
    ) as Record<string, string | boolean>;
    const answer = cedar.statefulIsAuthorized({
      principal,
      action: { type: "Arbor::Action", id: input.action },
      resource,
      context: { allowedTools: input.context.allowedTools ?? [] },
      preparsedPolicySetId: this.#setId,
      entities: [
        {
          uid: principal,
          attrs: {
            ...(input.principal.tenant ? { tenant: input.principal.tenant } : {}),
            roles: input.principal.roles,
          },
          parents: [],
        },
        { uid: resource, attrs: resourceAttrs, parents: [] },
      ],
    });
    if (answer.type === "failure") return { allow: false, reasons: answer.errors.map((e) => e.message) };
    const { decision, diagnostics } = answer.response;
    if (diagnostics.errors.length > 0)
      return { allow: false, reasons: diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`) };
    return {
      allow: decision === "allow",
      reasons: diagnostics.reason.length ? diagnostics.reason : ["no policy allows it"],
    };
  }
}
