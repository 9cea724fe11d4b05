#!/usr/bin/env node
/**
 * The `idempotent-tools` command (the package's bin). The CLI is an application on top
 * of the library's public API, in apps/cli/.
 */

import { main, runFromArgv } from './apps/cli/main.js';

export { main };

if (require.main === module) runFromArgv();
