import { ContentTypeNotSupportedError, RequestMalformedError } from "@a2a-js/sdk/errors";
import { MAX_JSON_DEPTH, MAX_MESSAGE_PARTS, nestsDeeperThan } from "../../domain/input-limits.ts";
import { isWithin, tenantUrn } from "../../domain/urn.ts";
import { paramsProblem } from "./a2a-params.ts";
import type { A2aVersion } from "./a2a-transport.ts";

/**
 * What an A2A request must be before the SDK reads it: the SDK's JSON decoding is lenient (a
 * text part `{"text": 5}` becomes "5", a part that is null throws), and by the time Arbor sees the
 * decoded message what was sent is lost. So the raw JSON-RPC request is checked here, fully and
 * before anything is read or written, with the limits every channel keeps (domain/input-limits.ts):
 *   - no JSON nests deeper than MAX_JSON_DEPTH (a data part 5,000 levels deep is refused, not a crash);
 *   - a message's contextId of another tenant is a conversation that does not exist (checked first,
 *     so that the rest of the body cannot tell what exists there);
 *   - parts: an array of 1 to MAX_MESSAGE_PARTS objects, each with exactly one content (`text` a
 *     string; `data` any JSON but null; `raw`, `url` strings, refused later as unsupported; a part
 *     that holds only content of another kind is content Arbor does not take, -32005), and
 *     `mediaType`, `filename` strings, `metadata` an object when present; in A2A 0.3, a `kind`
 *     (text, data, file: a kind Arbor does not know is content it does not take, -32005);
 *   - configuration: only the fields of the version's SendMessageConfiguration, each of its type
 *     (the SDK drops what it does not know; an unknown field is refused, never ignored);
 *   - any other method: the task id it names, a historyLength of 0 or more (a2a-params.ts).
 * The rendered text's length (MAX_REQUEST_CHARS) is checked where the parts are rendered
 * (requestText). Returns the error to answer with, or undefined.
 */
export function checkA2aRequest(
  body: Record<string, unknown>,
  tenant: string,
  version: A2aVersion = "1.0",
): Error | undefined {
  if (nestsDeeperThan(body, MAX_JSON_DEPTH))
    return new RequestMalformedError(`The request nests deeper than ${MAX_JSON_DEPTH} levels`);
  // The methods that name a task: its id, a historyLength of 0 or more (a2a-params.ts).
  if (!SENDS[version].includes(body.method as string)) return paramsProblem(body, version);
  const configProblem = configurationProblem(
    (body.params as { configuration?: unknown } | undefined)?.configuration,
    version,
  );
  if (configProblem) return new RequestMalformedError(`Invalid configuration: ${configProblem}`);
  const message = (body.params as { message?: unknown } | undefined)?.message;
  if (typeof message !== "object" || message === null) return undefined; // the SDK says it is required
  const m = message as Record<string, unknown>;
  const contextId = m.contextId ?? m.context_id;
  if (
    typeof contextId === "string" &&
    contextId.startsWith("cld:") &&
    !isWithin(contextId, tenantUrn(tenant))
  )
    return new RequestMalformedError(
      `No conversation ${contextId} for this caller: omit contextId to start a new one`,
    );
  if (version === "0.3") return legacyPartsProblem(m.parts);
  const problem = partsProblem(m.parts);
  if (problem instanceof Error) return problem; // content of a kind Arbor does not know (-32005)
  return problem ? new RequestMalformedError(`Invalid message parts: ${problem}`) : undefined;
}

const SENDS: Record<A2aVersion, readonly string[]> = {
  "1.0": ["SendMessage", "SendStreamingMessage"],
  "0.3": ["message/send", "message/stream"],
};

/** Each version's configuration fields (1.0's JSON takes either case), and what each must be. */
type FieldCheck = (value: unknown) => string | undefined;
const strings: FieldCheck = (v) =>
  Array.isArray(v) && v.every((s) => typeof s === "string") ? undefined : "must be an array of strings";
const boolean: FieldCheck = (v) => (typeof v === "boolean" ? undefined : "must be true or false");
const count: FieldCheck = (v) =>
  Number.isInteger(v) && (v as number) >= 0 ? undefined : "must be a whole number, 0 or more";
const object: FieldCheck = (v) =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? undefined : "must be an object";
const CONFIGURATION: Record<A2aVersion, Record<string, FieldCheck>> = {
  "1.0": {
    acceptedOutputModes: strings,
    accepted_output_modes: strings,
    historyLength: count,
    history_length: count,
    returnImmediately: boolean,
    return_immediately: boolean,
    taskPushNotificationConfig: object,
    task_push_notification_config: object,
  },
  "0.3": {
    acceptedOutputModes: strings,
    blocking: boolean,
    historyLength: count,
    pushNotificationConfig: object,
  },
};

function configurationProblem(configuration: unknown, version: A2aVersion): string | undefined {
  if (configuration === undefined || configuration === null) return undefined;
  if (object(configuration)) return "configuration must be an object";
  const known = CONFIGURATION[version];
  for (const [field, value] of Object.entries(configuration as Record<string, unknown>)) {
    const check = known[field];
    if (!check) {
      const names = Object.keys(known).filter((k) => !k.includes("_"));
      return `Arbor does not know configuration.${field} (A2A ${version} has ${names.join(", ")}): remove it`;
    }
    if (value === null) continue; // as if absent
    const problem = check(value);
    if (problem) return `configuration.${field} ${problem}`;
  }
  return undefined;
}

/** The A2A 0.3 parts: `kind` text (`text` a string), data (`data` an object) or file (bytes or uri). */
function legacyPartsProblem(parts: unknown): Error | undefined {
  const malformed = (problem: string) => new RequestMalformedError(`Invalid message parts: ${problem}`);
  if (!Array.isArray(parts) || parts.length === 0)
    return malformed("message.parts must be a non-empty array (a text part at least)");
  if (parts.length > MAX_MESSAGE_PARTS) return malformed(`at most ${MAX_MESSAGE_PARTS} parts`);
  for (const [i, part] of parts.entries()) {
    const at = `parts[${i}]`;
    if (typeof part !== "object" || part === null || Array.isArray(part))
      return malformed(`${at} must be an object`);
    const p = part as Record<string, unknown>;
    if (p.metadata !== undefined && object(p.metadata)) return malformed(`${at}.metadata must be an object`);
    switch (p.kind) {
      case "text":
        if (typeof p.text !== "string") return malformed(`${at}.text must be a string`);
        break;
      case "data":
        if (object(p.data)) return malformed(`${at}.data must be an object`);
        break;
      case "file": {
        const file = p.file as Record<string, unknown> | undefined;
        if (object(file)) return malformed(`${at}.file must be an object with bytes or uri`);
        const f = file as Record<string, unknown>;
        if ((typeof f.bytes === "string") === (typeof f.uri === "string"))
          return malformed(`${at}.file must have exactly one of bytes, uri (a string)`);
        for (const field of ["mimeType", "name"])
          if (f[field] !== undefined && typeof f[field] !== "string")
            return malformed(`${at}.file.${field} must be a string`);
        break;
      }
      case undefined:
        return malformed(`${at}.kind is required: text, data or file`);
      default:
        return new ContentTypeNotSupportedError(
          `${at} is of kind ${JSON.stringify(p.kind).slice(0, 60)}, which Arbor does not take: ` +
            "send text parts (text/plain) or data parts (application/json)",
        );
    }
  }
  return undefined;
}

const CONTENTS = ["text", "data", "raw", "url"] as const;
/** What a 1.0 part may hold besides its content (either case, as the SDK's JSON reads both). */
const PART_FIELDS: readonly string[] = [...CONTENTS, "mediaType", "media_type", "filename", "metadata"];

function partsProblem(parts: unknown): string | Error | undefined {
  if (!Array.isArray(parts) || parts.length === 0)
    return "message.parts must be a non-empty array (a text part at least)";
  if (parts.length > MAX_MESSAGE_PARTS) return `at most ${MAX_MESSAGE_PARTS} parts`;
  for (const [i, part] of parts.entries()) {
    const at = `parts[${i}]`;
    if (typeof part !== "object" || part === null || Array.isArray(part)) return `${at} must be an object`;
    const p = part as Record<string, unknown>;
    const present = CONTENTS.filter((k) => p[k] !== undefined && p[k] !== null);
    const other = Object.keys(p).filter(
      (k) => !PART_FIELDS.includes(k) && p[k] !== undefined && p[k] !== null,
    );
    if (present.length === 0 && other.length > 0)
      return new ContentTypeNotSupportedError(
        `${at} holds ${other.map((k) => JSON.stringify(k).slice(0, 40)).join(", ")}, content Arbor does not take: ` +
          "send text parts (text/plain) or data parts (application/json)",
      );
    if (present.length !== 1)
      return `${at} must have exactly one of ${CONTENTS.join(", ")}${present.length ? ` (it has ${present.join(", ")})` : ""}`;
    const [content] = present as [(typeof CONTENTS)[number]];
    if (content !== "data" && typeof p[content] !== "string") return `${at}.${content} must be a string`;
    for (const field of ["mediaType", "media_type", "filename"])
      if (p[field] !== undefined && typeof p[field] !== "string") return `${at}.${field} must be a string`;
    const metadata = p.metadata;
    if (
      metadata !== undefined &&
      (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))
    )
      return `${at}.metadata must be an object`;
  }
  return undefined;
}
