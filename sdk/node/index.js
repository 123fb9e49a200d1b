// kennel-worker: write a kennel worker in a few lines. No dependencies.
//
//   import { serve } from 'kennel-worker';
//   serve((request) => request);          // an echo worker
//
// serve(handler, { load }) loads once, says it is ready, then calls
// handler(request, job) for each job (one at a time) and writes what it
// returns (or resolves to) as the reply. It keeps stdout for the protocol
// (console.log and other writes to process.stdout go to stderr), turns
// exceptions into error replies (WorkerError carries a status and fields),
// sends progress (job.report), reads stdin while a job runs so that a cancel
// request sets the job's flag (job.cancelled, job.signal,
// job.raiseIfCancelled()), and exits with code 0 when stdin ends. It speaks
// the three framings of docs/PROTOCOL.md: "json-lines" (the default),
// "json-rpc" and "content-length". serve(handler, { loadKey, unloadKey })
// loads and lets go of keys (a model, a workspace, a session) when kennel
// asks, for a pool whose jobs carry keys.

import { basename, extname } from 'node:path';

import { WorkerError, note } from './job.js';
import { Server } from './server.js';

export { Cancelled, Job, WorkerError } from './job.js';
export {
  KENNEL_ID,
  KENNEL_LOAD,
  KENNEL_UNLOAD,
  LOAD_METHOD,
  MCP_PROTOCOL_VERSION,
  RPC_CANCELLED,
  RPC_INVALID_REQUEST,
  RPC_PARSE_ERROR,
  RPC_SERVER_ERROR,
  UNLOAD_METHOD,
} from './server.js';

export const VERSION = '0.1.0';
/** The framings serve speaks; KENNEL_FRAMING names one when `framing` is not given. */
export const FRAMINGS = Object.freeze(['json-lines', 'json-rpc', 'content-length']);

/**
 * The files of a binary job, their bytes decoded: kennel's service sends an
 * application/octet-stream body, and the file parts of a multipart/form-data
 * one, as `{"files": [{name, filename, content_type, size, base64}]}`.
 * Returns [] for a request without files; throws a WorkerError (status 400)
 * for one whose base64 is not.
 */
export function filesOf(request) {
  const items = request !== null && typeof request === 'object' ? request.files : undefined;
  if (!Array.isArray(items)) return [];
  return items.map((item) => {
    if (item === null || typeof item !== 'object' || typeof item.base64 !== 'string') {
      throw new WorkerError('a file of the request has no base64 text', { status: 400 });
    }
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(item.base64) || item.base64.length % 4 !== 0) {
      throw new WorkerError('a file of the request is not base64', { status: 400 });
    }
    return {
      name: item.name ?? null,
      filename: item.filename ?? null,
      contentType: item.content_type ?? null,
      data: Buffer.from(item.base64, 'base64'),
    };
  });
}

/**
 * The worker's thread budget (KENNEL_THREADS, its share of the cores), or
 * null when kennel gave none. For a runtime with a setting of its own:
 * onnxruntime-node's `intraOpNumThreads`, a worker_threads pool's size.
 */
export function threads(env = process.env) {
  const raw = (env.KENNEL_THREADS ?? '').trim();
  if (!/^[0-9]+$/.test(raw)) return null;
  const value = Number(raw);
  return Number.isSafeInteger(value) && value >= 1 ? value : null;
}

/** Which framing: the argument, else KENNEL_FRAMING, else json-lines. */
export function resolveFraming(framing, env = process.env) {
  const chosen = framing ?? (env.KENNEL_FRAMING || 'json-lines');
  if (!FRAMINGS.includes(chosen)) {
    throw new TypeError(`unknown framing ${JSON.stringify(chosen)}: expected one of ${FRAMINGS.join(', ')}`);
  }
  return chosen;
}

/**
 * Serves jobs on stdin/stdout until stdin ends, then exits with code 0
 * (code 1 if load failed).
 *
 * - `handler(request, job)`: returns (or resolves to) the reply, any JSON
 *   value; throws WorkerError for an error reply with a status and fields;
 *   any other exception becomes an error reply with its message. In the
 *   JSON-RPC framings `request` is the params and `job.method` the method.
 * - `load()`: called (and awaited) once before the worker says it is ready;
 *   an object it returns adds fields to the ready line (json-lines) or to
 *   the `initialize` result (JSON-RPC). If it throws, the worker reports the
 *   warm-up failure and exits with code 1.
 * - `loadKey(key)`, `unloadKey(key)`: in a pool whose jobs carry keys (a
 *   model, a workspace, a session), kennel asks the worker to load a key
 *   before the first job of that key it hands it, and to let go of its
 *   least recently used key when it holds too many. `loadKey` is called (and
 *   awaited) for a request `{"kennel_load": key}` (json-lines) or a call of
 *   `kennel/load` with params `{"key": key}` (JSON-RPC; the pool's
 *   `load_method`), answered `{"loaded": key}`; `unloadKey` for
 *   `kennel_unload` / `kennel/unload`, answered `{"unloaded": key}`. If the
 *   hook throws, the answer is an error reply with its message (the job
 *   that needed the key fails with it). Without a hook the answer is
 *   success: nothing to load.
 * - `framing`: "json-lines" (default), "json-rpc" or "content-length"; when
 *   not given, the KENNEL_FRAMING environment variable names it.
 * - `name`, `version`: the serverInfo answered to `initialize`.
 * - `exit`: false to resolve with the exit code instead of exiting.
 *
 * Returns a promise of the exit code (when `exit` is false).
 */
export async function serve(handler, { load, loadKey, unloadKey, framing, name, version = '0', exit = true } = {}) {
  const chosen = resolveFraming(framing);
  const stdout = process.stdout;
  const write = stdout.write.bind(stdout);
  // Stray writes to stdout (console.log, console.info, libraries) go to the log.
  stdout.write = process.stderr.write.bind(process.stderr);
  const server = new Server(handler, {
    framing: chosen,
    name: name ?? (basename(process.argv[1] ?? '', extname(process.argv[1] ?? '')) || 'kennel-worker'),
    version,
    output: (data) => write(data),
    loadKey,
    unloadKey,
  });
  stdout.on('error', () => {
    server.broken = true; // kennel is gone: stop quietly
    server.push({ kind: 'eof' });
  });
  const stdin = process.stdin;
  stdin.on('data', (chunk) => server.onData(chunk));
  stdin.on('end', () => server.push({ kind: 'eof' }));
  stdin.on('error', (err) => {
    note(`reading stdin failed: ${err.message}`);
    server.push({ kind: 'eof' });
  });
  const code = await server.run(load);
  stdin.pause();
  stdin.removeAllListeners('data');
  if (!exit) return code;
  // Exit once every reply has left: an empty write calls back after the ones before it.
  write('', () => process.exit(code));
  return code;
}
