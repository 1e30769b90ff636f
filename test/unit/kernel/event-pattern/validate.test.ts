/** Validation of event-pattern shapes: each bad pattern names the JSON path of its bad part and what is wrong. */
import { describe, expect, it } from "vitest";
import { InvalidPatternError } from "../../../../shared/kernel/errors.ts";
import {
  compilePattern,
  matchesPattern,
  validatePattern,
} from "../../../../shared/kernel/event-pattern/index.ts";

type Bad = {
  readonly name: string;
  readonly pattern: unknown;
  readonly path: readonly string[];
  readonly says: string;
};

const bad: readonly Bad[] = [
  { name: "pattern is an array", pattern: [{ a: ["x"] }], path: [], says: "must be a JSON object" },
  { name: "pattern is a string", pattern: '{"a":["x"]}', path: [], says: "must be a JSON object" },
  { name: "pattern is null", pattern: null, path: [], says: "must be a JSON object" },
  { name: "empty pattern", pattern: {}, path: [], says: "empty objects are not allowed" },
  { name: "empty nested object", pattern: { detail: {} }, path: ["detail"], says: "empty objects" },
  { name: "leaf is a string", pattern: { source: "aws.ec2" }, path: ["source"], says: "must be an array" },
  {
    name: "leaf is a number",
    pattern: { detail: { n: 5 } },
    path: ["detail", "n"],
    says: "must be an array",
  },
  { name: "leaf is null", pattern: { source: null }, path: ["source"], says: "got null" },
  {
    name: "empty pattern array",
    pattern: { source: [] },
    path: ["source"],
    says: "empty arrays are not allowed",
  },
  { name: "nested array value", pattern: { a: [["x"]] }, path: ["a", "0"], says: "match values must be" },
  { name: "NaN value", pattern: { a: [Number.NaN] }, path: ["a", "0"], says: "finite number" },
  {
    name: "unknown operator",
    pattern: { a: [{ contains: "x" }] },
    path: ["a", "0"],
    says: 'unknown operator "contains"',
  },
  { name: "empty operator object", pattern: { a: [{}] }, path: ["a", "0"], says: "exactly one key, got 0" },
  {
    name: "two operators in one object",
    pattern: { a: [{ prefix: "x", suffix: "y" }] },
    path: ["a", "0"],
    says: "exactly one key, got 2 (prefix, suffix)",
  },
  {
    name: "prefix with a number",
    pattern: { a: [{ prefix: 5 }] },
    path: ["a", "0", "prefix"],
    says: "prefix must be a string",
  },
  {
    name: "prefix with an unknown inner operator",
    pattern: { a: [{ prefix: { wildcard: "x*" } }] },
    path: ["a", "0", "prefix"],
    says: '{"equals-ignore-case": string}',
  },
  {
    name: "suffix with a list",
    pattern: { a: [{ suffix: [".png"] }] },
    path: ["a", "0", "suffix"],
    says: "suffix must be",
  },
  {
    name: "equals-ignore-case with a number",
    pattern: { a: [{ "equals-ignore-case": 1 }] },
    path: ["a", "0", "equals-ignore-case"],
    says: "must be a string",
  },
  {
    name: "exists with a string",
    pattern: { a: [{ exists: "true" }] },
    path: ["a", "0", "exists"],
    says: "true or false",
  },
  {
    name: "wildcard with a number",
    pattern: { a: [{ wildcard: 1 }] },
    path: ["a", "0", "wildcard"],
    says: "must be a string",
  },
  {
    name: "wildcard with consecutive stars",
    pattern: { a: [{ wildcard: "abc**def" }] },
    path: ["a", "0", "wildcard"],
    says: "consecutive wildcard characters at position 3",
  },
  {
    name: "wildcard with a bad escape",
    pattern: { a: [{ wildcard: "a\\bc" }] },
    path: ["a", "0", "wildcard"],
    says: "invalid escape at position 1",
  },
  {
    name: "wildcard ending in a backslash",
    pattern: { a: [{ wildcard: "abc\\" }] },
    path: ["a", "0", "wildcard"],
    says: "invalid escape at position 3",
  },
  {
    name: "numeric not an array",
    pattern: { a: [{ numeric: 5 }] },
    path: ["a", "0", "numeric"],
    says: "numeric must be",
  },
  {
    name: "numeric empty",
    pattern: { a: [{ numeric: [] }] },
    path: ["a", "0", "numeric"],
    says: "numeric must be",
  },
  {
    name: "numeric with a bad operator",
    pattern: { a: [{ numeric: ["!=", 5] }] },
    path: ["a", "0", "numeric", "0"],
    says: 'unknown numeric operator "!="',
  },
  {
    name: "numeric with a string operand",
    pattern: { a: [{ numeric: [">", "5"] }] },
    path: ["a", "0", "numeric", "1"],
    says: "must be a finite number",
  },
  {
    name: "numeric range starting with <",
    pattern: { a: [{ numeric: ["<", 5, ">", 0] }] },
    path: ["a", "0", "numeric", "0"],
    says: "must start with > or >=",
  },
  {
    name: "numeric range with a bad second operator",
    pattern: { a: [{ numeric: [">", 0, ">", 5] }] },
    path: ["a", "0", "numeric", "2"],
    says: "must end with < or <=",
  },
  {
    name: "numeric range with a non-number top",
    pattern: { a: [{ numeric: [">", 0, "<", null] }] },
    path: ["a", "0", "numeric", "3"],
    says: "must be a finite number",
  },
  {
    name: "numeric range upside down",
    pattern: { a: [{ numeric: [">", 5, "<=", 5] }] },
    path: ["a", "0", "numeric"],
    says: "must be less than the upper bound",
  },
  {
    name: "numeric with too many terms",
    pattern: { a: [{ numeric: [">", 0, "<", 5, "<", 6] }] },
    path: ["a", "0", "numeric"],
    says: "numeric must be",
  },
  {
    name: "cidr not a string",
    pattern: { ip: [{ cidr: 10 }] },
    path: ["ip", "0", "cidr"],
    says: "cidr must be a string",
  },
  {
    name: "cidr without a mask",
    pattern: { ip: [{ cidr: "10.0.0.1" }] },
    path: ["ip", "0", "cidr"],
    says: 'one "/"',
  },
  {
    name: "cidr with a bad address",
    pattern: { ip: [{ cidr: "10.0.0.256/24" }] },
    path: ["ip", "0", "cidr"],
    says: "not an IPv4",
  },
  {
    name: "cidr with a hostname",
    pattern: { ip: [{ cidr: "example.com/24" }] },
    path: ["ip", "0", "cidr"],
    says: "not an IPv4",
  },
  {
    name: "cidr mask too long",
    pattern: { ip: [{ cidr: "10.0.0.0/33" }] },
    path: ["ip", "0", "cidr"],
    says: "0 to 32",
  },
  {
    name: "IPv6 cidr mask too long",
    pattern: { ip: [{ cidr: "::1/129" }] },
    path: ["ip", "0", "cidr"],
    says: "0 to 128",
  },
  {
    name: "cidr mask not a number",
    pattern: { ip: [{ cidr: "10.0.0.0/x" }] },
    path: ["ip", "0", "cidr"],
    says: "integer",
  },
  {
    name: "anything-but with null",
    pattern: { a: [{ "anything-but": null }] },
    path: ["a", "0", "anything-but"],
    says: "anything-but must be",
  },
  {
    name: "anything-but with a boolean",
    pattern: { a: [{ "anything-but": true }] },
    path: ["a", "0", "anything-but"],
    says: "anything-but must be",
  },
  {
    name: "anything-but with a mixed list",
    pattern: { a: [{ "anything-but": ["a", 1] }] },
    path: ["a", "0", "anything-but"],
    says: "only strings or only numbers",
  },
  {
    name: "anything-but with an empty list",
    pattern: { a: [{ "anything-but": [] }] },
    path: ["a", "0", "anything-but"],
    says: "non-empty",
  },
  {
    name: "anything-but with an unknown inner operator",
    pattern: { a: [{ "anything-but": { numeric: [">", 1] } }] },
    path: ["a", "0", "anything-but"],
    says: "anything-but takes one of prefix, suffix, equals-ignore-case, wildcard",
  },
  {
    name: "anything-but prefix with a number",
    pattern: { a: [{ "anything-but": { prefix: 5 } }] },
    path: ["a", "0", "anything-but", "prefix"],
    says: "must be a string or a non-empty list of strings",
  },
  {
    name: "anything-but with an empty prefix",
    pattern: { a: [{ "anything-but": { prefix: "" } }] },
    path: ["a", "0", "anything-but", "prefix"],
    says: "must not be empty",
  },
  {
    name: "anything-but equals-ignore-case list with a number",
    pattern: { a: [{ "anything-but": { "equals-ignore-case": ["a", 1] } }] },
    path: ["a", "0", "anything-but", "equals-ignore-case"],
    says: "list of strings",
  },
  {
    name: "anything-but wildcard list with consecutive stars",
    pattern: { a: [{ "anything-but": { wildcard: ["*/lib/*", "a**"] } }] },
    path: ["a", "0", "anything-but", "wildcard", "1"],
    says: "consecutive wildcard characters",
  },
  { name: "$or not an array", pattern: { $or: { a: ["x"] } }, path: ["$or"], says: "$or must be an array" },
  { name: "$or with one element", pattern: { $or: [{ a: ["x"] }] }, path: ["$or"], says: "at least two" },
  {
    name: "$or with a string element",
    pattern: { $or: [{ a: ["x"] }, "b"] },
    path: ["$or", "1"],
    says: "must be objects",
  },
  {
    name: "$or with an empty object",
    pattern: { $or: [{ a: ["x"] }, {}] },
    path: ["$or", "1"],
    says: "empty objects",
  },
  {
    name: "operator name used as a field inside $or",
    pattern: { $or: [{ prefix: ["a"] }, { suffix: ["b"] }] },
    path: ["$or", "0", "prefix"],
    says: '"prefix" is an operator',
  },
  {
    name: "bad value deep inside a nested $or",
    pattern: { detail: { $or: [{ a: ["x"] }, { b: { c: [{ numeric: ["=", "1"] }] } }] } },
    path: ["detail", "$or", "1", "b", "c", "0", "numeric", "1"],
    says: "must be a finite number",
  },
];

function caught(run: () => unknown): InvalidPatternError {
  try {
    run();
  } catch (error) {
    if (error instanceof InvalidPatternError) return error;
    throw error;
  }
  throw new Error("expected an InvalidPatternError");
}

describe("validatePattern rejects bad shapes with the path and the reason", () => {
  it.each(bad)("$name", ({ pattern, path, says }) => {
    const error = caught(() => validatePattern(pattern));
    expect(error.code).toBe("INVALID_PATTERN");
    expect(error.details).toEqual({ path });
    expect(error.message).toContain(says);
    expect(error.message).toContain(path.length ? `at ${path.join(".")}:` : "Invalid event pattern:");
  });

  it.each(bad)("compilePattern and matchesPattern throw the same way: $name", ({ pattern, path }) => {
    expect(caught(() => compilePattern(pattern)).details).toEqual({ path });
    expect(caught(() => matchesPattern(pattern, {})).details).toEqual({ path });
  });
});

describe("validatePattern accepts every documented operator form", () => {
  const good: readonly unknown[] = [
    { a: ["x", 1, 2.5, true, false, null, ""] },
    { a: [{ prefix: "" }, { prefix: { "equals-ignore-case": "x" } }] },
    { a: [{ suffix: "x" }, { suffix: { "equals-ignore-case": "x" } }] },
    { a: [{ "equals-ignore-case": "x" }, { wildcard: "a*b\\*c\\\\d" }, { wildcard: "" }] },
    {
      a: [
        { "anything-but": "x" },
        { "anything-but": 1 },
        { "anything-but": ["x", "y"] },
        { "anything-but": [1, 2] },
      ],
    },
    { a: [{ "anything-but": { prefix: "x" } }, { "anything-but": { suffix: ["x", "y"] } }] },
    { a: [{ "anything-but": { "equals-ignore-case": ["x"] } }, { "anything-but": { wildcard: "*/x/*" } }] },
    { a: [{ numeric: ["=", 0] }, { numeric: ["<", 1] }, { numeric: ["<=", 1] }, { numeric: [">", 1] }] },
    { a: [{ numeric: [">=", -1.5, "<", 1e9] }, { numeric: [">", 0, "<=", 5] }] },
    { a: [{ cidr: "0.0.0.0/0" }, { cidr: "10.0.0.5/32" }, { cidr: "::/0" }, { cidr: "fe80::1/128" }] },
    { a: [{ exists: true }, { exists: false }] },
    { $or: [{ a: ["x"] }, { b: { $or: [{ c: [1] }, { d: [2] }] } }], e: { f: ["y"] } },
  ];
  it.each(good)("accepts %j", (pattern) => {
    expect(validatePattern(pattern)).toBe(pattern);
  });
});
