// A kennel worker's job: WorkerError and Cancelled (what a handler throws to
// fail or stop it), Job (the handler's second argument), and note (a line on
// stderr). index.js re-exports WorkerError, Cancelled and Job.

/**
 * A failure the worker reports: the job fails, the worker stays.
 *
 * `throw new WorkerError('text is too long', { status: 422, code: 'too_long', limit: 512 })`
 * is written as {"error":true,"message":"text is too long","status":422,"code":"too_long","limit":512}
 * in json-lines, and as a JSON-RPC error with code `rpcCode` (-32000 unless
 * given) whose `data` holds the status and fields.
 */
export class WorkerError extends Error {
  constructor(message, { status, rpcCode, ...fields } = {}) {
    super(String(message));
    this.name = 'WorkerError';
    this.status = status;
    this.rpcCode = rpcCode;
    this.fields = fields;
  }

  /** The status (when given) and the fields, as one object. */
  data() {
    return this.status === undefined || this.status === null
      ? { ...this.fields }
      : { status: this.status, ...this.fields };
  }
}

/** Thrown by job.raiseIfCancelled(); the SDK answers the job as cancelled. */
export class Cancelled extends Error {
  constructor(message = 'cancelled') {
    super(message);
    this.name = 'Cancelled';
  }
}

/**
 * The job a handler is running, its second argument.
 *
 * - `request`: what the handler got (the request, or the JSON-RPC params);
 * - `method`, `id`: the JSON-RPC method and id (in json-lines no method, and
 *   the `kennel_id` kennel gave the request, which the SDK echoes; undefined
 *   when it gave none);
 * - `cancelled`, `signal` (an AbortSignal), `raiseIfCancelled()`,
 *   `checkpoint()` (yields to the event loop so that a cancel can arrive,
 *   then throws Cancelled if it did);
 * - `report(progress, { total, message })`.
 */
export class Job {
  #server;
  #controller = new AbortController();
  #done = false;

  constructor(server, request, method, id, progressToken) {
    this.#server = server;
    this.request = request;
    this.method = method;
    this.id = id;
    this.progressToken = progressToken;
  }

  get cancelled() {
    return this.#controller.signal.aborted;
  }

  get signal() {
    return this.#controller.signal;
  }

  raiseIfCancelled() {
    if (this.cancelled) throw new Cancelled();
  }

  async checkpoint() {
    await new Promise((resolve) => setImmediate(resolve));
    this.raiseIfCancelled();
  }

  /** Sends one progress message for this job, before its reply; ignored once the job has ended. */
  report(progress, { total, message } = {}) {
    if (this.#done) {
      note('report() after the job ended is ignored');
      return;
    }
    this.#server.progress(this, progress, total, message);
  }

  /** @internal */
  _cancel() {
    if (!this.#done) this.#controller.abort(new Cancelled());
  }

  /** @internal */
  _finish() {
    this.#done = true;
  }
}

export function note(text) {
  process.stderr.write(`kennel-worker: ${text}\n`);
}
