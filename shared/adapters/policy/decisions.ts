import { hash } from "node:crypto";
import { ulid } from "ulid";
import { trimOldest } from "../../domain/bounded-map.ts";
import { componentLogger } from "../../kernel/logger.ts";
import { type PolicyDecision, type PolicyInput, PolicyInputSchema } from "../../ports/policy.ts";

/**
 * What every policy engine does around its own evaluation: check the input, give each decision its
 * own id, hash the input, and log the decision (denials at info, allows at debug, which is only
 * worked out when that level is on). With `remember`, answers are kept by the input as given (a
 * model's tool calls ask the same few questions); only for policies that are pure functions of
 * their input.
 */
export type ParsedPolicyInput = ReturnType<typeof PolicyInputSchema.parse>;
export interface Answer {
  allow: boolean;
  reasons: string[];
}

/**
 * Answers remembered, the oldest forgotten first: about 1 KB each with their input's text. The
 * questions repeat within a task (its tool calls, its reads), so those of the requests in flight
 * are what count; at 10,000, two new ones a request took a steady server 50 minutes to fill.
 */
export const MAX_REMEMBERED = 1_000;

interface Known extends Answer {
  inputHash: string;
  line: { action: string; principal: string; resource: string; inputHash: string; revision: string };
}

export class Decisions {
  readonly #engine: PolicyDecision["engine"];
  readonly #revision: string;
  readonly #evaluate: (input: ParsedPolicyInput) => Answer;
  readonly #answers: Map<string, Known> | undefined;
  /** Decision ids: unique to this instance (a ULID), then a counter. */
  readonly #idPrefix = `dec_${ulid()}_`;
  #count = 0;
  readonly #log = componentLogger("policy");
  readonly #debug = ["DEBUG", "TRACE"].includes(this.#log.getLevelName());

  constructor(
    engine: PolicyDecision["engine"],
    revision: string,
    evaluate: (input: ParsedPolicyInput) => Answer,
    options: { remember: boolean },
  ) {
    this.#engine = engine;
    this.#revision = revision;
    this.#evaluate = evaluate;
    this.#answers = options.remember ? new Map() : undefined;
  }

  decide(raw: PolicyInput): PolicyDecision {
    const key = this.#answers ? JSON.stringify(raw) : "";
    let known = this.#answers?.get(key);
    if (!known) {
      const input = PolicyInputSchema.parse(raw);
      const inputHash = hash("sha256", JSON.stringify(input));
      const line = {
        action: input.action,
        principal: input.principal.id,
        resource: input.resource.id,
        inputHash,
        revision: this.#revision,
      };
      known = { ...this.#evaluate(input), inputHash, line };
      if (this.#answers) {
        this.#answers.set(key, known);
        trimOldest(this.#answers, MAX_REMEMBERED);
      }
    }
    const decision: PolicyDecision = {
      allow: known.allow,
      id: `${this.#idPrefix}${(++this.#count).toString(36)}`,
      inputHash: known.inputHash,
      revision: this.#revision,
      engine: this.#engine,
      reasons: known.reasons,
    };
    if (!decision.allow)
      this.#log.info("policy decision", {
        decisionId: decision.id,
        allow: false,
        ...known.line,
        reasons: known.reasons,
      });
    else if (this.#debug)
      this.#log.debug("policy decision", { decisionId: decision.id, allow: true, ...known.line });
    return decision;
  }
}
