import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { PDFDocument, StandardFonts } from "pdf-lib";
import { afterAll, describe, expect, it } from "vitest";
import { buildFunctionBundle, PROJECT_ROOT } from "../../../infra/constructs/function-bundle.ts";

/**
 * The engine steps' bundle reads a PDF as the sources do: the worker's script beside the modules,
 * PDF.js (unpdf) under its node_modules, run from the bundle alone. The API's bundle, which reads
 * no document, ships neither.
 */
const dir = mkdtempSync(join(tmpdir(), "arbor-doc-bundle-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the document reader in a function's bundle", () => {
  it("ships with the engine steps and reads a PDF from there", async () => {
    const out = join(dir, "steps");
    buildFunctionBundle(join(PROJECT_ROOT, "functions/engine-step.ts"), out);
    expect(existsSync(join(out, "pdf-text-worker.mjs"))).toBe(true);
    expect(existsSync(join(out, "node_modules/unpdf/package.json"))).toBe(true);
    const pdf = await PDFDocument.create();
    const font = await pdf.embedFont(StandardFonts.Helvetica);
    pdf.addPage().drawText("Bundled reading works.", { x: 50, y: 700, size: 12, font });
    const bytes = await pdf.save();
    const answer = await new Promise<{ pages?: string[] }>((resolve, reject) => {
      const worker = new Worker(join(out, "pdf-text-worker.mjs"), {
        workerData: { bytes, maxPages: 10, maxChars: 10_000 },
      });
      worker.once("message", (m) => {
        void worker.terminate();
        resolve(m);
      });
      worker.once("error", reject);
    });
    expect(answer.pages).toEqual(["Bundled reading works."]);
  }, 120_000);

  it("stays out of the API function's bundle", () => {
    const out = join(dir, "api");
    buildFunctionBundle(join(PROJECT_ROOT, "functions/api.ts"), out);
    expect(existsSync(join(out, "pdf-text-worker.mjs"))).toBe(false);
    expect(existsSync(join(out, "node_modules/unpdf"))).toBe(false);
  }, 120_000);
});
