//! Replies of the Redis protocol (RESP2, what a connection speaks until it sends HELLO 3),
//! read as they arrive by a `Reader` that trusts nothing in them. Replies are
//! `redis::Value`s, as the redis crate gives them, so that one set of helpers reads the
//! answers of both transports.
//!
//! Why not the redis crate's own parser (`redis::Parser`, on `combine`)? It is incremental
//! and bounds nesting (100 levels), but nothing else: an announced bulk length is buffered
//! for as long as bytes come (4 GB announced, 50 MB sent: 100 MB held), a line as long as
//! it grows, and a bound added from outside (counting the bytes it is fed) cannot tell a
//! status line from a bulk string's body, so it would have to be as large as the largest
//! record. This reader bounds each on its own, and refuses an announced length over its
//! bound before a byte of it arrives. (It is also faster on the small replies of the hot
//! path; see `parse_cost` below.)
//!
//! What it refuses, with an error that says which (the connection is then dropped, and its
//! memory given back with the reader):
//! - nesting deeper than `Limits::depth` (no recursion: open arrays are a stack of our own);
//! - a line (a status, an error, an integer, a length) longer than `Limits::line`;
//! - a reply (all its strings and lines together) longer than `Limits::reply`, and so any
//!   bulk string announced longer; memory for a bulk string grows only as its bytes arrive;
//! - more than `Limits::elements` array elements in one reply;
//! - an unknown type, a malformed or negative length (but -1, nil), a line that ends in a
//!   bare LF, a bulk string without its CRLF.
//!
//! A line that is not complete yet is searched again only from where the last search
//! stopped, never from its start.

use redis::Value;

/// What one reply may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Arrays within arrays. The store's replies on this transport are at most 2 deep (a
    /// claim script's answer); 16 leaves room.
    pub depth: usize,
    /// A line without its CRLF. The store's lines are short (`+OK`, `:1`, lengths, error
    /// messages naming a key of at most `maxKeyBytes`); an error line longer than this is
    /// refused as such instead of read.
    pub line: usize,
    /// A whole reply. The largest reply this transport reads is one record (an acquire's
    /// `SET NX GET` answers with the record in the way), and a record is one Redis string,
    /// which Redis holds to 512 MiB (`proto-max-bulk-len`); so is V8's longest string.
    /// The store cannot know a call's `maxResultBytes` (16 MiB by default, but each
    /// wrapper may raise it), so it allows what Redis itself allows, plus room for the
    /// other fields of a claim script's reply.
    pub reply: usize,
    /// Array elements in one reply (each costs a `Value`, tens of bytes, whatever its
    /// bytes on the wire). The store's replies have a handful.
    pub elements: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        depth: 16,
        line: 1 << 20,
        reply: (512 << 20) + (1 << 20),
        elements: 1 << 16,
    };
}

/// A buffer larger than this is given back once it is no longer needed (after a large
/// reply), so that one large record does not pin its size for the connection's life.
const KEEP: usize = 1 << 20;

/// An array being read: its elements so far, and how many are still to come.
struct Open {
    items: Vec<Value>,
    left: usize,
}

/// A bulk string being read: its bytes so far, and how many it has (without its CRLF).
struct Bulk {
    body: Vec<u8>,
    len: usize,
}

/// Reads replies from the bytes of one connection, as they arrive (`feed`, then `next`
/// until it says it needs more). One reader per connection: drop it with the connection.
pub struct Reader {
    limits: Limits,
    /// Bytes received and not yet taken into a value (from `at`).
    buf: Vec<u8>,
    at: usize,
    /// How many bytes from `at` were searched for a line's end without finding one.
    scanned: usize,
    /// The arrays open in the reply being read, outermost first.
    open: Vec<Open>,
    bulk: Option<Bulk>,
    /// What the reply being read took so far: bytes, and array elements announced.
    reply_bytes: usize,
    elements: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new(Limits::DEFAULT)
    }
}

impl Reader {
    pub fn new(limits: Limits) -> Reader {
        Reader {
            limits,
            buf: Vec::new(),
            at: 0,
            scanned: 0,
            open: Vec::new(),
            bulk: None,
            reply_bytes: 0,
            elements: 0,
        }
    }

    /// Bytes received from the server.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Memory the reader holds (its buffers' capacity), for tests.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.buf.capacity() + self.bulk.as_ref().map_or(0, |b| b.body.capacity())
    }

    /// The next whole reply; `None` when the bytes so far do not hold one yet; an error
    /// when they are not RESP or break a limit (the connection cannot be read any further).
    pub fn next(&mut self) -> Result<Option<Value>, String> {
        loop {
            let value = if self.bulk.is_some() {
                match self.bulk_body()? {
                    Some(v) => v,
                    None => return Ok(self.wait()),
                }
            } else {
                match self.line()? {
                    Some((kind, start, end)) => match self.item(kind, start, end)? {
                        Some(v) => v,
                        None => continue,
                    },
                    None => return Ok(self.wait()),
                }
            };
            if let Some(reply) = self.complete(value) {
                return Ok(Some(reply));
            }
        }
    }

    /// More bytes are needed: what was read is dropped from the buffer (the values made
    /// of it own their bytes), and a large buffer no longer needed is given back.
    fn wait(&mut self) -> Option<Value> {
        if self.at > 0 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        if self.buf.capacity() > KEEP && self.buf.len() <= KEEP / 2 {
            self.buf.shrink_to(KEEP / 2);
        }
        None
    }

    /// Counts `n` more bytes of the reply being read.
    fn take(&mut self, n: usize) -> Result<(), String> {
        self.reply_bytes += n;
        if self.reply_bytes > self.limits.reply {
            return Err(format!(
                "a reply longer than {} bytes (the most a store's reply can need)",
                self.limits.reply
            ));
        }
        Ok(())
    }

    /// The next line: its type byte and where its text starts and ends (before the CR),
    /// or `None` until its end has arrived.
    fn line(&mut self) -> Result<Option<(u8, usize, usize)>, String> {
        let from = self.at + self.scanned;
        let Some(i) = self.buf[from..].iter().position(|&b| b == b'\n') else {
            self.scanned = self.buf.len() - self.at;
            if self.scanned > self.limits.line {
                return Err(format!(
                    "a line longer than {} bytes without its CRLF",
                    self.limits.line
                ));
            }
            return Ok(None);
        };
        let lf = from + i;
        self.scanned = 0;
        if lf - self.at > self.limits.line + 1 {
            return Err(format!(
                "a line longer than {} bytes without its CRLF",
                self.limits.line
            ));
        }
        if lf == self.at || self.buf[lf - 1] != b'\r' {
            return Err("a line that does not end in CRLF".into());
        }
        if lf == self.at + 1 {
            return Err("an empty line".into());
        }
        let kind = self.buf[self.at];
        let (start, end) = (self.at + 1, lf - 1);
        self.take(lf + 1 - self.at)?;
        self.at = lf + 1;
        Ok(Some((kind, start, end)))
    }

    /// The value a line stands for, or `None` when it opened an array (its elements come
    /// next) or a bulk string whose bytes have not all arrived.
    fn item(&mut self, kind: u8, start: usize, end: usize) -> Result<Option<Value>, String> {
        let text = &self.buf[start..end];
        Ok(Some(match kind {
            b'+' if text == b"OK" => Value::Okay,
            b'+' => Value::SimpleString(String::from_utf8_lossy(text).into_owned()),
            b':' => Value::Int(number(text)?),
            b'-' => {
                // The redis crate's own parser makes the error value (its code and detail).
                let mut raw = Vec::with_capacity(text.len() + 3);
                raw.push(b'-');
                raw.extend_from_slice(text);
                raw.extend_from_slice(b"\r\n");
                redis::parse_redis_value(&raw)
                    .map_err(|_| format!("an error reply that is not text: {}", shown(text)))?
            }
            b'$' => match length(text)? {
                None => Value::Nil,
                Some(len) => {
                    if self.reply_bytes.saturating_add(len).saturating_add(2) > self.limits.reply {
                        return Err(format!(
                            "a bulk string of {len} bytes announced, over the most a store's reply can need ({} bytes)",
                            self.limits.reply
                        ));
                    }
                    if self.buf.len() - self.at >= len + 2 {
                        // All there (the common case): one copy, straight into the value.
                        let body = self.buf[self.at..self.at + len].to_vec();
                        self.at += len;
                        self.reply_bytes += len;
                        self.bulk = Some(Bulk { body, len });
                        return self.bulk_body();
                    }
                    self.bulk = Some(Bulk {
                        body: Vec::new(),
                        len,
                    });
                    return Ok(None);
                }
            },
            b'*' => match length(text)? {
                None => Value::Nil,
                Some(0) => Value::Array(Vec::new()),
                Some(n) => {
                    if self.open.len() >= self.limits.depth {
                        return Err(format!(
                            "arrays nested more than {} deep",
                            self.limits.depth
                        ));
                    }
                    self.elements = self.elements.saturating_add(n);
                    if self.elements > self.limits.elements {
                        return Err(format!(
                            "more than {} array elements in one reply",
                            self.limits.elements
                        ));
                    }
                    self.open.push(Open {
                        items: Vec::with_capacity(n.min(64)),
                        left: n,
                    });
                    return Ok(None);
                }
            },
            other => {
                return Err(format!(
                    "an unknown reply type {}",
                    std::ascii::escape_default(other)
                ))
            }
        }))
    }

    /// The bulk string being read, once its bytes and CRLF are all there.
    fn bulk_body(&mut self) -> Result<Option<Value>, String> {
        let bulk = self.bulk.as_mut().expect("a bulk string being read");
        let want = bulk.len - bulk.body.len();
        if want > 0 {
            let n = want.min(self.buf.len() - self.at);
            let needed = bulk.body.len() + n;
            if needed > bulk.body.capacity() {
                // Grown as bytes arrive (never to an announced length that may not come),
                // doubling, but never past the announced length.
                let to = needed.max(bulk.body.capacity() * 2).min(bulk.len);
                bulk.body.reserve_exact(to - bulk.body.len());
            }
            bulk.body.extend_from_slice(&self.buf[self.at..self.at + n]);
            self.at += n;
            self.reply_bytes += n;
            if bulk.body.len() < bulk.len {
                return Ok(None);
            }
        }
        if self.buf.len() - self.at < 2 {
            return Ok(None);
        }
        if &self.buf[self.at..self.at + 2] != b"\r\n" {
            return Err("a bulk string longer than its announced length".into());
        }
        self.at += 2;
        self.reply_bytes += 2;
        let bulk = self.bulk.take().expect("a bulk string being read");
        Ok(Some(Value::BulkString(bulk.body)))
    }

    /// Puts `value` into the array it belongs to, closing every array it completes; the
    /// whole reply once its outermost value is complete.
    fn complete(&mut self, mut value: Value) -> Option<Value> {
        loop {
            let Some(open) = self.open.last_mut() else {
                self.reply_bytes = 0;
                self.elements = 0;
                return Some(value);
            };
            open.items.push(value);
            open.left -= 1;
            if open.left > 0 {
                return None;
            }
            let done = self.open.pop().expect("an open array");
            value = Value::Array(done.items);
        }
    }
}

/// At most 40 bytes of `text`, escaped, for a message.
fn shown(text: &[u8]) -> String {
    let mut out: String = text
        .iter()
        .take(40)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if text.len() > 40 {
        out.push_str("...");
    }
    format!("\"{out}\"")
}

fn number(text: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(text)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("a malformed number {}", shown(text)))
}

/// A bulk string's or an array's length: `None` for -1 (nil); any other negative length
/// is not RESP.
fn length(text: &[u8]) -> Result<Option<usize>, String> {
    match number(text).map_err(|_| format!("a malformed length {}", shown(text)))? {
        -1 => Ok(None),
        n if n < 0 => Err(format!("a negative length {n}")),
        n => usize::try_from(n)
            .map(Some)
            .map_err(|_| format!("a length too large: {n}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(depth: usize, line: usize, reply: usize, elements: usize) -> Reader {
        Reader::new(Limits {
            depth,
            line,
            reply,
            elements,
        })
    }

    /// Every reply in `bytes`, fed all at once.
    fn all(bytes: &[u8]) -> Result<Vec<Value>, String> {
        let mut r = Reader::default();
        r.feed(bytes);
        let mut out = Vec::new();
        while let Some(v) = r.next()? {
            out.push(v);
        }
        Ok(out)
    }

    const REPLIES: &[u8] = b"+OK\r\n+PONG\r\n:42\r\n:-7\r\n$-1\r\n$5\r\nab\r\nc\r\n*3\r\n:1\r\n$0\r\n\r\n*-1\r\n-WRONGTYPE Operation against a key\r\n*0\r\n*2\r\n*1\r\n*1\r\n:5\r\n$3\r\nxyz\r\n";

    fn expected() -> Vec<Value> {
        vec![
            Value::Okay,
            Value::SimpleString("PONG".into()),
            Value::Int(42),
            Value::Int(-7),
            Value::Nil,
            Value::BulkString(b"ab\r\nc".to_vec()),
            Value::Array(vec![Value::Int(1), Value::BulkString(vec![]), Value::Nil]),
            redis::parse_redis_value(b"-WRONGTYPE Operation against a key\r\n").unwrap(),
            Value::Array(vec![]),
            Value::Array(vec![
                Value::Array(vec![Value::Array(vec![Value::Int(5)])]),
                Value::BulkString(b"xyz".to_vec()),
            ]),
        ]
    }

    #[test]
    fn replies_are_read_as_the_redis_crate_reads_them() {
        let got = all(REPLIES).unwrap();
        assert_eq!(got, expected());
        assert!(matches!(&got[7], Value::ServerError(e) if e.code() == "WRONGTYPE"));
        // The same values as the Tokio transport's parser gives, reply by reply.
        let mut parser = redis::Parser::new();
        let mut rest: &[u8] = REPLIES;
        for v in &got {
            assert_eq!(&parser.parse_value(&mut rest).unwrap(), v);
        }
    }

    #[test]
    fn replies_in_pieces_of_any_size_read_the_same() {
        for size in [1, 2, 3, 5, 7, 64] {
            let mut r = Reader::default();
            let mut got = Vec::new();
            for piece in REPLIES.chunks(size) {
                r.feed(piece);
                while let Some(v) = r.next().unwrap() {
                    got.push(v);
                }
            }
            assert_eq!(got, expected(), "pieces of {size} bytes");
            assert_eq!(r.buf.len(), 0);
        }
    }

    #[test]
    fn bytes_that_are_not_resp_are_refused_saying_what_they_are() {
        let cases: &[(&[u8], &str)] = &[
            (b"?x\r\n", "unknown reply type ?"),
            (b"\r\n", "an empty line"),
            (b"\n", "does not end in CRLF"),
            (b"+OK\n", "does not end in CRLF"),
            (b":12ab\r\n", "malformed number \"12ab\""),
            (b":+1\r\n", "malformed number"),
            (b"$x\r\n", "malformed length \"x\""),
            (b"*-7\r\n", "negative length -7"),
            (b"$-2\r\n", "negative length -2"),
            (b"$2\r\nabcd\r\n", "longer than its announced length"),
            (b"*2\r\n:1\r\n!x\r\n", "unknown reply type !"),
        ];
        for (bytes, says) in cases {
            let err = all(bytes).unwrap_err();
            assert!(err.contains(says), "{bytes:?}: {err}");
        }
    }

    #[test]
    fn nesting_is_bounded_without_recursion() {
        // 100,000 levels (the reply that crashed the process): refused at the bound.
        let deep = b"*1\r\n".repeat(100_000);
        let err = all(&deep).unwrap_err();
        assert!(err.contains("nested more than 16 deep"), "{err}");
        // At the bound, read.
        let mut ok = b"*1\r\n".repeat(16);
        ok.extend_from_slice(b":1\r\n");
        let mut v = all(&ok).unwrap().remove(0);
        for _ in 0..16 {
            let Value::Array(mut items) = v else {
                panic!("an array")
            };
            v = items.remove(0);
        }
        assert_eq!(v, Value::Int(1));
        let mut r = small(2, 64, 1 << 10, 8);
        r.feed(b"*1\r\n*1\r\n*1\r\n");
        assert!(r.next().unwrap_err().contains("nested more than 2 deep"));
    }

    #[test]
    fn an_announced_length_over_the_bound_is_refused_before_its_bytes() {
        let mut r = Reader::default();
        r.feed(b"$4000000000\r\n");
        let err = r.next().unwrap_err();
        assert!(err.contains("4000000000 bytes announced"), "{err}");
        assert!(r.held() < 1024);
        // Nested: what the reply took so far counts.
        let mut r = small(4, 64, 100, 8);
        r.feed(b"*2\r\n$40\r\n");
        r.feed(&[b'x'; 40]);
        r.feed(b"\r\n$50\r\n");
        assert!(r.next().unwrap_err().contains("50 bytes announced"));
        // Elements.
        let mut r = small(4, 64, 1 << 20, 8);
        r.feed(b"*5\r\n*5\r\n");
        assert!(r.next().unwrap_err().contains("more than 8 array elements"));
        let mut r = small(4, 64, 1 << 20, 8);
        r.feed(b"*9223372036854775807\r\n");
        assert!(r.next().unwrap_err().contains("more than 8 array elements"));
        // The bounds are per reply: replies one after another each get all of them.
        let mut r = small(4, 64, 20, 8);
        for _ in 0..100 {
            r.feed(b"*2\r\n$3\r\nabc\r\n:1\r\n");
            assert!(r.next().unwrap().is_some());
        }
    }

    #[test]
    fn a_bulk_string_holds_only_what_arrived() {
        let mut r = Reader::default();
        r.feed(b"$100000000\r\n");
        assert!(r.next().unwrap().is_none());
        let piece = vec![b'y'; 64 * 1024];
        for _ in 0..16 {
            r.feed(&piece);
            assert!(r.next().unwrap().is_none());
        }
        // 1 MiB arrived of 100 MB announced: about 1 MiB held (doubling), not 100 MB.
        assert!(r.held() <= 3 << 20, "{}", r.held());
    }

    #[test]
    fn a_line_without_its_end_is_searched_once_and_bounded() {
        let mut r = small(4, 1 << 20, 1 << 30, 8);
        r.feed(b"+");
        assert!(r.next().unwrap().is_none());
        let piece = vec![b'a'; 1024];
        for i in 1..=1000 {
            r.feed(&piece);
            assert!(r.next().unwrap().is_none());
            // The search resumes where it stopped: it has covered exactly what arrived.
            assert_eq!(r.scanned, 1 + i * 1024);
        }
        r.feed(b"\r\n");
        let Some(Value::SimpleString(s)) = r.next().unwrap() else {
            panic!("a status line")
        };
        assert_eq!(s.len(), 1000 * 1024);
        assert_eq!(r.scanned, 0);
        // Over the bound: refused once it is over, not when (if ever) it ends.
        let mut r = small(4, 4096, 1 << 30, 8);
        r.feed(b"+");
        let mut err = None;
        for _ in 0..10 {
            r.feed(&piece);
            if let Err(e) = r.next() {
                err = Some(e);
                break;
            }
        }
        assert!(err.unwrap().contains("longer than 4096 bytes"));
        assert!(r.held() < 16 << 10);
    }

    #[test]
    fn a_large_buffer_is_given_back_once_read() {
        let mut r = Reader::default();
        let mut reply = b"$3000000\r\n".to_vec();
        reply.extend(std::iter::repeat_n(b'z', 3_000_000));
        reply.extend_from_slice(b"\r\n");
        r.feed(&reply);
        let Some(Value::BulkString(b)) = r.next().unwrap() else {
            panic!("a bulk string")
        };
        assert_eq!(b.len(), 3_000_000);
        assert!(r.next().unwrap().is_none());
        assert!(r.held() <= KEEP, "{}", r.held());
    }

    /// What one reply costs to read, here and with the redis crate's parser (`cargo test
    /// --release -- --ignored --nocapture parse_cost`); a measurement, not a check.
    #[test]
    #[ignore]
    fn parse_cost() {
        let replies: &[(&str, &[u8])] = &[
            ("+OK", b"+OK\r\n"),
            ("nil", b"$-1\r\n"),
            (":1", b":1\r\n"),
            (
                "[1, 40 bytes]",
                b"*2\r\n:1\r\n$40\r\n0123456789012345678901234567890123456789\r\n",
            ),
        ];
        let record = {
            let mut r = b"$400\r\n".to_vec();
            r.extend([b'r'; 400]);
            r.extend_from_slice(b"\r\n");
            r
        };
        let mut cases: Vec<(&str, Vec<u8>)> =
            replies.iter().map(|(n, b)| (*n, b.to_vec())).collect();
        cases.push(("400-byte record", record));
        const N: usize = 200_000;
        for (name, one) in cases {
            let stream = one.repeat(N);
            let t = std::time::Instant::now();
            let mut r = Reader::default();
            for chunk in stream.chunks(64 * 1024) {
                r.feed(chunk);
                while let Some(v) = r.next().unwrap() {
                    std::hint::black_box(v);
                }
            }
            let ours = t.elapsed().as_nanos() as f64 / N as f64;
            let t = std::time::Instant::now();
            let mut parser = redis::Parser::new();
            let mut rest: &[u8] = &stream;
            for _ in 0..N {
                std::hint::black_box(parser.parse_value(&mut rest).unwrap());
            }
            let theirs = t.elapsed().as_nanos() as f64 / N as f64;
            println!("{name:>16}: Reader {ours:6.0} ns, redis::Parser {theirs:6.0} ns");
        }
    }
}
