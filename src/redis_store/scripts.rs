//! The Lua scripts. Each runs on one key (the record), so the store works on Redis
//! Cluster, and each is one atomic server-side step that reads the clock with `TIME`.
//! `redis::Script` sends EVALSHA and, on NOSCRIPT, SCRIPT LOAD and EVALSHA again.
//!
//! Scripts, not Redis 7 functions: measured on Redis 7.0 (INFO commandstats, the settle's
//! body both ways), an FCALL costs the server what an EVALSHA does (5.9-7.5 µs against
//! 5.7-7.5 µs); a script needs no library loaded and kept on every node, its SHA names
//! its exact code (so processes of two versions never run each other's), and a server
//! that forgets it (a restart, SCRIPT FLUSH, a failover) is handled by loading it again.
//!
//! The hot path needs no script at all: a new call claims with `SET NX GET`, a replay is
//! that same command's answer. `settle` runs once per new call (unless the one-command
//! settle of `on_loop/one_command.rs` lands); `claim` only when SET NX
//! found the key taken by a record that is not completed (or of format 1).

use std::sync::OnceLock;

use redis::{Cmd, Script};

/// The helpers that the scripts run rarely start with (see lua/record.lua).
const PRELUDE: &str = include_str!("lua/record.lua");

fn script(cell: &'static OnceLock<Script>, code: &str, prelude: bool) -> &'static Script {
    cell.get_or_init(|| {
        if prelude {
            Script::new(&format!("{PRELUDE}\n{code}"))
        } else {
            Script::new(code)
        }
    })
}

pub fn claim() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/claim.lua"), true)
}

pub fn settle() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/settle.lua"), false)
}

pub fn settle_if_equal() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/settle_if_equal.lua"), false)
}

pub fn settle_staged() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/settle_staged.lua"), false)
}

pub fn renew() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/renew.lua"), true)
}

pub fn release() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/release.lua"), true)
}

pub fn expire() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/expire.lua"), true)
}

pub fn clear() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/clear.lua"), true)
}

/// `script` on one record: EVALSHA with its key and arguments.
pub fn evalsha(script: &Script, redis_key: &str, args: &[Vec<u8>]) -> Cmd {
    evalsha_keys(script, &[redis_key], args)
}

/// `script` with its keys (a record, and a staging key in its hash slot) and arguments.
pub fn evalsha_keys(script: &Script, keys: &[&str], args: &[Vec<u8>]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash())
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    cmd
}
