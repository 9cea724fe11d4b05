//! Replies of the Redis protocol (RESP2, what a connection speaks until it sends HELLO 3),
//! parsed as they arrive: `parse` takes one whole reply from the front of a buffer, or
//! says that more bytes are needed. Replies are `redis::Value`s, as the redis crate gives
//! them, so that one set of helpers reads the answers of both transports.

use redis::Value;

/// One reply parsed from the front of `buf`: the value and how many bytes it took; `None`
/// when the buffer does not hold a whole reply yet; an error when the bytes are not RESP.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, String> {
    let mut at = 0;
    match value(buf, &mut at)? {
        Some(v) => Ok(Some((v, at))),
        None => Ok(None),
    }
}

/// The line at `*at` (without its CRLF), moving `*at` past it.
fn line<'a>(buf: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let start = *at;
    let rel = buf.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    *at = start + rel + 2;
    Some(&buf[start..start + rel])
}

fn number(bytes: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("a malformed number {:?}", String::from_utf8_lossy(bytes)))
}

fn value(buf: &[u8], at: &mut usize) -> Result<Option<Value>, String> {
    let Some(&kind) = buf.get(*at) else {
        return Ok(None);
    };
    *at += 1;
    let Some(head) = line(buf, at) else {
        return Ok(None);
    };
    Ok(Some(match kind {
        b'+' => Value::SimpleString(String::from_utf8_lossy(head).into_owned()),
        b':' => Value::Int(number(head)?),
        b'-' => {
            // The redis crate's own parser makes the error value (its code and detail).
            let mut raw = Vec::with_capacity(head.len() + 3);
            raw.push(b'-');
            raw.extend_from_slice(head);
            raw.extend_from_slice(b"\r\n");
            redis::parse_redis_value(&raw).map_err(|e| e.to_string())?
        }
        b'$' => {
            let len = number(head)?;
            if len < 0 {
                Value::Nil
            } else {
                let len = len as usize;
                let end = *at + len;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err("a bulk string without its CRLF".into());
                }
                let bytes = buf[*at..end].to_vec();
                *at = end + 2;
                Value::BulkString(bytes)
            }
        }
        b'*' => {
            let len = number(head)?;
            if len < 0 {
                Value::Nil
            } else {
                let mut items = Vec::with_capacity((len as usize).min(1024));
                for _ in 0..len {
                    match value(buf, at)? {
                        Some(v) => items.push(v),
                        None => return Ok(None),
                    }
                }
                Value::Array(items)
            }
        }
        other => return Err(format!("an unknown reply type {:?}", other as char)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_replies_are_parsed_and_partial_ones_wait() {
        let all = b"+OK\r\n:42\r\n$-1\r\n$5\r\nab\r\nc\r\n*3\r\n:1\r\n$0\r\n\r\n*-1\r\n-WRONGTYPE Operation against a key\r\n";
        let mut at = 0;
        let mut got = Vec::new();
        while at < all.len() {
            let (v, n) = parse(&all[at..]).unwrap().unwrap();
            got.push(v);
            at += n;
        }
        assert_eq!(got[0], Value::SimpleString("OK".into()));
        assert_eq!(got[1], Value::Int(42));
        assert_eq!(got[2], Value::Nil);
        assert_eq!(got[3], Value::BulkString(b"ab\r\nc".to_vec()));
        assert_eq!(
            got[4],
            Value::Array(vec![Value::Int(1), Value::BulkString(vec![]), Value::Nil])
        );
        assert!(matches!(&got[5], Value::ServerError(e) if e.code() == "WRONGTYPE"));
        // Every proper prefix of a reply is "not yet".
        for cut in 0..all.len() {
            let r = parse(&all[..cut]).unwrap();
            if let Some((_, n)) = r {
                assert!(n <= cut);
            }
        }
        assert!(parse(b"$5\r\nab").unwrap().is_none());
        assert!(parse(b"*2\r\n:1\r\n").unwrap().is_none());
        assert!(parse(b"").unwrap().is_none());
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b"$2\r\nabcd").is_err());
    }
}
