//! Cross-process wake-ups: one connection per store that LISTENs on the table's channel.
//! Settles (complete, fail, release) of an awaited claim send NOTIFY with the claim's tag
//! (SHA-256 of its token, which `watch` gave the waiter), never the key: any role that can
//! connect may LISTEN on the channel without any privilege on the table. JavaScript waits
//! for the tags with `nextSettled()` and wakes the 'block' waiters of that claim at once
//! (polling stays the fallback).
//!
//! An empty string means "anything may have changed": sent once the LISTEN is in place
//! (a settle just before it would otherwise be missed) and after every reconnect.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use super::pool::Pool;

/// What the listening task hands to `nextSettled`.
pub enum Heard {
    Settled(String),
    Stop,
}

pub struct Listening {
    tx: UnboundedSender<Heard>,
    rx: Arc<Mutex<UnboundedReceiver<Heard>>>,
    task: JoinHandle<()>,
}

/// At most this many tags per `nextSettled` reply.
const BATCH: usize = 1024;

impl Listening {
    pub fn start(pool: Arc<Pool>) -> Self {
        let (tx, rx) = unbounded_channel();
        let task = tokio::spawn(listen(pool, tx.clone()));
        Listening {
            tx,
            rx: Arc::new(Mutex::new(rx)),
            task,
        }
    }

    pub fn receiver(&self) -> Arc<Mutex<UnboundedReceiver<Heard>>> {
        self.rx.clone()
    }

    pub fn stop(self) {
        self.task.abort();
        let _ = self.tx.send(Heard::Stop);
    }
}

/// The tags heard, waiting for at least one; `None` once stopped.
pub async fn next(rx: &Mutex<UnboundedReceiver<Heard>>) -> Option<Vec<String>> {
    let mut rx = rx.lock().await;
    let mut keys = match rx.recv().await? {
        Heard::Settled(k) => vec![k],
        Heard::Stop => return None,
    };
    while keys.len() < BATCH {
        match rx.try_recv() {
            Ok(Heard::Settled(k)) => keys.push(k),
            Ok(Heard::Stop) => return None,
            Err(_) => break,
        }
    }
    Some(keys)
}

async fn listen(pool: Arc<Pool>, tx: UnboundedSender<Heard>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if listen_once(&pool, &tx).await {
            backoff = Duration::from_millis(100);
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// One connection's life: LISTEN, then forward every notification until it breaks.
/// True when the LISTEN was in place (so the next attempt starts after a short pause).
async fn listen_once(pool: &Pool, tx: &UnboundedSender<Heard>) -> bool {
    let Ok(Ok((client, mut connection))) =
        tokio::time::timeout(pool.deadline(), pool.connect_raw()).await
    else {
        return false;
    };
    let sql = format!("LISTEN {}", pool.table.channel);
    let listen = client.batch_execute(&sql);
    tokio::pin!(listen);
    let mut listening = false;
    let deadline = tokio::time::sleep(pool.deadline());
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if tx.send(Heard::Settled(n.payload().to_string())).is_err() {
                        return listening;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return listening,
            },
            done = &mut listen, if !listening => {
                if done.is_err() {
                    return false;
                }
                listening = true;
                // Whatever settled before the LISTEN took effect: look again.
                if tx.send(Heard::Settled(String::new())).is_err() {
                    return true;
                }
            },
            _ = &mut deadline, if !listening => return false,
        }
    }
}
