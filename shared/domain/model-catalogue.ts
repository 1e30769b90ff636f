/**
 * The models Arbor knows: what a token costs on each, and whether the provider still serves it.
 *
 * A cost is only ever this table's price for the model that answered (or the operator's price for
 * it, ARBOR_MODEL_PRICES): a model that is in neither has an unknown cost, never another model's
 * price. Prices are US dollars per million tokens, on-demand, as each source listed them on the
 * date beside it; a row goes stale when a provider changes its price, so the operator's prices
 * win over the table.
 */

/** US dollars per million tokens. */
export interface TokenPrice {
  input: number;
  output: number;
  /** Input read from the provider's prompt cache; absent: billed as input. */
  cacheRead?: number;
  /** Input written to the provider's prompt cache; absent: billed as input. */
  cacheWrite?: number;
}

export type Lifecycle =
  | { status: "active" }
  /** Still served until `eol`; move to `replacement`. */
  | { status: "legacy"; eol: string; replacement: string }
  /** No longer served: a call fails. */
  | { status: "end-of-life"; since: string; replacement: string };

export interface CatalogueModel {
  /** The model id without a Bedrock inference profile's prefix (us., eu., global., ...). */
  id: string;
  provider: "bedrock" | "openai" | "local";
  name: string;
  price: TokenPrice;
  /**
   * Bedrock bills these models 10 % more through a geographic inference profile (us., eu., apac.,
   * ...) or in one region than through a global profile; the price above is the global one.
   */
  regionalPremium?: number;
  lifecycle: Lifecycle;
  /** Where the price and the lifecycle were read, and when. */
  source: { url: string; checked: string };
}

const BEDROCK = { url: "https://aws.amazon.com/bedrock/pricing/", checked: "2026-11-28" };
const BEDROCK_LIFECYCLE = {
  url: "https://docs.aws.amazon.com/bedrock/latest/userguide/model-lifecycle.html",
  checked: "2026-11-28",
};
const OPENAI = { url: "https://openai.com/api/pricing/", checked: "2026-11-28" };

export const HAIKU_4_5 = "anthropic.claude-haiku-4-5-20251001-v1:0";
const SONNET_4_5 = "anthropic.claude-sonnet-4-5-20250929-v1:0";

/**
 * The model a deployment and the CLI's examples use when none is named: Claude Haiku 4.5 through
 * the US inference profile (Bedrock serves it on demand only through a profile). Elsewhere use
 * the eu., apac. or global. profile of the same model.
 */
export const DEFAULT_BEDROCK_MODEL = `us.${HAIKU_4_5}`;

export const MODEL_CATALOGUE: readonly CatalogueModel[] = [
  {
    id: HAIKU_4_5,
    provider: "bedrock",
    name: "Claude Haiku 4.5",
    price: { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
    regionalPremium: 0.1,
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: SONNET_4_5,
    provider: "bedrock",
    name: "Claude Sonnet 4.5",
    price: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
    regionalPremium: 0.1,
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: "anthropic.claude-opus-4-5-20251101-v1:0",
    provider: "bedrock",
    name: "Claude Opus 4.5",
    price: { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
    regionalPremium: 0.1,
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: "anthropic.claude-3-5-haiku-20241022-v1:0",
    provider: "bedrock",
    name: "Claude 3.5 Haiku",
    price: { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 },
    lifecycle: { status: "end-of-life", since: "2026-06", replacement: `us.${HAIKU_4_5}` },
    source: BEDROCK_LIFECYCLE,
  },
  {
    id: "anthropic.claude-3-7-sonnet-20250219-v1:0",
    provider: "bedrock",
    name: "Claude 3.7 Sonnet",
    price: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
    lifecycle: { status: "end-of-life", since: "2026-04-28", replacement: `us.${SONNET_4_5}` },
    source: BEDROCK_LIFECYCLE,
  },
  {
    id: "anthropic.claude-3-5-sonnet-20241022-v2:0",
    provider: "bedrock",
    name: "Claude 3.5 Sonnet v2",
    price: { input: 3, output: 15 },
    lifecycle: { status: "end-of-life", since: "2026-03", replacement: `us.${SONNET_4_5}` },
    source: BEDROCK_LIFECYCLE,
  },
  {
    id: "anthropic.claude-3-5-sonnet-20240620-v1:0",
    provider: "bedrock",
    name: "Claude 3.5 Sonnet",
    price: { input: 3, output: 15 },
    lifecycle: { status: "end-of-life", since: "2026-03", replacement: `us.${SONNET_4_5}` },
    source: BEDROCK_LIFECYCLE,
  },
  {
    id: "amazon.nova-micro-v1:0",
    provider: "bedrock",
    name: "Amazon Nova Micro",
    price: { input: 0.035, output: 0.14, cacheRead: 0.00875 },
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: "amazon.nova-lite-v1:0",
    provider: "bedrock",
    name: "Amazon Nova Lite",
    price: { input: 0.06, output: 0.24, cacheRead: 0.015 },
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: "amazon.nova-pro-v1:0",
    provider: "bedrock",
    name: "Amazon Nova Pro",
    price: { input: 0.8, output: 3.2, cacheRead: 0.2 },
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: "amazon.titan-embed-text-v2:0",
    provider: "bedrock",
    name: "Amazon Titan Text Embeddings V2",
    price: { input: 0.02, output: 0 },
    lifecycle: { status: "active" },
    source: BEDROCK,
  },
  {
    id: "gpt-5",
    provider: "openai",
    name: "GPT-5",
    price: { input: 1.25, output: 10, cacheRead: 0.125 },
    lifecycle: { status: "active" },
    source: OPENAI,
  },
  {
    id: "gpt-5-mini",
    provider: "openai",
    name: "GPT-5 mini",
    price: { input: 0.25, output: 2, cacheRead: 0.025 },
    lifecycle: { status: "active" },
    source: OPENAI,
  },
  {
    id: "gpt-4.1",
    provider: "openai",
    name: "GPT-4.1",
    price: { input: 2, output: 8, cacheRead: 0.5 },
    lifecycle: { status: "active" },
    source: OPENAI,
  },
  {
    id: "gpt-4.1-mini",
    provider: "openai",
    name: "GPT-4.1 mini",
    price: { input: 0.4, output: 1.6, cacheRead: 0.1 },
    lifecycle: { status: "active" },
    source: OPENAI,
  },
  {
    id: "gpt-4o",
    provider: "openai",
    name: "GPT-4o",
    price: { input: 2.5, output: 10, cacheRead: 1.25 },
    lifecycle: { status: "active" },
    source: OPENAI,
  },
  {
    id: "gpt-4o-mini",
    provider: "openai",
    name: "GPT-4o mini",
    price: { input: 0.15, output: 0.6, cacheRead: 0.075 },
    lifecycle: { status: "active" },
    source: OPENAI,
  },
  {
    id: "scripted",
    provider: "local",
    name: "Arbor's scripted model (offline examples and tests)",
    price: { input: 0, output: 0 },
    lifecycle: { status: "active" },
    source: { url: "shared/adapters/llm/scripted-llm.ts", checked: "2026-11-28" },
  },
];

const BY_ID = new Map(MODEL_CATALOGUE.map((m) => [m.id, m]));

/** A Bedrock inference profile's prefix: the geography it routes in, or global. */
const PROFILE = /^(us|us-gov|eu|apac|jp|au|ca|global)\.(.+)$/;

export interface ModelRef {
  /** The catalogue's id: the model id without a profile prefix. */
  id: string;
  /** The inference profile's geography ("global" for a global profile); absent: no profile. */
  profile?: string;
}

/**
 * The catalogue's id for a model id as it is configured or answered: the Bedrock inference
 * profile's prefix comes off, as does a "bedrock:" or "openai:" provider prefix.
 */
export function modelRef(model: string): ModelRef {
  const bare = model.replace(/^(bedrock|openai):/, "");
  const profile = PROFILE.exec(bare);
  return profile ? { id: profile[2] as string, profile: profile[1] as string } : { id: bare };
}

/** The catalogue's row for a model id (with or without a profile prefix), or undefined. */
export function catalogued(model: string): CatalogueModel | undefined {
  return BY_ID.get(modelRef(model).id);
}

/** Prices the operator sets (ARBOR_MODEL_PRICES), by model id as configured or as in the catalogue. */
export type PriceOverrides = Readonly<Record<string, TokenPrice>>;

/**
 * The price of one model's tokens: the operator's for that exact id, else the operator's for the
 * catalogue's id, else the catalogue's (with the regional premium where the id is not a global
 * profile). Undefined: the cost of this model is unknown.
 */
export function priceOf(model: string, overrides: PriceOverrides = {}): TokenPrice | undefined {
  const ref = modelRef(model);
  const set = overrides[model] ?? overrides[ref.id];
  if (set) return set;
  const row = BY_ID.get(ref.id);
  if (!row) return undefined;
  const premium = row.regionalPremium;
  if (!premium || ref.profile === "global") return row.price;
  const up = (n: number) => Math.round(n * (1 + premium) * 1e6) / 1e6;
  const { input, output, cacheRead, cacheWrite } = row.price;
  return {
    input: up(input),
    output: up(output),
    ...(cacheRead === undefined ? {} : { cacheRead: up(cacheRead) }),
    ...(cacheWrite === undefined ? {} : { cacheWrite: up(cacheWrite) }),
  };
}

export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

/** What these tokens cost at this price, in US dollars. */
export function costAt(price: TokenPrice, tokens: TokenCounts): number {
  const read = tokens.cacheReadTokens ?? 0;
  const write = tokens.cacheWriteTokens ?? 0;
  return (
    (tokens.inputTokens * price.input +
      tokens.outputTokens * price.output +
      read * (price.cacheRead ?? price.input) +
      write * (price.cacheWrite ?? price.input)) /
    1_000_000
  );
}

/**
 * Why a model must not be configured, or undefined when it may: a model past its end of life
 * fails every call, so it is refused where it is configured, with the one to use instead.
 */
export function endOfLife(model: string): string | undefined {
  const row = catalogued(model);
  if (row?.lifecycle.status !== "end-of-life") return undefined;
  return `${model} (${row.name}) reached its end of life on Bedrock in ${row.lifecycle.since}: every call to it fails. Use ${row.lifecycle.replacement} instead (see ${row.source.url})`;
}
