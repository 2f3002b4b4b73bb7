//! Figures of the current process and its host, cheap enough to take at every record:
//! resident memory and CPU use of the process and host RAM use (sysinfo), and the bytes in
//! use by the C heap (glibc's `mallinfo2`), which on CPU is where tensors live.

use sysinfo::{MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use crate::model::memory::{percent, SystemStats};

/// Samples this process; CPU use is measured between consecutive samples.
pub struct ProcessSampler {
    system: System,
    pid: Pid,
    sampled_before: bool,
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
            pid: Pid::from_u32(std::process::id()),
            sampled_before: false,
        }
    }

    /// The process's figures now; CPU use is `None` on the first sample.
    pub fn sample(&mut self) -> SystemStats {
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            false,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        self.system
            .refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram());
        let process = self.system.process(self.pid);
        let cpu_percent = process
            .filter(|_| self.sampled_before)
            .map(|p| f64::from(p.cpu_usage()));
        self.sampled_before = true;
        let total = self.system.total_memory();
        SystemStats {
            rss_bytes: process.map(|p| p.memory()),
            heap_bytes: heap_in_use(),
            cpu_percent,
            ram_percent: (total > 0).then(|| percent(self.system.used_memory(), total)),
        }
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

    #[test]
    fn heap_grows_with_a_large_allocation_and_shrinks_after() {
        let before = heap_in_use().unwrap();
        let block = vec![1u8; 64 << 20];
        let during = heap_in_use().unwrap();
        assert!(during >= before + (64 << 20), "{before} -> {during}");
        drop(block);
        let after = heap_in_use().unwrap();
        assert!(after < during - (32 << 20), "{during} -> {after}");
    }

    #[test]
    fn samples_have_rss_and_cpu_from_the_second_on() {
        let mut sampler = ProcessSampler::new();
        let first = sampler.sample();
        assert!(first.rss_bytes.unwrap() > 1 << 20);
        assert!(first.cpu_percent.is_none());
        let second = sampler.sample();
        assert!(second.cpu_percent.is_some());
        assert!((0.0..=100.0).contains(&second.ram_percent.unwrap()));
    }
}
