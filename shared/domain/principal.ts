/**
 * Who asks for a resource: a person a channel authenticated (with the tenant it vouches for), an
 * assistant (its tenant is the root of its URN), or the engine itself (`system`, every tenant).
 */
export interface Principal {
  id: string;
  kind: "human" | "agent" | "system";
  tenant?: string;
  roles?: readonly string[];
}

/**
 * What a channel vouches for about whoever calls an entry point: the tenant they authenticated
 * for, and their roles.
 */
export interface Caller {
  tenant?: string;
  roles?: readonly string[];
}
