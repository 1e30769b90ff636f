import { createHash } from "node:crypto";
import { DataFactory, type Literal, type NamedNode, type Variable } from "n3";
import { parseUrn, tenantOf } from "../domain/urn.ts";
import { ValidationError } from "../kernel/errors.ts";
import { GENID_PREFIX, MAX_IRI_CHARS, MAX_LITERAL_CHARS, PREFIXES } from "./vocabulary.ts";

/**
 * The terms of the graph tool, as a model writes them in JSON, and back:
 *   IRI        an absolute IRI (`https://schema.org/name`, `urn:isbn:123`, `mailto:a@b.c`), with or
 *              without `<...>`; a prefixed name of the table below (`schema:name`, `xsd:integer`);
 *              a `cld:` URN of the caller's own tenant (a triple about one of Arbor's resources).
 *   literal    `{ "value": "Ada", "language": "en" }` or `{ "value": "42", "datatype": "xsd:integer" }`
 *              (objects only); the lexical forms of the common XSD types are checked.
 *   blank node `_:label` (graph_add only): scoped to one call, stored as the IRI
 *              `urn:arbor:genid:<hash of tenant, call and label>`, which later calls use to name it.
 *   variable   `?name` (queries and removals only).
 * Bounds: an IRI MAX_IRI_CHARS, a literal MAX_LITERAL_CHARS; text must be well-formed Unicode.
 */
export { GENID_PREFIX, MAX_IRI_CHARS, MAX_LITERAL_CHARS, PREFIXES } from "./vocabulary.ts";

const XSD = PREFIXES.xsd as string;
const RDF_LANG_STRING = `${PREFIXES.rdf}langString`;
const XSD_STRING = `${XSD}string`;
/** Lexical forms of the XSD types worth checking (the rest are taken as given). */
const LEXICAL: Readonly<Record<string, RegExp>> = {
  [`${XSD}integer`]: /^[+-]?\d+$/,
  [`${XSD}decimal`]: /^[+-]?(\d+(\.\d*)?|\.\d+)$/,
  [`${XSD}double`]: /^([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?INF|NaN)$/,
  [`${XSD}float`]: /^([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?INF|NaN)$/,
  [`${XSD}boolean`]: /^(true|false|1|0)$/,
  [`${XSD}date`]: /^-?\d{4,}-\d{2}-\d{2}(Z|[+-]\d{2}:\d{2})?$/,
  [`${XSD}dateTime`]: /^-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$/,
};

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;
/** Characters an IRI may not hold (RFC 3987 excludes them; N-Triples cannot write them in `<...>`). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const NOT_IN_IRI = /[\u0000-\u0020<>"{}|^`\\\u007f-\u009f]/;
const LANGUAGE = /^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8}){0,7}$/;
const VARIABLE = /^\?([A-Za-z_][A-Za-z0-9_]{0,63})$/;
const BLANK = /^_:([A-Za-z0-9_-]{1,64})$/;

/** A literal as JSON. */
export interface LiteralInput {
  value: string;
  language?: string | undefined;
  datatype?: string | undefined;
}
export type TermInput = string | LiteralInput;
export type ObjectTerm = NamedNode | Literal;
export type PatternTerm = NamedNode | Literal | Variable;

/** Where terms are read: the caller's tenant (for `cld:` URNs) and how blank nodes are scoped. */
export interface TermScope {
  tenant: string;
  /** Blank nodes are allowed (graph_add) and made IRIs unique to this scope (the call's key). */
  blankScope?: string;
  /** `?variables` are allowed (queries, removals). */
  variables?: boolean;
}

const fail = (where: string, problem: string): never => {
  throw new ValidationError(`${where}: ${problem}`);
};

const wellFormed = (s: string) => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** An IRI (or prefixed name, or `cld:` URN of the tenant), checked; `where` names the field. */
export function parseIri(raw: string, where: string, tenant: string): NamedNode {
  let text = raw.startsWith("<") && raw.endsWith(">") ? raw.slice(1, -1) : raw;
  if (text.length === 0) return fail(where, "is empty: give an IRI such as https://schema.org/name");
  if (text.length > MAX_IRI_CHARS) return fail(where, `is longer than ${MAX_IRI_CHARS} characters`);
  if (!wellFormed(text)) return fail(where, "is not well-formed Unicode (a lone surrogate)");
  const scheme = SCHEME.exec(text)?.[1];
  if (scheme === undefined)
    return fail(
      where,
      `${JSON.stringify(text.slice(0, 80))} is not an IRI: give an absolute IRI (https://...), ` +
        `a prefixed name (${Object.keys(PREFIXES).join(", ")}), or a cld: URN of your tenant`,
    );
  const namespace = PREFIXES[scheme];
  if (namespace !== undefined) text = namespace + text.slice(scheme.length + 1);
  if (NOT_IN_IRI.test(text))
    return fail(
      where,
      `${JSON.stringify(text.slice(0, 80))} holds a character an IRI may not (space, <>"{}|^\`\\)`,
    );
  // A scheme is case-insensitive (RFC 3986): `CLD:` names what `cld:` names, and is not let past
  // the tenant check below by its case.
  if (scheme !== "cld" && scheme.toLowerCase() === "cld")
    return fail(where, `write the scheme of ${JSON.stringify(text.slice(0, 80))} as cld: (lower case)`);
  if (scheme === "cld") {
    try {
      parseUrn(text);
    } catch (e) {
      return fail(where, (e as Error).message);
    }
    const owner = tenantOf(text);
    if (owner !== tenant)
      return fail(
        where,
        `${text.slice(0, 120)} is not a resource of your tenant (${tenant}): a graph names only its own tenant's resources`,
      );
  }
  if (text.length > MAX_IRI_CHARS) return fail(where, `is longer than ${MAX_IRI_CHARS} characters`);
  return DataFactory.namedNode(text);
}

function parseLiteral(raw: LiteralInput, where: string, tenant: string): Literal {
  const { value, language, datatype } = raw;
  if (typeof value !== "string") return fail(where, "a literal needs a string `value`");
  if (value.length > MAX_LITERAL_CHARS)
    return fail(
      where,
      `the literal is ${value.length} characters, over ${MAX_LITERAL_CHARS}: store long text as a resource and name its URN`,
    );
  if (!wellFormed(value)) return fail(where, "the literal is not well-formed Unicode (a lone surrogate)");
  if (language !== undefined && datatype !== undefined)
    return fail(where, "a literal has a language or a datatype, not both");
  if (language !== undefined) {
    if (!LANGUAGE.test(language))
      return fail(where, `${JSON.stringify(language.slice(0, 40))} is not a language tag (en, en-GB)`);
    return DataFactory.literal(value, language.toLowerCase());
  }
  if (datatype === undefined) return DataFactory.literal(value);
  const type = parseIri(datatype, `${where}.datatype`, tenant);
  if (type.value === RDF_LANG_STRING) return fail(where, "rdf:langString needs a `language`, not a datatype");
  const lexical = LEXICAL[type.value];
  if (lexical && !lexical.test(value))
    return fail(where, `${JSON.stringify(value.slice(0, 40))} is not a valid ${compactIri(type.value)}`);
  return type.value === XSD_STRING ? DataFactory.literal(value) : DataFactory.literal(value, type);
}

/** The IRI a blank node label stands for in one scope (a call): the same label, the same IRI. */
export function skolemIri(tenant: string, scope: string, label: string): string {
  const h = createHash("sha256").update(`${tenant}\u0000${scope}\u0000${label}`).digest("hex");
  return `${GENID_PREFIX}${h.slice(0, 32)}`;
}

/** A subject or predicate (`object` false), or an object, as the scope allows. */
export function parseTerm(raw: unknown, where: string, scope: TermScope, object: boolean): PatternTerm {
  if (typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
    if (!object) return fail(where, "only an object may be a literal");
    return parseLiteral(raw as LiteralInput, where, scope.tenant);
  }
  if (typeof raw !== "string")
    return fail(where, 'give a string (an IRI, "?variable" or "_:blank") or, for an object, {"value": ...}');
  const variable = VARIABLE.exec(raw);
  if (variable) {
    if (!scope.variables) return fail(where, `${raw} is a variable: graph_add takes no variables`);
    return DataFactory.variable(variable[1] as string);
  }
  if (raw.startsWith("?"))
    return fail(
      where,
      `${JSON.stringify(raw.slice(0, 70))} is not a variable name (?name: a letter, then letters, digits or _)`,
    );
  if (raw.startsWith("_:")) {
    const label = BLANK.exec(raw)?.[1];
    if (label === undefined)
      return fail(where, `${JSON.stringify(raw.slice(0, 70))} is not a blank node label (_:letters-digits)`);
    if (scope.blankScope === undefined)
      return fail(
        where,
        `blank node ${raw} names nothing outside the call that made it: use the ${GENID_PREFIX}... IRI graph_add gave it, or a ?variable`,
      );
    return DataFactory.namedNode(skolemIri(scope.tenant, scope.blankScope, label));
  }
  return parseIri(raw, where, scope.tenant);
}

/** An IRI shortened to a prefixed name of the table when that is exact, else as is. */
export function compactIri(iri: string): string {
  for (const [prefix, ns] of Object.entries(PREFIXES)) {
    if (iri.startsWith(ns) && /^[A-Za-z_][A-Za-z0-9_-]*$/.test(iri.slice(ns.length)))
      return `${prefix}:${iri.slice(ns.length)}`;
  }
  return iri;
}

/** A term as the tool shows it: an IRI as a string, a literal as `{value, language | datatype}`. */
export function termOutput(term: ObjectTerm): TermInput {
  if (term.termType === "NamedNode") return compactIri(term.value);
  const out: LiteralInput = { value: term.value };
  if (term.language) out.language = term.language;
  else if (term.datatype.value !== XSD_STRING) out.datatype = compactIri(term.datatype.value);
  return out;
}
