//! Time. Record times (`createdAt`, `updatedAt`, `ttlMs` expiry) are wall-clock epoch
//! milliseconds. Leases are timed on a clock that no wall-clock step can move.
//!
//! A lease compares times taken in different processes, so its clock must be one that
//! every process on the host shares, and that an NTP step, `date -s`, or a VM or laptop
//! resuming does not move:
//! - Linux: `CLOCK_MONOTONIC`, identified by the boot id
//!   (`/proc/sys/kernel/random/boot_id`), so a reboot ends every lease. Not
//!   `CLOCK_BOOTTIME`: while a machine sleeps, the lease's owner is frozen too and cannot
//!   renew; BOOTTIME would count the sleep, so on resume every live lease would look
//!   expired and a second process could take over an owner that is still running.
//!   MONOTONIC stops during sleep, so a lease keeps the time it had left.
//! - macOS: `CLOCK_UPTIME_RAW` (also stops during sleep), identified by the boot session
//!   UUID (`kern.bootsessionuuid`).
//! - Elsewhere, or when the boot id cannot be read: the wall clock (`lease_expires_at`).
//!
//! One caveat: Linux time namespaces (`unshare --time`) offset CLOCK_MONOTONIC per
//! namespace; processes in different time namespaces must not share a store file.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// INTERNAL, for this package's tests only, and only in a build with the `test-hooks`
/// feature: `IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS` moves this process's wall clock
/// (as the store sees it) by that many ms, standing in for a wall-clock step that a test
/// cannot make to the real clock. Read once.
#[cfg(feature = "test-hooks")]
fn wall_offset_ms() -> i64 {
    static OFFSET: OnceLock<i64> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var("IDEMPOTENT_TOOLS_TEST_WALL_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// What users install: the wall clock as it is.
#[cfg(not(feature = "test-hooks"))]
fn wall_offset_ms() -> i64 {
    0
}

/// Wall-clock time in epoch milliseconds.
pub fn now_ms() -> i64 {
    let system = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    system + wall_offset_ms()
}

/// A reading of the host's lease clock: its identity (readings of clocks with different
/// ids cannot be compared: a reboot started a new one) and its time in ms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseClock {
    pub id: &'static str,
    pub ms: i64,
}

/// One moment, as the store's decisions need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Now {
    pub wall: i64,
    /// The host's lease clock; `None` where leases are timed on the wall clock.
    pub lease: Option<LeaseClock>,
}

impl Now {
    /// This host's wall clock and lease clock.
    pub fn current() -> Self {
        Now {
            wall: now_ms(),
            lease: lease_clock(),
        }
    }
}

/// A moment on the wall clock alone (Redis: the server's TIME).
impl From<i64> for Now {
    fn from(wall: i64) -> Self {
        Now { wall, lease: None }
    }
}

impl From<&Now> for Now {
    fn from(now: &Now) -> Self {
        now.clone()
    }
}

fn lease_clock() -> Option<LeaseClock> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    let id = ID
        .get_or_init(|| platform::boot_id().map(|boot| format!("{}:{boot}", platform::CLOCK_NAME)))
        .as_deref()?;
    Some(LeaseClock {
        id,
        ms: platform::monotonic_ms()?,
    })
}

#[cfg(target_os = "linux")]
mod platform {
    pub const CLOCK_NAME: &str = "linux-monotonic";

    pub fn boot_id() -> Option<String> {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let id = text.trim();
        (!id.is_empty()).then(|| id.to_string())
    }

    pub fn monotonic_ms() -> Option<i64> {
        super::clock_ms(libc::CLOCK_MONOTONIC)
    }
}

#[cfg(target_os = "macos")]
mod platform {
    pub const CLOCK_NAME: &str = "macos-uptime-raw";

    pub fn boot_id() -> Option<String> {
        let mut buf = [0u8; 128];
        let mut len = buf.len();
        // SAFETY: the name is NUL-terminated, `buf` has `len` writable bytes, no new value.
        let rc = unsafe {
            libc::sysctlbyname(
                c"kern.bootsessionuuid".as_ptr(),
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return None;
        }
        let text = std::str::from_utf8(&buf[..len.min(buf.len())]).ok()?;
        let id = text.trim_end_matches('\0').trim();
        (!id.is_empty()).then(|| id.to_string())
    }

    pub fn monotonic_ms() -> Option<i64> {
        super::clock_ms(libc::CLOCK_UPTIME_RAW)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod platform {
    pub const CLOCK_NAME: &str = "none";

    pub fn boot_id() -> Option<String> {
        None
    }

    pub fn monotonic_ms() -> Option<i64> {
        None
    }
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
#[allow(clippy::useless_conversion)] // time_t and c_long are i32 on some 32-bit targets
fn clock_ms(clock: libc::clockid_t) -> Option<i64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| i64::from(ts.tv_sec) * 1000 + i64::from(ts.tv_nsec) / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn linux_leases_use_the_monotonic_clock_of_this_boot() {
        let a = Now::current().lease.expect("a lease clock on Linux");
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = Now::current().lease.unwrap();
        assert!(a.id.starts_with("linux-monotonic:"), "{}", a.id);
        assert_eq!(a.id, b.id);
        assert!(b.ms >= a.ms + 5);
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert!(a.id.ends_with(boot.trim()));
    }
}
