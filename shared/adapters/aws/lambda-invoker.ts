import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import type { FunctionInvocation, FunctionInvoker } from "../../ports/function-invoker.ts";

/** Makes the Lambda client of a region (undefined: the SDK's default region). */
export type LambdaClientFor = (region: string | undefined) => LambdaClient;

/**
 * The lambda tools' invocations (ports/function-invoker.ts): a synchronous Invoke (RequestResponse)
 * each, on one client per region, made when a tool first needs it.
 */
export class LambdaInvoker implements FunctionInvoker {
  readonly #clients = new Map<string, LambdaClient>();
  readonly #make: LambdaClientFor | undefined;

  /** `make`: the caller's clients (pointed at a local peer, say); default the SDK's, per region. */
  constructor(make?: LambdaClientFor) {
    this.#make = make;
  }

  async invoke(request: FunctionInvocation): Promise<{ payload: string; functionError?: string }> {
    const command = new InvokeCommand({
      FunctionName: request.functionName,
      InvocationType: "RequestResponse",
      Payload: request.payload,
      ...(request.qualifier ? { Qualifier: request.qualifier } : {}),
      ...(request.clientContext ? { ClientContext: request.clientContext } : {}),
    });
    const response = await this.#client(request.region).send(
      command,
      request.signal ? { abortSignal: request.signal } : {},
    );
    const payload = response.Payload?.transformToString("utf-8") ?? "";
    return response.FunctionError ? { payload, functionError: response.FunctionError } : { payload };
  }

  #client(region: string | undefined): LambdaClient {
    const key = region ?? "";
    let client = this.#clients.get(key);
    if (!client) {
      // One attempt: a retry after a lost response could run a function with effects twice. A
      // throttled or failed call is an error the model reads (and may try again, deliberately).
      client = this.#make
        ? this.#make(region)
        : new LambdaClient({ ...(region ? { region } : {}), maxAttempts: 1 });
      this.#clients.set(key, client);
    }
    return client;
  }

  close(): void {
    for (const client of this.#clients.values()) client.destroy();
    this.#clients.clear();
  }
}
