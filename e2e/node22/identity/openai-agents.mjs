// The identity harness's driver for the current @openai/agents (Node >= 22, e2e/node22): the
// OpenAI Agents driver (stress/identity/drivers/openai-agents.mjs) over @openai/agents 0.20
// (its Runner, RunState and RunContext, re-exported from the @openai/agents-core it depends
// on), zod and the package as e2e/node22 installs them (idempotent-tools is a link to the
// repository, .ci/node22-e2e.sh). Its Runner fails a run whose later response reuses a call
// id for other arguments (and takes one with the same arguments for the call it already ran),
// so numbered call ids count on across the responses of a run here (numbering: 'run'), and
// start again at call_0 in the next run.
//
//   eval "$(.ci/nodes.sh)"   # from the repository's root, e2e/node22 installed
//   PATH="$NODE22_BIN:$PATH" node stress/identity/campaign.mjs --driver e2e/node22/identity/openai-agents.mjs --seed 7

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

import * as agents from '@openai/agents';
import { z } from 'zod';

import { openaiAgentsDriver } from '../../../stress/identity/drivers/openai-agents.mjs';

const require = createRequire(import.meta.url);
// The package as e2e/node22 resolves it (or IDENTITY_PACKAGE_ROOT: another build).
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || join(require.resolve('idempotent-tools/package.json'), '..');
const pkg = require(PACKAGE);
const helper = require(join(PACKAGE, 'dist', 'integrations', 'openai-agents.js'));
// Its version, for the verdict lines (the package exports no package.json).
const { version } = JSON.parse(readFileSync(join(dirname(require.resolve('@openai/agents')), '..', 'package.json'), 'utf8'));

const driver = openaiAgentsDriver({ agents, z, pkg, helper, version: `@openai/agents ${version}`, numbering: 'run' });
export const { name, variants, run } = driver;
