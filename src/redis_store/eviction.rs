//! Whether the server may evict this store's records: a Redis (or Valkey) with a memory
//! limit and an eviction policy other than `noeviction` drops keys when it is full, and
//! every claim (its `SET NX` expiry) and every record with `ttlMs` carries an expiry, the
//! `volatile-*` policies' candidates; `allkeys-*` takes any key. A record evicted is a
//! completed call that runs again, or a claim a duplicate then makes while its call runs.
//! Read from `INFO memory` (which managed services that rename `CONFIG` still answer).

use napi_derive::napi;
use redis::Value;

use super::Inner;
use crate::failure::StoreResult;

/// The server's memory limit and what it does when the limit is reached.
#[napi(object)]
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionPolicy {
    /// `maxmemory_policy`, as the server names it (`noeviction`, `allkeys-lru`, ...).
    pub policy: String,
    /// `maxmemory` in bytes; 0 is no limit (nothing is ever evicted).
    pub maxmemory: f64,
    /// Whether records can be evicted: a limit, and a policy that evicts. Decided here,
    /// once, for the JavaScript store that warns.
    pub evicts: bool,
}

/// The policy in an `INFO memory` reply (`field:value` lines), if it names both fields.
pub fn parse_info(text: &str) -> Option<EvictionPolicy> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
    };
    let maxmemory = field("maxmemory")?.parse::<u64>().ok()? as f64;
    let policy = field("maxmemory_policy")?;
    if policy.is_empty() || policy.len() > 64 || !policy.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    Some(EvictionPolicy {
        evicts: maxmemory > 0.0 && policy != "noeviction",
        policy: policy.to_string(),
        maxmemory,
    })
}

/// The command that asks.
pub fn info_memory() -> redis::Cmd {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("memory");
    cmd
}

/// The policy in `info_memory`'s reply; `None` for anything else (an error such as
/// NOPERM for a user without `+info`, a server that leaves the fields out).
/// On a cluster, redis-rs asks every node and answers a map of node to reply: the policy
/// of a node that evicts, if any does, else the first one's.
pub fn from_reply(reply: &Value) -> Option<EvictionPolicy> {
    match reply {
        Value::BulkString(bytes) => parse_info(&String::from_utf8_lossy(bytes)),
        Value::VerbatimString { text, .. } => parse_info(text),
        Value::Map(nodes) => {
            let all: Vec<EvictionPolicy> =
                nodes.iter().filter_map(|(_, r)| from_reply(r)).collect();
            all.iter().find(|p| p.evicts).or(all.first()).cloned()
        }
        _ => None,
    }
}

impl Inner {
    /// The server's eviction policy, asked on the Tokio transport (see `from_reply`).
    pub async fn eviction_policy(&self) -> StoreResult<Option<EvictionPolicy>> {
        const WHAT: &str = "Redis INFO memory failed";
        let reply = self
            .conn
            .run(WHAT, |mut c| async move {
                info_memory().query_async::<Value>(&mut c).await
            })
            .await;
        Ok(reply.ok().as_ref().and_then(from_reply))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_limit_and_the_policy() {
        let info = "# Memory\r\nused_memory:123\r\nmaxmemory:67108864\r\nmaxmemory_human:64.00M\r\nmaxmemory_policy:allkeys-lru\r\n";
        let p = parse_info(info).unwrap();
        assert_eq!(p.policy, "allkeys-lru");
        assert_eq!(p.maxmemory, 67108864.0);
        assert!(p.evicts);
    }

    #[test]
    fn no_limit_or_noeviction_evicts_nothing() {
        let unlimited = parse_info("maxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n").unwrap();
        assert!(!unlimited.evicts);
        let refusing = parse_info("maxmemory:100\r\nmaxmemory_policy:noeviction\r\n").unwrap();
        assert!(!refusing.evicts);
    }

    #[test]
    fn a_clusters_replies_by_node_say_whether_any_node_evicts() {
        let node = |policy: &str| {
            Value::BulkString(
                format!("maxmemory:100\r\nmaxmemory_policy:{policy}\r\n").into_bytes(),
            )
        };
        let name = |n: &str| Value::SimpleString(n.into());
        let mixed = Value::Map(vec![
            (name("a:1"), node("noeviction")),
            (name("b:2"), node("allkeys-lfu")),
        ]);
        assert_eq!(from_reply(&mixed).unwrap().policy, "allkeys-lfu");
        let calm = Value::Map(vec![(name("a:1"), node("noeviction"))]);
        assert!(!from_reply(&calm).unwrap().evicts);
        assert_eq!(from_reply(&Value::Map(vec![])), None);
        assert_eq!(from_reply(&Value::Nil), None);
    }

    #[test]
    fn a_reply_without_the_fields_or_with_odd_ones_says_nothing() {
        assert_eq!(parse_info(""), None);
        assert_eq!(parse_info("maxmemory:100\r\n"), None);
        assert_eq!(parse_info("maxmemory:-1\r\nmaxmemory_policy:x\r\n"), None);
        assert_eq!(parse_info("maxmemory:1\r\nmaxmemory_policy:a b\r\n"), None);
        // `maxmemory_human` and `maxmemory_policy` are not `maxmemory`.
        assert_eq!(
            parse_info("maxmemory_human:1M\r\nmaxmemory_policy:noeviction\r\n"),
            None
        );
    }
}
