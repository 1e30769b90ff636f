// Runs s3rver in its own process: its ListObjectsV2 continuation tokens use a cipher that Node 17+
// only offers with --openssl-legacy-provider, which must be set when the process starts.
// Prints {"port": N} on stdout once it listens; exits when stdin closes (its parent went away).
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";

// s3rver lists by walking its folders, which breaks S3's documented ListObjectsV2 behaviour in two
// ways that matter to Arbor: keys are not in UTF-8 byte order around "/" ("a/b" before "a.json"),
// and a folder with nothing but deeper folders is missing from CommonPrefixes. This replaces its
// store's listObjects with one that follows S3: every key under the prefix, in byte order, folded
// by the delimiter, MaxKeys counting keys and common prefixes alike. s3rver derives its
// continuation token from the last *object* on a page, so a truncated page is cut after its last
// object (and the common prefixes after it move to the next page).
const require = createRequire(import.meta.url);
const FilesystemStore = require("s3rver/lib/stores/filesystem");
const S3Object = require("s3rver/lib/models/object");
const { walk } = require("s3rver/lib/utils");
const OBJECT_SUFFIX = "._S3rver_object";

FilesystemStore.prototype.listObjects = async function listObjects(bucket, options) {
  const { delimiter = "", startAfter = "", prefix = "", maxKeys = Number.POSITIVE_INFINITY } = options;
  const bucketPath = this.getBucketPath(bucket);
  const keys = [];
  for (const path of walk(bucketPath)) {
    if (!path.endsWith(OBJECT_SUFFIX)) continue;
    const key = path.slice(bucketPath.length + 1, -OBJECT_SUFFIX.length);
    if (key.startsWith(prefix)) keys.push(key);
  }
  keys.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const after = Buffer.from(startAfter);
  const entries = [];
  for (const key of keys) {
    const at = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
    const entry = at >= 0 ? { prefix: key.slice(0, at + delimiter.length) } : { key };
    const name = entry.key ?? entry.prefix;
    if (Buffer.compare(Buffer.from(name), after) <= 0) continue;
    const last = entries[entries.length - 1];
    if (entry.prefix && last?.prefix === entry.prefix) continue;
    entries.push(entry);
  }
  let page = entries.slice(0, maxKeys);
  let isTruncated = entries.length > page.length;
  if (isTruncated) {
    let end = page.length;
    while (end > 0 && page[end - 1].prefix) end--;
    if (end > 0) page = page.slice(0, end);
    else {
      // Only common prefixes up to the limit: return them all, up to the next object.
      const next = entries.findIndex((e, i) => i >= page.length && e.key);
      page = next < 0 ? entries : entries.slice(0, next + 1);
      isTruncated = next >= 0 && next + 1 < entries.length;
    }
  }
  const objects = await Promise.all(
    page
      .filter((e) => e.key)
      .map(async (e) => new S3Object(bucket, e.key, null, await this.getMetadata(bucket, e.key))),
  );
  return { objects, commonPrefixes: page.filter((e) => e.prefix).map((e) => e.prefix), isTruncated };
};

const directory = mkdtempSync(join(tmpdir(), "arbor-s3rver-"));
const server = new S3rver({ port: 0, address: "127.0.0.1", directory, silent: true });
const { port } = await server.run();
process.stdout.write(`${JSON.stringify({ port })}\n`);

const stop = async () => {
  await server.close().catch(() => undefined);
  rmSync(directory, { recursive: true, force: true });
  process.exit(0);
};
process.stdin.on("end", stop);
process.stdin.resume();
process.on("SIGTERM", stop);
