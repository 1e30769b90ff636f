import { TooLargeError, ValidationError } from "../kernel/errors.ts";

/**
 * What a document may be (shared/knowledge/documents.ts): its kinds and bounds, checked by every
 * way in (the HTTP API, the CLI, a chat's shared file) before anything is stored, and by the
 * processor again. The bounds keep one document from taking a function's memory or time: its
 * bytes, its pages, the text read from it and the chunks made of it.
 */
export const DOCUMENT_LIMITS = {
  /**
   * Bytes of one document: on AWS the HTTP API hands the body to Lambda base64-encoded, within its
   * 6 MB request payload (4 MB is 5.3 MB so).
   */
  bytes: 4 * 1024 * 1024,
  pages: 500,
  /** Characters of text read from one document. */
  chars: 2_000_000,
  chunks: 2_000,
  /** Characters of a document's name (its file name or URL). */
  nameChars: 500,
  /** How long reading one PDF may take, and the memory it may use. */
  pdfMs: 60_000,
  pdfHeapMb: 256,
} as const;

export const DOCUMENT_TYPES = ["text/markdown", "text/plain", "text/html", "application/pdf"] as const;
export type DocumentType = (typeof DOCUMENT_TYPES)[number];

const BY_EXTENSION: Readonly<Record<string, DocumentType>> = {
  md: "text/markdown",
  markdown: "text/markdown",
  txt: "text/plain",
  text: "text/plain",
  html: "text/html",
  htm: "text/html",
  pdf: "application/pdf",
};

const ACCEPTED = "Markdown (.md), plain text (.txt), HTML (.html) and PDF (.pdf)";

/** Magic numbers of what people send instead of a document, named in the refusal. */
const NOT_DOCUMENTS: readonly [string, number[]][] = [
  ["a ZIP archive (or an Office file)", [0x50, 0x4b, 0x03, 0x04]],
  ["a gzip archive", [0x1f, 0x8b]],
  ["a PNG image", [0x89, 0x50, 0x4e, 0x47]],
  ["a JPEG image", [0xff, 0xd8, 0xff]],
  ["a GIF image", [0x47, 0x49, 0x46, 0x38]],
  ["an executable", [0x7f, 0x45, 0x4c, 0x46]],
];

const startsWith = (bytes: Uint8Array, magic: readonly number[]) => magic.every((b, i) => bytes[i] === b);
const isPdf = (bytes: Uint8Array) => startsWith(bytes, [0x25, 0x50, 0x44, 0x46, 0x2d]); // %PDF-

/**
 * The kind of a document from what the caller says (a content type, else the name's extension)
 * checked against its bytes: a PDF must begin as one, text must not be binary. ValidationError
 * naming what it is otherwise; TooLargeError past DOCUMENT_LIMITS.bytes.
 */
export function documentTypeOf(name: string, bytes: Uint8Array, contentType?: string): DocumentType {
  if (bytes.length > DOCUMENT_LIMITS.bytes)
    throw new TooLargeError(
      `${name} is ${bytes.length} bytes; a document may have at most ${DOCUMENT_LIMITS.bytes} (4 MB): split it into parts`,
    );
  if (bytes.length === 0) throw new ValidationError(`${name} is empty`);
  for (const [what, magic] of NOT_DOCUMENTS)
    if (startsWith(bytes, magic))
      throw new ValidationError(`${name} is ${what}, not a document: Arbor takes ${ACCEPTED}`);
  const given = contentType?.split(";")[0]?.trim().toLowerCase();
  const declared =
    given && given !== "application/octet-stream"
      ? (DOCUMENT_TYPES as readonly string[]).includes(given)
        ? (given as DocumentType)
        : given === "text/x-markdown"
          ? "text/markdown"
          : undefined
      : BY_EXTENSION[/\.([A-Za-z0-9]+)$/.exec(name.split(/[?#]/)[0] ?? "")?.[1]?.toLowerCase() ?? ""];
  const type = declared ?? (isPdf(bytes) ? "application/pdf" : undefined);
  if (!type)
    throw new ValidationError(
      `${name}${given ? ` (${given})` : ""} is not a kind of document Arbor reads: give ${ACCEPTED}`,
    );
  if (type === "application/pdf" && !isPdf(bytes))
    throw new ValidationError(`${name} is said to be a PDF but does not begin as one (%PDF-)`);
  if (type !== "application/pdf" && (isPdf(bytes) || bytes.subarray(0, 8192).includes(0)))
    throw new ValidationError(`${name} is said to be ${type} but holds binary data`);
  return type;
}

/** Why a document's name cannot be taken, or undefined. */
export function documentNameProblem(name: string): string | undefined {
  if (!name.trim()) return "A document needs a name (its file name or URL)";
  if (name.length > DOCUMENT_LIMITS.nameChars)
    return `A document's name is at most ${DOCUMENT_LIMITS.nameChars} characters`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  if (/[\u0000-\u001f\u007f]/.test(name)) return "A document's name may not hold control characters";
  return undefined;
}
