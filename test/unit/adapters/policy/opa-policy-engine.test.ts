import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tar from "tar";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import wabt from "wabt";
import { OpaPolicyEngine } from "../../../../shared/adapters/policy/opa-policy-engine.ts";
import { ConfigError } from "../../../../shared/kernel/errors.ts";
import type { PolicyInput } from "../../../../shared/ports/policy.ts";

/**
 * The OPA path with the real SDK (`@open-policy-agent/opa-wasm`) and no OPA compiler: a small
 * module written in WAT (test/fixtures/opa/policy.wat) that speaks the OPA wasm ABI 1.2, built
 * here with `wabt`, packed as OPA packs bundles (a gzipped tar with /policy.wasm), and loaded from a
 * folder with its sha256. Its policy: the engine's own principal is allowed, nothing else.
 */
let dir: string;
let wasm: Uint8Array;
let bundle: Buffer;
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-opa-"));
  const module = (await wabt()).parseWat(
    "policy.wat",
    await readFile(join(import.meta.dirname, "../../../fixtures/opa/policy.wat"), "utf8"),
  );
  wasm = module.toBinary({}).buffer;
  module.destroy();
  await writeFile(join(dir, "policy.wasm"), wasm);
  await tar.c({ gzip: true, file: join(dir, "bundle.tar.gz"), cwd: dir, portable: true }, ["policy.wasm"]);
  bundle = await readFile(join(dir, "bundle.tar.gz"));
  await writeFile(join(dir, "bundle.tar.gz.sha256"), `${sha(bundle)}  bundle.tar.gz\n`);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const input = (kind: "system" | "agent" | "human"): PolicyInput => ({
  principal: {
    id: kind === "system" ? "system_engine" : "p1",
    kind,
    ...(kind === "system" ? {} : { tenant: "acme" }),
  },
  action: "resource.write",
  resource: {
    id: "cld:common.Tenant.acme/common.Conversation.c",
    tenant: "acme",
    type: "common.Conversation",
  },
});

describe("OPA wasm policies (a WAT module on the OPA ABI)", () => {
  it("loads a bundle from a folder, checks its sha256, and evaluates the named entrypoint", async () => {
    const opa = await OpaPolicyEngine.fromFolder(dir);
    expect(opa.revision).toBe(sha(bundle).slice(0, 16));
    const allowed = await opa.decide(input("system"));
    expect(allowed).toMatchObject({ allow: true, engine: "opa", revision: opa.revision });
    expect(allowed.id).toMatch(/^dec_/);
    // Deny on anything but an explicit allow.
    expect((await opa.decide(input("agent"))).allow).toBe(false);
    expect((await opa.decide(input("human"))).allow).toBe(false);
  });

  it("refuses a bundle whose sha256 differs from the one published with it", async () => {
    await expect(
      OpaPolicyEngine.load(bundle, "0".repeat(64), { source: "s3://policies/bundle.tar.gz" }),
    ).rejects.toThrow(/s3:\/\/policies\/bundle\.tar\.gz has sha256 .* not the 0{64} it was published with/);
  });

  it("says which entrypoints a bundle has when the one asked for is missing", async () => {
    await expect(OpaPolicyEngine.load(wasm, sha(wasm), { entrypoint: "arbor/other/allow" })).rejects.toThrow(
      /has no entrypoint arbor\/other\/allow; it has arbor\/authz\/allow/,
    );
  });

  it("refuses what is not a policy, and a folder without a bundle, saying what to do", async () => {
    const junk = Buffer.from("not a bundle");
    await expect(OpaPolicyEngine.load(junk, sha(junk))).rejects.toThrow(ConfigError);
    await expect(OpaPolicyEngine.fromFolder(join(dir, "nowhere"))).rejects.toThrow(
      /Cannot read the OPA bundle/,
    );
  });
});
