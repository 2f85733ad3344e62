"""ds_fixtures.py: the small DeepSpeed checkpoints under tests/data/dsck/,
written by DeepSpeed itself, that `make test` reads without torch
(tests/test_ds_ckpt.c, spec Z-DSCK-003..006) and the fuzz corpus seeds.

Run by hand in the peers' venv when DeepSpeed's format changes:
  DS_ACCELERATOR=cpu build/peer-venv/bin/torchrun --standalone \
      --nproc-per-node 2 tests/ds_fixtures.py tests/data/dsck

A model whose names and shapes are zinc's `mlp:5,5,5,tie:1=0` (layers.0.weight
[5 x 5] and layers.0.bias, layers.1.weight tied to layers.0.weight,
layers.1.bias): 35 parameters in two optimizer groups, sizes odd enough that
every stage pads. Four folders, two steps of AdamW each: z1-bf16 (stage 1,
bf16), z2 (stage 2), z3 (stage 3), z3-bf16 (stage 3, bf16), each beside
expected.safetensors: DeepSpeed's own zero_to_fp32 state dict of it and
the Adam moments of every parameter as safe_get_full_optimizer_state gives
them ("NAME/exp_avg", "NAME/exp_avg_sq"); and z2-universal, z2 through
ds_to_universal --inject_missing_state (z2's expected.safetensors holds for it)."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(5, 5), torch.nn.Linear(5, 5)])
        self.layers[1].weight = self.layers[0].weight   # tied: DeepSpeed records it in shared_params

    def forward(self, x):
        return self.layers[1](torch.tanh(self.layers[0](x)))


def one(root, name, stage, bf16):
    import deepspeed
    torch.manual_seed(1)
    m = Tiny()
    L = m.layers
    groups = [{"params": [L[0].weight]}, {"params": [L[0].bias, L[1].bias], "weight_decay": 0.0}]
    cfg = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}},
           "zero_optimization": {"stage": stage}, "steps_per_print": 1000}
    if bf16:
        cfg["bf16"] = {"enabled": True}
    eng, _, _, _ = deepspeed.initialize(model=m, model_parameters=groups, config=cfg)
    g = torch.Generator().manual_seed(dist.get_rank())
    dt = torch.bfloat16 if bf16 else torch.float32
    for _ in range(2):
        x = torch.randn(2, 5, generator=g)
        loss = torch.nn.functional.mse_loss(eng(x.to(dt)).float(), torch.sin(x))
        eng.backward(loss)
        eng.step()
    # the Adam moments as DeepSpeed's own API gathers them (collective at stage 3)
    peer_common.link_optimizer_state(eng)
    from deepspeed.utils import safe_get_full_optimizer_state
    moments = {}
    for pname, p in eng.module.named_parameters():
        for k in ("exp_avg", "exp_avg_sq"):
            moments[pname + "/" + k] = safe_get_full_optimizer_state(p, k).detach().float().clone().contiguous()
    d = os.path.join(root, name)
    eng.save_checkpoint(d, tag="global_step2")
    dist.barrier()
    if dist.get_rank() == 0:
        for f in os.listdir(d):   # the scripts save_checkpoint copies in are not the checkpoint
            if f.endswith(".py"):
                os.remove(os.path.join(d, f))
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        from safetensors.torch import save_file
        sd = get_fp32_state_dict_from_zero_checkpoint(d, "global_step2")
        sd = {k: v.detach().clone().contiguous() for k, v in sd.items()}
        save_file(dict(sd, **moments), os.path.join(d, "expected.safetensors"))
    dist.barrier()


def main():
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    root = sys.argv[1]
    for name, stage, bf16 in (("z1-bf16", 1, True), ("z2", 2, False), ("z3", 3, False), ("z3-bf16", 3, True)):
        one(root, name, stage, bf16)
    if dist.get_rank() == 0:   # z2 as DeepSpeed's universal checkpoint
        import subprocess
        subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                        os.path.join(root, "z2", "global_step2"), "--output_folder",
                        os.path.join(root, "z2-universal", "global_step2_universal"), "--inject_missing_state"],
                       check=True)
    dist.barrier()


if __name__ == "__main__":
    main()
