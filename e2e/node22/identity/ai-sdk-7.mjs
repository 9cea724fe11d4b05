// The identity harness's driver for ai 7 (Node >= 22, e2e/node22): the AI SDK driver
// (stress/identity/drivers/ai-sdk.mjs) over ai 7, its MockLanguageModelV4 (ai 7's own model
// specification; ai/test also keeps a V3 mock), zod and the package as e2e/node22 installs them
// (idempotent-tools is a link to the repository, .ci/node22-e2e.sh). ai 7 hands each tool its own
// context, from generateText's `toolsContext`: the factory passes it there for 'ai 7', keeps
// `responseMessages` (ai 7's `response.messages` is the last step's only), and adds a variant
// whose approvals are asked at the call site (generateText's `toolApproval`, not needsApproval).
//
//   eval "$(.ci/nodes.sh)"   # from the repository's root, e2e/node22 installed
//   PATH="$NODE22_BIN:$PATH" node stress/identity/campaign.mjs --driver e2e/node22/identity/ai-sdk-7.mjs --seed 7

import { createRequire } from 'node:module';
import { join } from 'node:path';

import * as ai from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';

import { aiSdkDriver } from '../../../stress/identity/drivers/ai-sdk.mjs';

const require = createRequire(import.meta.url);
// The package as e2e/node22 resolves it (or IDENTITY_PACKAGE_ROOT: another build).
const PACKAGE = process.env.IDENTITY_PACKAGE_ROOT || join(require.resolve('idempotent-tools/package.json'), '..');
const pkg = require(PACKAGE);
const helper = require(join(PACKAGE, 'dist', 'integrations', 'ai-sdk.js'));

const driver = aiSdkDriver({ ai, MockLanguageModel: MockLanguageModelV4, z, pkg, helper, version: 'ai 7' });
export const { name, variants, run } = driver;
