//! What a piece of GPU work is, by its name, as HTA 0.5 classifies it: NCCL kernels are
//! communication, copies and memsets are memory, synchronisation is neither, the rest is
//! computation.

use crate::model::words::words;

words! {
    /// The type of a piece of GPU work, named as HTA prints it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum KernelType {
        /// Computation kernels.
        Computation = "COMPUTATION",
        /// Collective communication (NCCL) kernels.
        Communication = "COMMUNICATION",
        /// Copies and memsets.
        Memory = "MEMORY",
        /// Synchronisation and copies named unusually: counted as busy, but not as compute.
        Other = "OTHER",
    }
}

impl KernelType {
    /// The type of the GPU work called `name`.
    pub fn of(name: &str) -> KernelType {
        if name.starts_with("nccl") && name[4..].contains("Kernel") {
            KernelType::Communication
        } else if name.starts_with("Memcpy")
            || name.starts_with("Memset")
            || name.starts_with("dma")
        {
            KernelType::Memory
        } else if name.contains("Memcpy") || name.contains("Sync") {
            KernelType::Other
        } else {
            KernelType::Computation
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_classify_as_hta_does() {
        assert_eq!(
            KernelType::of("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"),
            KernelType::Communication
        );
        assert_eq!(
            KernelType::of("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)"),
            KernelType::Communication
        );
        assert_eq!(
            KernelType::of("Memcpy HtoD (Pageable -> Device)"),
            KernelType::Memory
        );
        assert_eq!(KernelType::of("Memset (Device)"), KernelType::Memory);
        assert_eq!(KernelType::of("Stream Sync"), KernelType::Other);
        assert_eq!(
            KernelType::of("void at::native::vectorized_elementwise_kernel<4>"),
            KernelType::Computation
        );
        // Only a leading "nccl…Kernel" is communication.
        assert_eq!(KernelType::of("my_ncclKernel"), KernelType::Computation);
    }
}
