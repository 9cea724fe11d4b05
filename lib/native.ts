/** The compiled Rust addon (built by `napi build` into native/). */
import * as binding from '../native/index.js';

export = binding;
