//! The host's figures and a process tree's, through sysinfo: CPU and RAM of the machine,
//! and for `gpuscope run` the command's process and all its descendants (RSS, CPU, and the
//! GPU memory the GPUs list for their pids). [`crate::formats::process::ProcessSampler`] measures the
//! calling process only, cheaply, inside training; this one walks the process table.
//!
//! GPUs report pids in the host's pid namespace. Inside a container those pids are not in
//! this process table: they are counted as not visible rather than matched by accident.

use std::collections::{HashMap, HashSet};

use sysinfo::{MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use crate::model::gpu::{GpuSample, HostSample, TreeSample};

/// Samples the host, and a process tree when asked.
pub struct HostSampler {
    system: System,
    cpu_primed: bool,
    processes_primed: bool,
}

impl Default for HostSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl HostSampler {
    /// A sampler; CPU figures start from the second sample.
    pub fn new() -> Self {
        HostSampler {
            system: System::new(),
            cpu_primed: false,
            processes_primed: false,
        }
    }

    /// CPU use since the previous call (`None` on the first) and RAM now.
    pub fn host(&mut self) -> HostSample {
        self.system.refresh_cpu_usage();
        self.system
            .refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram());
        let cpu = self
            .cpu_primed
            .then(|| f64::from(self.system.global_cpu_usage()));
        self.cpu_primed = true;
        let total = self.system.total_memory();
        HostSample {
            cpu_percent: cpu,
            ram_used_bytes: (total > 0).then(|| self.system.used_memory()),
            ram_total_bytes: (total > 0).then_some(total),
        }
    }

    /// Rereads the process table (memory and CPU of every process).
    pub fn refresh_processes(&mut self) {
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing().with_memory().with_cpu(),
        );
    }

    /// Fills in names the GPU source did not give (NVML gives none) from the process table.
    pub fn name_processes(&self, gpus: &mut [GpuSample]) {
        for process in gpus.iter_mut().flat_map(|g| g.processes.iter_mut()) {
            if process.name.is_none() {
                process.name = self
                    .system
                    .process(Pid::from_u32(process.pid))
                    .map(|p| p.name().to_string_lossy().into_owned());
            }
        }
    }

    /// The tree under `root` as of the last [`Self::refresh_processes`]; CPU from the
    /// second refresh on. `None` once the root is gone.
    pub fn tree(&mut self, root: u32, gpus: &[GpuSample]) -> Option<TreeSample> {
        let pids = self.descendants(root);
        if pids.is_empty() {
            return None;
        }
        let cpu_ready = self.processes_primed;
        self.processes_primed = true;
        let members: Vec<_> = pids
            .iter()
            .filter_map(|&pid| self.system.process(Pid::from_u32(pid)))
            .collect();
        let in_tree: HashSet<u32> = pids.iter().copied().collect();
        let gpu_processes: Vec<_> = gpus.iter().flat_map(|g| &g.processes).collect();
        let ours: Vec<_> = gpu_processes
            .iter()
            .filter(|p| in_tree.contains(&p.pid))
            .collect();
        let unreported = !ours.is_empty() && ours.iter().all(|p| p.used_memory_bytes.is_none());
        let gpu_memory_bytes = if gpus.is_empty() || unreported {
            None
        } else {
            Some(ours.iter().filter_map(|p| p.used_memory_bytes).sum())
        };
        let gpu_pids_not_visible = gpu_processes
            .iter()
            .filter(|p| self.system.process(Pid::from_u32(p.pid)).is_none())
            .count() as u32;
        Some(TreeSample {
            root_pid: root,
            rss_bytes: Some(members.iter().map(|p| p.memory()).sum()),
            cpu_percent: cpu_ready.then(|| members.iter().map(|p| f64::from(p.cpu_usage())).sum()),
            gpu_memory_bytes,
            gpu_pids_not_visible,
            pids,
        })
    }

    /// `root` and every process below it, root first; empty if `root` is gone.
    fn descendants(&self, root: u32) -> Vec<u32> {
        let root = Pid::from_u32(root);
        if self.system.process(root).is_none() {
            return Vec::new();
        }
        let mut children: HashMap<Pid, Vec<Pid>> = HashMap::new();
        for (pid, process) in self.system.processes() {
            if process.thread_kind().is_none() {
                if let Some(parent) = process.parent() {
                    children.entry(parent).or_default().push(*pid);
                }
            }
        }
        let mut tree = vec![root];
        let mut next = 0;
        while next < tree.len() {
            if let Some(kids) = children.get(&tree[next]) {
                tree.extend(
                    kids.iter()
                        .filter(|k| !tree.contains(k))
                        .collect::<Vec<_>>(),
                );
            }
            next += 1;
        }
        tree.into_iter().map(Pid::as_u32).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpu::GpuProcess;

    #[test]
    fn host_figures_are_plausible() {
        let mut sampler = HostSampler::new();
        let first = sampler.host();
        assert!(first.cpu_percent.is_none());
        assert!(first.ram_used_bytes.unwrap() <= first.ram_total_bytes.unwrap());
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let cpu = sampler.host().cpu_percent.unwrap();
        assert!((0.0..=100.0).contains(&cpu), "{cpu}");
    }

    #[test]
    fn the_tree_of_this_process_holds_its_child_and_the_gpu_memory_of_its_pids() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let gpus = vec![GpuSample {
            processes: vec![
                GpuProcess {
                    pid: child.id(),
                    name: None,
                    used_memory_bytes: Some(100),
                },
                // A pid beyond pid_max: a host pid seen from a container.
                GpuProcess {
                    pid: 4_194_305,
                    name: None,
                    used_memory_bytes: Some(7),
                },
            ],
            ..GpuSample::default()
        }];
        let mut sampler = HostSampler::new();
        sampler.refresh_processes();
        let tree = sampler.tree(me, &gpus).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(tree.pids[0], me);
        assert!(tree.pids.contains(&child.id()));
        assert!(tree.rss_bytes.unwrap() > 1 << 20);
        assert!(tree.cpu_percent.is_none());
        assert_eq!(tree.gpu_memory_bytes, Some(100));
        assert_eq!(tree.gpu_pids_not_visible, 1);
        assert!(sampler.tree(4_194_305, &gpus).is_none());
    }
}
