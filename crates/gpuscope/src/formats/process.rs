//! Figures of the current process and its host, cheap enough to take at every record:
//! resident memory and CPU time of the process, host RAM use, and the bytes in use by the
//! C heap (glibc's `mallinfo2`), which on CPU is where tensors live.
//!
//! On Linux the process figures are read directly (`/proc/self/statm`, `getrusage`): a
//! sysinfo process refresh reads several /proc files and was measured at 0.2–1 ms per
//! call, most of a memory record's budget. Host RAM comes from sysinfo everywhere, and the
//! process figures too off Linux.

use std::time::Instant;

use sysinfo::{MemoryRefreshKind, System};

use crate::model::memory::{percent, SystemStats};

/// Samples this process; CPU use is measured between consecutive samples.
pub struct ProcessSampler {
    system: System,
    previous: Option<(Instant, f64)>,
}

impl Default for ProcessSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessSampler {
    /// A sampler for the calling process.
    pub fn new() -> Self {
        ProcessSampler {
            system: System::new(),
            previous: None,
        }
    }

    /// The process's figures now; CPU use is `None` on the first sample.
    pub fn sample(&mut self) -> SystemStats {
        let now = Instant::now();
        let cpu_seconds = this_process::cpu_seconds();
        let cpu_percent = match (self.previous, cpu_seconds) {
            (Some((then, before)), Some(cpu)) => {
                let wall = now.duration_since(then).as_secs_f64();
                (wall > 0.0).then(|| (cpu - before) * 100.0 / wall)
            }
            _ => None,
        };
        self.previous = cpu_seconds.map(|cpu| (now, cpu));
        self.system
            .refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram());
        let total = self.system.total_memory();
        SystemStats {
            rss_bytes: this_process::rss_bytes(),
            heap_bytes: heap_in_use(),
            cpu_percent,
            ram_percent: (total > 0).then(|| percent(self.system.used_memory(), total)),
            ram_total_bytes: (total > 0).then_some(total),
        }
    }
}

#[cfg(target_os = "linux")]
mod this_process {
    /// Resident set size from `/proc/self/statm` (second field, in pages).
    pub fn rss_bytes() -> Option<u64> {
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        // SAFETY: sysconf only reads a system constant.
        #[allow(unsafe_code)]
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(page).ok().map(|page| pages * page)
    }

    /// User plus system CPU time of the whole process, in seconds.
    pub fn cpu_seconds() -> Option<f64> {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
        // SAFETY: getrusage fills the struct it is given and nothing else.
        #[allow(unsafe_code)]
        let usage = unsafe {
            if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
                return None;
            }
            usage.assume_init()
        };
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
    }
}

#[cfg(not(target_os = "linux"))]
mod this_process {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

    fn refreshed() -> (System, Pid) {
        let pid = Pid::from_u32(std::process::id());
        let mut system = System::new();
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[pid]),
            false,
            ProcessRefreshKind::nothing().with_memory(),
        );
        (system, pid)
    }

    pub fn rss_bytes() -> Option<u64> {
        let (system, pid) = refreshed();
        system.process(pid).map(|p| p.memory())
    }

    pub fn cpu_seconds() -> Option<f64> {
        let (system, pid) = refreshed();
        system
            .process(pid)
            .map(|p| p.accumulated_cpu_time() as f64 / 1000.0)
    }
}

/// Bytes the C allocator has handed out and not taken back: small-chunk arenas in use plus
/// mmap-ed large chunks (where tensor storages go). `None` off glibc.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn heap_in_use() -> Option<u64> {
    // SAFETY: mallinfo2 only reads the allocator's own statistics and returns a plain struct.
    #[allow(unsafe_code)]
    let info = unsafe { libc::mallinfo2() };
    Some((info.uordblks + info.hblkhd) as u64)
}

/// Bytes the C allocator has handed out; not available on this platform.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn heap_in_use() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // The memory figures are checked in tests/host_figures.rs, a test binary of their own:
    // they are process-wide, and parallel tests here would blur them.

    #[test]
    fn samples_have_rss_and_cpu_from_the_second_on() {
        let mut sampler = ProcessSampler::new();
        let first = sampler.sample();
        assert!(first.rss_bytes.unwrap() > 1 << 20);
        assert!(first.cpu_percent.is_none());
        // Burn CPU for a while: one busy thread is close to 100 % of a core.
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < 200 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let second = sampler.sample();
        let cpu = second.cpu_percent.unwrap();
        assert!((20.0..=250.0).contains(&cpu), "{cpu}");
        assert!((0.0..=100.0).contains(&second.ram_percent.unwrap()));
        // The host's RAM, in bytes: more than this process holds.
        assert!(second.ram_total_bytes.unwrap() > second.rss_bytes.unwrap());
    }
}
