/**
 * INTERNAL, for this package's crash tests only: `IDEMPOTENT_TOOLS_FAULT=<point>` makes
 * the process kill itself with SIGKILL at that point of the call protocol, so the tests
 * can check what survives a crash at every step. Only with a native binary built with the
 * `test-hooks` feature (the tests build one for themselves: __test__/global-setup.ts);
 * with the binary users install, the variable does nothing. Read once at load; when
 * unset, the hook is a function that does nothing.
 *
 * Points: `after-acquire` (the claim is recorded, fn has not started), `after-fn` (fn
 * returned, its side effect happened, the completion is not recorded), `after-complete`
 * (the completion is recorded, the caller's promise has not resolved).
 */

import * as native from './native.js';

export type FaultPoint = 'after-acquire' | 'after-fn' | 'after-complete';

const armed = native.testHooks() ? process.env.IDEMPOTENT_TOOLS_FAULT : undefined;

export const crashPoint: (point: FaultPoint) => void =
  armed === undefined || armed === ''
    ? () => {}
    : (point) => {
        if (point === armed) process.kill(process.pid, 'SIGKILL');
      };
