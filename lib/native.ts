/** The compiled Rust addon, loaded by binding.js (a prebuilt platform package, or a build from source in native/). */
import * as binding from '../binding.js';

export = binding;
