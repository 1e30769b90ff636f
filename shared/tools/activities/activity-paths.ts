/**
 * Output paths (seed 004): where a call's result goes in its task's state. A path is `state.` and
 * one to four identifiers joined by dots (`state.forecast`, `state.weather.sunny`); a branching
 * path offers alternatives joined by `||` (`state.sunny || state.rainy`), of which an activity
 * writes exactly one. The seeds' `†` marker before a path is accepted and dropped. Pure: the
 * engine and the tool function parse with the same code.
 */

/** The meta-properties a call may carry besides its own arguments; taken off before the check. */
export const META_KEYS = ["_outputPath", "_instance"] as const;
export type MetaKey = (typeof META_KEYS)[number];

export const MAX_OUTPUT_PATH_CHARS = 500;
export const MAX_ALTERNATIVES = 8;
const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const MAX_SEGMENTS = 4;

/** What the model is told of `_outputPath` in a tool's JSON Schema. */
export const OUTPUT_PATH_DOC =
  "Optional. Where to store the result in the task's state, e.g. `state.forecast`; later turns see it. " +
  "An activity may take alternatives, `state.sunny || state.rainy`, and stores to the one it chooses. " +
  "Without it, an activity runs in the background (fire-and-forget, not awaited) and another tool's " +
  "result is shown in the next turn only.";

export type ParsedPaths = { ok: true; paths: string[] } | { ok: false; problem: string };

/** Parses `_outputPath`; every problem names what to write instead. */
export function parseOutputPath(raw: unknown): ParsedPaths {
  const hint = "write state.<name>, or alternatives like state.<a> || state.<b>";
  if (typeof raw !== "string") return { ok: false, problem: `_outputPath must be a string: ${hint}` };
  if (raw.length > MAX_OUTPUT_PATH_CHARS)
    return { ok: false, problem: `_outputPath is longer than ${MAX_OUTPUT_PATH_CHARS} characters` };
  const parts = raw.split("||").map((p) => p.trim().replace(/^†/, ""));
  if (parts.length > MAX_ALTERNATIVES)
    return { ok: false, problem: `_outputPath offers more than ${MAX_ALTERNATIVES} alternatives` };
  const paths: string[] = [];
  for (const p of parts) {
    const segments = p.split(".");
    const [head, ...rest] = segments;
    if (
      head !== "state" ||
      rest.length < 1 ||
      rest.length > MAX_SEGMENTS ||
      !rest.every((s) => IDENT.test(s))
    )
      return {
        ok: false,
        problem: `_outputPath ${JSON.stringify(p.slice(0, 80))} is not a state path: ${hint}`,
      };
    if (paths.includes(p)) return { ok: false, problem: `_outputPath names ${p} twice` };
    paths.push(p);
  }
  return { ok: true, paths };
}

/** The call's arguments without its meta-properties, and the meta-properties given. */
export function splitMeta(args: Record<string, unknown>): {
  own: Record<string, unknown>;
  meta: Partial<Record<MetaKey, unknown>>;
} {
  const own: Record<string, unknown> = {};
  const meta: Partial<Record<MetaKey, unknown>> = {};
  for (const [k, v] of Object.entries(args)) {
    if ((META_KEYS as readonly string[]).includes(k)) meta[k as MetaKey] = v;
    else own[k] = v;
  }
  return { own, meta };
}

/** A tool's JSON Schema with `_outputPath` advertised (a copy; the original is frozen). */
export function withOutputPath(parameters: Record<string, unknown>): Record<string, unknown> {
  const properties = (parameters.properties ?? {}) as Record<string, unknown>;
  if ("_outputPath" in properties) return parameters;
  return {
    ...parameters,
    properties: {
      ...properties,
      _outputPath: { type: "string", maxLength: MAX_OUTPUT_PATH_CHARS, description: OUTPUT_PATH_DOC },
    },
  };
}
