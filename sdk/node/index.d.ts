// Types for kennel-worker (index.js).

export type Framing = 'json-lines' | 'json-rpc' | 'content-length';

export declare const VERSION: string;
export declare const FRAMINGS: readonly Framing[];
export declare const RPC_SERVER_ERROR: -32000;
export declare const RPC_CANCELLED: -32800;
export declare const RPC_PARSE_ERROR: -32700;
export declare const RPC_INVALID_REQUEST: -32600;
export declare const MCP_PROTOCOL_VERSION: string;
/** json-lines: the key of the id kennel adds to a request object; echoed in its reply. */
export declare const KENNEL_ID: string;
/** json-lines: the key of a load request, `{"kennel_load": key}`. */
export declare const KENNEL_LOAD: 'kennel_load';
/** json-lines: the key of an unload request, `{"kennel_unload": key}`. */
export declare const KENNEL_UNLOAD: 'kennel_unload';
/** JSON-RPC: the method of a load (params `{"key": key}`), for a pool's `load_method`. */
export declare const LOAD_METHOD: 'kennel/load';
/** JSON-RPC: the method of an unload, for a pool's `unload_method`. */
export declare const UNLOAD_METHOD: 'kennel/unload';

export interface WorkerErrorOptions {
  /** Written as "status" (json-lines) or data.status (JSON-RPC). */
  status?: number;
  /** The JSON-RPC error code; -32000 unless given. Not written in json-lines. */
  rpcCode?: number;
  /** Any other field is written next to message (json-lines) or in data (JSON-RPC). */
  [field: string]: unknown;
}

export declare class WorkerError extends Error {
  constructor(message: string, options?: WorkerErrorOptions);
  status?: number;
  rpcCode?: number;
  fields: Record<string, unknown>;
  data(): Record<string, unknown>;
}

export declare class Cancelled extends Error {
  constructor(message?: string);
}

export declare class Job<Request = unknown> {
  readonly request: Request;
  /** The JSON-RPC method; undefined in json-lines. */
  readonly method: string | undefined;
  /** The JSON-RPC id; in json-lines the `kennel_id` kennel gave the request (echoed in the reply), undefined when it gave none. */
  readonly id: string | number | null | undefined;
  readonly progressToken: unknown;
  readonly cancelled: boolean;
  readonly signal: AbortSignal;
  raiseIfCancelled(): void;
  checkpoint(): Promise<void>;
  report(progress: unknown, options?: { total?: number; message?: string }): void;
}

export interface ServeOptions {
  load?: () => unknown | Promise<unknown>;
  /** Loads what jobs of `key` need, when kennel asks; answered `{"loaded": key}`, or an error reply if it throws. */
  loadKey?: (key: string) => unknown | Promise<unknown>;
  /** Lets go of `key`, when kennel asks; answered `{"unloaded": key}`, or an error reply if it throws. */
  unloadKey?: (key: string) => unknown | Promise<unknown>;
  framing?: Framing;
  name?: string;
  version?: string;
  exit?: boolean;
}

export declare function resolveFraming(framing?: string, env?: Record<string, string | undefined>): Framing;

export declare function serve<Request = any>(
  handler: (request: Request, job: Job<Request>) => unknown | Promise<unknown>,
  options?: ServeOptions,
): Promise<number>;

/** One file of a binary job. */
export interface File {
  name: string | null;
  filename: string | null;
  contentType: string | null;
  data: Buffer;
}

/** The files of a binary job (`request.files`), their bytes decoded. */
export function filesOf(request: unknown): File[];
/** The worker's thread budget (KENNEL_THREADS), or null when kennel gave none. */
export function threads(env?: Record<string, string | undefined>): number | null;
