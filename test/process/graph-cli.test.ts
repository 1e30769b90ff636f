import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DataFactory } from "n3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphStoreOf } from "../../shared/graph/state-graph-store.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { arborCli } from "../support/arbor-process.ts";

/** `arbor graph query` as a person runs it: a real process on a data folder whose graph holds triples. */
let dataDir: string;
const arbor = (...args: string[]) =>
  arborCli(args, {
    ...process.env,
    ARBOR_DATA_DIR: dataDir,
    ARBOR_TENANT: "acme",
    NO_COLOR: "1",
    ARBOR_URL: "",
    ARBOR_KEY: "",
  });

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "arbor-graph-cli-"));
  const rt = createLocalRuntime({ mode: "local", tenant: "acme", dataDir, durable: false });
  const { namedNode: iri, literal } = DataFactory;
  await graphStoreOf(rt.state).add("acme", [
    {
      subject: iri("https://example.org/ada"),
      predicate: iri("https://schema.org/name"),
      object: literal("Ada", "en"),
    },
    {
      subject: iri("https://example.org/ada"),
      predicate: iri("https://schema.org/knows"),
      object: iri("https://example.org/bob"),
    },
  ]);
  // Text a terminal would act on: a C1 CSI (JSON leaves it as is), a bidirectional override.
  await graphStoreOf(rt.state).add("acme", [
    {
      subject: iri("https://example.org/eve"),
      predicate: iri("https://schema.org/description"),
      object: literal("\u009b2J\u202eevil"),
    },
  ]);
  await rt.close();
});
afterAll(() => rm(dataDir, { recursive: true, force: true }));

describe("arbor graph query", () => {
  it("prints the triples matching a pattern, and says how many the graph holds", async () => {
    const all = await arbor("graph", "query");
    expect(all.stderr).toBe("");
    expect(all.code).toBe(0);
    expect(all.stdout).toContain('<https://example.org/ada> <schema:name> "Ada"@en .');
    expect(all.stdout).toContain("<https://example.org/ada> <schema:knows> <https://example.org/bob> .");
    expect(all.stdout).toMatch(/3 triples; the graph of acme holds 3/);
    // What a terminal would act on is shown as U+FFFD.
    expect(all.stdout).toContain('<https://example.org/eve> <schema:description> "\ufffd2J\ufffdevil" .');
    expect(all.stdout).not.toMatch(/[\u0080-\u009f\u202a-\u202e]/);
    const names = await arbor("graph", "query", "-", "schema:name", "?o");
    expect(names.stdout).toMatch(/^<https:\/\/example\.org\/ada> <schema:name> "Ada"@en \.\n1 triple;/);
    const other = await arbor("graph", "query", "--tenant", "beta");
    expect(other.stdout).toMatch(/0 triples; the graph of beta holds 0/);
  }, 60_000);

  it("says what is wrong with a bad term or command", async () => {
    const bad = await arbor("graph", "query", "not-an-iri");
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/is not an IRI/);
    const usage = await arbor("graph", "drop");
    expect(usage.code).not.toBe(0);
    expect(usage.stderr).toMatch(/Usage: arbor graph query/);
  }, 60_000);
});
