//! Call sites: where in the user's code an allocation came from. Torch records stacks
//! innermost first, native frames and all; the site is the first frame of the user's own
//! Python code (not torch's, not an installed package's, not the standard library's),
//! plus more of the user's frames outward when asked for.

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::model::interned::Names;
use crate::model::snapshot::{StackId, Stacks, NO_STACK};

/// Site of allocations whose stack was not recorded (made before
/// `_record_memory_history` was turned on, or with stacks off).
pub const NO_STACK_SITE: &str = "(no stack recorded)";

/// Site of stacks with no Python frame and no operator to name.
pub const NATIVE_SITE: &str = "(no Python frame)";

/// Native functions that allocate a library's workspace, and the site it is named by:
/// torch gives each cuBLAS handle (one per thread and stream: the forward's and the
/// backward's) a workspace of its own from the caching allocator, kept for the life of
/// the process (32 MiB each on the H200 runs), and cuBLASLt one more. Whatever Python
/// line made the first matrix product is not where that memory goes.
const WORKSPACES: [(&str, &str); 2] = [
    ("at::cuda::setWorkspaceForHandle", "(cuBLAS workspace)"),
    ("at::cuda::getCUDABlasLtWorkspace", "(cuBLASLt workspace)"),
];

/// The workspace site of a stack whose frames (`names`) allocate a library's workspace.
fn workspace_site(names: &[&str]) -> Option<&'static str> {
    names.iter().find_map(|n| {
        WORKSPACES
            .iter()
            .find(|(function, _)| n.starts_with(function))
            .map(|(_, site)| *site)
    })
}

/// A name for a stack without Python frames: the autograd node running it (backward runs
/// on autograd's own threads, where no Python is on the stack), else the outermost ATen
/// operator called.
fn native_site(names: &[&str]) -> Option<String> {
    if let Some(node) = names
        .iter()
        .find_map(|n| after(n, "torch::autograd::generated::"))
    {
        let node = node.strip_suffix("_apply_functional").unwrap_or(&node);
        return Some(format!("(backward: {node})"));
    }
    names
        .iter()
        .rev()
        .find_map(|n| after(n, "at::_ops::"))
        .map(|op| format!("(native: aten::{op})"))
}

/// The identifier after `prefix` in a C++ frame name, past a `details::` namespace:
/// `torch::autograd::generated::details::mm_mat2_backward(…)` → `mm_mat2_backward`.
fn after(name: &str, prefix: &str) -> Option<String> {
    let rest = name.split(prefix).nth(1)?;
    let rest = rest.strip_prefix("details::").unwrap_or(rest);
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!ident.is_empty()).then_some(ident)
}

/// True for a Python file that is not the user's: torch, installed packages, the
/// standard library.
fn is_library(filename: &str) -> bool {
    let f = filename.replace('\\', "/");
    f.contains("/site-packages/")
        || f.contains("/dist-packages/")
        || f.contains("/torch/")
        || f.starts_with("<frozen ")
        || f.contains("/lib/python3")
}

fn is_python(filename: &str) -> bool {
    filename.ends_with(".py")
}

/// Names sites of stacks, caching each stack's answer. Sites are interned: many stacks
/// share one, and callers that add up bytes by site do it by [`Sites::id`].
pub struct Sites<'a> {
    stacks: &'a Stacks,
    frames: usize,
    /// The site id of each stack named so far, by stack id (stack ids are dense).
    by_stack: Vec<Option<u32>>,
    names: Names,
}

impl<'a> Sites<'a> {
    /// Sites of up to `frames` user frames each (at least one).
    pub fn new(stacks: &'a Stacks, frames: usize) -> Self {
        Sites {
            stacks,
            frames: frames.max(1),
            by_stack: Vec::new(),
            names: Names::default(),
        }
    }

    /// The site of `stack`: `file.py:LINE function`, frames joined by ` < ` (callee <
    /// caller). Without a user frame, the innermost library Python frame; without any
    /// Python frame, [`NATIVE_SITE`].
    pub fn of(&mut self, stack: StackId) -> &str {
        let id = self.id(stack);
        self.names.get(id)
    }

    /// The id of the site of `stack`: equal ids, equal sites.
    pub fn id(&mut self, stack: StackId) -> u32 {
        let k = stack as usize;
        if let Some(id) = self.by_stack.get(k).copied().flatten() {
            return id;
        }
        let id = self.names.intern(&self.name(stack));
        if k >= self.by_stack.len() {
            self.by_stack.resize(k + 1, None);
        }
        self.by_stack[k] = Some(id);
        id
    }

    /// The site with id `id`.
    pub fn site(&self, id: u32) -> &str {
        self.names.get(id)
    }

    fn name(&self, stack: StackId) -> String {
        if stack == NO_STACK {
            return NO_STACK_SITE.to_owned();
        }
        let names = &self.stacks.names;
        let native: Vec<&str> = self
            .stacks
            .frames(stack)
            .map(|f| names.get(f.name))
            .collect();
        if let Some(site) = workspace_site(&native) {
            return site.to_owned();
        }
        let python: Vec<_> = self
            .stacks
            .frames(stack)
            .filter(|f| is_python(names.get(f.filename)))
            .collect();
        let user: Vec<_> = python
            .iter()
            .filter(|f| !is_library(names.get(f.filename)))
            .take(self.frames)
            .collect();
        let chosen: Vec<_> = if user.is_empty() {
            python.iter().take(1).collect()
        } else {
            user
        };
        if chosen.is_empty() {
            return native_site(&native).unwrap_or_else(|| NATIVE_SITE.to_owned());
        }
        chosen
            .iter()
            .map(|f| frame_text(names.get(f.filename), f.line, names.get(f.name)))
            .collect::<Vec<_>>()
            .join(FRAME_SEPARATOR)
    }
}

/// A frame as a site shows it: `file.py:LINE function`, or `file.py function` when the
/// line is unknown.
fn frame_text(filename: &str, line: Option<i64>, name: &str) -> String {
    match line {
        Some(line) => format!("{filename}:{line} {name}"),
        None => format!("{filename} {name}"),
    }
}

/// Between the frames of a site of several (`--frames N`), innermost first.
pub const FRAME_SEPARATOR: &str = " < ";

/// Bytes and allocations of one site.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SiteBytes {
    /// The site.
    pub site: String,
    /// Bytes.
    pub bytes: u64,
    /// Allocations.
    pub count: u64,
}

/// Adds up `(stack, bytes)` by site, largest first.
pub fn by_site(
    sites: &mut Sites,
    items: impl IntoIterator<Item = (StackId, u64)>,
) -> Vec<SiteBytes> {
    let mut sums: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
    for (stack, bytes) in items {
        let e = sums.entry(sites.id(stack)).or_default();
        e.0 += bytes;
        e.1 += 1;
    }
    let mut out: Vec<SiteBytes> = sums
        .into_iter()
        .map(|(id, (bytes, count))| SiteBytes {
            site: sites.site(id).to_owned(),
            bytes,
            count,
        })
        .collect();
    largest_first(&mut out);
    out
}

/// Rows of the same site summed into one, largest first.
pub fn summed(rows: impl IntoIterator<Item = SiteBytes>) -> Vec<SiteBytes> {
    let mut sums: FxHashMap<String, (u64, u64)> = FxHashMap::default();
    for r in rows {
        let e = sums.entry(r.site).or_default();
        e.0 += r.bytes;
        e.1 += r.count;
    }
    let mut out: Vec<SiteBytes> = sums
        .into_iter()
        .map(|(site, (bytes, count))| SiteBytes { site, bytes, count })
        .collect();
    largest_first(&mut out);
    out
}

/// Sorts by bytes, largest first; ties by site, so the order is the same every run.
pub fn largest_first(rows: &mut [SiteBytes]) {
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.site.cmp(&b.site)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(s: &mut Stacks, frames: &[(&str, &str, i64)]) -> StackId {
        let ids: Vec<u32> = frames
            .iter()
            .map(|&(n, f, l)| s.frame(n, f, (l >= 0).then_some(l)))
            .collect();
        s.stack(&ids)
    }

    #[test]
    fn the_first_user_frame_names_the_site() {
        let mut s = Stacks::default();
        let torch = "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py";
        let st = stack(
            &mut s,
            &[
                ("c10::cuda::malloc", "CUDACachingAllocator.cpp", 0),
                ("at::empty", "??", 0),
                ("forward", torch, 125),
                ("forward", "/home/me/model.py", 40),
                ("train_step", "/home/me/train.py", 12),
            ],
        );
        let native = stack(&mut s, &[("at::empty", "??", 0)]);
        let backward = stack(
            &mut s,
            &[
                ("at::_ops::empty_memory_format::call(x)", "??", 0),
                ("at::_ops::new_zeros::call(y)", "??", 0),
                (
                    "torch::autograd::generated::IndexBackward0::apply(z)",
                    "??",
                    0,
                ),
            ],
        );
        let op = stack(
            &mut s,
            &[
                ("at::_ops::empty_memory_format::call(x)", "??", 0),
                ("at::_ops::new_zeros::call(y)", "??", 0),
            ],
        );
        let functional = stack(
            &mut s,
            &[(
                "torch::autograd::generated::SelectBackward0_apply_functional(std::vector<x>)",
                "??",
                0,
            )],
        );
        let details = stack(
            &mut s,
            &[(
                "torch::autograd::generated::details::mm_mat2_backward(at::Tensor const&)",
                "??",
                0,
            )],
        );
        let library_only = stack(
            &mut s,
            &[("forward", torch, 125), ("main", "<frozen runpy>", 1)],
        );
        let workspace = stack(
            &mut s,
            &[
                (
                    "at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)",
                    "??",
                    0,
                ),
                ("at::cuda::getCurrentCUDABlasHandle()", "??", 0),
                ("forward", "/home/me/model.py", 40),
            ],
        );
        let lt_workspace = stack(
            &mut s,
            &[
                ("at::cuda::getCUDABlasLtWorkspace()", "??", 0),
                ("torch::autograd::generated::MmBackward0::apply(z)", "??", 0),
            ],
        );
        // A line torch could not place (read as `None`; -1 here).
        let unplaced = stack(&mut s, &[("step", "/home/me/train.py", -1)]);
        let mut one = Sites::new(&s, 1);
        assert_eq!(one.of(st), "/home/me/model.py:40 forward");
        assert_eq!(one.of(native), NATIVE_SITE);
        assert_eq!(one.of(backward), "(backward: IndexBackward0)");
        assert_eq!(one.of(op), "(native: aten::new_zeros)");
        assert_eq!(one.of(functional), "(backward: SelectBackward0)");
        assert_eq!(one.of(details), "(backward: mm_mat2_backward)");
        assert_eq!(one.of(NO_STACK), NO_STACK_SITE);
        assert_eq!(one.of(library_only), format!("{torch}:125 forward"));
        assert_eq!(one.of(unplaced), "/home/me/train.py step");
        assert_eq!(one.of(workspace), "(cuBLAS workspace)");
        assert_eq!(one.of(lt_workspace), "(cuBLASLt workspace)");
        let mut two = Sites::new(&s, 2);
        assert_eq!(
            two.of(st),
            "/home/me/model.py:40 forward < /home/me/train.py:12 train_step"
        );
    }
}
