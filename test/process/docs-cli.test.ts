import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PDFDocument, StandardFonts } from "pdf-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, killAll, startServe } from "../support/arbor-process.ts";

/**
 * `arbor docs` as a person runs it: real processes on a data folder, then against a running
 * `arbor serve` through ARBOR_URL (the server reads the documents in its documents step).
 */
let dir: string;
let dataDir: string;
const env = () => ({
  ...arborEnv(dataDir),
  ARBOR_TENANT: "acme",
  NO_COLOR: "1",
  ARBOR_URL: "",
  ARBOR_KEY: "",
});
const arbor = (...args: string[]) => arborCli(args, env());

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-docs-cli-"));
  dataDir = join(dir, "data");
  await mkdir(join(dir, "policies", "travel"), { recursive: true });
  await writeFile(
    join(dir, "policies", "security.md"),
    "# Security\n\nPasswords have 14 characters at least.\n",
  );
  await writeFile(join(dir, "policies", "travel", "hotels.txt"), "Hotels cost at most 150 euros a night.\n");
  await writeFile(join(dir, "policies", "notes.bin"), Buffer.from([0, 1, 2])); // not a document: skipped
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  pdf.addPage().drawText("Meals: 45 euros a day.", { x: 50, y: 700, size: 12, font });
  await writeFile(join(dir, "policies", "meals.pdf"), await pdf.save());
  await writeFile(join(dir, "fake.pdf"), Buffer.concat([Buffer.from("PK\u0003\u0004"), Buffer.alloc(100)]));
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("arbor docs on the data folder", () => {
  it("adds a folder's documents, each with its progress and outcome; again, each is unchanged", async () => {
    const added = await arbor("docs", "add", join(dir, "policies"));
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(
      /policies\/security\.md: ready, 1 chunk {2}cld:common\.Tenant\.acme\/doc\.Document\./,
    );
    expect(added.stdout).toMatch(/policies\/meals\.pdf: ready, 1 chunk from 1 page/);
    expect(added.stdout).toMatch(/policies\/travel\/hotels\.txt: ready/);
    expect(added.stdout).not.toContain("notes.bin");
    const again = await arbor("docs", "add", join(dir, "policies"));
    expect(again.stdout.match(/unchanged \(ready\)/g)).toHaveLength(3);
  });

  it("says why a file is not a document, and exits 1", async () => {
    const refused = await arbor("docs", "add", join(dir, "fake.pdf"));
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/fake\.pdf: not added: .*ZIP archive/);
  });

  it("lists them, and removes one by its name", async () => {
    const listed = await arbor("docs", "ls");
    expect(listed.code).toBe(0);
    expect(listed.stdout.trim().split("\n")).toHaveLength(3);
    const removed = await arbor("docs", "rm", "policies/security.md");
    expect(removed.code).toBe(0);
    expect((await arbor("docs", "ls")).stdout).not.toContain("security.md");
  });
});

describe("arbor docs against a running arbor serve", () => {
  it("sends the bytes, and follows the server's processing to its end", async () => {
    const serveData = join(dir, "served");
    const serveEnv = { ...arborEnv(serveData), ARBOR_TENANT: "acme", NO_COLOR: "1" };
    const key = await addKey(serveEnv, "user_ada", "acme", ["admin"]);
    const served = await startServe(serveEnv, ["--example", "offsite"]);
    const remote = (...args: string[]) => arborCli(args, { ...env(), ARBOR_URL: served.url, ARBOR_KEY: key });
    const added = await remote("docs", "add", join(dir, "policies", "security.md"));
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(/security\.md: ready, 1 chunk/);
    expect((await remote("docs", "ls")).stdout).toMatch(/security\.md {2}ready/);
    const refused = await remote("docs", "add", join(dir, "fake.pdf"));
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/ZIP archive/);
    await served.stop();
  }, 120_000);
});
