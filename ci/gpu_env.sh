# Sourced on the GPU machine from the project root (ci/gpu_check.sh does):
# the libraries ci/gpu_pack.sh carried in build-gpu/lib, then NCCL and cuBLAS
# from PyTorch's Python environment (its nvidia.* wheels), then the toolkit's.
# From ../shared/gpu/env.sh, which does not travel with the tree.
nv=$(python3 - <<'PY' 2>/dev/null
import importlib, os
out = []
for m in ("nvidia.nccl", "nvidia.cublas", "nvidia.cu13", "nvidia.cuda_runtime"):
    try:
        mod = importlib.import_module(m)
    except Exception:
        continue
    for p in list(getattr(mod, "__path__", [])):
        for d in ("lib", "lib64"):
            if os.path.isdir(os.path.join(p, d)):
                out.append(os.path.join(p, d))
print(":".join(out))
PY
)
export LD_LIBRARY_PATH="$PWD/build-gpu/lib${nv:+:$nv}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
