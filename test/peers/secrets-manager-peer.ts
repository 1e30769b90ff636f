/**
 * A local AWS Secrets Manager peer for tests: an HTTP server that speaks the part of Secrets
 * Manager's JSON protocol (awsJson1_1) the AWS SDK v3 client (`@aws-sdk/client-secrets-manager`
 * 3.x) uses for GetSecretValue, PutSecretValue and CreateSecret, so the real client can be pointed at
 * it (`endpoint` = the peer, any region, dummy credentials).
 *
 * Protocol: `POST /` with `X-Amz-Target: secretsmanager.<Operation>` and
 * `Content-Type: application/x-amz-json-1.1`. A secret is named by its ARN
 * (`arn:aws:secretsmanager:<region>:123456789012:secret:<name>-<6 characters>`), its name, or the
 * ARN without the six characters, as Secrets Manager takes them. Errors are JSON bodies with
 * `__type` (`ResourceNotFoundException`, ...) and `Message`, as the service sends them.
 *
 * Like Secrets Manager: GetSecretValue answers the AWSCURRENT version (or `VersionId` /
 * `VersionStage` when asked); PutSecretValue makes a new version AWSCURRENT and the previous one
 * AWSPREVIOUS; a value is SecretString or SecretBinary (base64 in JSON). Unlike it: SigV4 signatures
 * are not verified (an `Authorization` header must be present), no KMS, no rotation lambdas.
 *
 * Test hooks: `start()`, `close()`, `create(name, value)` (its ARN), `put(id, value)` (a rotation),
 * `deny(id)` (AccessDeniedException from now on, as a missing grant answers), `calls` (each
 * request's operation and secret id).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";

const ACCOUNT = "123456789012";

interface Version {
  id: string;
  string?: string;
  binary?: string;
  stages: string[];
  created: number;
}

interface Secret {
  arn: string;
  name: string;
  versions: Version[];
  denied: boolean;
}

type Json = Record<string, unknown>;

class PeerError extends Error {
  readonly type: string;
  readonly status: number;

  constructor(type: string, message: string, status = 400) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

export class SecretsManagerPeer {
  readonly calls: { operation: string; secretId: string }[] = [];
  readonly #secrets = new Map<string, Secret>();
  readonly #server: Server;
  readonly #region: string;
  #endpoint = "";

  private constructor(region: string) {
    this.#region = region;
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        if (!res.headersSent) reply(res, 500, { __type: "InternalServiceError", Message: String(e) });
      });
    });
  }

  static async start(region = "us-east-1"): Promise<SecretsManagerPeer> {
    const peer = new SecretsManagerPeer(region);
    await new Promise<void>((resolve) => peer.#server.listen(0, "127.0.0.1", resolve));
    peer.#endpoint = `http://127.0.0.1:${(peer.#server.address() as AddressInfo).port}`;
    return peer;
  }

  get endpoint(): string {
    return this.#endpoint;
  }

  /** The real SDK client, pointed at this peer with dummy credentials. */
  client(): SecretsManagerClient {
    return new SecretsManagerClient({
      endpoint: this.#endpoint,
      region: this.#region,
      credentials: { accessKeyId: "AKIDSMPEER", secretAccessKey: "secrets-manager-peer" },
      maxAttempts: 1,
    });
  }

  /** A new secret with a first (AWSCURRENT) string value; returns its complete ARN. */
  create(name: string, value: string): string {
    return this.#create(name, { SecretString: value });
  }

  /** A new AWSCURRENT version (a rotation); returns its version id. */
  put(secretId: string, value: string): string {
    return this.#put(this.#find(secretId), { SecretString: value });
  }

  /** From now on the secret answers AccessDeniedException (a function without the grant). */
  deny(secretId: string): void {
    this.#find(secretId).denied = true;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((r) => this.#server.close(r));
  }

  #create(name: string, value: Json): string {
    if (!/^[A-Za-z0-9/_+=.@-]{1,512}$/.test(name))
      throw new PeerError(
        "InvalidParameterException",
        "Invalid name. Must be a valid name containing alphanumeric characters, or any of the following: -/_+=.@!",
      );
    if ([...this.#secrets.values()].some((s) => s.name === name))
      throw new PeerError(
        "ResourceExistsException",
        `The operation failed because the secret ${name} already exists.`,
      );
    const suffix = randomBytes(6)
      .toString("base64url")
      .replace(/[^A-Za-z0-9]/g, "x")
      .slice(0, 6);
    const arn = `arn:aws:secretsmanager:${this.#region}:${ACCOUNT}:secret:${name}-${suffix}`;
    const secret: Secret = { arn, name, versions: [], denied: false };
    this.#secrets.set(arn, secret);
    this.#put(secret, value);
    return arn;
  }

  #put(secret: Secret, value: Json): string {
    const string = typeof value.SecretString === "string" ? value.SecretString : undefined;
    const binary = typeof value.SecretBinary === "string" ? value.SecretBinary : undefined;
    if ((string === undefined) === (binary === undefined))
      throw new PeerError(
        "InvalidParameterException",
        "You must provide either SecretString or SecretBinary.",
      );
    for (const v of secret.versions) {
      v.stages = v.stages.includes("AWSCURRENT")
        ? ["AWSPREVIOUS"]
        : v.stages.filter((s) => s !== "AWSPREVIOUS");
    }
    const version: Version = {
      id: typeof value.ClientRequestToken === "string" ? value.ClientRequestToken : randomUUID(),
      ...(string !== undefined ? { string } : {}),
      ...(binary !== undefined ? { binary } : {}),
      stages: ["AWSCURRENT"],
      created: Date.now() / 1000,
    };
    secret.versions.push(version);
    return version.id;
  }

  /** By complete ARN, partial ARN (without the six characters) or name. */
  #find(secretId: string): Secret {
    const exact = this.#secrets.get(secretId);
    if (exact) return exact;
    for (const s of this.#secrets.values())
      if (s.name === secretId || s.arn.replace(/-[A-Za-z0-9]{6}$/, "") === secretId) return s;
    throw new PeerError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const target = String(req.headers["x-amz-target"] ?? "");
    const operation = target.startsWith("secretsmanager.") ? target.slice("secretsmanager.".length) : target;
    try {
      if (
        req.method !== "POST" ||
        !String(req.headers["content-type"] ?? "").startsWith("application/x-amz-json-1.1")
      )
        throw new PeerError("UnknownOperationException", "Expected a JSON 1.1 POST", 404);
      if (!req.headers.authorization)
        throw new PeerError("MissingAuthenticationTokenException", "Missing Authentication Token", 403);
      const input = (raw ? JSON.parse(raw) : {}) as Json;
      this.calls.push({ operation, secretId: String(input.SecretId ?? input.Name ?? "") });
      reply(res, 200, this.#operation(operation, input));
    } catch (e) {
      if (!(e instanceof PeerError)) throw e;
      reply(res, e.status, { __type: e.type, Message: e.message });
    }
  }

  #operation(operation: string, input: Json): Json {
    switch (operation) {
      case "CreateSecret": {
        const arn = this.#create(String(input.Name ?? ""), input);
        const secret = this.#find(arn);
        return { ARN: arn, Name: secret.name, VersionId: secret.versions.at(-1)?.id };
      }
      case "PutSecretValue": {
        const secret = this.#find(String(input.SecretId ?? ""));
        const id = this.#put(secret, input);
        return { ARN: secret.arn, Name: secret.name, VersionId: id, VersionStages: ["AWSCURRENT"] };
      }
      case "GetSecretValue": {
        const secret = this.#find(String(input.SecretId ?? ""));
        if (secret.denied)
          throw new PeerError(
            "AccessDeniedException",
            `User: arn:aws:sts::${ACCOUNT}:assumed-role/peer is not authorized to perform: secretsmanager:GetSecretValue on resource: ${secret.arn}`,
          );
        const stage = typeof input.VersionStage === "string" ? input.VersionStage : "AWSCURRENT";
        const version =
          typeof input.VersionId === "string"
            ? secret.versions.find((v) => v.id === input.VersionId)
            : secret.versions.find((v) => v.stages.includes(stage));
        if (!version)
          throw new PeerError(
            "ResourceNotFoundException",
            `Secrets Manager can't find the specified secret value for staging label: ${stage}`,
          );
        return {
          ARN: secret.arn,
          Name: secret.name,
          VersionId: version.id,
          VersionStages: version.stages,
          CreatedDate: version.created,
          ...(version.string !== undefined ? { SecretString: version.string } : {}),
          ...(version.binary !== undefined ? { SecretBinary: version.binary } : {}),
        };
      }
      default:
        throw new PeerError("UnknownOperationException", `The peer does not speak ${operation}`);
    }
  }
}

function reply(res: ServerResponse, status: number, body: Json): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/x-amz-json-1.1",
    "content-length": Buffer.byteLength(text),
    "x-amzn-requestid": randomUUID(),
  });
  res.end(text);
}
