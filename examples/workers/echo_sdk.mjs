// Echoes each request back, with the Node SDK (sdk/node). Installed with
// `npm install ./sdk/node`, the import is 'kennel-worker'. See docs/PROTOCOL.md.
import { serve } from '../../sdk/node/index.js';

serve((request) => request);
