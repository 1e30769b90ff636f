import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";

/**
 * Starts the local AWS peers the integration tests talk to with the real AWS SDK clients:
 *   - DynamoDB Local: AWS's jar, shipped inside the npm package amplify-dynamodb-simulator (needs Java 17+);
 *   - s3rver, in a child process started with --openssl-legacy-provider.
 * Each is started once per test run and stopped at the end; endpoints reach tests through inject().
 */
declare module "vitest" {
  export interface ProvidedContext {
    dynamoEndpoint: string;
    s3Endpoint: string;
  }
}

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(
  what: string,
  probe: () => Promise<boolean>,
  child: ChildProcess,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`${what} exited with code ${child.exitCode} before it was ready`);
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} did not become ready within ${timeoutMs / 1000}s`);
}

export async function startDynamoLocal(): Promise<{ endpoint: string; child: ChildProcess }> {
  const pkg = dirname(require.resolve("amplify-dynamodb-simulator/package.json"));
  const emulator = join(pkg, "emulator");
  const port = await freePort();
  const child = spawn(
    "java",
    [
      "-Djava.library.path=./DynamoDBLocal_lib",
      "-jar",
      "DynamoDBLocal.jar",
      "-inMemory",
      "-port",
      String(port),
    ],
    { cwd: emulator, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr += String(d);
  });
  child.once("error", (e) => {
    stderr += `\n${e.message}: DynamoDB Local needs Java 17 or newer on the PATH (apt-get install openjdk-17-jre-headless)`;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      "DynamoDB Local",
      async () => {
        const res = await fetch(endpoint, {
          method: "POST",
          headers: {
            "content-type": "application/x-amz-json-1.0",
            "x-amz-target": "DynamoDB_20120810.ListTables",
            authorization:
              "AWS4-HMAC-SHA256 Credential=test/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
          },
          body: "{}",
        });
        return res.ok;
      },
      child,
    );
  } catch (e) {
    child.kill("SIGKILL");
    throw new Error(`${(e as Error).message}\n${stderr}`);
  }
  return { endpoint, child };
}

async function startS3rver(): Promise<{ endpoint: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--openssl-legacy-provider", join(here, "s3rver-process.mjs")], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (d) => {
      out += String(d);
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve((JSON.parse(line) as { port: number }).port);
    });
    child.once("exit", (code) => reject(new Error(`s3rver exited with code ${code} before it was ready`)));
    setTimeout(() => reject(new Error("s3rver did not start within 30s")), 30_000).unref();
  });
  return { endpoint: `http://127.0.0.1:${port}`, child };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [dynamo, s3] = await Promise.all([startDynamoLocal(), startS3rver()]);
  project.provide("dynamoEndpoint", dynamo.endpoint);
  project.provide("s3Endpoint", s3.endpoint);
  return async () => {
    s3.child.stdin?.end();
    dynamo.child.kill("SIGTERM");
    await Promise.all(
      [s3.child, dynamo.child].map(
        (c) => new Promise<void>((r) => (c.exitCode !== null ? r() : c.once("exit", () => r()))),
      ),
    );
  };
}
