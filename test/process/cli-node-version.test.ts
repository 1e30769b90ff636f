import { describe, expect, it } from "vitest";
import { BIN, node } from "../support/arbor-process.ts";

/**
 * `arbor` on a Node that cannot run it: one line that says what to do, exit code 1, no stack
 * trace. An older Node is played by this one with its version numbers changed before bin.mjs runs.
 */
const asNode20 = `data:text/javascript,${encodeURIComponent(
  'Object.defineProperty(process, "versions", { value: { ...process.versions, node: "20.20.2" } });' +
    'Object.defineProperty(process, "version", { value: "v20.20.2" });',
)}`;

const arbor = (nodeArgs: string[]) => node([...nodeArgs, BIN, "--help"]);

describe("arbor on a Node that cannot run it", () => {
  it("older than 24: says it needs Node 24 and how to get it, in one line", async () => {
    const { code, stdout, stderr } = await arbor(["--import", asNode20]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(stderr).toMatch(/^arbor: Arbor needs Node\.js 24 or newer and this is v20\.20\.2: /);
    expect(stderr).toContain("npx -y -p node@24 npm start");
  });

  it("with type stripping turned off: says so, in one line", async () => {
    const { code, stdout, stderr } = await arbor(["--no-experimental-strip-types"]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(stderr).toContain("type stripping");
  });

  it("on this Node: runs", async () => {
    const { code, stdout } = await arbor([]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^arbor: run teams of LLM agents/);
  });
});
