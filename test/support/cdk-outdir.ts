import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Where the tests' CDK syntheses write their cloud assembly. Without this, every synthesis made a
 * `cdk.out*` folder of its own in the temp directory (some 20 MB each: the bundled functions) that
 * nothing removed, and a machine that ran the suite often filled its disk.
 *
 * As a global setup (the main vitest process): one folder for the run, ARBOR_CDK_OUT_ROOT, which
 * the test processes inherit and the teardown removes (test processes may be stopped by a signal,
 * so they cannot be trusted to clean up after themselves). As a setup file (each test process): a
 * folder of its own in it, as CDK_OUTDIR, which CDK reads as `cdk` sets it.
 */
export default function setup(): () => void {
  const root = process.env.ARBOR_CDK_OUT_ROOT ?? mkdtempSync(join(tmpdir(), "arbor-cdk-out-"));
  process.env.ARBOR_CDK_OUT_ROOT = root;
  return () => rmSync(root, { recursive: true, force: true });
}

if (process.env.VITEST_WORKER_ID !== undefined && !process.env.CDK_OUTDIR) {
  const root = process.env.ARBOR_CDK_OUT_ROOT ?? tmpdir();
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, "process-"));
  process.env.CDK_OUTDIR = dir;
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
}
