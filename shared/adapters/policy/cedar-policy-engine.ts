import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

type CedarModule = typeof import("./cedar-wasm.ts");
let cedarModule: Promise<CedarModule> | undefined;
/**
 * Cedar's wasm (4 MB, compiled when its module loads), loaded at the first decision: a process
 * that decides nothing with Cedar (a function on OPA, the notify function) never pays for it.
 */
const loadCedar = (): Promise<CedarModule> => {
  cedarModule ??= import("./cedar-wasm.ts");
  return cedarModule;
};

import { ConfigError } from "../../kernel/errors.ts";
import type { PolicyDecision, PolicyEngine, PolicyInput } from "../../ports/policy.ts";
import { type Answer, Decisions, type ParsedPolicyInput } from "./decisions.ts";

/**
 * Policies in Cedar (`@cedar-policy/cedar-wasm`): the local default, as it needs no compiler. The
 * policy text is parsed once, at the first decision, or at once with `check()` (a policy file
 * does: a bad one fails at start-up, saying where); each decision maps the input to Cedar entities:
 *   principal  Arbor::Human | Arbor::Agent | Arbor::System, with `id` (the entity's own id, so that
 *              a policy can compare it with an owner), `tenant` and `roles`
 *   action     Arbor::Action::"tool.call" (and the other POLICY_ACTIONS)
 *   resource   Arbor::Resource, with `tenant`, `type` and, when known, `tool`, `risky`, `purpose`,
 *              `owner`
 *   context    `allowedTools`
 * The same input always gets the same answer from the same policies, so answers are remembered
 * (see Decisions); each decision still gets its own id.
 */
const PRINCIPAL_TYPES = { human: "Arbor::Human", agent: "Arbor::Agent", system: "Arbor::System" } as const;
export class CedarPolicyEngine implements PolicyEngine {
  readonly engine = "cedar" as const;
  readonly revision: string;
  readonly #setId: string;
  readonly #decisions: Decisions;
  readonly #text: string;
  readonly #source: string;
  #parsed: Promise<CedarModule> | undefined;
  #cedar: CedarModule | undefined;

  constructor(policyText: string, source = "the Cedar policies") {
    this.revision = createHash("sha256").update(policyText).digest("hex").slice(0, 16);
    this.#setId = `arbor-${this.revision}`;
    this.#text = policyText;
    this.#source = source;
    // Cedar decides on its input alone: answers may be remembered.
    this.#decisions = new Decisions("cedar", this.revision, (input) => this.#evaluate(input), {
      remember: true,
    });
  }

  /** Parses the policies now (once): a ConfigError saying where, when they do not parse. */
  check(): Promise<void> {
    return this.#ready().then(() => undefined);
  }

  #ready(): Promise<CedarModule> {
    this.#parsed ??= loadCedar().then((cedar) => {
      const parsed = cedar.preparsePolicySet(this.#setId, { staticPolicies: this.#text });
      if (parsed.type === "failure") {
        throw new ConfigError(
          `${this.#source} do not parse: ${parsed.errors.map((e) => e.message).join("; ")}`,
        );
      }
      this.#cedar = cedar;
      return cedar;
    });
    // A failure is kept: the same text fails the same way at every decision.
    return this.#parsed;
  }

  /** The policies of a `.cedar` file (check() them before serving with them). */
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
    if (!this.#cedar) await this.#ready();
    return this.#decisions.decide(raw);
  }

  #evaluate(input: ParsedPolicyInput): Answer {
    const cedar = this.#cedar as CedarModule; // decide() waited for it
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
            id: input.principal.id,
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
