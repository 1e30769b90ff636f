/**
 * Token counting per model family, for the context window (window.ts) and the task prompt's budget.
 *
 *   const counter = await tokenCounter("us.anthropic.claude-3-5-haiku-20241022-v1:0");
 *   counter.count("Hello, world!") // tokens, with the family's safety margin
 *
 * Families, by the model's id (a provider prefix such as `bedrock:` and a Bedrock cross-region
 * prefix such as `us.` are looked through):
 * - OpenAI: `gpt-tokenizer` (o200k_base for gpt-4o, gpt-4.1, gpt-5, o1/o3/o4, gpt-oss; cl100k_base for
 *   gpt-4 and gpt-3.5). Exact for those models.
 * - Anthropic Claude (`anthropic.claude-...`, `claude-...`): `@anthropic-ai/tokenizer`, the tokenizer
 *   Anthropic published for its earlier Claude models. Claude 3 and later tokenize differently and
 *   Anthropic has not published theirs, so the count is approximate: it is multiplied by
 *   CLAUDE_MARGIN (1.25), which keeps it above what those models count on ordinary text.
 * - Anything else (Titan, Llama, Mistral, Nova, Cohere, the scripted model, local models):
 *   a conservative estimate, one token per 3 characters (English BPE averages about 4).
 *
 * The tokenizers are loaded on first use, with a dynamic import, once per process: a process that
 * never counts for that family (the W1 bench, a Lambda cold start of a function that takes no turn)
 * never loads their tables (0.4-0.6 s each).
 *
 * Long texts: a BPE tokenizer is quadratic in the length of a piece it cannot split (a 1 MB run of
 * one character takes minutes), so text is counted in chunks of CHUNK_CHARS characters (each chunk
 * boundary may split one token in two: a count at most one token per chunk high), and a text longer
 * than EXACT_CHARS is counted exactly on its first EXACT_CHARS characters and, past them, at one
 * token per UTF-8 byte: a BPE token is at least one byte, so the count is never below the truth
 * (scaling the head instead undercounts a text whose start is plain English and whose rest is CJK
 * or emoji six-fold, and a window built on that count overflows the model's). Counting is
 * deterministic either way: the same text always counts the same.
 */

export type TokenFamily = "o200k" | "cl100k" | "claude" | "estimate";

export interface TokenCounter {
  readonly family: TokenFamily;
  /** Tokens of `text`, never below 0; deterministic. */
  count(text: string): number;
  /** Set when the family's tokenizer could not be loaded and the estimate counts instead. */
  readonly problem?: string;
}

/** How much the published Claude tokenizer's count is raised for the Claude models it approximates. */
export const CLAUDE_MARGIN = 1.25;
/** The estimate of the other families: one token per this many characters (rounded up). */
export const ESTIMATE_CHARS_PER_TOKEN = 3;
const CHUNK_CHARS = 1_000;
const EXACT_CHARS = 64_000;
const CACHE_CHARS = 4_000_000;

const PROVIDER = /^(?:bedrock|openai|scripted):/;
const REGION = /^(?:us|eu|apac|us-gov|ca|jp|au|global)\./;

/** The family a model id counts in. */
export function familyOf(model: string | undefined): TokenFamily {
  const id = (model ?? "").trim().toLowerCase().replace(PROVIDER, "").replace(REGION, "");
  if (/^(?:anthropic\.)?claude/.test(id)) return "claude";
  const openai = id.replace(/^openai\./, "");
  if (/^(?:gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|chatgpt-4o|o1|o3|o4)(?:\b|[-.:_]|$)/.test(openai))
    return "o200k";
  if (/^(?:gpt-4|gpt-3\.5|text-embedding-3|text-embedding-ada)/.test(openai)) return "cl100k";
  return "estimate";
}

/** The conservative estimate: ceil(characters / 3). */
export const estimateCounter: TokenCounter = {
  family: "estimate",
  count: (text) => Math.ceil(text.length / ESTIMATE_CHARS_PER_TOKEN),
};

type Encode = (text: string) => number;
const loaded = new Map<TokenFamily, Promise<TokenCounter>>();

/** The counter of `model`'s family, its tokenizer loaded on first use (once per process). */
export function tokenCounter(model: string | undefined): Promise<TokenCounter> {
  const family = familyOf(model);
  if (family === "estimate") return Promise.resolve(estimateCounter);
  let counter = loaded.get(family);
  if (!counter) {
    // A tokenizer that cannot be loaded (a bundle without tiktoken's wasm) does not stop the turn:
    // the estimate counts instead, once per process, and says why (window-context.ts logs it).
    counter = load(family).then(
      (encode) => counterOf(family, encode),
      (e: unknown): TokenCounter => ({
        ...estimateCounter,
        problem: `the ${family} tokenizer could not be loaded (${e instanceof Error ? e.message : String(e)}); counting with the estimate (characters / ${ESTIMATE_CHARS_PER_TOKEN})`,
      }),
    );
    loaded.set(family, counter);
  }
  return counter;
}

async function load(family: Exclude<TokenFamily, "estimate">): Promise<Encode> {
  // Special tokens in the text (`<|endoftext|>` in a tool result) are counted as plain text.
  if (family === "o200k") {
    const { countTokens } = await import("gpt-tokenizer/encoding/o200k_base");
    return (text) => countTokens(text, { disallowedSpecial: new Set() });
  }
  if (family === "cl100k") {
    const { countTokens } = await import("gpt-tokenizer/encoding/cl100k_base");
    return (text) => countTokens(text, { disallowedSpecial: new Set() });
  }
  const { getTokenizer } = await import("@anthropic-ai/tokenizer");
  // One tokenizer for the process (countTokens() would build and free one per call).
  const tokenizer = getTokenizer();
  return (text) => Math.ceil(tokenizer.encode(text.normalize("NFKC"), [], []).length * CLAUDE_MARGIN);
}

function counterOf(family: TokenFamily, encode: Encode): TokenCounter {
  const chunked = (text: string) => {
    let sum = 0;
    for (let i = 0; i < text.length; i += CHUNK_CHARS) sum += encode(text.slice(i, i + CHUNK_CHARS));
    return sum;
  };
  const exact = (text: string) => {
    if (text.length <= EXACT_CHARS) return chunked(text);
    return chunked(text.slice(0, EXACT_CHARS)) + Buffer.byteLength(text.slice(EXACT_CHARS), "utf8");
  };
  // Each model request counts the transcript again: counts of longer texts are remembered, up to
  // CACHE_CHARS characters of them (then forgotten at once; a count is cheap to redo).
  const cache = new Map<string, number>();
  let cachedChars = 0;
  return {
    family,
    count(text) {
      if (text.length < 64) return chunked(text);
      const known = cache.get(text);
      if (known !== undefined) return known;
      const n = exact(text);
      if (cachedChars + text.length > CACHE_CHARS) {
        cache.clear();
        cachedChars = 0;
      }
      cache.set(text, n);
      cachedChars += text.length;
      return n;
    },
  };
}
