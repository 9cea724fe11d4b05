//! The Lua scripts. Each runs on one key (the record's hash), so the store works on Redis
//! Cluster, and each is one atomic server-side step that reads the clock with `TIME`.
//! `redis::Script` sends EVALSHA and, on NOSCRIPT, SCRIPT LOAD and EVALSHA again.

use std::sync::OnceLock;

use redis::Script;

fn script(cell: &'static OnceLock<Script>, code: &str) -> &'static Script {
    cell.get_or_init(|| Script::new(code))
}

pub fn acquire() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/acquire.lua"))
}

pub fn settle() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/settle.lua"))
}

pub fn renew() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/renew.lua"))
}

pub fn release() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/release.lua"))
}

pub fn clear() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, include_str!("lua/clear.lua"))
}
