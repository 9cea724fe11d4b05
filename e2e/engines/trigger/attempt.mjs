// One attempt of a Trigger.dev run, as the SDK's mock task context builds it (Trigger.dev's
// engine needs its hosted API or a container): TASK, RUN (the run id) and ATTEMPT (its number).
import { writeSync } from 'node:fs';

import { runInMockTaskContext } from '@trigger.dev/sdk/ai/test';

import { runs } from './tasks.mjs';

const { TASK, RUN, ATTEMPT, PAYLOAD } = process.env;
const result = await runInMockTaskContext(
  ({ ctx }) => runs[TASK](JSON.parse(PAYLOAD), { ctx, signal: new AbortController().signal }),
  { ctx: { run: { id: RUN }, attempt: { number: Number(ATTEMPT) } } },
);
writeSync(1, `result ${JSON.stringify(result)}\n`);
process.exit(0);
