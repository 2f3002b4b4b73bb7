# %% [markdown]
# # Holistic Trace Analysis notebook, on gpuscope
#
# The cells of HTA's trace-analysis demo notebook, unchanged but for the import: the
# line below was `from hta.trace_analysis import TraceAnalysis`. Run it as a script
# (`python examples/trace_analysis_notebook.py TRACE_DIR`) or open it in Jupyter
# (a `# %%` cell per question). With `--out DIR` every frame is also saved as JSON.

# %%
import argparse
import pathlib

from gpuscope import TraceAnalysis

parser = argparse.ArgumentParser(description="HTA's questions on a directory of traces")
parser.add_argument("trace_dir", help="a directory of PyTorch profiler traces, one per rank")
parser.add_argument("--out", help="save each frame as JSON into this directory")
args = parser.parse_args()
frames = {}

# %%
analyzer = TraceAnalysis(trace_dir=args.trace_dir)

# %% [markdown]
# ## Temporal breakdown: idle, compute and non-compute time of each rank's GPU

# %%
frames["temporal"] = analyzer.get_temporal_breakdown(visualize=False)
print(frames["temporal"].to_string())

# %% [markdown]
# ## Kernel breakdown: time by kernel type, and the kernels with the most time

# %%
kernel_type_df, kernel_df = analyzer.get_gpu_kernel_breakdown(visualize=False)
frames["kernel_types"], frames["kernels"] = kernel_type_df, kernel_df
print(kernel_type_df.to_string())
print(kernel_df.head(10).to_string())

# %% [markdown]
# ## Idle time: why each stream of rank 0 waited

# %%
idle_df, idle_stats = analyzer.get_idle_time_breakdown(
    visualize=False, show_idle_interval_stats=True
)
frames["idle"] = idle_df
print(idle_df.to_string())

# %% [markdown]
# ## Communication and computation overlap

# %%
frames["overlap"] = analyzer.get_comm_comp_overlap(visualize=False)
print(frames["overlap"].to_string())

# %% [markdown]
# ## Queue length and memory bandwidth of rank 0

# %%
frames["queue"] = analyzer.get_queue_length_summary()
frames["memory_bw"] = analyzer.get_memory_bw_summary()
print(frames["queue"])
print(frames["memory_bw"])

# %% [markdown]
# ## CUDA kernel launch statistics of rank 0

# %%
launches = analyzer.get_cuda_kernel_launch_stats(visualize=False)
frames["launches"] = next(iter(launches.values()))
print(frames["launches"].describe().to_string())

# %%
if args.out:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, df in frames.items():
        if df is not None:
            df.to_json(out / f"{name}.json", orient="split")
