// kennel-worker tests: each starts fixtures/worker.mjs as a real child process
// (fixtures/child.mjs) and talks to it over its pipes, once per framing (what
// differs between framings: fixtures/shapes.mjs). Every wait has a deadline.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';

import { DEADLINE, Worker } from '../fixtures/child.mjs';
import { SHAPES } from '../fixtures/shapes.mjs';
import { FRAMINGS, resolveFraming, threads } from '../index.js';

const CANCEL_BOUND = 2_000; // a cancelled job is answered within this

for (const framing of FRAMINGS) {
  const shape = SHAPES[framing];

  describe(framing, () => {
    const t = {};

    beforeEach(async () => {
      t.worker = new Worker(framing);
      t.nextId = 0;
      t.ready = await shape.handshake(t.worker);
    });

    afterEach(async () => {
      await t.worker.close();
    });

    const request = (op, params, meta) => shape.request(t, op, params, meta);

    async function collect(id, timeout = DEADLINE) {
      const deadline = Date.now() + timeout;
      const before = [];
      for (;;) {
        const message = await t.worker.read(Math.max(10, deadline - Date.now()));
        if (shape.isReply(message)) {
          shape.checkId?.(message, id);
          return { before, reply: message };
        }
        before.push(message);
      }
    }

    const call = (op, params, meta) => collect(request(op, params, meta));

    test('echo round trip', async () => {
      const { before, reply } = await call('echo', { text: 'héllo', n: [1, 2, { x: null }] });
      assert.deepEqual(before, []);
      assert.equal(shape.result(reply).text, 'héllo');
      assert.deepEqual(shape.result(reply).n, [1, 2, { x: null }]);
    });

    test('stray writes to stdout go to stderr', async () => {
      const { reply } = await call('print');
      assert.deepEqual(shape.result(reply), { printed: true });
      const text = await t.worker.stderrText('raw process.stdout.write');
      assert.match(text, /stray console.log from the handler/);
      assert.match(text, /a stray console.log during load/);
      const again = await call('echo', { after: 'print' }); // the stream is still in step
      assert.equal(shape.result(again.reply).after, 'print');
    });

    test('an exception becomes an error reply and the worker goes on', async () => {
      let { reply } = await call('crash');
      assert.equal(shape.errorMessage(reply), 'something broke');
      await t.worker.stderrText('Error: something broke'); // the stack is logged
      ({ reply } = await call('bigint'));
      assert.match(shape.errorMessage(reply), /the reply is not JSON/);
      ({ reply } = await call('echo', { still: 'alive' }));
      assert.equal(shape.result(reply).still, 'alive');
    });

    test('progress comes in order before the reply', async () => {
      const { before, reply } = await call('progress', { steps: 4 });
      assert.deepEqual(
        before.map((m) => shape.progressValue(m)),
        [1, 2, 3, 4].map((n) => ({ progress: n, total: 4, message: `step ${n}` })),
      );
      assert.deepEqual(shape.result(reply), { done: true });
    });

    test('cancel ends a long handler and the same worker goes on', async () => {
      for (const op of ['spin', 'spin_raise']) {
        const id = request(op);
        const started = await t.worker.read(); // the handler's first report: it is running
        assert.equal(shape.progressValue(started).message, 'spinning');
        const sent = Date.now();
        shape.cancel(t, id);
        const { before, reply } = await collect(id, CANCEL_BOUND);
        assert.ok(Date.now() - sent < CANCEL_BOUND);
        assert.deepEqual(before, []);
        shape.assertCancelled(reply);
        const pid = await call('pid');
        assert.equal(shape.result(pid.reply).pid, t.worker.proc.pid);
      }
    });

    const keyRequest = async (kind, key) => (await collect(shape.keyRequest(t, kind, key))).reply;

    test('a load calls loadKey and answers loaded', async () => {
      assert.deepEqual(shape.result(await keyRequest('load', 'model a')), { loaded: 'model a' });
      assert.deepEqual(shape.result(await keyRequest('load', 'b')), { loaded: 'b' });
      let { reply } = await call('held');
      assert.deepEqual(shape.result(reply), { held: { 'model a': 'state of model a', b: 'state of b' } });
      assert.deepEqual(shape.result(await keyRequest('unload', 'model a')), { unloaded: 'model a' });
      ({ reply } = await call('held'));
      assert.deepEqual(shape.result(reply), { held: { b: 'state of b' } });
    });

    test('a failed load is an error reply with its message and the worker goes on', async () => {
      assert.equal(shape.errorMessage(await keyRequest('load', 'unknown')), 'no key named unknown');
      assert.equal(shape.errorMessage(await keyRequest('load', 'crash')), 'loading broke');
      await t.worker.stderrText('Error: loading broke'); // the stack is logged
      assert.equal(shape.errorMessage(await keyRequest('unload', 'never')), '"never" was never loaded');
      const { reply } = await call('held');
      assert.deepEqual(shape.result(reply), { held: {} });
    });

    test('without hooks a load and an unload answer success', async () => {
      const first = t.worker;
      t.worker = new Worker(framing, { TEST_NO_KEY_HOOKS: '1' });
      try {
        await shape.handshake(t.worker);
        assert.deepEqual(shape.result(await keyRequest('load', 'a')), { loaded: 'a' });
        assert.deepEqual(shape.result(await keyRequest('unload', 'a')), { unloaded: 'a' });
        const { reply } = await call('held');
        assert.deepEqual(shape.result(reply), { held: {} });
      } finally {
        await t.worker.close();
        t.worker = first;
      }
    });

    test('EOF on stdin exits 0', async () => {
      await call('echo');
      t.worker.proc.stdin.end();
      assert.deepEqual(await t.worker.exit(), { code: 0, signal: null });
    });

    if (!shape.rpc) {
      test('the ready line has the fields load returned', () => {
        assert.deepEqual(t.ready, { ready: true, kennel_id: true, model: 'tiny', pid: t.worker.proc.pid });
      });

      test('a WorkerError has its status and fields', async () => {
        const { reply } = await call('error');
        assert.deepEqual(reply, { error: true, message: 'text is too long', status: 422, code: 'too_long', limit: 5 });
      });

      test('a bad request line is answered and the worker goes on', async () => {
        t.worker.writeRaw('this is not json\n');
        const reply = await t.worker.read();
        assert.equal(reply.error, true);
        assert.match(reply.message, /^bad request: /);
        t.worker.writeRaw('\n   \n'); // blank lines are skipped, not answered
        const again = await call('echo', { ok: 1 });
        assert.deepEqual(again.reply, { op: 'echo', ok: 1 });
      });

      test('kennel_load beside other keys is a job', async () => {
        const { reply } = await call('echo', { kennel_load: 'a' });
        assert.deepEqual(reply, { kennel_load: 'a', op: 'echo' });
        t.worker.send({ kennel_load: 7 }); // not a key: a job like any other
        assert.deepEqual(await t.worker.read(), { kennel_load: 7 });
        const held = await call('held');
        assert.deepEqual(held.reply, { held: {} });
      });

      test('a request can be any JSON value', async () => {
        t.worker.send([1, 'two']);
        assert.deepEqual(await t.worker.read(), [1, 'two']);
      });

      test('a cancel line between jobs is ignored', async () => {
        t.worker.send({ cancel: true });
        await t.worker.assertQuiet();
        t.worker.send({ cancel: 1 }); // not a cancel line: a request like any other
        assert.deepEqual(await t.worker.read(), { cancel: 1 });
        const { reply } = await call('echo', { ok: 2 });
        assert.deepEqual(reply, { op: 'echo', ok: 2 });
      });

      test('a failed load is an error line and exit 1', async () => {
        const worker = new Worker(framing, { TEST_LOAD_FAILS: '1' });
        try {
          assert.deepEqual(await worker.read(), { error: true, message: 'no model here', status: 503 });
          assert.equal((await worker.exit()).code, 1);
        } finally {
          await worker.close();
        }
      });
    } else {
      test('the initialize result has the fields load returned', async () => {
        assert.deepEqual(t.ready, {
          jsonrpc: '2.0',
          id: 'init',
          result: {
            model: 'tiny',
            pid: t.worker.proc.pid,
            protocolVersion: '2025-03-26',
            capabilities: {},
            serverInfo: { name: 'test-worker', version: '1.2.3' },
          },
        });
        const { reply } = await call('ping');
        assert.deepEqual(shape.result(reply), {});
      });

      test('the handler gets method and params', async () => {
        let { reply } = await call('echo', { a: 1 });
        assert.deepEqual(shape.result(reply), { a: 1 });
        t.nextId += 1;
        t.worker.send({ jsonrpc: '2.0', id: t.nextId, method: 'echo' });
        ({ reply } = await collect(t.nextId));
        assert.equal(shape.result(reply), null);
      });

      test('a WorkerError has its status and fields in data', async () => {
        let { reply } = await call('error');
        assert.deepEqual(reply.error, {
          code: -32000,
          message: 'text is too long',
          data: { status: 422, code: 'too_long', limit: 5 },
        });
        ({ reply } = await call('rpc_code'));
        assert.deepEqual(reply.error, { code: -32602, message: 'no such tool' });
      });

      test('the progress token comes from _meta or the id', async () => {
        let { before } = await call('progress', { steps: 1 }, { progressToken: 'tok-7' });
        assert.equal(shape.token(before[0]), 'tok-7');
        ({ before } = await call('progress', { steps: 1 }));
        assert.equal(shape.token(before[0]), t.nextId);
        assert.equal(before[0].method, shape.progressMethod);
      });

      test('a queued request can be cancelled before it starts', async () => {
        const first = request('spin');
        await t.worker.read(); // spinning
        const second = request('echo', { never: 'run' });
        shape.cancel(t, second);
        shape.cancel(t, first);
        shape.assertCancelled((await collect(first, CANCEL_BOUND)).reply);
        shape.assertCancelled((await collect(second, CANCEL_BOUND)).reply);
        shape.cancel(t, first); // answered already: nothing to cancel, nothing written
        const { reply } = await call('echo', { after: 'cancel' });
        assert.deepEqual(shape.result(reply), { after: 'cancel' });
      });

      test('a bad message is answered and the worker goes on', async () => {
        t.worker.send({ jsonrpc: '2.0', id: 99, params: {} });
        assert.equal((await t.worker.read()).error.code, -32600);
        t.worker.send([{ jsonrpc: '2.0', id: 1, method: 'echo' }]);
        assert.equal((await t.worker.read()).error.code, -32600);
        t.worker.send({ jsonrpc: '2.0', method: 'notifications/whatever' });
        t.worker.send({ jsonrpc: '2.0', id: 5, result: {} }); // a response: ignored
        await t.worker.assertQuiet();
        const { reply } = await call('echo', { ok: 3 });
        assert.deepEqual(shape.result(reply), { ok: 3 });
      });

      test('shutdown is answered null in content-length, a job in json-rpc', async () => {
        // The test worker's handler answers an unknown op with an error.
        const { reply } = await call('shutdown');
        if (framing === 'content-length') {
          assert.equal(shape.result(reply), null);
        } else {
          assert.ok(reply.error, JSON.stringify(reply));
        }
      });

      test('unparsable input is a parse error with id null', async () => {
        if (framing === 'json-rpc') {
          t.worker.writeRaw('{nope\n');
        } else {
          t.worker.writeRaw('Content-Length: 5\r\n\r\n{nope');
        }
        let reply = await t.worker.read();
        assert.deepEqual([reply.id, reply.error.code], [null, -32700]);
        if (framing === 'content-length') {
          t.worker.writeRaw('Content-Type: application/json\r\n\r\n');
          reply = await t.worker.read();
          assert.equal(reply.error.code, -32700);
          assert.match(reply.error.message, /Content-Length/);
          const body = '{"jsonrpc":"2.0","id":"x","method":"echo","params":{"ok":5}}';
          t.worker.writeRaw(`content-length:${Buffer.byteLength(body)}\r\nContent-Type: x\r\n\r\n${body}`);
          ({ reply } = await collect('x'));
          assert.deepEqual(shape.result(reply), { ok: 5 });
        }
        ({ reply } = await call('echo', { ok: 4 }));
        assert.deepEqual(shape.result(reply), { ok: 4 });
      });

      test('a failed load answers initialize with an error and exits 1', async () => {
        const worker = new Worker(framing, { TEST_LOAD_FAILS: '1' });
        try {
          const reply = await shape.handshake(worker);
          assert.deepEqual(reply.error, { code: -32000, message: 'no model here', data: { status: 503 } });
          assert.equal((await worker.exit()).code, 1);
        } finally {
          await worker.close();
        }
      });
    }
  });
}

describe('json-lines with kennel_id', () => {
  const t = {};

  beforeEach(async () => {
    t.worker = new Worker('json-lines');
    await t.worker.read();
  });

  afterEach(async () => {
    await t.worker.close();
  });

  /** The next message, its kennel_id checked as its first key and taken out. */
  async function readFor(id) {
    const message = await t.worker.read();
    assert.equal(Object.keys(message)[0], 'kennel_id', JSON.stringify(message));
    const { kennel_id: got, ...rest } = message;
    assert.equal(got, id);
    return rest;
  }

  test('the handler never sees the id, and every reply and progress line echoes it first', async () => {
    t.worker.send({ kennel_id: 7, op: 'keys', a: 1 });
    assert.deepEqual(await readFor(7), { keys: ['a', 'op'] });
    t.worker.send({ kennel_id: 8, op: 'error' });
    assert.deepEqual(await readFor(8), {
      error: true,
      message: 'text is too long',
      status: 422,
      code: 'too_long',
      limit: 5,
    });
    t.worker.send({ kennel_id: 9, op: 'progress', steps: 1 });
    assert.deepEqual(await readFor(9), { progress: 1, total: 1, message: 'step 1' });
    assert.deepEqual(await readFor(9), { done: true });
    t.worker.send({ kennel_id: 10, op: 'spin' });
    assert.deepEqual(await readFor(10), { progress: 0, message: 'spinning' });
    t.worker.send({ cancel: true });
    assert.deepEqual(await readFor(10), { error: true, message: 'cancelled', cancelled: true });
  });

  test('a load echoes the id of its request', async () => {
    t.worker.send({ kennel_id: 11, kennel_load: 'a' });
    assert.deepEqual(await readFor(11), { loaded: 'a' });
    t.worker.send({ kennel_id: 12, kennel_load: 'unknown' });
    assert.deepEqual(await readFor(12), { error: true, message: 'no key named unknown', status: 404 });
  });

  test('a request without an id gets a reply without one', async () => {
    t.worker.send({ op: 'keys' });
    assert.deepEqual(await t.worker.read(), { keys: ['op'] });
    t.worker.send([1, 'two']);
    assert.deepEqual(await t.worker.read(), [1, 'two']);
  });
});

describe('framing choice', () => {
  test('the argument, then KENNEL_FRAMING, then json-lines', () => {
    assert.equal(resolveFraming(undefined, {}), 'json-lines');
    assert.equal(resolveFraming(undefined, { KENNEL_FRAMING: 'content-length' }), 'content-length');
    assert.equal(resolveFraming('json-rpc', { KENNEL_FRAMING: 'content-length' }), 'json-rpc');
    assert.throws(() => resolveFraming('xml', {}), /unknown framing "xml"/);
  });
});

describe('filesOf', () => {
  test('files come back as bytes', async () => {
    const { filesOf } = await import('../index.js');
    const got = filesOf({
      lang: 'fr',
      files: [{ name: 'photo', filename: 'a.png', content_type: 'image/png', size: 3, base64: 'AQID' }],
    });
    assert.equal(got.length, 1);
    assert.deepEqual([got[0].name, got[0].filename, got[0].contentType], ['photo', 'a.png', 'image/png']);
    assert.deepEqual([...got[0].data], [1, 2, 3]);
    assert.deepEqual(filesOf({ text: 'no files' }), []);
  });

  test('bad base64 is a 400 worker error', async () => {
    const { filesOf, WorkerError } = await import('../index.js');
    assert.throws(() => filesOf({ files: [{ name: 'x', base64: 'not base64!' }] }), (err) => err instanceof WorkerError && err.status === 400);
  });
});

describe('threads', () => {
  test('the budget is KENNEL_THREADS as a whole number of at least 1', () => {
    assert.equal(threads({ KENNEL_THREADS: '3' }), 3);
    assert.equal(threads({ KENNEL_THREADS: ' 1 ' }), 1);
  });
  test('without a budget, or with a value that is not one, there is none', () => {
    for (const raw of [undefined, '', '0', '-2', '1.5', 'four', '99999999999999999999']) {
      assert.equal(threads({ KENNEL_THREADS: raw }), null, `KENNEL_THREADS=${raw}`);
    }
  });
});
