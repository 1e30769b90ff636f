import type { Message, Part } from "@a2a-js/sdk";
import { ContentTypeNotSupportedError, RequestMalformedError } from "@a2a-js/sdk/errors";
import { requestTextProblem } from "../../domain/input-limits.ts";

/**
 * The parts of A2A messages and artifacts: what Arbor reads in a message (text, and data as JSON;
 * no files), and the forms it gives its answer in (the caller's acceptedOutputModes).
 */
export const textPart = (value: string): Part => ({
  content: { $case: "text", value },
  metadata: undefined,
  filename: "",
  mediaType: "text/plain",
});

export const dataPart = (value: Record<string, unknown>): Part => ({
  content: { $case: "data", value },
  metadata: undefined,
  filename: "",
  mediaType: "application/json",
});

/** A file of an answer: its bytes (raw, base64 in JSON) or its URL; a note when it has neither here. */
export const filePart = (file: {
  name: string;
  mediaType: string;
  bytes?: Uint8Array;
  url?: string;
}): Part =>
  file.bytes
    ? {
        content: { $case: "raw", value: Buffer.from(file.bytes) },
        metadata: undefined,
        filename: file.name,
        mediaType: file.mediaType,
      }
    : file.url
      ? {
          content: { $case: "url", value: file.url },
          metadata: undefined,
          filename: file.name,
          mediaType: file.mediaType,
        }
      : textPart(
          `${file.name} (${file.mediaType}) is too large to send here; read it through Arbor's HTTP API`,
        );

// ---- what Arbor takes in, and gives back --------------------------------------------------------

const baseType = (mediaType: string) => mediaType.split(";", 1)[0]?.trim().toLowerCase() ?? "";
const isJsonType = (t: string) => t === "application/json" || /^application\/[\w.+-]+\+json$/.test(t);
const ACCEPTED_INPUT =
  "Arbor takes text parts (text/plain) and data parts (application/json); send a file's content as text";

/**
 * Refuses, with ContentTypeNotSupportedError (-32005), a part Arbor does not take: files (raw
 * bytes or a URL: Arbor reads no files), a text part of a media type other than text/*, a data
 * part of one other than JSON. Checked on every message before anything is written.
 */
export function checkParts(message: Message): void {
  for (const [i, part] of message.parts.entries()) {
    const c = part.content;
    const type = baseType(part.mediaType ?? "");
    const refuse = (what: string) => {
      throw new ContentTypeNotSupportedError(
        `parts[${i}] is ${what}, which Arbor does not take: ${ACCEPTED_INPUT}`,
      );
    };
    if (c?.$case === "text") {
      if (type && !type.startsWith("text/")) refuse(`text of media type ${type}`);
    } else if (c?.$case === "data") {
      if (type && !isJsonType(type)) refuse(`data of media type ${type}`);
    } else if (c?.$case === "raw" || c?.$case === "url") {
      refuse(`a file (${c.$case === "raw" ? "bytes" : "a URL"}${type ? ` of media type ${type}` : ""})`);
    } else refuse("a part with no content Arbor knows");
  }
}

/**
 * A request's text: its text parts, and any data parts as JSON (checkParts has refused the rest),
 * refused when over MAX_REQUEST_CHARS once rendered (pretty-printed JSON can be far longer than it was sent).
 */
export function requestText(message: Message): string {
  checkParts(message);
  const texts: string[] = [];
  for (const part of message.parts) {
    const c = part.content;
    if (c?.$case === "text") texts.push(c.value);
    else if (c?.$case === "data") texts.push(`\`\`\`json\n${JSON.stringify(c.value, null, 2)}\n\`\`\``);
  }
  const text = texts.join("\n\n").trim();
  if (!text) throw new RequestMalformedError("The message has no text: send the request as a text part");
  // The limit every channel keeps, on the text as the planner will read it (data parts rendered).
  const problem = requestTextProblem(text);
  if (problem) throw new RequestMalformedError(problem);
  return text;
}

/** The answer's forms: its text, and `{ result, title }` as JSON (seed 003, section 8.3). */
export type OutputMode = "text/plain" | "application/json";

/**
 * The forms a caller gets the answer in, from its acceptedOutputModes, in its order of preference:
 * none named (or only `*\/*`): text; text/plain (or text/*) and application/json (or
 * application/*, or a +json type) each add theirs. Throws ContentTypeNotSupportedError (-32005)
 * when the list names neither (nor `*\/*`).
 */
export function outputModes(accepted: readonly string[]): OutputMode[] {
  const modes: OutputMode[] = [];
  let any = accepted.length === 0;
  for (const raw of accepted) {
    const t = baseType(raw);
    const mode: OutputMode | undefined =
      t === "text/plain" || t === "text/*"
        ? "text/plain"
        : isJsonType(t) || t === "application/*"
          ? "application/json"
          : undefined;
    if (t === "*/*") any = true;
    if (mode && !modes.includes(mode)) modes.push(mode);
  }
  if (modes.length === 0 && !any)
    throw new ContentTypeNotSupportedError(
      `acceptedOutputModes ${JSON.stringify(accepted).slice(0, 200)} names nothing Arbor answers in: ` +
        "it offers text/plain and application/json (a data part { result, title }); accept one of them, or */*",
    );
  return modes.length ? modes : ["text/plain"];
}

/** The modes a task's caller asked for, kept in its metadata (`arbor.outputModes`); text when none. */
export function outputModesOf(metadata: Record<string, unknown> | undefined): OutputMode[] {
  const kept = (metadata?.arbor as { outputModes?: unknown } | undefined)?.outputModes;
  const modes = Array.isArray(kept)
    ? kept.filter((m): m is OutputMode => m === "text/plain" || m === "application/json")
    : [];
  return modes.length ? modes : ["text/plain"];
}

/**
 * The answer's parts in the caller's modes: the output as text, and/or `{ result, title }` as a
 * data part. What the artifact, a push and a stream carry alike.
 */
export function artifactParts(
  outcome: { output: string; title?: string },
  modes: readonly OutputMode[] = ["text/plain"],
): Part[] {
  return modes.map((mode) =>
    mode === "application/json"
      ? dataPart({ result: outcome.output, ...(outcome.title ? { title: outcome.title } : {}) })
      : textPart(outcome.output),
  );
}
