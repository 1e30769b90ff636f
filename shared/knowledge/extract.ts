import { Worker } from "node:worker_threads";
import { DOCUMENT_LIMITS, type DocumentType } from "../domain/documents.ts";
import { TooLargeError, ValidationError } from "../kernel/errors.ts";
import type { TextBlock } from "./chunking.ts";

/**
 * A document's text and its structure, read with well-kept parsers: Markdown's blocks and
 * headings by mdast (mdast-util-from-markdown), HTML as text by html-to-text (scripts, styles and
 * markup dropped; headings kept as Markdown headings, so the same structure reader follows), PDF
 * page by page by PDF.js (unpdf's build) on a thread of its own with a heap and a time bound. The
 * parsers load when a document of their kind is first read.
 */
export interface ExtractedText {
  text: string;
  blocks: TextBlock[];
  title?: string;
  pages?: number;
}

export async function extractText(
  name: string,
  type: DocumentType,
  bytes: Uint8Array,
): Promise<ExtractedText> {
  if (type === "application/pdf") return pdfText(name, bytes);
  const decoded = utf8(name, bytes);
  if (type === "text/plain")
    return bounded(name, { text: decoded, blocks: paragraphs(decoded, 0, decoded.length, []) });
  if (type === "text/markdown") return bounded(name, await markdownText(decoded));
  const { html, title } = await htmlAsMarkdown(decoded);
  const extracted = await markdownText(html);
  return bounded(name, { ...extracted, ...(title ? { title } : {}) });
}

function utf8(name: string, bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ValidationError(`${name} is not UTF-8 text: save it as UTF-8 and add it again`);
  }
}

function bounded(name: string, extracted: ExtractedText): ExtractedText {
  if (extracted.text.length > DOCUMENT_LIMITS.chars)
    throw new TooLargeError(
      `${name} has ${extracted.text.length} characters of text; a document may have at most ${DOCUMENT_LIMITS.chars}: split it into parts`,
    );
  return extracted;
}

/** Paragraphs (runs between blank lines) of `text` between two offsets. */
function paragraphs(
  text: string,
  from: number,
  to: number,
  headings: readonly string[],
  page?: number,
): TextBlock[] {
  const blocks: TextBlock[] = [];
  const blank = /\n[ \t]*\n/g;
  blank.lastIndex = from;
  let start = from;
  for (let m = blank.exec(text); m && m.index < to; m = blank.exec(text)) {
    blocks.push({ start, end: m.index, headings, ...(page ? { page } : {}) });
    start = m.index + m[0].length;
  }
  if (start < to) blocks.push({ start, end: to, headings, ...(page ? { page } : {}) });
  return blocks.filter((b) => text.slice(b.start, b.end).trim());
}

/** Markdown's top-level blocks under their headings; the first heading is the title. */
async function markdownText(text: string): Promise<ExtractedText> {
  const { fromMarkdown } = await import("mdast-util-from-markdown");
  const root = fromMarkdown(text);
  const blocks: TextBlock[] = [];
  const path: { depth: number; text: string }[] = [];
  let title: string | undefined;
  for (const node of root.children) {
    const start = node.position?.start.offset;
    const end = node.position?.end.offset;
    if (start === undefined || end === undefined) continue;
    if (node.type === "heading") {
      const heading = headingText(text.slice(start, end));
      title ??= heading;
      while ((path.at(-1)?.depth ?? 0) >= node.depth) path.pop();
      path.push({ depth: node.depth, text: heading.slice(0, 300) });
      continue;
    }
    if (node.type === "definition" || node.type === "thematicBreak") continue;
    blocks.push({ start, end, headings: path.slice(-6).map((h) => h.text) });
  }
  return { text, blocks, ...(title ? { title: title.slice(0, 500) } : {}) };
}

/** A heading's words, without its `#`s or its setext underline. */
const headingText = (source: string) =>
  source
    .replace(/^#{1,6}[ \t]*/, "")
    .replace(/[ \t]+#+[ \t]*$/, "")
    .replace(/\n[=-]+\s*$/, "")
    .replace(/\s+/g, " ")
    .trim();

/** HTML as Markdown-like text: headings as `#` lines, links and images as their words only. */
async function htmlAsMarkdown(html: string): Promise<{ html: string; title?: string }> {
  const { convert } = await import("html-to-text");
  const heading = (level: number) => ({
    selector: `h${level}`,
    format: "markdownHeading",
    options: { level },
  });
  const text = convert(html, {
    wordwrap: false,
    selectors: [
      ...[1, 2, 3, 4, 5, 6].map(heading),
      { selector: "a", options: { ignoreHref: true } },
      { selector: "img", format: "skip" },
      { selector: "nav", format: "skip" },
      { selector: "footer", format: "skip" },
    ],
    formatters: {
      markdownHeading: (elem, walk, builder, options) => {
        builder.openBlock({ leadingLineBreaks: 2 });
        builder.addLiteral(`${"#".repeat(Number(options.level) || 1)} `);
        walk(elem.children, builder);
        builder.closeBlock({ trailingLineBreaks: 2 });
      },
    },
  });
  const title = /<title[^>]*>([^<]{1,500})<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, " ").trim();
  return { html: text, ...(title ? { title } : {}) };
}

interface PdfAnswer {
  pages?: string[];
  total?: number;
  title?: string;
  tooMany?: "pages" | "chars";
  count?: number;
  error?: string;
}

/** A PDF's pages as text, read on a worker that may use DOCUMENT_LIMITS.pdfHeapMb and pdfMs. */
async function pdfText(name: string, bytes: Uint8Array): Promise<ExtractedText> {
  const answer = await new Promise<PdfAnswer>((resolve, reject) => {
    const worker = new Worker(new URL("./pdf-text-worker.mjs", import.meta.url), {
      workerData: { bytes, maxPages: DOCUMENT_LIMITS.pages, maxChars: DOCUMENT_LIMITS.chars },
      resourceLimits: { maxOldGenerationSizeMb: DOCUMENT_LIMITS.pdfHeapMb, maxYoungGenerationSizeMb: 32 },
      stdout: true,
      stderr: true,
    });
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(
        new TooLargeError(
          `Reading ${name} took more than ${DOCUMENT_LIMITS.pdfMs / 1000} s: it may be built to be slow to read; split it or save it again`,
        ),
      );
    }, DOCUMENT_LIMITS.pdfMs);
    worker.once("message", (m: PdfAnswer) => {
      clearTimeout(timer);
      void worker.terminate();
      resolve(m);
    });
    worker.once("error", (e: Error & { code?: string }) => {
      clearTimeout(timer);
      reject(
        e.code === "ERR_WORKER_OUT_OF_MEMORY"
          ? new TooLargeError(
              `Reading ${name} needed more than ${DOCUMENT_LIMITS.pdfHeapMb} MB: it may be compressed to hide its size; split it or save it again`,
            )
          : new ValidationError(`${name} could not be read as a PDF: ${e.message}`),
      );
    });
    worker.once("exit", () => {
      clearTimeout(timer);
      reject(new ValidationError(`${name} could not be read as a PDF: its reader stopped`));
    });
  });
  if (answer.error) throw new ValidationError(`${name} could not be read as a PDF: ${answer.error}`);
  if (answer.tooMany === "pages")
    throw new TooLargeError(
      `${name} has ${answer.count} pages; a document may have at most ${DOCUMENT_LIMITS.pages}: split it into parts`,
    );
  if (answer.tooMany === "chars")
    throw new TooLargeError(
      `${name} has more than ${DOCUMENT_LIMITS.chars} characters of text: split it into parts`,
    );
  let text = "";
  const blocks: TextBlock[] = [];
  (answer.pages ?? []).forEach((page, i) => {
    if (text) text += "\n\n";
    const start = text.length;
    text += page;
    blocks.push(...paragraphs(text, start, text.length, [], i + 1));
  });
  if (!text.trim())
    throw new ValidationError(`${name} has no text to read (a scanned PDF needs text recognition first)`);
  return {
    text,
    blocks,
    pages: answer.total ?? answer.pages?.length ?? 0,
    ...(answer.title ? { title: answer.title } : {}),
  };
}
