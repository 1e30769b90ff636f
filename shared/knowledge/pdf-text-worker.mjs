// Reads a PDF's text on a thread of its own (extract.ts starts it with a heap bound and a time
// bound): a PDF built to inflate past its size, or to keep its reader busy, ends this thread, never
// the process. Plain JavaScript beside its module, so it runs from the sources and from a function's
// bundle alike (unpdf shipped under the bundle's node_modules).
import { parentPort, workerData } from "node:worker_threads";
import { getDocumentProxy } from "unpdf";

const { bytes, maxPages, maxChars } = workerData;
try {
  const pdf = await getDocumentProxy(new Uint8Array(bytes), {
    isEvalSupported: false,
    disableFontFace: true,
  });
  if (pdf.numPages > maxPages) {
    parentPort.postMessage({ tooMany: "pages", count: pdf.numPages });
  } else {
    const pages = [];
    let chars = 0;
    for (let n = 1; n <= pdf.numPages; n++) {
      const page = await pdf.getPage(n);
      const content = await page.getTextContent();
      let text = "";
      for (const item of content.items) if ("str" in item) text += item.str + (item.hasEOL ? "\n" : "");
      page.cleanup();
      chars += text.length;
      if (chars > maxChars) break;
      pages.push(text);
    }
    const info = (await pdf.getMetadata().catch(() => undefined))?.info;
    const title = typeof info?.Title === "string" ? info.Title.trim().slice(0, 500) : undefined;
    parentPort.postMessage(
      chars > maxChars ? { tooMany: "chars", count: chars } : { pages, total: pdf.numPages, title },
    );
  }
} catch (error) {
  parentPort.postMessage({ error: error instanceof Error ? error.message : String(error) });
}
