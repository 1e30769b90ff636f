/**
 * Text processing for the local embedder: tokenising, a light English stemmer, stopwords and the
 * exclusion scope of phrases such as "Not for bookkeeping or tax" (what an assistant is NOT for
 * must not pull those tasks towards it). Pure functions, no I/O, deterministic.
 */

export interface Token {
  /** Lower-cased surface form. */
  readonly raw: string;
  /** Stemmed form, used for matching and features. */
  readonly stem: string;
  /** Index of the clause (sentence part) the token belongs to. */
  readonly clause: number;
  /** 1 for normal text, the exclusion factor inside a "not for ..." scope. */
  readonly factor: number;
  /** A stopword or a bare number: matched by the lexicon but gives no word features. */
  readonly stop: boolean;
}

const STOPWORDS = new Set(
  `a about above after again against all also am an and any are aren't as at be because been before being
  below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
  each either etc every few for from further get gets getting got had hadn't has hasn't have haven't having he
  her here hers herself him himself his how however i if in into is isn't it it's its itself just let's like
  made make makes making may me might more most much must mustn't my myself need needs no nor not now of off
  on once one only or other others our ours ourselves out over own per please same shall she should shouldn't
  so some such than that that's the their theirs them themselves then there there's these they they're this
  those through to too under until up upon us use used uses using very via was wasn't we we're were weren't
  what when where whether which while who whom whose why will with within without won't would wouldn't yet
  you your yours yourself yourselves instead thing things way ways well really quite something anything
  everything nothing someone anyone everyone still even ever e.g i.e vs
  purpose instructions applicability evaluation`.split(/\s+/),
);

/** Scopes that describe what something is NOT for. The words after the cue are excluded. */
const EXCLUSION_CUES: readonly (readonly string[])[] = [
  ["not", "for"],
  ["not", "used", "for"],
  ["not", "to", "be", "used", "for"],
  ["do", "not", "use", "for"],
  ["do", "not", "use", "it", "for"],
  ["don't", "use", "for"],
  ["never", "for"],
  ["not", "meant", "for"],
];
const CUE_STARTS = new Set(EXCLUSION_CUES.map((cue) => cue[0] as string));

/** Nouns that only look inflected or derived: stemming them would merge unrelated senses. */
const KEEP = new Set(
  `accounting marketing booking meeting setting billing funding pricing hosting building training listing
  opening shipping naming offering landing onboarding routing ceiling during morning evening nothing
  something anything everything thing string spring wedding clothing housing statement receivable payable
  table variable stable cable notable
  business news series species basis analysis`.split(/\s+/),
);

const vowel = /[aeiouy]/;

function undouble(s: string): string {
  const n = s.length;
  if (
    n >= 3 &&
    s[n - 1] === s[n - 2] &&
    !"lsz".includes(s[n - 1] as string) &&
    !vowel.test(s[n - 1] as string)
  ) {
    return s.slice(0, -1);
  }
  return s;
}

const DERIVATIONAL: readonly (readonly [string, string])[] = [
  ["isations", "iz"],
  ["izations", "iz"],
  ["isation", "iz"],
  ["ization", "iz"],
  ["ational", "at"],
  ["ations", "at"],
  ["ation", "at"],
  ["ments", ""],
  ["ment", ""],
  ["nesses", ""],
  ["ness", ""],
  ["fully", ""],
  ["ful", ""],
  ["ably", ""],
  ["able", ""],
  ["ible", ""],
  ["ise", "iz"],
  ["ize", "iz"],
  ["yse", "yz"],
  ["yze", "yz"],
  ["ly", ""],
];

/**
 * A light, deterministic English stemmer: plurals, -ing, -ed and a few derivational suffixes,
 * then a final "e" is dropped so that "create", "created" and "creating" meet. Agent nouns keep
 * their "-er" on purpose: "a designer found a photo" names who, not what kind of work.
 * It is applied identically to texts and to the lexicon, so its imperfections cancel out.
 */
export function stem(word: string): string {
  // Texts repeat the same words, and stemming runs several regexes: remember recent results.
  let s = stemCache.get(word);
  if (s === undefined) {
    s = stemUncached(word);
    if (stemCache.size >= STEM_CACHE_LIMIT) stemCache.clear();
    stemCache.set(word, s);
  }
  return s;
}

/** Bounds the stem cache; clearing it when full is enough (a stem is cheap to recompute). */
const STEM_CACHE_LIMIT = 50_000;
const stemCache = new Map<string, string>();

function stemUncached(word: string): string {
  let s = word.toLowerCase().replace(/['’]s$/, "");
  if (s.length <= 3 || /\d/.test(s) || KEEP.has(s)) return s;
  if (s.endsWith("sses")) s = s.slice(0, -2);
  else if (s.endsWith("ies") && s.length > 4) s = `${s.slice(0, -3)}y`;
  else if (/(?:xes|ches|shes|zes)$/.test(s)) s = s.slice(0, -2);
  else if (s.endsWith("s") && !/(?:ss|us|is)$/.test(s)) s = s.slice(0, -1);
  if (KEEP.has(s)) return s;

  if (s.endsWith("ied") && s.length > 4) s = `${s.slice(0, -3)}y`;
  else if (s.endsWith("ing") && s.length >= 6 && vowel.test(s.slice(0, -3))) s = undouble(s.slice(0, -3));
  else if (s.endsWith("ed") && s.length >= 5 && vowel.test(s.slice(0, -2))) s = undouble(s.slice(0, -2));

  for (const [suffix, replacement] of DERIVATIONAL) {
    const minimum = suffix.startsWith("ment") ? 5 : 4;
    if (s.endsWith(suffix) && s.length - suffix.length >= minimum) {
      s = undouble(s.slice(0, -suffix.length) + replacement);
      break;
    }
  }
  if (s.length > 4 && s.endsWith("e") && !STOPWORDS.has(s.slice(0, -1))) s = s.slice(0, -1);
  return s;
}

const WORD = /[\p{L}\p{N}]+(?:['’][\p{L}]+)*/gu;
/** Clause boundaries: sentence punctuation, colons, semicolons, parentheses, line breaks, dashes. */
const CLAUSE = /[.!?;:()\n\r]+|\s[-–—]\s/u;

/** Words of a phrase or text, lower-cased, split on anything that is not a letter or a digit. */
export function words(text: string): string[] {
  return text.normalize("NFKC").toLowerCase().match(WORD) ?? [];
}

/** Tokenises a text into stemmed tokens with clause numbers and exclusion factors. */
export function tokenize(text: string, exclusionFactor: number): Token[] {
  const out: Token[] = [];
  const clauses = text.normalize("NFKC").toLowerCase().split(CLAUSE);
  for (let clauseIndex = 0; clauseIndex < clauses.length; clauseIndex++) {
    const raw = (clauses[clauseIndex] as string).match(WORD);
    if (!raw) continue;
    const excludedFrom = exclusionStart(raw);
    for (let i = 0; i < raw.length; i++) {
      const w = raw[i] as string;
      out.push({
        raw: w,
        stem: stem(w),
        clause: clauseIndex,
        factor: i >= excludedFrom ? exclusionFactor : 1,
        stop: STOPWORDS.has(w) || /^\d+$/.test(w),
      });
    }
  }
  return out;
}

/** Index of the first word after the first exclusion cue of a clause, or +Infinity if none. */
function exclusionStart(raw: readonly string[]): number {
  for (let i = 0; i < raw.length; i++) {
    // Most words start no cue: skip the scan over all cues for them.
    if (!CUE_STARTS.has(raw[i] as string)) continue;
    for (const cue of EXCLUSION_CUES) {
      if (matchesCue(raw, i, cue)) return i + cue.length;
    }
  }
  return Number.POSITIVE_INFINITY;
}

function matchesCue(raw: readonly string[], start: number, cue: readonly string[]): boolean {
  for (let k = 0; k < cue.length; k++) if (raw[start + k] !== cue[k]) return false;
  return true;
}
