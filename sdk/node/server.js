// The server behind serve(): it splits stdin into requests and cancels (in
// the chosen framing), runs the jobs one at a time, and writes the replies
// and progress. Private to the package; index.js re-exports its constants.

import { Cancelled, Job, WorkerError } from './job.js';

/** The JSON-RPC error code of a failed job, unless WorkerError's rpcCode gives one. */
export const RPC_SERVER_ERROR = -32000;
export const RPC_CANCELLED = -32800;
export const RPC_PARSE_ERROR = -32700;
export const RPC_INVALID_REQUEST = -32600;
/** The protocolVersion answered to an `initialize` that names none. */
export const MCP_PROTOCOL_VERSION = '2025-11-25';

const idKey = (id) => JSON.stringify(id ?? null);

/** json-lines: the key of the id kennel adds to a request object; echoed in its reply. */
export const KENNEL_ID = 'kennel_id';
/** json-lines: `{"kennel_load": key}` asks the worker to load a key (answered `{"loaded": key}`). */
export const KENNEL_LOAD = 'kennel_load';
/** json-lines: `{"kennel_unload": key}` asks it to let go of one (answered `{"unloaded": key}`). */
export const KENNEL_UNLOAD = 'kennel_unload';
/** JSON-RPC: the method of a load (params `{"key": key}`), for a pool's `load_method`. */
export const LOAD_METHOD = 'kennel/load';
/** JSON-RPC: the method of an unload, for a pool's `unload_method`. */
export const UNLOAD_METHOD = 'kennel/unload';

const isPlainObject = (value) =>
  value !== null &&
  typeof value === 'object' &&
  (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null);

// json-lines: `message` with the job's kennel_id as its first key (a plain object only).
function withId(kennelId, message) {
  if (kennelId === undefined || !isPlainObject(message)) return message;
  const { [KENNEL_ID]: _theirs, ...rest } = message;
  return { [KENNEL_ID]: kennelId, ...rest };
}

function errorText(err) {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

export class Server {
  constructor(handler, { framing, name, version, output, loadKey, unloadKey }) {
    this.handler = handler;
    this.loadKey = loadKey;
    this.unloadKey = unloadKey;
    this.framing = framing;
    this.rpc = framing !== 'json-lines';
    this.name = name;
    this.version = version;
    this.output = output;
    this.inbox = [];
    this.wake = null;
    this.pending = new Map(); // id key -> queued requests with that id
    this.cancelledIds = new Set();
    this.current = null;
    this.buffer = Buffer.alloc(0);
    this.broken = false;
  }

  // ---- output

  send(message) {
    if (this.broken) return;
    const body = Buffer.from(JSON.stringify(message), 'utf8');
    const data =
      this.framing === 'content-length'
        ? Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'ascii'), body])
        : Buffer.concat([body, Buffer.from('\n')]);
    this.output(data);
  }

  progress(job, progress, total, message) {
    const payload = { progress };
    if (total !== undefined && total !== null) payload.total = total;
    if (message !== undefined && message !== null) payload.message = message;
    if (this.framing === 'json-lines') {
      this.send(withId(job.id, payload));
    } else if (this.framing === 'json-rpc') {
      this.send({
        jsonrpc: '2.0',
        method: 'notifications/progress',
        params: { progressToken: job.progressToken, ...payload },
      });
    } else {
      this.send({ jsonrpc: '2.0', method: '$/progress', params: { token: job.progressToken, value: payload } });
    }
  }

  sendResult(id, value) {
    const result = value === undefined ? null : value;
    this.send(this.rpc ? { jsonrpc: '2.0', id, result } : withId(id, result));
  }

  sendError(id, message, data = {}, rpcCode) {
    if (this.rpc) {
      const error = { code: rpcCode ?? RPC_SERVER_ERROR, message };
      if (Object.keys(data).length > 0) error.data = data;
      this.send({ jsonrpc: '2.0', id: id ?? null, error });
    } else {
      const reply = { error: true, message };
      for (const [key, value] of Object.entries(data)) {
        if (key !== 'error' && key !== 'message') reply[key] = value;
      }
      this.send(withId(id ?? undefined, reply));
    }
  }

  sendCancelled(id) {
    if (this.rpc) this.sendError(id, 'request cancelled', {}, RPC_CANCELLED);
    else this.sendError(id, 'cancelled', { cancelled: true });
  }

  sendFailure(id, err) {
    if (err instanceof WorkerError) this.sendError(id, err.message, err.data(), err.rpcCode);
    else if (err instanceof Cancelled) this.sendCancelled(id);
    else this.sendError(id, errorText(err));
  }

  // ---- input

  push(item) {
    this.inbox.push(item);
    if (this.wake) {
      const wake = this.wake;
      this.wake = null;
      wake();
    }
  }

  next() {
    if (this.inbox.length > 0) return Promise.resolve(this.inbox.shift());
    return new Promise((resolve) => {
      this.wake = () => resolve(this.inbox.shift());
    });
  }

  onData(chunk) {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    if (this.framing === 'content-length') this.splitFrames();
    else this.splitLines();
  }

  splitLines() {
    let start = 0;
    for (;;) {
      const end = this.buffer.indexOf(10, start);
      if (end < 0) break;
      const line = this.buffer.subarray(start, end);
      start = end + 1;
      if (line.toString('utf8').trim() !== '') this.take(line);
    }
    this.buffer = this.buffer.subarray(start);
  }

  splitFrames() {
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buffer.subarray(0, end).toString('ascii');
      let length;
      let seen = false;
      for (const line of head.split('\r\n')) {
        const colon = line.indexOf(':');
        if (colon < 0) continue;
        seen = true;
        if (line.slice(0, colon).trim().toLowerCase() === 'content-length') length = line.slice(colon + 1).trim();
      }
      if (!seen && head.trim() === '') {
        this.buffer = this.buffer.subarray(end + 4); // blank lines between messages
        continue;
      }
      const size = /^\d+$/.test(length ?? '') ? Number(length) : NaN;
      if (Number.isNaN(size)) {
        const what = length === undefined ? 'no Content-Length header' : `bad Content-Length ${JSON.stringify(length)}`;
        this.buffer = this.buffer.subarray(end + 4);
        this.push({ kind: 'bad', message: `parse error: ${what}`, id: null });
        continue;
      }
      if (this.buffer.length < end + 4 + size) return;
      const body = this.buffer.subarray(end + 4, end + 4 + size);
      this.buffer = this.buffer.subarray(end + 4 + size);
      this.take(body);
    }
  }

  take(raw) {
    let message;
    try {
      message = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      this.push({ kind: 'bad', message: `${this.rpc ? 'parse error' : 'bad request'}: ${err.message}`, id: null });
      return;
    }
    if (!this.rpc) {
      const isCancel =
        message !== null &&
        typeof message === 'object' &&
        !Array.isArray(message) &&
        message.cancel === true &&
        Object.keys(message).length === 1;
      if (isCancel) {
        this.current?._cancel();
        return;
      }
      // kennel's id is the job's, not the handler's: taken out here, echoed in the reply.
      let id;
      if (isPlainObject(message) && Object.hasOwn(message, KENNEL_ID)) {
        id = message[KENNEL_ID];
        delete message[KENNEL_ID];
      }
      this.push({ kind: 'request', request: message, id });
      return;
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      this.push({ kind: 'bad', message: 'invalid request: not a JSON-RPC object (batches are not supported)', id: null });
      return;
    }
    const { method, params } = message;
    if (method === undefined) {
      if ('id' in message && ('result' in message || 'error' in message)) return; // a response: ignore it
      this.push({ kind: 'bad', message: 'invalid request: no method', id: message.id });
      return;
    }
    if (typeof method !== 'string') {
      this.push({ kind: 'bad', message: 'invalid request: method is not a string', id: message.id });
      return;
    }
    if (!('id' in message)) {
      // a notification: never answered
      if ((method === 'notifications/cancelled' || method === '$/cancelRequest') && params && typeof params === 'object') {
        this.cancelId(params.requestId !== undefined ? params.requestId : params.id);
      }
      return;
    }
    const { id } = message;
    let token = id;
    if (params && typeof params === 'object' && params._meta && typeof params._meta === 'object') {
      if (params._meta.progressToken !== undefined) token = params._meta.progressToken;
    }
    const key = idKey(id);
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    this.push({ kind: 'request', request: params, method, id, token });
  }

  cancelId(id) {
    const key = idKey(id);
    if (this.current && idKey(this.current.id) === key) this.current._cancel();
    else if (this.pending.get(key)) this.cancelledIds.add(key);
    // else: answered already (or never seen): nothing to cancel
  }

  // ---- the jobs, one at a time

  async run(load) {
    let extra = {};
    let loadError = null;
    try {
      const loaded = load ? await load() : undefined;
      if (loaded && typeof loaded === 'object' && !Array.isArray(loaded)) extra = loaded;
    } catch (err) {
      if (!(err instanceof WorkerError)) console.error(err);
      loadError = err;
    }
    if (!this.rpc) {
      if (loadError) {
        this.sendFailure(null, loadError);
        return 1;
      }
      // It echoes kennel's id in every reply: kennel then holds each reply object to it.
      const { ready: _ignored, [KENNEL_ID]: _ours, ...fields } = extra;
      this.send({ ready: true, [KENNEL_ID]: true, ...fields });
    }
    while (!this.broken) {
      const item = await this.next();
      if (item.kind === 'eof') return loadError ? 1 : 0;
      if (item.kind === 'bad') {
        if (this.rpc) {
          const code = item.message.startsWith('parse error') ? RPC_PARSE_ERROR : RPC_INVALID_REQUEST;
          this.sendError(item.id, item.message, {}, code);
        } else {
          this.sendError(null, item.message);
        }
        continue;
      }
      const { request, method, id, token } = item;
      if (this.rpc) {
        const key = idKey(id);
        const left = (this.pending.get(key) ?? 1) - 1;
        if (left > 0) this.pending.set(key, left);
        else this.pending.delete(key);
        if (this.cancelledIds.delete(key)) {
          this.sendCancelled(id);
          continue;
        }
        if (method === 'initialize') {
          if (loadError) {
            this.sendFailure(id, loadError);
            return 1;
          }
          this.sendResult(id, this.initializeResult(request, extra));
          continue;
        }
        if (method === 'ping') {
          this.sendResult(id, {});
          continue;
        }
        if (method === 'shutdown' && this.framing === 'content-length') {
          // LSP's end, which kennel sends at close before `exit`: answered
          // here, never a job; the worker ends with its stdin.
          this.sendResult(id, null);
          continue;
        }
        if (loadError) {
          this.sendFailure(id, loadError);
          continue;
        }
      }
      const keyRequest = this.keyRequest(request, method);
      if (keyRequest) {
        await this.runKeyRequest(id, keyRequest);
        continue;
      }
      await this.runJob(new Job(this, request, method, id, token));
    }
    return 0;
  }

  // A load or an unload of a key: { hook, answer, key }, else null.
  // json-lines: an object whose only key (kennel's id aside) is kennel_load
  // or kennel_unload, a string; JSON-RPC: the method kennel/load or
  // kennel/unload with params {"key": ...}.
  keyRequest(request, method) {
    let kind;
    let key;
    if (this.rpc) {
      kind = { [LOAD_METHOD]: 'load', [UNLOAD_METHOD]: 'unload' }[method];
      key = isPlainObject(request) ? request.key : undefined;
    } else {
      if (!isPlainObject(request)) return null;
      const names = Object.keys(request);
      if (names.length !== 1) return null;
      kind = { [KENNEL_LOAD]: 'load', [KENNEL_UNLOAD]: 'unload' }[names[0]];
      key = request[names[0]];
    }
    if (kind === undefined || typeof key !== 'string') return null;
    return kind === 'load'
      ? { hook: this.loadKey, answer: 'loaded', key }
      : { hook: this.unloadKey, answer: 'unloaded', key };
  }

  // Calls (and awaits) the hook (none: nothing to load) and answers {answer: key}.
  async runKeyRequest(id, { hook, answer, key }) {
    try {
      if (hook) await hook(key);
    } catch (err) {
      if (!(err instanceof WorkerError)) console.error(err);
      this.sendFailure(id, err);
      return;
    }
    this.sendResult(id, { [answer]: key });
  }

  initializeResult(params, extra) {
    const protocolVersion =
      params && typeof params.protocolVersion === 'string' ? params.protocolVersion : MCP_PROTOCOL_VERSION;
    return {
      ...extra,
      protocolVersion,
      capabilities: {},
      serverInfo: { name: this.name, version: this.version },
    };
  }

  async runJob(job) {
    this.current = job;
    let failure = null;
    let reply;
    try {
      reply = await this.handler(job.request, job);
      try {
        JSON.stringify(reply === undefined ? null : reply); // a reply that is not JSON fails here
      } catch (err) {
        failure = new WorkerError(`the reply is not JSON: ${err.message}`);
      }
    } catch (err) {
      if (!(err instanceof WorkerError) && !(err instanceof Cancelled) && !job.cancelled) console.error(err);
      failure = err;
    }
    this.current = null;
    const wasCancelled = job.cancelled;
    job._finish();
    if (wasCancelled) this.sendCancelled(job.id);
    else if (failure !== null) this.sendFailure(job.id, failure);
    else this.sendResult(job.id, reply);
  }
}
