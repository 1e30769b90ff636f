/**
 * Parses and validates an Amazon EventBridge event pattern into a small typed tree that
 * `matcher.ts` compiles to closures. Every error names the JSON path of the bad part.
 * Rules follow the EventBridge user guide (event buses) and the validation messages of
 * AWS's own rule compiler where the guide is silent.
 */
import { InvalidPatternError } from "../errors.ts";

/** A JSON scalar as it can appear in an event. */
export type Leaf = string | number | boolean | null;

export type NumericRange = {
  readonly lower: number;
  readonly lowerInclusive: boolean;
  readonly upper: number;
  readonly upperInclusive: boolean;
};

export type Cidr = { readonly bytes: Uint8Array; readonly bits: number };

/** What one element of a pattern's value array asks of an event value. */
export type ValueRule =
  | { readonly kind: "exact"; readonly value: Leaf }
  | { readonly kind: "prefix"; readonly value: string; readonly ignoreCase: boolean }
  | { readonly kind: "suffix"; readonly value: string; readonly ignoreCase: boolean }
  | { readonly kind: "equals-ignore-case"; readonly value: string }
  | { readonly kind: "wildcard"; readonly parts: readonly string[] }
  | { readonly kind: "numeric"; readonly range: NumericRange }
  | { readonly kind: "cidr"; readonly cidr: Cidr }
  /** Matches a present value that none of `excluded` matches. */
  | { readonly kind: "anything-but"; readonly excluded: readonly ValueRule[] }
  | { readonly kind: "exists"; readonly value: boolean };

export type FieldNode =
  | { readonly kind: "leaf"; readonly key: string; readonly rules: readonly ValueRule[] }
  | { readonly kind: "object"; readonly key: string; readonly node: ObjectNode };

/** All `fields` must match and, when `anyOf` is non-empty, at least one of `anyOf` ($or). */
export type ObjectNode = { readonly fields: readonly FieldNode[]; readonly anyOf: readonly ObjectNode[] };

const OPERATORS: ReadonlySet<string> = new Set([
  "prefix",
  "suffix",
  "equals-ignore-case",
  "wildcard",
  "anything-but",
  "numeric",
  "cidr",
  "exists",
]);
const ANYTHING_BUT_OPERATORS = ["prefix", "suffix", "equals-ignore-case", "wildcard"] as const;
type Path = readonly string[];

function fail(path: Path, message: string): never {
  throw new InvalidPatternError(message, path);
}

export function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "object") return "an object";
  return `${typeof value} ${String(value)}`;
}

function finite(value: unknown, path: Path, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    fail(path, `${what} must be a finite number, got ${describe(value)}`);
  }
  return value;
}

/** Parses a whole pattern; throws InvalidPatternError on the first problem found. */
export function parsePattern(pattern: unknown): ObjectNode {
  if (!isRecord(pattern)) fail([], `the pattern must be a JSON object, got ${describe(pattern)}`);
  return parseObject(pattern, [], false);
}

function parseObject(value: Readonly<Record<string, unknown>>, path: Path, insideOr: boolean): ObjectNode {
  const keys = Object.keys(value);
  if (keys.length === 0) fail(path, "empty objects are not allowed");
  const fields: FieldNode[] = [];
  let anyOf: ObjectNode[] = [];
  for (const key of keys) {
    const child = value[key];
    const childPath = [...path, key];
    if (key === "$or") {
      anyOf = parseOr(child, childPath);
      continue;
    }
    if (insideOr && OPERATORS.has(key)) {
      fail(childPath, `"${key}" is an operator and cannot be used as a field name inside $or`);
    }
    if (Array.isArray(child)) {
      if (child.length === 0) fail(childPath, "empty arrays are not allowed");
      const rules = child.map((element, i) => parseMatchValue(element, [...childPath, String(i)]));
      fields.push({ kind: "leaf", key, rules });
    } else if (isRecord(child)) {
      fields.push({ kind: "object", key, node: parseObject(child, childPath, insideOr) });
    } else {
      fail(
        childPath,
        `a field's value must be an array of match values or a nested object, got ${describe(child)}`,
      );
    }
  }
  return { fields, anyOf };
}

function parseOr(value: unknown, path: Path): ObjectNode[] {
  if (!Array.isArray(value) || value.length < 2) {
    fail(path, `$or must be an array of at least two pattern objects, got ${describe(value)}`);
  }
  return value.map((element, i) => {
    if (!isRecord(element))
      fail([...path, String(i)], `$or elements must be objects, got ${describe(element)}`);
    return parseObject(element, [...path, String(i)], true);
  });
}

function parseMatchValue(value: unknown, path: Path): ValueRule {
  if (value === null || typeof value === "string" || typeof value === "boolean") {
    return { kind: "exact", value };
  }
  if (typeof value === "number") return { kind: "exact", value: finite(value, path, "a match value") };
  if (!isRecord(value)) {
    fail(
      path,
      `match values must be strings, numbers, booleans, null or operator objects, got ${describe(value)}`,
    );
  }
  const keys = Object.keys(value);
  const [op] = keys;
  if (op === undefined || keys.length !== 1) {
    fail(path, `an operator object must have exactly one key, got ${keys.length} (${keys.join(", ")})`);
  }
  const operand = value[op];
  const opPath = [...path, op];
  switch (op) {
    case "prefix":
    case "suffix":
      return parsePrefixOrSuffix(op, operand, opPath);
    case "equals-ignore-case":
      if (typeof operand !== "string")
        fail(opPath, `equals-ignore-case must be a string, got ${describe(operand)}`);
      return { kind: "equals-ignore-case", value: operand };
    case "wildcard":
      return parseWildcard(operand, opPath);
    case "numeric":
      return { kind: "numeric", range: parseNumeric(operand, opPath) };
    case "cidr":
      return { kind: "cidr", cidr: parseCidr(operand, opPath) };
    case "exists":
      if (typeof operand !== "boolean")
        fail(opPath, `exists must be true or false, got ${describe(operand)}`);
      return { kind: "exists", value: operand };
    case "anything-but":
      return { kind: "anything-but", excluded: parseAnythingBut(operand, opPath) };
    default:
      return fail(path, `unknown operator ${JSON.stringify(op)} (known: ${[...OPERATORS].join(", ")})`);
  }
}

function parsePrefixOrSuffix(op: "prefix" | "suffix", operand: unknown, path: Path): ValueRule {
  if (typeof operand === "string") return { kind: op, value: operand, ignoreCase: false };
  if (isRecord(operand)) {
    const keys = Object.keys(operand);
    const inner = operand["equals-ignore-case"];
    if (keys.length === 1 && typeof inner === "string") return { kind: op, value: inner, ignoreCase: true };
  }
  return fail(path, `${op} must be a string or {"equals-ignore-case": string}, got ${describe(operand)}`);
}

function parseWildcard(operand: unknown, path: Path): ValueRule {
  if (typeof operand !== "string") fail(path, `wildcard must be a string, got ${describe(operand)}`);
  const parts: string[] = [];
  let current = "";
  for (let i = 0; i < operand.length; i++) {
    const c = operand[i];
    if (c === "*") {
      if (operand[i + 1] === "*") fail(path, `consecutive wildcard characters at position ${i}`);
      parts.push(current);
      current = "";
    } else if (c === "\\") {
      const next = operand[i + 1];
      if (next !== "*" && next !== "\\") {
        fail(path, `invalid escape at position ${i}: only \\* and \\\\ may be escaped`);
      }
      current += next;
      i++;
    } else {
      current += c;
    }
  }
  parts.push(current);
  return { kind: "wildcard", parts };
}

/** Numeric operators mapped to whether their bound is inclusive. */
const LOWER_OPS: ReadonlyMap<unknown, boolean> = new Map([
  [">", false],
  [">=", true],
]);
const UPPER_OPS: ReadonlyMap<unknown, boolean> = new Map([
  ["<", false],
  ["<=", true],
]);

function parseNumeric(operand: unknown, path: Path): NumericRange {
  if (!Array.isArray(operand) || (operand.length !== 2 && operand.length !== 4)) {
    fail(
      path,
      `numeric must be [operator, number] or [">"|">=", number, "<"|"<=", number], got ${describe(operand)}`,
    );
  }
  const [op, value, op2, value2] = operand as readonly unknown[];
  if (typeof op !== "string" || !(op === "=" || LOWER_OPS.has(op) || UPPER_OPS.has(op))) {
    fail([...path, "0"], `unknown numeric operator ${JSON.stringify(op)} (use =, <, <=, >, >=)`);
  }
  const n = finite(value, [...path, "1"], `the operand of ${op}`);
  if (operand.length === 2) {
    if (op === "=") return { lower: n, lowerInclusive: true, upper: n, upperInclusive: true };
    const lowerInclusive = LOWER_OPS.get(op);
    if (lowerInclusive !== undefined) {
      return { lower: n, lowerInclusive, upper: Number.POSITIVE_INFINITY, upperInclusive: false };
    }
    return {
      lower: Number.NEGATIVE_INFINITY,
      lowerInclusive: false,
      upper: n,
      upperInclusive: UPPER_OPS.get(op) === true,
    };
  }
  const lowerInclusive = LOWER_OPS.get(op);
  if (lowerInclusive === undefined)
    fail([...path, "0"], `a numeric range must start with > or >=, got ${op}`);
  const upperInclusive = UPPER_OPS.get(op2);
  if (upperInclusive === undefined)
    fail([...path, "2"], `a numeric range must end with < or <=, got ${describe(op2)}`);
  const upper = finite(value2, [...path, "3"], `the operand of ${String(op2)}`);
  if (!(n < upper)) fail(path, `the lower bound ${n} must be less than the upper bound ${upper}`);
  return { lower: n, lowerInclusive, upper, upperInclusive };
}

function parseCidr(operand: unknown, path: Path): Cidr {
  if (typeof operand !== "string")
    fail(path, `cidr must be a string such as "10.0.0.0/24", got ${describe(operand)}`);
  const slash = operand.split("/");
  const [ip, bitsText] = slash;
  if (slash.length !== 2 || ip === undefined || bitsText === undefined) {
    fail(path, `malformed CIDR ${JSON.stringify(operand)}: exactly one "/" is required`);
  }
  if (!/^\d{1,3}$/.test(bitsText))
    fail(path, `malformed CIDR ${JSON.stringify(operand)}: mask bits must be an integer`);
  const bytes = parseIp(ip);
  if (bytes === undefined)
    fail(path, `malformed CIDR ${JSON.stringify(operand)}: not an IPv4 or IPv6 address`);
  const bits = Number(bitsText);
  const max = bytes.length * 8;
  if (bits > max) fail(path, `malformed CIDR ${JSON.stringify(operand)}: mask bits must be 0 to ${max}`);
  return { bytes, bits };
}

function parseIPv4(text: string): Uint8Array | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = parts[i] ?? "";
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    bytes[i] = n;
  }
  return bytes;
}

function parseIPv6Groups(text: string, allowTrailingIPv4: boolean): number[] | undefined {
  if (text === "") return [];
  const pieces = text.split(":");
  const groups: number[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i] ?? "";
    if (allowTrailingIPv4 && i === pieces.length - 1 && piece.includes(".")) {
      const v4 = parseIPv4(piece);
      if (v4 === undefined) return undefined;
      groups.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
    } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) {
      groups.push(Number.parseInt(piece, 16));
    } else {
      return undefined;
    }
  }
  return groups;
}

function parseIPv6(text: string): Uint8Array | undefined {
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  let groups: number[];
  if (halves.length === 2) {
    const head = parseIPv6Groups(halves[0] ?? "", false);
    const tail = parseIPv6Groups(halves[1] ?? "", true);
    if (head === undefined || tail === undefined || head.length + tail.length > 7) return undefined;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    const all = parseIPv6Groups(text, true);
    if (all === undefined || all.length !== 8) return undefined;
    groups = all;
  }
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}

/** Parses an IPv4 (4 bytes) or IPv6 (16 bytes) address literal; undefined if it is neither. */
export function parseIp(text: string): Uint8Array | undefined {
  if (text.length > 45) return undefined;
  return text.includes(":") ? parseIPv6(text) : parseIPv4(text);
}

function parseAnythingBut(operand: unknown, path: Path): ValueRule[] {
  if (typeof operand === "string") return [{ kind: "exact", value: operand }];
  if (typeof operand === "number") return [{ kind: "exact", value: finite(operand, path, "anything-but") }];
  if (Array.isArray(operand)) {
    const allStrings = operand.every((v) => typeof v === "string");
    const allNumbers = operand.every((v) => typeof v === "number");
    if (operand.length === 0 || !(allStrings || allNumbers)) {
      fail(path, "an anything-but list must be non-empty and hold only strings or only numbers");
    }
    return operand.map((v: unknown, i) => ({
      kind: "exact",
      value: allNumbers ? finite(v, [...path, String(i)], "anything-but") : (v as string),
    }));
  }
  if (isRecord(operand)) {
    const keys = Object.keys(operand);
    const [op] = keys;
    const known = ANYTHING_BUT_OPERATORS.find((name) => name === op);
    if (keys.length !== 1 || op === undefined || known === undefined) {
      fail(path, `anything-but takes one of ${ANYTHING_BUT_OPERATORS.join(", ")}, got {${keys.join(", ")}}`);
    }
    const inner = operand[op];
    const innerPath = [...path, op];
    const values: readonly unknown[] = Array.isArray(inner) ? inner : [inner];
    if (values.length === 0 || !values.every((v) => typeof v === "string")) {
      fail(
        innerPath,
        `anything-but ${op} must be a string or a non-empty list of strings, got ${describe(inner)}`,
      );
    }
    return (values as readonly string[]).map((v, i): ValueRule => {
      const itemPath = Array.isArray(inner) ? [...innerPath, String(i)] : innerPath;
      if (known === "equals-ignore-case") return { kind: "equals-ignore-case", value: v };
      if (known === "wildcard") return parseWildcard(v, itemPath);
      if (v === "") fail(itemPath, `anything-but ${known} must not be empty`);
      return { kind: known, value: v, ignoreCase: false };
    });
  }
  return fail(
    path,
    `anything-but must be a string, a number, a list of strings or of numbers, or an object with one of ${ANYTHING_BUT_OPERATORS.join(", ")}; got ${describe(operand)}`,
  );
}
