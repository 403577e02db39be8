"""The PyTorch side of test_training_run.py: resnet_ddp's training run, written the way a PyTorch
user writes it. torchvision's resnet18 (1 input channel, 10 classes; the cifar stem, or the
imagenet stem where "stem" says so) from a given state_dict, wrapped in DistributedDataParallel over gloo when there is more than one rank (its
defaults: 25 MB buckets, rank 0's buffers broadcast before each forward); DistributedSampler
(shuffle, seed, set_epoch, no drop_last) cut into batches as a DataLoader would;
torch.optim.AdamW or SGD with momentum, the learning rate of every step from
bench/pytorch_recipe.py's LrSchedule; evaluation after each epoch through
DistributedSampler(shuffle=False), its sums all-reduced.

    python3 tests/parity/ddp_reference.py SETTINGS.json

SETTINGS.json holds one object with the keys of SETTINGS below. The results are files in its
"out" directory:
  steps-rank{R}.jsonl   one {"global_step", "lr", "loss"} line per step, each rank its own
  epochs.jsonl          rank 0: one {"epoch", "val_loss", "val_accuracy", "val_top5_accuracy"}
                        line per epoch
  final.pt              rank 0: the state_dict after the last step
"dtype" may be "float64", to see how far float32 rounding alone moves a run. "stem" is optional
("cifar" unless given), and so is "no_decay_norm_bias" (true: one-dimensional parameters in a
param group of weight_decay 0, as resnet_ddp's --no-decay-norm-bias).
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import pytorch_recipe  # noqa: E402  (LrSchedule, backward_and_step, build_model, load_split, normalise,
#                               parameter_groups)

SETTINGS = ("data", "init", "out", "world", "epochs", "batch_size", "optimizer", "lr", "momentum",
            "weight_decay", "lr_schedule", "warmup_epochs", "seed", "limit_train", "limit_val",
            "dtype", "threads")


def normalise(images, dtype):
    """The recipe's ToTensor + Normalize, in float32 as torchvision's, then widened to dtype."""
    return pytorch_recipe.normalise(images, "cpu").to(dtype)


def batches(sampler, batch_size):
    order = list(sampler)
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def evaluate(model, x, y, rank, world, batch_size, dtype):
    sampler = DistributedSampler(range(len(x)), num_replicas=world, rank=rank, shuffle=False)
    sums = torch.zeros(4, dtype=torch.float64)  # loss, correct, correct in the top 5, count
    model.eval()
    with torch.no_grad():
        for index in batches(sampler, batch_size):
            logits = model(normalise(x[index], dtype))
            sums[0] += F.cross_entropy(logits, y[index], reduction="sum").item()
            sums[1] += (logits.argmax(1) == y[index]).sum().item()
            sums[2] += (logits.topk(5, dim=1).indices == y[index, None]).any(dim=1).sum().item()
            sums[3] += len(index)
    model.train()
    if world > 1:
        dist.all_reduce(sums)
    return tuple(value / sums[3].item() for value in sums[:3].tolist())


def run_rank(rank, s):
    torch.set_num_threads(s["threads"])
    world, dtype = s["world"], getattr(torch, s["dtype"])
    if world > 1:
        dist.init_process_group("gloo", init_method="file://" + os.path.join(s["out"], "rendezvous"),
                                world_size=world, rank=rank)
    train_x, train_y = pytorch_recipe.load_split(s["data"], "train", s["limit_train"])
    val_x, val_y = pytorch_recipe.load_split(s["data"], "t10k", s["limit_val"])
    model = pytorch_recipe.build_model(s.get("stem", "cifar"))
    model.load_state_dict(torch.load(s["init"]))
    model = model.to(dtype)
    trained = DistributedDataParallel(model) if world > 1 else model
    groups = pytorch_recipe.parameter_groups(model, not s.get("no_decay_norm_bias", False))
    if s["optimizer"] == "adamw":
        optimizer = torch.optim.AdamW(groups, lr=s["lr"], weight_decay=s["weight_decay"])
    else:
        optimizer = torch.optim.SGD(groups, lr=s["lr"], momentum=s["momentum"],
                                    weight_decay=s["weight_decay"])
    sampler = DistributedSampler(range(len(train_x)), num_replicas=world, rank=rank, shuffle=True,
                                 seed=s["seed"])
    steps_per_epoch = len(batches(sampler, s["batch_size"]))
    schedule = pytorch_recipe.LrSchedule(s["lr_schedule"], s["lr"], s["epochs"], steps_per_epoch,
                                         s["warmup_epochs"])
    global_step = 0
    with open(os.path.join(s["out"], f"steps-rank{rank}.jsonl"), "w") as steps, \
            open(os.path.join(s["out"], "epochs.jsonl"), "w") if rank == 0 else open(os.devnull, "w") as epochs:
        for epoch in range(s["epochs"]):
            sampler.set_epoch(epoch)
            for index in batches(sampler, s["batch_size"]):
                loss = F.cross_entropy(trained(normalise(train_x[index], dtype)), train_y[index])
                lr = schedule.at(global_step)
                pytorch_recipe.backward_and_step(optimizer, loss, lr)
                global_step += 1
                steps.write(json.dumps({"global_step": global_step, "lr": lr, "loss": loss.item()}) + "\n")
            val_loss, val_accuracy, val_top5 = evaluate(trained, val_x, val_y, rank, world,
                                                        s["batch_size"], dtype)
            epochs.write(json.dumps({"epoch": epoch + 1, "val_loss": val_loss,
                                     "val_accuracy": val_accuracy,
                                     "val_top5_accuracy": val_top5}) + "\n")
    if rank == 0:
        torch.save(model.state_dict(), os.path.join(s["out"], "final.pt"))
    if world > 1:
        # Every rank's files are complete once all have arrived here. Then leave without
        # tearing DDP down: PyTorch 1.13's ProcessGroupGloo destructor, run by the garbage
        # collector with the GIL held, can wait forever for a gloo thread that waits for the GIL
        # (seen here at the end of a two-rank run).
        dist.barrier()
        sys.stdout.flush()
        os._exit(0)


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} SETTINGS.json")
    with open(sys.argv[1]) as stream:
        settings = json.load(stream)
    missing = [key for key in SETTINGS if key not in settings]
    if missing:
        sys.exit(f"{sys.argv[1]}: missing settings {missing}")
    if settings["world"] > 1:
        torch.multiprocessing.spawn(run_rank, args=(settings,), nprocs=settings["world"])
    else:
        run_rank(0, settings)


if __name__ == "__main__":
    main()
