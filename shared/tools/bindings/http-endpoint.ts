import { ThrottledError, ToolError, UnavailableError } from "../../kernel/errors.ts";
import type { ToolBinding, ToolContext } from "../../ports/tools.ts";
import { outsideTool } from "../service/json-schema.ts";

/**
 * A tool bound to an HTTP endpoint of an existing service: the arguments go as a JSON body (POST,
 * PUT, PATCH) or as query parameters (GET), and the response body comes back to the model. A
 * status outside 2xx is the tool failing, with the status and the start of the body. Every request
 * carries the call's `Idempotency-Key` (the same for each attempt of one call; `Arbor-Attempt` says
 * which attempt it is), so a service that honours the header does not act twice on a repeat.
 */
export interface HttpEndpointSettings {
  url: string;
  method: "GET" | "POST" | "PUT" | "PATCH";
  /** Sent with every call (an API key, say); never shown to the model or stored with the schema. */
  headers: Record<string, string>;
}

export function httpEndpointBinding(
  name: string,
  options: {
    description: string;
    parameters: Record<string, unknown>;
    risky: boolean;
    settings: HttpEndpointSettings;
  },
  fetchFn: typeof fetch,
): ToolBinding {
  const { url, method, headers } = options.settings;
  return outsideTool(
    {
      name,
      kind: "http",
      description: options.description,
      parameters: options.parameters,
      risky: options.risky,
    },
    async (args: Record<string, unknown>, context: ToolContext) => {
      const target = new URL(url);
      if (method === "GET")
        for (const [k, v] of Object.entries(args))
          target.searchParams.set(k, typeof v === "string" ? v : JSON.stringify(v));
      const response = await fetchFn(target, {
        method,
        redirect: "manual",
        headers: {
          accept: "application/json, text/plain;q=0.9, */*;q=0.1",
          ...(method === "GET" ? {} : { "content-type": "application/json" }),
          ...headers,
          ...(context.idempotencyKey ? { "idempotency-key": context.idempotencyKey } : {}),
          ...(context.attempt ? { "arbor-attempt": String(context.attempt) } : {}),
        },
        ...(method === "GET" ? {} : { body: JSON.stringify(args) }),
        ...(context.signal ? { signal: context.signal } : {}),
      });
      const body = await response.text();
      if (!response.ok) {
        const { status } = response;
        const message = `${name} answered HTTP ${status}: ${body.slice(0, 500)}`;
        throw status === 429
          ? new ThrottledError(message, { details: { status } })
          : status >= 500
            ? new UnavailableError(message, { details: { status } })
            : new ToolError(message, { details: { status } });
      }
      return body;
    },
  );
}
