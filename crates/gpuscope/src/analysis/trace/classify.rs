//! What a name says in a trace: one table of rules ([`RULES`]) that types GPU work by its
//! name and tells what a runtime or driver call does (launch a kernel, launch a copy,
//! replay a CUDA graph, wait for the device, begin or end a stream capture). Every
//! analysis that classifies by name asks here; none keeps a list of its own.
//!
//! GPU work is typed as HTA 0.5 types it — `^nccl.*Kernel` communication, `^Memcpy`,
//! `^Memset`, `^dma` memory, names containing `Memcpy` or `Sync` other, the rest
//! computation — so the breakdowns compare with HTA's. One departure: collectives HTA does
//! not know (RCCL's MSCCL kernels, vLLM's custom all-reduce and its copies, NVSHMEM's
//! collectives on a stream, DeepEP's dispatch and combine) are communication here, where
//! HTA counts them as computation (README, "How GPU work is classified").
//!
//! Each rule says in a comment where its names were seen. Rules are tried in order and
//! the first that matches wins; GPU work and calls are matched only against rules of their
//! own class, so a call's name never types a kernel.

use rustc_hash::FxHashSet;

use crate::model::trace::Trace;
use crate::model::words::words;

words! {
    /// The type of a piece of GPU work, named as HTA prints it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum KernelType {
        /// Computation kernels.
        Computation = "COMPUTATION",
        /// Collective and point-to-point communication kernels (NCCL, RCCL and the like).
        Communication = "COMMUNICATION",
        /// Copies and memsets.
        Memory = "MEMORY",
        /// Synchronisation and copies named unusually: counted as busy, but not as compute.
        Other = "OTHER",
    }
}

/// What a runtime or driver call does, as far as the analyses care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    /// Launches one kernel; its kernel carries the call's correlation id.
    KernelLaunch,
    /// Launches one copy on a stream (none at all for 0 bytes). It returns only when the
    /// copy is done if host memory is pageable or the copy goes to the host.
    CopyLaunch,
    /// Launches one memset on a stream (none at all for 0 bytes).
    MemsetLaunch,
    /// Replays a CUDA (HIP) graph: every kernel, copy and memset of the graph carries this
    /// one call's correlation id, so no kernel has a launch of its own.
    GraphLaunch,
    /// Waits for all work on the device.
    DeviceSync,
    /// Waits for the work on one stream, or up to one event.
    StreamSync,
    /// Copies or sets memory, returning when done.
    Copy,
    /// Allocates or frees device or pinned host memory, or maps it (`cudaFree` waits for
    /// the device first).
    Allocation,
    /// Begins a stream capture: what is launched until its end is recorded into a graph,
    /// not run.
    CaptureBegin,
    /// Ends a stream capture.
    CaptureEnd,
}

/// What a rule says a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// GPU work of this type.
    Work(KernelType),
    /// A runtime or driver call that does this.
    Call(Call),
}

/// How a rule's names are matched against a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The name is one of them.
    Exact,
    /// The name starts with one of them (calls Kineto records with a version suffix,
    /// `cudaStreamBeginCapture_v2`).
    Prefix,
    /// The name contains one of them anywhere (demangled names start with a return type
    /// and namespaces: `void vllm::cross_device_reduce_1stage<...>`).
    Contains,
    /// The name starts with one of them and contains this further on (HTA's regular
    /// expression `^nccl.*Kernel`).
    PrefixThen(&'static str),
}

/// One rule of the table.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// What a matching name is.
    pub class: Class,
    /// How the names match.
    pub how: Match,
    /// The names (or prefixes, or fragments) it matches.
    pub names: &'static [&'static str],
}

impl Rule {
    /// Whether `name` matches this rule.
    pub fn matches(&self, name: &str) -> bool {
        self.names.iter().any(|n| match self.how {
            Match::Exact => name == *n,
            Match::Prefix => name.starts_with(n),
            Match::Contains => name.contains(n),
            Match::PrefixThen(then) => name.strip_prefix(n).is_some_and(|r| r.contains(then)),
        })
    }
}

use Class::{Call as C, Work as W};
use KernelType::{Communication, Memory, Other};

/// Every rule, in the order they are tried (the first that matches wins).
pub const RULES: &[Rule] = &[
    // HTA 0.5's communication rule (`^nccl.*Kernel`). NCCL before 2.19 names its kernels
    // `ncclKernel_*` (`ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)` in the shared
    // rank0_nccl_data trace), NCCL 2.19 on `ncclDevKernel_*`
    // (`ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)`). RCCL on
    // ROCm keeps NCCL's names: `ncclDevKernel_Generic(ncclDevComm*, channelMasks,
    // ncclWork*)` and `ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)` in rocprof
    // and PyTorch ROCm traces.
    Rule {
        class: W(Communication),
        how: Match::PrefixThen("Kernel"),
        names: &["nccl"],
    },
    // RCCL's MSCCL kernels, beyond HTA: `mscclKernel_Sum_half_Simple_false(ncclDevComm*,
    // mscclAlgo*, mscclWork*)` in rocprof output, `mscclKernel_Sum_hip_bfloat16_Simple` in
    // vLLM ROCm traces (RCCL's msccl_kernel.h: `mscclKernel_##devredop##_##type##_##proto`).
    Rule {
        class: W(Communication),
        how: Match::Prefix,
        names: &["mscclKernel_"],
    },
    // Custom all-reduce, beyond HTA: vLLM's csrc/custom_all_reduce.cuh
    // (`void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, ...)` in
    // vLLM traces) and its copies in SGLang (`sglang::cross_device_reduce_1stage<__half, 8>`)
    // and AITER on ROCm (`aiter::cross_device_reduce_2stage<bf16,8,false>`).
    Rule {
        class: W(Communication),
        how: Match::Contains,
        names: &["cross_device_reduce_1stage", "cross_device_reduce_2stage"],
    },
    // NVSHMEM's collectives on a stream, beyond HTA: src/host/stream/coll/ defines
    // `rdxn_on_stream_kernel`, `fcollect_on_stream_kernel`, `broadcast_on_stream_kernel`,
    // `alltoall_on_stream_kernel`, `barrier_on_stream_kernel_threadgroup` and
    // `sync_on_stream_kernel_threadgroup` (rocSHMEM: `rocshmem_reduce_on_stream_kernel`).
    Rule {
        class: W(Communication),
        how: Match::Contains,
        names: &["_on_stream_kernel"],
    },
    // DeepEP's expert-parallel dispatch and combine, beyond HTA: the kernels of
    // csrc/kernels/intranode.cu, internode.cu and internode_ll.cu
    // (`void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, ...)` in SGLang
    // traces). Its layout kernels (`deep_ep::layout::`) compute locally and stay computation.
    Rule {
        class: W(Communication),
        how: Match::Contains,
        names: &[
            "deep_ep::intranode::",
            "deep_ep::internode::",
            "deep_ep::internode_ll::",
        ],
    },
    // HTA 0.5's memory rule: Kineto names copies `Memcpy HtoD (Pageable -> Device)` and
    // memsets `Memset (Device)`, on CUDA and ROCm alike (every shared trace); `dma` is HTA's
    // and not seen in them.
    Rule {
        class: W(Memory),
        how: Match::Prefix,
        names: &["Memcpy", "Memset", "dma"],
    },
    // HTA 0.5's other rule: the synchronisations Kineto records on a stream (`Stream Sync`,
    // `Context Sync`, `Event Sync` in the shared AlexNet and event_sync traces; `Stream
    // Wait Event` has no `Sync` and is computation, as in HTA), and copies named unusually.
    Rule {
        class: W(Other),
        how: Match::Contains,
        names: &["Memcpy", "Sync"],
    },
    // Kernel launches. CUDA runtime: Kineto's CUPTI registry (CuptiCbidRegistry.cpp)
    // correlates cudaLaunchKernel (every shared CUDA trace), cudaLaunchKernelExC
    // (rank0_nccl_data) and the cooperative ones; driver: cuLaunchKernel (Triton,
    // triton_example) and cuLaunchKernelEx (newer Triton and CUDA 12, the shared H200
    // trace); cuLaunchCooperativeKernel is the driver's counterpart of the cooperative
    // launch (cuda.h). HIP: Kineto's roctracer activities (RoctracerActivity_inl.h) correlate
    // hipLaunchKernel, hipExtLaunchKernel, hipLaunchCooperativeKernel,
    // hipHccModuleLaunchKernel, hipModuleLaunchKernel and hipExtModuleLaunchKernel
    // (amd_mi250_rocm has hipLaunchKernel and hipExtModuleLaunchKernel).
    Rule {
        class: C(Call::KernelLaunch),
        how: Match::Exact,
        names: &[
            "cudaLaunchKernel",
            "cudaLaunchKernelExC",
            "cudaLaunchCooperativeKernel",
            "cudaLaunchCooperativeKernelMultiDevice",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cuLaunchCooperativeKernel",
            "hipLaunchKernel",
            "hipExtLaunchKernel",
            "hipLaunchCooperativeKernel",
            "hipHccModuleLaunchKernel",
            "hipModuleLaunchKernel",
            "hipExtModuleLaunchKernel",
        ],
    },
    // Copies launched on a stream: cudaMemcpyAsync (every shared CUDA trace),
    // hipMemcpyWithStream (amd_mi250_rocm), hipMemcpyAsync (Kineto's roctracer
    // activities). The synchronous cudaMemcpy is a copy, below, as HTA leaves it out of its
    // launch statistics.
    Rule {
        class: C(Call::CopyLaunch),
        how: Match::Exact,
        names: &["cudaMemcpyAsync", "hipMemcpyAsync", "hipMemcpyWithStream"],
    },
    // Memsets launched on a stream: cudaMemsetAsync (every shared CUDA trace) and HIP's
    // hipMemsetAsync.
    Rule {
        class: C(Call::MemsetLaunch),
        how: Match::Exact,
        names: &["cudaMemsetAsync", "hipMemsetAsync"],
    },
    // Graph replays: cudaGraphLaunch (Kineto's CUPTI registry; 70 in the shared
    // rank0_nccl_negative_queue trace, a torch.compile run), hipGraphLaunch (HIP's, a
    // kernel-launch API for roctracer), cuGraphLaunch (the driver's, cuda.h).
    Rule {
        class: C(Call::GraphLaunch),
        how: Match::Exact,
        names: &["cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"],
    },
    // Device-wide waits: cudaDeviceSynchronize (torch.profiler makes one as it stops: in
    // every shared CUDA trace with GPU work), hipDeviceSynchronize (amd_mi250_rocm),
    // cuCtxSynchronize (the driver's, cuda.h).
    Rule {
        class: C(Call::DeviceSync),
        how: Match::Exact,
        names: &[
            "cudaDeviceSynchronize",
            "cuCtxSynchronize",
            "hipDeviceSynchronize",
        ],
    },
    // Waits on one stream or event: cudaStreamSynchronize (the shared ResNet-50, AlexNet,
    // rank0_nccl_negative_queue and H200 traces), cudaEventSynchronize (rank0_nccl_data),
    // their driver (cuda.h) and HIP counterparts.
    Rule {
        class: C(Call::StreamSync),
        how: Match::Exact,
        names: &[
            "cudaStreamSynchronize",
            "cudaEventSynchronize",
            "cuStreamSynchronize",
            "cuEventSynchronize",
            "hipStreamSynchronize",
            "hipEventSynchronize",
        ],
    },
    // Copies that return when done: cudaMemcpy (the shared cupti_profiler_counters trace),
    // the runtime's
    // other synchronous copies (cuda_runtime_api.h), HIP's hipMemcpy.
    Rule {
        class: C(Call::Copy),
        how: Match::Exact,
        names: &[
            "cudaMemcpy",
            "cudaMemcpy2D",
            "cudaMemcpy3D",
            "cudaMemcpyPeer",
            "cudaMemcpyToSymbol",
            "cudaMemcpyFromSymbol",
            "cudaMemset",
            "hipMemcpy",
            "hipMemset",
        ],
    },
    // Memory management: cudaMalloc, cudaFree and cudaHostAlloc (the caching allocator and
    // pinned memory, in the shared AlexNet and cupti_profiler_counters traces), the
    // runtime's other allocation calls (cuda_runtime_api.h; cudaMallocAsync and
    // cudaFreeAsync for PyTorch's `backend:cudaMallocAsync`), HIP's. The driver's by prefix
    // for CUPTI's versioned names (`cuMemAlloc_v2`), with the virtual-memory calls of
    // PyTorch's expandable segments (c10's CUDACachingAllocator: cuMemCreate, cuMemMap,
    // cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressReserve).
    Rule {
        class: C(Call::Allocation),
        how: Match::Exact,
        names: &[
            "cudaMalloc",
            "cudaFree",
            "cudaMallocHost",
            "cudaFreeHost",
            "cudaHostAlloc",
            "cudaMallocManaged",
            "cudaMallocAsync",
            "cudaFreeAsync",
            "cudaHostRegister",
            "cudaHostUnregister",
            "hipMalloc",
            "hipFree",
            "hipHostMalloc",
            "hipHostFree",
            "hipMallocAsync",
            "hipFreeAsync",
        ],
    },
    Rule {
        class: C(Call::Allocation),
        how: Match::Prefix,
        names: &[
            "cuMemAlloc",
            "cuMemFree",
            "cuMemCreate",
            "cuMemMap",
            "cuMemSetAccess",
            "cuMemUnmap",
            "cuMemRelease",
            "cuMemAddress",
        ],
    },
    // Stream captures (CUDA graphs being recorded): the runtime's and driver's calls, by
    // prefix for CUPTI's versioned names (`cudaStreamBeginCapture_v10000`), and HIP's.
    Rule {
        class: C(Call::CaptureBegin),
        how: Match::Prefix,
        names: &[
            "cudaStreamBeginCapture",
            "cuStreamBeginCapture",
            "hipStreamBeginCapture",
        ],
    },
    Rule {
        class: C(Call::CaptureEnd),
        how: Match::Prefix,
        names: &[
            "cudaStreamEndCapture",
            "cuStreamEndCapture",
            "hipStreamEndCapture",
        ],
    },
];

impl KernelType {
    /// The type of the GPU work called `name`: that of the first work rule it matches,
    /// computation when none does.
    pub fn of(name: &str) -> KernelType {
        RULES
            .iter()
            .find_map(|r| match r.class {
                Class::Work(t) if r.matches(name) => Some(t),
                _ => None,
            })
            .unwrap_or(KernelType::Computation)
    }
}

words! {
    /// Which collective a piece of communication is, as its name tells (for advice: each
    /// has its own remedy).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum CollectiveKind {
        /// All-reduce: DDP's gradient synchronisation.
        AllReduce = "all_reduce",
        /// All-gather: FSDP's and ZeRO's parameter gathering.
        AllGather = "all_gather",
        /// Reduce-scatter: FSDP's and ZeRO's gradient scattering.
        ReduceScatter = "reduce_scatter",
        /// All-to-all and point-to-point exchanges: sharded embeddings, mixture-of-experts
        /// dispatch, pipeline stages.
        Exchange = "exchange",
        /// Broadcast: DDP's buffer synchronisation, parameters sent from one rank.
        Broadcast = "broadcast",
        /// A name that says none of these (RCCL's `ncclDevKernel_Generic`, a reduce, a
        /// barrier).
        Other = "other",
    }
}

impl CollectiveKind {
    /// The collective a communication kernel (`ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t`,
    /// `ncclDevKernel_AllReduce_Sum_f32_RING_LL`, and the non-NCCL kernels of [`RULES`])
    /// or a CPU collective (`gloo:all_reduce`) is, by its name.
    pub fn of(name: &str) -> CollectiveKind {
        // NCCL writes `AllReduce`, gloo `all_reduce`, NVSHMEM `alltoall`: one spelling.
        let name: String = name
            .chars()
            .filter(|&c| c != '_')
            .flat_map(char::to_lowercase)
            .collect();
        let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
        if has(&["reducescatter"]) {
            CollectiveKind::ReduceScatter
        } else if has(&["allgather", "fcollect"]) {
            CollectiveKind::AllGather
        } else if has(&["allreduce", "crossdevicereduce", "rdxn"]) {
            CollectiveKind::AllReduce
        } else if has(&["sendrecv", "alltoall", "deepep", "send", "recv"]) {
            CollectiveKind::Exchange
        } else if has(&["broadcast"]) {
            CollectiveKind::Broadcast
        } else {
            CollectiveKind::Other
        }
    }
}

/// Whether the CPU event called `name` is a collective the CPU runs itself: a
/// `record_function` range of torch.distributed's gloo or MPI process group
/// (`gloo:all_reduce`, `mpi:broadcast`), which moves CPU tensors with no GPU kernel.
pub fn is_cpu_collective(name: &str) -> bool {
    name.starts_with("gloo:") || name.starts_with("mpi:")
}

/// Whether the launch of the copy Kineto names `name` returns at once: the copy is between
/// device memories (`Memcpy DtoD (Device -> Device)`) or with pinned host memory (`Memcpy
/// HtoD (Pinned -> Device)`). With pageable host memory (`(Pageable -> Device)`, `(Device
/// -> Pageable)`: `.item()`, `.cpu()`) or host memory of unknown kind (ROCm's `(Host ->
/// Device)`), the call returns only when the copy is done.
pub fn copy_launch_returns_at_once(copy: &str) -> bool {
    copy.contains("(Device -> Device)") || copy.contains("Pinned")
}

impl Call {
    /// What the runtime or driver call `name` does; `None` for calls no rule names.
    pub fn of(name: &str) -> Option<Call> {
        RULES.iter().find_map(|r| match r.class {
            Class::Call(c) if r.matches(name) => Some(c),
            _ => None,
        })
    }

    /// The ids of the names in `trace` of calls that do one of `calls`. Exact names are
    /// looked up; names matched by prefix are searched for among all of the trace's names.
    pub fn names_in(trace: &Trace, calls: &[Call]) -> FxHashSet<u32> {
        let mut ids = FxHashSet::default();
        for rule in RULES {
            let Class::Call(c) = rule.class else {
                continue;
            };
            if !calls.contains(&c) {
                continue;
            }
            match rule.how {
                Match::Exact => ids.extend(rule.names.iter().filter_map(|n| trace.names.find(n))),
                _ => ids.extend(
                    (0..trace.names.len() as u32)
                        .filter(|&id| Call::of(trace.names.get(id)) == Some(c)),
                ),
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_are_named_by_what_they_do() {
        for (name, kind) in [
            (
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, \
                 ncclWork*)",
                CollectiveKind::Exchange,
            ),
            (
                "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
                CollectiveKind::AllReduce,
            ),
            (
                "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                CollectiveKind::AllGather,
            ),
            (
                "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                CollectiveKind::ReduceScatter,
            ),
            (
                "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)",
                CollectiveKind::Broadcast,
            ),
            ("alltoall_on_stream_kernel", CollectiveKind::Exchange),
            (
                "void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*)",
                CollectiveKind::Exchange,
            ),
            (
                "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)",
                CollectiveKind::AllReduce,
            ),
            ("gloo:all_reduce", CollectiveKind::AllReduce),
            (
                "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)",
                CollectiveKind::Other,
            ),
        ] {
            assert_eq!(CollectiveKind::of(name), kind, "{name}");
        }
        assert!(is_cpu_collective("gloo:all_reduce"));
        assert!(!is_cpu_collective("nccl:all_reduce"));
    }

    /// Each of `names` classifies as `class`.
    fn check(class: Class, names: &[&str]) {
        for name in names {
            let got = match class {
                Class::Work(_) => Class::Work(KernelType::of(name)),
                Class::Call(_) => match Call::of(name) {
                    Some(c) => Class::Call(c),
                    None => panic!("{name}: no call rule"),
                },
            };
            assert_eq!(got, class, "{name}");
        }
    }

    #[test]
    fn each_rule_classifies_its_own_names_as_it_says() {
        // No earlier rule takes a name a rule lists: each name as the rule matches it (a
        // fragment inside a longer name, not at its start).
        for rule in RULES {
            let names: Vec<String> = rule
                .names
                .iter()
                .map(|n| match rule.how {
                    Match::Exact | Match::Prefix => (*n).to_owned(),
                    Match::Contains => format!("void {n}(int)"),
                    Match::PrefixThen(then) => format!("{n}{then}"),
                })
                .collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            check(rule.class, &names);
        }
    }

    #[test]
    fn nccl_and_rccl_kernels_are_communication_as_in_hta() {
        check(
            Class::Work(Communication),
            &[
                "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                "ncclDevKernel_Generic(ncclDevComm*, channelMasks, ncclWork*)",
                "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)",
            ],
        );
        // Only a leading "nccl…Kernel" is, as HTA's `^nccl.*Kernel`.
        check(
            Class::Work(KernelType::Computation),
            &["my_ncclKernel", "nccl_helper(int)"],
        );
    }

    #[test]
    fn msccl_kernels_are_communication() {
        check(
            Class::Work(Communication),
            &[
                "mscclKernel_Sum_half_Simple_false(ncclDevComm*, mscclAlgo*, mscclWork*)",
                "mscclKernel_Sum_hip_bfloat16_Simple",
            ],
        );
    }

    #[test]
    fn custom_all_reduce_kernels_are_communication() {
        check(
            Class::Work(Communication),
            &[
                "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, \
                 vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
                "void vllm::cross_device_reduce_2stage<float, 4>(vllm::RankData*, \
                 vllm::RankSignals, vllm::Signal*, float*, int, int)",
                "void sglang::cross_device_reduce_1stage<__half, 8>(sglang::RankData*, \
                 sglang::RankSignals, sglang::Signal*, __half*, int, int)",
                "aiter::cross_device_reduce_2stage<bf16,8,false>",
            ],
        );
    }

    #[test]
    fn nvshmem_stream_collectives_are_communication() {
        check(
            Class::Work(Communication),
            &[
                "void rdxn_on_stream_kernel<float, (rdxn_ops)0>(int, float*, const float*, \
                 unsigned long, int)",
                "void alltoall_on_stream_kernel<unsigned char>(int, unsigned char*, const \
                 unsigned char*, unsigned long, int)",
                "void barrier_on_stream_kernel_threadgroup<(threadgroup_t)1>(int, int)",
                "void sync_on_stream_kernel_threadgroup<(threadgroup_t)0>(int, int)",
            ],
        );
    }

    #[test]
    fn deep_ep_dispatch_and_combine_are_communication_and_its_layout_is_not() {
        check(
            Class::Work(Communication),
            &[
                "void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, float*, int*)",
                "void deep_ep::internode_ll::combine<(bool)0, (int)6144, (int)11>(void*)",
                "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)",
                "void deep_ep::internode::combine<8, 4>(int4*, float*)",
            ],
        );
        check(
            Class::Work(KernelType::Computation),
            &["void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)"],
        );
    }

    #[test]
    fn copies_and_memsets_are_memory_as_in_hta() {
        check(
            Class::Work(Memory),
            &[
                "Memcpy HtoD (Pageable -> Device)",
                "Memcpy DtoD (Device -> Device)",
                "Memset (Device)",
                "Memset (Unknown)",
            ],
        );
    }

    #[test]
    fn synchronisation_is_other_as_in_hta() {
        check(
            Class::Work(Other),
            &[
                "Stream Sync",
                "Context Sync",
                "Event Sync",
                "cudaMemcpy peer",
            ],
        );
        check(
            Class::Work(KernelType::Computation),
            &[
                "Stream Wait Event",
                "void at::native::vectorized_elementwise_kernel<4>",
            ],
        );
    }

    #[test]
    fn kernel_launches() {
        check(
            Class::Call(Call::KernelLaunch),
            &[
                "cudaLaunchKernel",
                "cudaLaunchKernelExC",
                "cuLaunchKernel",
                "cuLaunchKernelEx",
                "hipLaunchKernel",
                "hipExtModuleLaunchKernel",
            ],
        );
        assert_eq!(Call::of("cudaLaunchKernel_ptsz"), None);
    }

    #[test]
    fn copy_and_memset_launches() {
        check(
            Class::Call(Call::CopyLaunch),
            &["cudaMemcpyAsync", "hipMemcpyWithStream"],
        );
        check(
            Class::Call(Call::MemsetLaunch),
            &["cudaMemsetAsync", "hipMemsetAsync"],
        );
        // The synchronous copy is no launch: it returns when done.
        check(Class::Call(Call::Copy), &["cudaMemcpy", "hipMemcpy"]);
    }

    #[test]
    fn waits_and_memory_management() {
        check(
            Class::Call(Call::StreamSync),
            &["cudaStreamSynchronize", "cudaEventSynchronize"],
        );
        check(
            Class::Call(Call::Allocation),
            &[
                "cudaMalloc",
                "cudaFree",
                "cudaHostAlloc",
                "cuMemAlloc_v2",
                "cuMemFree_v2",
                "cuMemUnmap",
            ],
        );
        // Polling and recording wait for nothing.
        for name in ["cudaEventQuery", "cudaStreamWaitEvent", "cudaEventRecord"] {
            assert_eq!(Call::of(name), None, "{name}");
        }
    }

    #[test]
    fn graph_launches() {
        check(
            Class::Call(Call::GraphLaunch),
            &["cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"],
        );
    }

    #[test]
    fn device_syncs() {
        check(
            Class::Call(Call::DeviceSync),
            &["cudaDeviceSynchronize", "hipDeviceSynchronize"],
        );
        assert_eq!(Call::of("cudaStreamSynchronize"), Some(Call::StreamSync));
    }

    #[test]
    fn stream_captures() {
        check(
            Class::Call(Call::CaptureBegin),
            &["cudaStreamBeginCapture_v2", "cudaStreamBeginCapture"],
        );
        check(
            Class::Call(Call::CaptureEnd),
            &["cudaStreamEndCapture", "cuStreamEndCapture"],
        );
        assert_eq!(Call::of("cudaStreamGetCaptureInfo_v2"), None);
    }

    #[test]
    fn call_names_are_found_in_a_trace() {
        let mut t = Trace::default();
        let launch = t.names.intern("cudaLaunchKernel");
        let begin = t.names.intern("cudaStreamBeginCapture_v10000");
        t.names.intern("aten::mm");
        assert_eq!(
            Call::names_in(&t, &[Call::KernelLaunch, Call::CaptureBegin]),
            FxHashSet::from_iter([launch, begin])
        );
        assert!(Call::names_in(&t, &[Call::GraphLaunch]).is_empty());
    }
}
