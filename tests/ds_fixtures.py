"""ds_fixtures.py: the small DeepSpeed checkpoints under tests/data/dsck/,
written by DeepSpeed itself, that `make test` reads without torch
(tests/test_ds_ckpt.c, spec Z-DSCK-003..006) and the fuzz corpus seeds.

Run by hand in the peers' venv when DeepSpeed's format changes:
  DS_ACCELERATOR=cpu build/peer-venv/bin/torchrun --standalone \
      --nproc-per-node 2 tests/ds_fixtures.py tests/data/dsck

A model of 65 parameters in two optimizer groups with a tied weight (an
embedding of 7 x 5 shared with the output layer, a 5 x 5 linear layer and
its bias): odd sizes, so every stage pads. Four folders, two steps of AdamW
each: z1-bf16 (stage 1, bf16), z2 (stage 2), z3 (stage 3), z3-bf16 (stage 3,
bf16), each beside expected.safetensors, DeepSpeed's own zero_to_fp32
state dict of it."""
import os
import sys

import torch
import torch.distributed as dist


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(7, 5)
        self.fc = torch.nn.Linear(5, 5)
        self.out = torch.nn.Linear(5, 7, bias=False)
        self.out.weight = self.emb.weight   # tied: DeepSpeed records it in shared_params

    def forward(self, x):
        return self.out(torch.tanh(self.fc(self.emb(x))))


def one(root, name, stage, bf16):
    import deepspeed
    torch.manual_seed(1)
    m = Tiny()
    groups = [{"params": [m.emb.weight, m.fc.weight]}, {"params": [m.fc.bias], "weight_decay": 0.0}]
    cfg = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}},
           "zero_optimization": {"stage": stage}, "steps_per_print": 1000}
    if bf16:
        cfg["bf16"] = {"enabled": True}
    eng, _, _, _ = deepspeed.initialize(model=m, model_parameters=groups, config=cfg)
    g = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(2):
        x = torch.randint(0, 7, (2, 3), generator=g)
        logits = eng(x)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 7), x.reshape(-1))
        eng.backward(loss)
        eng.step()
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
        save_file({k: v.detach().clone().contiguous() for k, v in sd.items()}, os.path.join(d, "expected.safetensors"))
    dist.barrier()


def main():
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    root = sys.argv[1]
    for name, stage, bf16 in (("z1-bf16", 1, True), ("z2", 2, False), ("z3", 3, False), ("z3-bf16", 3, True)):
        one(root, name, stage, bf16)


if __name__ == "__main__":
    main()
