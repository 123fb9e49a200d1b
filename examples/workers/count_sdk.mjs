// A worker with the Node SDK that shows a warm-up, progress, errors and
// cancellation: {"to": 5, "step_ms": 200} -> progress 1..5, then {"counted": 5}.
// See docs/PROTOCOL.md.
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkerError, serve } from '../../sdk/node/index.js';

const LIMIT = 1000;

serve(
  async (request, job) => {
    const to = Number(request.to ?? 3);
    if (to > LIMIT) throw new WorkerError(`cannot count to ${to}`, { status: 422, code: 'too_far', limit: LIMIT });
    for (let n = 1; n <= to; n += 1) {
      await sleep(request.step_ms ?? 100, undefined, { signal: job.signal }); // a cancel ends the wait
      job.report(n, { total: to });
    }
    return { counted: to };
  },
  {
    load: async () => {
      console.log('warming up'); // goes to stderr: the SDK keeps stdout for the protocol
      return { limit: LIMIT }; // extra fields on the ready line
    },
  },
);
