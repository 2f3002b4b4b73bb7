//! The native `gpuscope` binary: all the work is in the library, shared with the
//! pip-installed command.

// glibc's malloc hands large buffers back to the kernel and faults fresh zeroed pages in
// again as a report's records grow; mimalloc keeps them, which made reading a large run
// markedly faster (bench/README.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(gpuscope_cli::run(std::env::args_os()));
}
